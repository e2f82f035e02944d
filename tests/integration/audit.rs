//! Found by the audit of e100eb9 (issue "A lost tick, leaked passwords, a
//! token that is not one, and the silent default server"): each test failed
//! on that commit.

use std::time::Duration;

use crate::harness::{Fleet, Redlock, lock_key, send_signal, unique_key};

/// A contender frozen during its round for longer than its node timeout
/// (a VM pause, a starved host) resumes with the servers' grants in its
/// socket buffers: it must read them and hold the lock, not withdraw them
/// as timed out while the other hosts, which saw it hold a quorum, skip.
#[test]
fn a_winner_frozen_past_its_node_timeout_keeps_the_grants_that_arrived() {
    let fleet = Fleet::start(3);
    let key = unique_key("frozen-winner");
    // The servers know the acquire script already, as they do after the
    // first run (cold servers: cold_scripts.rs).
    Redlock::on(&fleet).args(["run", "-k", &unique_key("warm-up"), "--", "true"]).run().expect(0);
    // The servers hold the attempt's writes for a second: the answers
    // arrive while redlock is frozen, after its node timeout.
    for s in &fleet.servers {
        let _: redis::Value = s.cmd(&["CLIENT", "PAUSE", "1000", "WRITE"]);
    }
    let contender = Redlock::on(&fleet)
        .args(["acquire", "-n", "--ttl", "30s", "--node-timeout", "1s", "-k", &key])
        .spawn();
    std::thread::sleep(Duration::from_millis(300));
    send_signal(contender.pid(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(2000));
    send_signal(contender.pid(), libc::SIGCONT);
    let out = contender.wait();
    out.expect(0);
    let token = out.line().to_owned();
    assert_eq!(fleet.values(&lock_key(&key)), vec![Some(token); 3], "the grants were withdrawn");
}

/// With no server named anywhere (no `--servers`, no `REDLOCK_SERVERS`, no
/// configuration file), redlock used `redis://127.0.0.1:6379` without a
/// word: a host whose configuration was not deployed yet locked on its own
/// Redis and ran the job beside every other such host. Now every command
/// that needs servers exits 64 with one line saying where to name them,
/// before it touches any server; `config` says none are configured.
#[test]
fn no_server_named_anywhere_is_a_usage_error_not_a_local_redis() {
    for args in [
        &["run", "-n", "-E", "0", "-k", "k", "--", "true"][..],
        &["acquire", "-k", "k", "--wait", "1m"],
        &["status", "-k", "k"],
        &["doctor"],
    ] {
        let out = Redlock::new("").args(args).run();
        out.expect(64).stderr_has("no servers configured").stderr_has("--servers");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    let out = Redlock::new("").args(["config"]).run();
    out.expect(0);
    let servers = out.stdout.lines().find(|l| l.starts_with("servers")).unwrap_or_default();
    assert!(servers.contains("none configured"), "{}", out.stdout);
}

/// The shared holders' marker in the lock key was accepted as a token:
/// `release --token redlock-shared` deleted it while a reader ran (and a
/// writer then ran beside the reader), `extend --token redlock-shared`
/// kept writers out for an hour, and `status --json` showed it as the
/// holder's token.
#[test]
fn the_shared_marker_is_never_a_token() {
    let fleet = Fleet::start(3);
    let key = unique_key("marker");
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("inside");
    let reader = Redlock::on(&fleet)
        .args(["run", "--shared", "-k", &key, "--", "sh", "-c"])
        .args([format!("touch {}; sleep 2", inside.display())])
        .spawn();
    crate::harness::wait_for_file(&inside);
    for args in [
        &["release", "-k", &key, "--token", "redlock-shared"][..],
        &["extend", "-k", &key, "--token", "redlock-shared", "--ttl", "1h"],
    ] {
        let out = Redlock::on(&fleet).args(args).run();
        out.expect(64).stderr_has("marker of the shared holders");
    }
    assert_eq!(fleet.values(&lock_key(&key)), vec![Some("redlock-shared".to_owned()); 3]);
    let status = Redlock::on(&fleet).args(["status", "-k", &key, "--json"]).run();
    status.expect(0);
    let json = status.json();
    assert!(json["holder"]["token"].is_null(), "{json}");
    assert_eq!(json["holder"]["shared"], true, "{json}");
    assert_eq!(json["holders"][0]["shared"], true, "{json}");
    // A writer is still kept out while the reader runs.
    Redlock::on(&fleet).args(["run", "-n", "-k", &key, "--", "true"]).run().expect(75);
    reader.wait().expect(0);
    for pttl in fleet.servers.iter().map(|s| s.pttl(&lock_key(&key))) {
        assert_eq!(pttl, -2, "the marker outlived the last reader");
    }
}

/// No accepted combination of flags may stop a healthy job: a TTL that
/// leaves no room for the host's own delays (`--ttl 60ms`) is refused
/// before any server is touched.
#[test]
fn a_ttl_with_no_room_for_scheduling_is_refused() {
    let fleet = Fleet::start(1);
    let key = unique_key("tiny-ttl");
    let out = Redlock::on(&fleet).args(["run", "--ttl", "60ms", "-k", &key, "--", "true"]).run();
    out.expect(64).stderr_has("for the host's scheduling").stderr_has("a longer --ttl fits");
    assert_eq!(fleet.dbsizes(), vec![0], "a refused run wrote to a server");
    Redlock::on(&fleet).args(["run", "--ttl", "1s", "-k", &key, "--", "true"]).run().expect(0);
}

/// A server listed twice under two spellings (`127.0.0.1` and `localhost`,
/// `/0` and no database) was refused only when the round met its own token
/// on the twin: `acquire -n` exited 0 when it won before the twin's answer,
/// and renewals then counted the server twice. Servers are compared by
/// what they are (their `run_id`), not by how their URL is spelled. It is
/// a configuration mistake (64), not servers down (69).
#[test]
fn a_server_listed_twice_under_two_spellings_is_always_refused() {
    let fleet = Fleet::start(2);
    let (p, q) = (fleet.servers[0].port, fleet.servers[1].port);
    for twins in [
        format!("redis://127.0.0.1:{p},redis://localhost:{p},redis://127.0.0.1:{q}"),
        format!("redis://127.0.0.1:{q},redis://127.0.0.1:{p}/0,redis://127.0.0.1:{p}"),
        // Both the quorum: the twin refuses the round (its own token).
        format!("redis://127.0.0.1:{p},redis://localhost:{p}"),
    ] {
        for _ in 0..5 {
            let key = unique_key("twins");
            let out = Redlock::new(&twins).args(["acquire", "-n", "-k", &key]).run();
            out.expect(64)
                .stderr_has("listed twice")
                .stderr_has("the same server as")
                .stderr_has("list each server once");
            assert_eq!(fleet.values(&lock_key(&key)), vec![None, None], "nothing is left held");
        }
    }
}

/// A server listed twice, one spelling 40 ms slower (a proxy in front of
/// it): the round is won before the slow twin's identity is known, but its
/// late answer carries the attempt's own token, so `acquire` gives the lock
/// back and fails; `doctor` calls it an error of the configuration (64).
#[test]
fn a_slow_twin_is_caught_when_it_answers() {
    let fleet = Fleet::start(2);
    let proxy = crate::harness::proxy::Proxy::start(fleet.servers[0].port);
    proxy.set(crate::harness::proxy::Mode::Delay(Duration::from_millis(40)));
    let twins = format!("{},{},{}", fleet.servers[0].url(), fleet.servers[1].url(), proxy.url());
    for _ in 0..3 {
        let key = unique_key("slow-twin");
        let out = Redlock::new(&twins).args(["acquire", "-n", "-k", &key]).run();
        out.expect(64).stderr_has("listed twice");
        assert_eq!(fleet.values(&lock_key(&key)), vec![None, None], "nothing is left held");
    }
    let out = Redlock::new(&twins).args(["doctor"]).run();
    out.expect(64);
    assert!(out.stdout.contains("are the same server"), "{}", out.stdout);
}
