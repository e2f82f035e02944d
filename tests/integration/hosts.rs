//! Who a host is: `--host NAME`, `REDLOCK_HOST` or the file's `host` name
//! this host in tokens, `status` and `history` in place of the kernel's
//! host name; a name a token cannot carry is a usage error.

use crate::harness::{Fleet, Redlock, unique_key};

/// The flag, the variable and the file each name the host of the token,
/// the status line and the history entry.
#[test]
fn host_names_the_holder_in_tokens_status_and_history() {
    let fleet = Fleet::start(1);
    let key = unique_key("host-flag");
    let (token, _) = Redlock::on(&fleet).args(["--host", "ci-runner-7"]).acquire(&key, "30s");
    assert!(token.ends_with(".ci-runner-7"), "{token}");
    let out = Redlock::on(&fleet).args(["status", "-k", &key, "--json"]).run();
    out.expect(0);
    assert_eq!(out.json()["holder"]["host"], "ci-runner-7", "{}", out.stdout);
    Redlock::on(&fleet).args(["release", "-k", &key, "--token", &token]).run().expect(0);

    let key = unique_key("host-env");
    Redlock::on(&fleet)
        .env("REDLOCK_HOST", "web-3.example")
        .args(["run", "-k", &key, "--", "true"])
        .run()
        .expect(0);
    let out = Redlock::on(&fleet).args(["history", "-k", &key, "--json"]).run();
    out.expect(0);
    assert!(out.stdout.contains("\"host\":\"web-3.example\""), "{}", out.stdout);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redlock.toml");
    std::fs::write(&file, "host = \"pod-from-file\"\n").unwrap();
    let key = unique_key("host-file");
    let (token, _) =
        Redlock::on(&fleet).env("REDLOCK_CONFIG", &file.display().to_string()).acquire(&key, "30s");
    assert!(token.ends_with(".pod-from-file"), "{token}");
    // The flag wins over the file.
    let out = Redlock::on(&fleet)
        .env("REDLOCK_CONFIG", &file.display().to_string())
        .args(["--host", "flag-host", "config"])
        .run();
    out.expect(0);
    let row = out.stdout.lines().find(|l| l.starts_with("host")).unwrap().to_owned();
    assert!(row.contains("flag-host") && row.ends_with("flag"), "{}", out.stdout);
}

/// A name with a space, a token's separator or a control character, an
/// empty one or a long one: 64, one line, before any server is asked.
#[test]
fn a_host_a_token_cannot_carry_is_a_usage_error() {
    for bad in ["web 1", "web~note=x", "a\u{1b}[2Jb", "", &"h".repeat(65)] {
        let out = Redlock::new("redis://127.0.0.1:1")
            .args(["--host", bad, "run", "-k", "k", "--", "true"])
            .run();
        out.expect(64).stderr_has("redlock: --host");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redlock.toml");
    std::fs::write(&file, "servers = \"redis://127.0.0.1:1\"\nhost = \"two words\"\n").unwrap();
    let shown = file.display().to_string();
    let out = Redlock::new("").env("REDLOCK_CONFIG", &shown).args(["config", "--check"]).run();
    out.expect(64).stderr_has(&format!("{shown}:2: host \"two words\": must be 1 to 64"));
}

/// `release --force` deletes another's lock: the line saying whose (host,
/// pid, age, note) is shown without `-v`, in text and in JSON, so a CI
/// log or a terminal keeps it; `-q` silences it.
#[test]
fn release_force_says_whose_lock_it_deleted_without_v() {
    let fleet = Fleet::start(1);
    let key = unique_key("force-whose");
    let take = |key: &str| {
        Redlock::on(&fleet)
            .args(["--host", "web-9", "acquire", "-n", "--note", "deploy 42", "-k", key])
            .run()
            .expect(0);
    };
    take(&key);
    let out = Redlock::on(&fleet).args(["release", "-k", &key, "--force"]).run();
    out.expect(0).stderr_has("force-released").stderr_has("held by web-9 pid ");
    out.stderr_has("note \"deploy 42\"").stderr_has(", for ");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);

    take(&key);
    let out =
        Redlock::on(&fleet).args(["--log-format", "json", "release", "-k", &key, "--force"]).run();
    out.expect(0);
    let event: serde_json::Value = serde_json::from_str(out.stderr.trim()).unwrap();
    assert_eq!(event["event"], "force_released", "{}", out.stderr);
    assert!(event["msg"].as_str().unwrap().contains("held by web-9 pid "), "{event}");
    assert!(event["holders"][0].as_str().unwrap().contains(".web-9~note="), "{event}");

    take(&key);
    let out = Redlock::on(&fleet).args(["-q", "release", "-k", &key, "--force"]).run();
    out.expect(0);
    assert_eq!(out.stderr, "", "-q says nothing");
}
