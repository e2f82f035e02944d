//! A wait is not silent without `-v`: one line when it begins (who holds
//! the lock, or which servers fail), one now and then while it lasts, one
//! when it ends; nothing with `-q`.

use std::time::Duration;

use crate::harness::{Fleet, RedisServer, Redlock, unique_key};

#[test]
fn a_long_wait_says_when_it_begins_while_it_lasts_and_when_it_ends() {
    let server = RedisServer::start();
    let key = unique_key("long-wait");
    // A holder that never releases: its lock expires after 12s.
    Redlock::new(&server.url()).args(["acquire", "-k", &key, "--ttl", "12s"]).run().expect(0);
    let out =
        Redlock::new(&server.url()).args(["run", "-k", &key, "--wait", "1m", "--", "true"]).run();
    out.expect(0);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(out.elapsed >= Duration::from_secs(10), "{:?}", out.elapsed);
    assert_eq!(lines.len(), 3, "begin, one progress line, end:\n{}", out.stderr);
    assert!(lines[0].starts_with(&format!("redlock: waiting for {key} (at most ")), "{}", lines[0]);
    assert!(lines[0].contains(" is held by ") && lines[0].contains(" pid "), "{}", lines[0]);
    assert!(
        lines[1].starts_with(&format!("redlock: still waiting for {key} after 1")),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with(&format!("redlock: acquired {key} after waiting 1")),
        "{}",
        lines[2]
    );
}

#[test]
fn a_wait_on_unreachable_servers_names_them_and_quiet_says_nothing() {
    let out = Redlock::new("redis://127.0.0.1:1")
        .args(["run", "-k", "k", "--wait", "1", "--", "true"])
        .run();
    out.expect(69);
    // An outage is not contention: the line says the servers fail, and
    // which, never that the lock is busy.
    let first = out.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("redlock: the servers are unavailable, retrying (at most ")
            && first.contains("127.0.0.1:1: connection refused")
            && !first.contains("waiting for"),
        "{}",
        out.stderr
    );
    let json = Redlock::new("redis://127.0.0.1:1")
        .args(["--log-format", "json", "run", "-k", "k", "--wait", "1", "--", "true"])
        .run();
    json.expect(69);
    let waiting: serde_json::Value = json
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|v: &serde_json::Value| v["event"] == "waiting")
        .unwrap_or_else(|| json.fail("no waiting event"));
    assert_eq!(waiting["cause"], "unavailable", "{waiting}");
    let quiet = Redlock::new("redis://127.0.0.1:1")
        .args(["-q", "run", "-k", "k", "--wait", "1", "--", "true"])
        .run();
    quiet.expect(69);
    assert_eq!(quiet.stderr.lines().count(), 1, "only the final error: {}", quiet.stderr);
    let server = RedisServer::start();
    let key = unique_key("quiet-wait");
    Redlock::new(&server.url()).args(["acquire", "-k", &key]).run().expect(0);
    let quiet = Redlock::new(&server.url())
        .args(["-q", "run", "-k", &key, "--wait", "1", "--", "true"])
        .run();
    assert!(quiet.expect(75).stderr.is_empty(), "{}", quiet.stderr);
}

#[test]
fn a_hung_server_does_not_stretch_the_wait() {
    let fleet = crate::harness::Fleet::start(3);
    let key = unique_key("wait-hung");
    // Held elsewhere on a quorum (servers 0 and 1); server 2 answers nothing.
    for s in &fleet.servers[..2] {
        let _: redis::Value =
            s.cmd(&["SET", &crate::harness::lock_key(&key), "foreign", "PX", "60000"]);
    }
    fleet.servers[2].hang();
    for args in [["run", "--wait", "2s"].as_slice(), &["acquire", "--wait", "2s"]] {
        let mut cmd: Vec<&str> = args.to_vec();
        cmd.extend(["--node-timeout", "1s", "-k", &key]);
        if args[0] == "run" {
            cmd.extend(["--", "true"]);
        }
        let out = Redlock::on(&fleet).args(&cmd).run();
        out.expect(75);
        // --wait bounds the whole wait: the attempts, the queue's exit and
        // the answers the hung server never gives.
        out.within(Duration::from_millis(2600));
    }
    fleet.servers[2].resume();
}

/// `--wait DUR` ends within DUR plus a small constant, not plus a node
/// timeout: an attempt whose servers hang is cut at the deadline (its
/// votes withdrawn by its server tasks), and the exit says the servers did
/// not answer.
#[test]
fn a_wait_ends_at_its_bound_even_when_the_servers_hang() {
    let fleet = Fleet::start(3);
    let key = unique_key("wait-cut");
    fleet.servers[1].hang();
    fleet.servers[2].hang();
    let start = std::time::Instant::now();
    let out =
        Redlock::on(&fleet).args(["--node-timeout", "3s", "acquire", "-w", "1s", "-k", &key]).run();
    let took = start.elapsed();
    fleet.servers[1].resume();
    fleet.servers[2].resume();
    out.expect(69);
    assert!(took < std::time::Duration::from_millis(1_800), "--wait 1s took {took:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    // Nothing is left on the server that answered.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while fleet.values(&crate::harness::lock_key(&key))[0].is_some() {
        assert!(std::time::Instant::now() < deadline, "the cut attempt left its vote");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
