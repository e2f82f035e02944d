//! Servers whose script cache is empty (fresh, restarted, `SCRIPT FLUSH`):
//! the lock's calls still take one round trip each, so that a process
//! frozen during its round finds every answer waiting when it resumes.

use std::time::{Duration, Instant};

use crate::harness::{Fleet, RedisServer, Redlock, send_signal, unique_key, wait_for_file};

/// How many `NOSCRIPT` errors the server has answered since it started:
/// each is a script call that needed a second round trip.
fn noscript_answers(server: &RedisServer) -> usize {
    let info: String = server.cmd(&["INFO", "errorstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_NOSCRIPT:count="))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

/// Polls `ready` every 5 ms until it holds, at most 10 s.
fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether a client on `server` waits in a `CLIENT PAUSE` with `EVALSHA`
/// (flag `b`): a lock call sent and held.
fn evalsha_held(server: &RedisServer) -> bool {
    let clients: String = server.cmd(&["CLIENT", "LIST"]);
    clients.lines().any(|l| l.contains(" flags=b ") && l.contains(" cmd=evalsha "))
}

/// Fresh servers know none of the scripts: a whole `run` (acquire,
/// release) gets no NOSCRIPT answer; nor does the next one after
/// `SCRIPT FLUSH`. A flush under a running holder costs its next renewal
/// one NOSCRIPT per server, answered by loading the script again.
#[test]
fn a_cold_script_cache_costs_no_second_round_trip() {
    let fleet = Fleet::start(3);
    let key = unique_key("cold-cache");
    Redlock::on(&fleet).args(["run", "-n", "-k", &key, "--", "true"]).run().expect(0);
    for s in &fleet.servers {
        assert_eq!(noscript_answers(s), 0, "{}: a NOSCRIPT on a fresh server", s.name());
        let _: String = s.cmd(&["SCRIPT", "FLUSH"]);
    }
    let out = Redlock::on(&fleet).args(["acquire", "-n", "--ttl", "10s", "-k", &key]).run();
    out.expect(0);
    let token = out.line().to_owned();
    Redlock::on(&fleet).args(["release", "-k", &key, "--token", &token]).run().expect(0);
    for s in &fleet.servers {
        assert_eq!(noscript_answers(s), 0, "{}: a NOSCRIPT after SCRIPT FLUSH", s.name());
    }
    let dir = tempfile::tempdir().unwrap();
    let (inside, go) = (dir.path().join("inside"), dir.path().join("go"));
    let holder = Redlock::on(&fleet)
        .args(["run", "--ttl", "1s", "-k", &key, "--", "sh", "-c"])
        .args([format!(
            "touch {}; while ! test -e {}; do sleep 0.05; done",
            inside.display(),
            go.display()
        )])
        .spawn();
    wait_for_file(&inside);
    let renewals = |s: &RedisServer| s.calls(&["evalsha"]);
    let before: Vec<usize> = fleet.servers.iter().map(renewals).collect();
    for s in &fleet.servers {
        let _: String = s.cmd(&["SCRIPT", "FLUSH"]);
    }
    // Two renewals after the flush: the first reloads the script, the
    // second runs it as known.
    until("two renewals after SCRIPT FLUSH", || {
        fleet.servers.iter().zip(&before).all(|(s, b)| renewals(s) >= b + 3)
    });
    std::fs::write(&go, "").unwrap();
    holder.wait().expect(0);
    for s in &fleet.servers {
        assert!(noscript_answers(s) <= 1, "{}: more than one NOSCRIPT", s.name());
    }
}

/// Fresh servers, two of which hold writes (`CLIENT PAUSE WRITE`) while the
/// contender is frozen (SIGSTOP) past its node timeout; they answer while
/// it is frozen. On resume it must find its grants in its socket buffers
/// and run the command: a NOSCRIPT there would need SCRIPT LOAD and
/// EVALSHA again, round trips its deadline no longer allows.
#[test]
fn a_winner_frozen_on_servers_without_its_script_keeps_its_grants() {
    let fleet = Fleet::start(3);
    let key = unique_key("cold-frozen");
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let paused = &fleet.servers[1..];
    for s in paused {
        let _: String = s.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]);
    }
    let contender = Redlock::on(&fleet)
        .args(["run", "-n", "-E", "0", "--ttl", "10s", "--node-timeout", "900ms", "-k", &key])
        .args(["--", "touch", ran.to_str().unwrap()])
        .spawn();
    // Its calls are on the paused servers, held: freeze it.
    until("the contender's calls held on the paused servers", || paused.iter().all(evalsha_held));
    send_signal(contender.pid(), libc::SIGSTOP);
    let frozen = Instant::now();
    // Its node timeout passes while it is frozen; then the paused servers
    // answer (unpaused, no client held any more), still while it is frozen.
    let node_timeout = Duration::from_millis(900);
    std::thread::sleep(node_timeout + Duration::from_millis(300));
    for s in paused {
        let _: String = s.cmd(&["CLIENT", "UNPAUSE"]);
    }
    until("the paused servers answered", || !paused.iter().any(evalsha_held));
    assert!(frozen.elapsed() > node_timeout);
    send_signal(contender.pid(), libc::SIGCONT);
    let out = contender.wait();
    out.expect(0);
    assert!(ran.exists(), "the command did not run:\n{}", out.stderr);
}
