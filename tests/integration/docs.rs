//! The generated man pages and completions: committed, current, renderable
//! and loadable.

use std::process::Command;

use crate::harness::root;

/// rust-analyzer's `ensure_file_contents`: a stale file fails the test with
/// the command that regenerates it.
#[test]
fn generated_files_are_committed_and_current() {
    let mut stale = Vec::new();
    for file in redlock::docs::files() {
        let on_disk = std::fs::read(root().join(&file.path)).unwrap_or_default();
        if on_disk != file.content {
            stale.push(file.path);
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run `cargo run --example gen-docs` and commit the result"
    );
}

#[test]
fn man_pages_render_without_warnings() {
    let pages: Vec<_> =
        redlock::docs::files().into_iter().filter(|f| f.path.starts_with("man/")).collect();
    assert!(pages.len() >= 7, "one page per subcommand plus redlock(1)");
    for page in pages {
        let out = Command::new("groff")
            .args(["-man", "-ww", "-z", "-Tutf8"])
            .arg(root().join(&page.path))
            .output()
            .expect("groff (Debian package groff-base) must be installed");
        assert!(out.status.success(), "{}: groff failed", page.path);
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(warnings.is_empty(), "{}: {warnings}", page.path);
    }
    let text = Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(root().join("man/redlock.1"))
        .env("MANWIDTH", "100")
        .output()
        .expect("man (Debian package man-db) must be installed");
    let text = String::from_utf8_lossy(&text.stdout);
    for heading in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "EXAMPLES",
        "SEE ALSO",
    ] {
        assert!(text.lines().any(|l| l == heading), "redlock(1) lacks {heading}:\n{text}");
    }
    assert!(text.contains("REDLOCK_SERVERS") && text.contains("flock(1)"));
}

#[test]
fn completions_load_in_bash_and_zsh() {
    let bash = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p redlock",
            root().join("completions/redlock.bash").display()
        ))
        .output()
        .expect("bash");
    assert!(bash.status.success(), "bash: {}", String::from_utf8_lossy(&bash.stderr));
    assert!(String::from_utf8_lossy(&bash.stdout).contains("redlock"));

    let script = format!(
        "autoload -U compinit && compinit -u -D && source {} && whence -w _redlock",
        root().join("completions/_redlock").display()
    );
    let zsh = Command::new("zsh")
        .args(["-f", "-c", &script])
        .output()
        .expect("zsh must be installed (apt-get install -y zsh)");
    assert!(zsh.status.success(), "zsh: {}", String::from_utf8_lossy(&zsh.stderr));
    assert!(String::from_utf8_lossy(&zsh.stdout).contains("_redlock: function"));
}
