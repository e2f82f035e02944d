//! What a newcomer reads: usage errors that keep the parser's content on
//! one line, and server errors that say what is wrong (wrong password, a
//! missing socket, TLS to a plain port, a bad URL, a renamed command).

use std::time::Duration;

use crate::harness::{Output, RedisServer, Redlock, unique_key};

/// Asserts exit 64 and one line on stderr holding every one of `expect`.
fn usage(args: &[&str], expect: &[&str]) -> Output {
    let out = Redlock::new("redis://127.0.0.1:1").args(args).run();
    out.expect(64);
    if out.stderr.lines().count() != 1 {
        out.fail("should print one line");
    }
    for e in expect {
        out.stderr_has(e);
    }
    out
}

#[test]
fn usage_errors_name_what_is_wrong_on_one_line() {
    usage(&["release", "--key", "m2"], &["--token <TOKEN>"]);
    usage(&["run", "--key", "a", "echo", "hello"], &["'echo'", "-- echo"]);
    usage(&["runn"], &["'runn'", "similar subcommand exists: 'run'"]);
    usage(&["run", "--key", "a", "--wait", "-10s", "--", "true"], &["--wait \"-10s\"", "negative"]);
    usage(&["run", "-k", "a", "-n", "-w", "5", "--", "true"], &["--no-wait", "--wait"]);
    usage(&["acquire", "-k", "a", "--wait", "soon"], &["--wait \"soon\"", "not a duration"]);
}

#[test]
fn redlock_alone_prints_a_short_usage_and_exits_64() {
    let out = Redlock::new("redis://127.0.0.1:1").run();
    out.expect(64).stderr_has("Usage: redlock").stderr_has("run");
    assert!(out.stdout.is_empty());
}

#[test]
fn wait_zero_tries_once_and_bare_numbers_are_seconds() {
    let server = RedisServer::start();
    let key = unique_key("flock-habits");
    let token = Redlock::new(&server.url()).args(["acquire", "-k", &key, "--ttl", "30"]).run();
    token.expect(0);
    assert!(server.pttl(&key) > 25_000, "--ttl 30 is 30 seconds");
    Redlock::new(&server.url())
        .args(["run", "-k", &key, "--wait", "0", "--", "true"])
        .run()
        .expect(75)
        .within(Duration::from_secs(5));
    let out = Redlock::new(&server.url()).args(["run", "-k", &key, "-w", "1", "--", "true"]).run();
    out.expect(75);
    assert!(out.elapsed >= Duration::from_millis(900), "-w 1 waits a second: {:?}", out.elapsed);
}
