//! The smallest ACL the README documents is enough for every lock
//! operation, and no password ever shows in any output.

use std::path::Path;

use crate::harness::{Output, RedisServer, Redlock, unique_key};

/// The README's `ACL SETUSER` line, split into arguments.
fn readme_acl() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let line = readme.lines().find(|l| l.starts_with("ACL SETUSER ")).expect("an ACL line");
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_documented_acl_is_enough_for_every_lock_operation() {
    let server = RedisServer::start();
    let acl = readme_acl();
    let args: Vec<&str> = acl.iter().map(String::as_str).collect();
    let ok: String = server.cmd(&args);
    assert_eq!(ok, "OK");
    let url = format!("redis://locker:CHANGE-ME@127.0.0.1:{}", server.port);
    let key = format!("lock-{}", unique_key("acl"));

    let token = Redlock::new(&url).args(["acquire", "--key", &key, "--ttl", "20s"]).run();
    token.expect(0);
    let token = token.line().to_owned();
    Redlock::new(&url).args(["extend", "--key", &key, "--token", &token]).run().expect(0);
    Redlock::new(&url).args(["status", "--key", &key]).run().expect(0);
    // A waiter subscribes to the release channel and wakes on release.
    let waiter = Redlock::new(&url)
        .args(["run", "--key", &key, "--wait", "20s", "--ttl", "1s", "--", "sh", "-c", "sleep 0.5"])
        .spawn();
    // Its subscription goes through under the ACL (the channel pattern).
    server.await_waiters(&key, 1);
    Redlock::new(&url).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    waiter.wait().expect(0);
    Redlock::new(&url).args(["acquire", "--key", &key]).run().expect(0);
    // The run history: a busy run counts a skip, a run records its entry,
    // history and check read them; none of it warns of a denied command.
    Redlock::new(&url)
        .args(["run", "-n", "-E", "0", "--key", &key, "--", "true"])
        .run()
        .expect(0)
        .stderr_lacks("history:");
    Redlock::new(&url).args(["release", "--key", &key, "--force"]).run().expect(0);
    Redlock::new(&url)
        .args(["run", "--key", &key, "--", "true"])
        .run()
        .expect(0)
        .stderr_lacks("history:");
    let history = Redlock::new(&url).args(["history", "--key", &key, "--json"]).run();
    history.expect(0);
    // The waiter's run and this one.
    assert_eq!(history.json()["entries"].as_array().map(Vec::len), Some(2));
    assert_eq!(history.json()["skips"]["count"], 1);
    Redlock::new(&url).args(["check", "--key", &key, "--max-age", "1h"]).run().expect(0);

    // Outside the granted keys: a clear permission error, at once.
    Redlock::new(&url)
        .args(["acquire", "--wait", "10s", "--key", "not-a-lock-key"])
        .run()
        .expect(69)
        .within(std::time::Duration::from_secs(5))
        .stderr_has("permission denied");
}

fn assert_no_secret(outputs: &[Output], secret: &str) {
    for out in outputs {
        if out.stdout.contains(secret) || out.stderr.contains(secret) {
            out.fail("leaked the password");
        }
    }
}

#[test]
fn no_output_of_any_subcommand_shows_the_password() {
    let secret = "pw-7f3a91-never-print";
    let server = RedisServer::start_with(&["--requirepass", secret]);
    let bare = server.url_without_password();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let file = file.display().to_string();
    let key = unique_key("secret");
    let mut outputs = Vec::new();
    for format in ["text", "json"] {
        for source in ["url", "env", "file"] {
            let base = || {
                let r = match source {
                    "url" => Redlock::new(&server.url()),
                    "env" => Redlock::new(&bare).env("REDLOCK_PASSWORD", secret),
                    _ => Redlock::new(&bare).args(["--password-file", &file]),
                };
                r.args(["-vv", "--log-format", format])
            };
            let acquired = base().args(["acquire", "--json", "--key", &key]).run();
            acquired.expect(0);
            let token = acquired.json()["token"].as_str().unwrap().to_owned();
            outputs.push(acquired);
            for args in [
                vec!["extend", "--key", &key, "--token", &token],
                vec!["status", "--key", &key],
                vec!["status", "--key", &key, "--json"],
                vec!["release", "--key", &key, "--token", &token],
                vec!["run", "--key", &key, "--ttl", "2s", "--", "sh", "-c", "sleep 0.2"],
                vec!["doctor"],
                vec!["doctor", "--json"],
                vec!["release", "--key", &key, "--force"],
            ] {
                let out = base().args(&args).run();
                if !matches!(out.status.code(), Some(0 | 1)) {
                    out.fail("should succeed");
                }
                outputs.push(out);
            }
        }
        // Failures name the server, never the password.
        let wrong = format!("redis://:{secret}-wrong@127.0.0.1:{}", server.port);
        outputs.push(
            Redlock::new(&wrong)
                .args(["--log-format", format, "-vv", "acquire", "-n", "--key", &key])
                .run(),
        );
        outputs.push(Redlock::new(&wrong).args(["--log-format", format, "-vv", "doctor"]).run());
        let down = format!("redis://:{secret}@127.0.0.1:1");
        outputs.push(
            Redlock::new(&down)
                .args(["--log-format", format, "-vv", "status", "--key", &key])
                .run(),
        );
    }
    assert_eq!(outputs.len(), 2 * (3 * 9 + 3));
    assert_no_secret(&outputs, secret);
    // The password file's content is the password, not the path's.
    assert!(outputs.iter().any(|o| o.stderr.contains("authentication failed")));
}
