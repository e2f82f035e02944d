//! What the man pages, `--help` and the completions tell a newcomer: the
//! supervision and safety story in redlock-run(1), every environment
//! variable, and completions that offer values and commands, not file names.

use std::process::Command;

use crate::harness::{bin, root};

fn man(page: &str) -> String {
    let out = Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(root().join("man").join(page))
        .env("MANWIDTH", "300")
        .output()
        .expect("man (Debian package man-db) must be installed");
    // man hyphenates nothing at this width; join lines for phrase checks.
    String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn redlock_run_1_tells_supervision_and_safety() {
    let text = man("redlock-run.1");
    for phrase in [
        "PROCESS GROUP AND SIGNALS",
        "reach the command exactly once",
        "kill -9",
        "redlock-guard",
        "WHEN THE LOCK IS LOST",
        "SIGKILL follows at the latest the margin",
        "redlock exits 70",
        "ACL SETUSER locker",
        "appendfsync always",
        "delayed restart",
        "REDLOCK_PASSWORD",
    ] {
        assert!(text.contains(phrase), "redlock-run(1) lacks {phrase:?}:\n{text}");
    }
}

#[test]
fn environment_lists_every_variable_redlock_reads() {
    let text = man("redlock.1");
    let env = &text[text.find("ENVIRONMENT").expect("ENVIRONMENT")..];
    for var in [
        "REDLOCK_SERVERS",
        "REDLOCK_PASSWORD",
        "REDLOCK_TLS_CA",
        "REDLOCK_TLS_CERT",
        "REDLOCK_TLS_KEY",
        "REDLOCK_CONFIG",
        "XDG_CONFIG_HOME",
        "REDLOCK_TOKEN",
        "SHELL",
    ] {
        assert!(env.contains(var), "ENVIRONMENT lacks {var}");
    }
    assert!(text.contains("/etc/redlock/config.toml"), "FILES names the system config");
}

#[test]
fn help_shows_no_empty_env_values() {
    let out = Command::new(bin()).arg("--help").env_remove("REDLOCK_TLS_CA").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("[env: REDLOCK_TLS_CA]"), "{help}");
    assert!(!help.contains("=]"), "an env value shown as if set:\n{help}");
}

/// COMPREPLY of the bash completion for `words` (the last one being completed).
fn bash_complete(words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-file-here"), "").unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "source {}\nCOMP_WORDS=({})\nCOMP_CWORD={}\n_redlock redlock {} {}\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
        root().join("completions/redlock.bash").display(),
        quoted.join(" "),
        words.len() - 1,
        quoted[words.len() - 1],
        quoted[words.len() - 2],
    );
    let out = Command::new("bash").arg("-c").arg(script).current_dir(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completion_offers_values_and_commands_not_files() {
    let on_lost = bash_complete(&["redlock", "run", "--on-lost", ""]);
    assert!(on_lost.contains(&"TERM".to_owned()) && on_lost.contains(&"ignore".to_owned()));
    for flag in ["--on-lost", "--ttl", "--wait", "--key"] {
        let offered = bash_complete(&["redlock", "run", flag, ""]);
        assert!(!offered.contains(&"a-file-here".to_owned()), "{flag}: {offered:?}");
    }
    let commands = bash_complete(&["redlock", "run", "-k", "k", "--", "ech"]);
    assert!(commands.contains(&"echo".to_owned()), "{commands:?}");
}

#[test]
fn version_names_the_commit_and_features() {
    let out = Command::new(bin()).arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let commit = text.split("(commit ").nth(1).and_then(|r| r.split(',').next()).unwrap_or("");
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
    assert!(text.contains("features: "), "{text}");
}
