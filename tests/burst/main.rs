#![allow(clippy::unwrap_used, clippy::expect_used)]

//! A tick is never lost: contenders that start together, votes split
//! among tokens, a frozen server, and the order of a withdrawal after the
//! attempt it withdraws.
//!
//! The bursts are gated ([`crate::harness::burst`]): every process blocks on
//! one FIFO and one close releases them all, as cron releases a fleet.
//!
//! In a test binary of their own, one test at a time ([`SERIAL`]): a burst
//! of up to 200 processes on two cores would skew the timing bounds of
//! every test beside it, and of the other bursts (cargo runs test binaries
//! one after the other).

#[path = "../integration/harness/mod.rs"]
mod harness;

use std::sync::Mutex;

use std::fs::File;
use std::time::{Duration, Instant};

use crate::harness::burst::{Gate, Tick, tick};
use crate::harness::proxy::{Mode, Proxy};
use crate::harness::{Fleet, HANG, Redlock, lock_key, unique_key};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");

/// Held by each test for its whole run.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long `-n` may spend settling split votes (`wait::SETTLE_BOUND`).
const SETTLE_BOUND: Duration = Duration::from_secs(5);

/// Sets `value` directly on the servers at `at`, expiring after `px`, as a
/// contender that crashed mid-attempt (or another client) leaves it.
fn plant(fleet: &Fleet, key: &str, at: &[usize], value: &str, px: Duration) {
    let px = px.as_millis().to_string();
    for &i in at {
        let _: String = fleet.servers[i].cmd(&["SET", &lock_key(key), value, "PX", &px]);
    }
}

/// `ticks` gated ticks of `n` contenders running `redlock GLOBAL run -n -E 0
/// --key KEY` on `urls`; asserts exactly one run and `n` exits 0 in each,
/// and returns the key and the ticks.
fn ticks(urls: &str, global: &[&str], n: usize, ticks: usize) -> (String, Vec<Tick>) {
    let key = unique_key("tick");
    // `-v`: the `acquire_attempt` events time each decision.
    let mut args: Vec<&str> = vec!["-v", "--log-format", "json"];
    args.extend(global);
    args.extend(["run", "-n", "-E", "0", "--key", &key]);
    let ticks = (0..ticks)
        .map(|i| {
            let tick = tick(BIN, n, &args, &[("REDLOCK_SERVERS", urls)], || {});
            let exits = tick.parts.iter().map(|p| p.exited).max().unwrap_or_default();
            eprintln!("tick {i}: {}, slowest exit {exits:?}", tick.describe());
            assert!(
                tick.runs == 1 && tick.count(0) == n,
                "tick {i} of {ticks}: {}",
                tick.describe()
            );
            tick
        })
        .collect();
    (key, ticks)
}

#[test]
fn split_votes_that_expire_let_run_n_run_the_command() {
    let _serial = serial();
    let fleet = Fleet::start(5);
    let key = unique_key("split-expiring");
    // Two other tokens hold two servers each, for a moment: nobody holds
    // the lock, so `-n` must not skip the tick.
    plant(&fleet, &key, &[0, 1], "crashed-contender-a", Duration::from_millis(800));
    plant(&fleet, &key, &[2, 3], "crashed-contender-b", Duration::from_millis(800));
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let out = Redlock::on(&fleet)
        .args(["run", "-n", "-E", "0", "--key", &key, "--", "touch", ran.to_str().unwrap()])
        .run();
    out.expect(0).within(SETTLE_BOUND);
    if !ran.exists() {
        out.fail("should have run the command once the split votes expired");
    }
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 5], "released after the run");
}

#[test]
fn split_votes_that_outlast_the_bound_are_an_error_not_busy() {
    let _serial = serial();
    let fleet = Fleet::start(5);
    let key = unique_key("split-lasting");
    plant(&fleet, &key, &[0, 1], "crashed-contender-a", Duration::from_secs(60));
    plant(&fleet, &key, &[2, 3], "crashed-contender-b", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    // `-E 0` silences a busy lock; it must not silence a tick nobody ran.
    let out = Redlock::on(&fleet)
        .args(["run", "-n", "-E", "0", "--key", &key, "--", "touch", ran.to_str().unwrap()])
        .run();
    out.expect(69)
        .within(SETTLE_BOUND + Duration::from_secs(2))
        .stderr_has("no holder has a quorum")
        .stderr_has("split among 3 tokens")
        .stderr_lacks("is held by");
    assert!(out.elapsed >= SETTLE_BOUND, "gave up after {:?}, before the bound", out.elapsed);
    assert!(!ran.exists(), "nobody holds the lock: the command must not run");
    Redlock::on(&fleet)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .stderr_has("no holder has a quorum");
    // The planted votes are untouched, and nothing of ours is left.
    let (a, b) = (Some("crashed-contender-a".to_owned()), Some("crashed-contender-b".to_owned()));
    assert_eq!(fleet.values(&lock_key(&key)), vec![a.clone(), a, b.clone(), b, None]);
}

#[test]
fn a_holder_on_a_quorum_is_busy_at_once() {
    let _serial = serial();
    let fleet = Fleet::start(5);
    let key = unique_key("held");
    plant(&fleet, &key, &[0, 1, 2], "the-holder", Duration::from_secs(60));
    plant(&fleet, &key, &[3], "a-straggler", Duration::from_secs(60));
    Redlock::on(&fleet)
        .args(["run", "-n", "--key", &key, "--", "true"])
        .run()
        .expect(75)
        .within(Duration::from_secs(2))
        .stderr_has("is held by another client (value \"the-holder\")");
}

#[test]
fn a_loser_descheduled_at_its_exit_still_withdraws_from_a_slow_server() {
    // A `-n` loser gives a server slower than its verdict a moment to
    // answer before it withdraws there. Descheduled past that moment and
    // past the exit's flush (200 processes on 2 CPUs; here a SIGSTOP), it
    // exited with the withdrawal unsent: its vote stayed on that server
    // for the TTL (CI, `two_hundred_at_once_run_each_tick_exactly_once`).
    let _serial = serial();
    let fleet = Fleet::start(5);
    let key = unique_key("descheduled-loser");
    plant(&fleet, &key, &[0, 2, 3], "the-holder", Duration::from_secs(60));
    // The attempt grants on server 1 (its SETs: the key, the fence), the
    // withdrawal deletes.
    let before = (fleet.servers[1].calls(&["set"]), fleet.servers[1].calls(&["del"]));
    fleet.servers[1].hang();
    let mut loser = Redlock::on(&fleet)
        .args(["-v", "--log-format", "json", "run", "-n", "-E", "0", "--key", &key, "--", "true"])
        .spawn();
    let stderr = loser.child.stderr.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    // The verdict (busy: the holder has a quorum) is out, server 1 has
    // the attempt unanswered, and the exit's flush has begun; the stop
    // comes inside the 50 ms the loser gives server 1 to answer.
    let verdict = loop {
        let line = lines.next().expect("no acquire_attempt event").unwrap();
        if line.contains("acquire_attempt") {
            break line;
        }
    };
    let read = Instant::now();
    assert!(verdict.contains("\"outcome\":\"busy\""), "not busy: {verdict}");
    std::thread::sleep(Duration::from_millis(20));
    crate::harness::send_signal(loser.pid(), libc::SIGSTOP);
    let stopped = read.elapsed();
    assert!(loser.child.try_wait().unwrap().is_none(), "the loser exited before the stop");
    std::thread::sleep(Duration::from_millis(500));
    crate::harness::send_signal(loser.pid(), libc::SIGCONT);
    let rest = std::thread::spawn(move || lines.count());
    let start = Instant::now();
    let status = loop {
        if let Some(status) = loser.child.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < HANG, "the loser did not exit");
        std::thread::sleep(Duration::from_millis(5));
    };
    rest.join().unwrap();
    assert_eq!(status.code(), Some(0), "-E 0: a busy lock is exit 0");
    // Server 1 runs what it read (the attempt, then the withdrawal) before
    // it drops the closed connection.
    fleet.servers[1].resume();
    clients_gone(&fleet, 1);
    let after = (fleet.servers[1].calls(&["set"]), fleet.servers[1].calls(&["del"]));
    let shown = format!("stopped {stopped:?} after the verdict");
    assert!(after.0 > before.0, "server 1 never ran the attempt ({shown})");
    assert!(after.1 > before.1, "server 1 never ran the withdrawal ({shown})");
    assert_eq!(fleet.servers[1].get(&lock_key(&key)), None, "the loser's vote stayed");
}

#[test]
fn fifty_at_once_run_each_tick_exactly_once() {
    let _serial = serial();
    let fleet = Fleet::start(5);
    let (key, _) = ticks(&fleet.urls(), &[], 50, 20);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 5]);
}

#[test]
fn two_hundred_at_once_run_each_tick_exactly_once() {
    let _serial = serial();
    let fleet = Fleet::start(5);
    // Here the servers share two CPUs with 200 starting processes, which
    // real servers do not: a node timeout of 1s (the default) is sometimes
    // too short for them to answer, which is an unavailable quorum (69),
    // not what this test is about.
    let (key, _) = ticks(&fleet.urls(), &["--node-timeout", "3s"], 200, 5);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 5]);
}

#[test]
fn a_frozen_server_neither_loses_nor_slows_a_tick() {
    let _serial = serial();
    let fleet = Fleet::start(5);
    let urls = fleet.urls();
    // The default for a 30s TTL: a frozen server costs this much, at most
    // once per process, and only after the decision.
    let node_timeout = Duration::from_secs(1);
    fleet.servers[4].hang();
    let (key, ticks) = ticks(&urls, &[], 50, 10);
    fleet.servers[4].resume();
    for (i, tick) in ticks.iter().enumerate() {
        // Each decision comes without waiting on the frozen server (from
        // the gate, start-up included) ...
        let slowest = tick.slowest();
        assert!(
            slowest < SETTLE_BOUND,
            "tick {i}: a decision took {slowest:?}: {}",
            tick.describe()
        );
        // ... and each skip exits at most a node timeout later: the
        // in-flight calls to the frozen server, ordered before their
        // withdrawal. (The one that ran exits after its command.)
        for p in tick.parts.iter().filter(|p| !p.ran) {
            assert!(
                p.exited < p.decided + node_timeout + Duration::from_millis(500),
                "tick {i}: pid {} decided at {:?} but exited at {:?}",
                p.pid,
                p.decided,
                p.exited
            );
        }
    }
    // Once the thawed server has run what it queued (each withdrawal after
    // its attempt, on one connection), no dead vote is left on it.
    clients_gone(&fleet, 4);
    assert_eq!(fleet.servers[4].get(&lock_key(&key)), None, "a dead vote on the thawed server");
}

/// Clients connected to server `i` (the asking one included).
fn clients(fleet: &Fleet, i: usize) -> usize {
    let info: String = fleet.servers[i].cmd(&["INFO", "clients"]);
    info.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// Waits until thawed server `i` has dropped every client but the one
/// asking: it has run what it read from the closed connections first.
fn clients_gone(fleet: &Fleet, i: usize) {
    let start = Instant::now();
    while clients(fleet, i) > 1 {
        assert!(start.elapsed() < HANG, "the thawed server kept its clients");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_burst_of_waiters_all_run_one_at_a_time() {
    let _serial = serial();
    let fleet = Fleet::start(5);
    let urls = fleet.urls();
    let key = unique_key("waiters");
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let job = format!("echo start >> {0}; sleep 0.05; echo end >> {0}", ledger.display());
    let mut gate = Gate::new(dir.path());
    let n = 20;
    let mut children: Vec<_> = (0..n)
        .map(|i| {
            let err = File::create(dir.path().join(format!("err.{i}"))).unwrap();
            let args = ["run", "--wait", "60s", "--key", &key, "--", "sh", "-c", &job];
            gate.spawn(BIN, &args, &[("REDLOCK_SERVERS", &urls)], err)
        })
        .collect();
    let released = gate.release();
    for (i, child) in children.iter_mut().enumerate() {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(released.elapsed() < HANG, "waiter {i} still waiting");
            std::thread::sleep(Duration::from_millis(10));
        };
        let err = std::fs::read_to_string(dir.path().join(format!("err.{i}"))).unwrap();
        assert_eq!(status.code(), Some(0), "waiter {i}: {err}");
    }
    let lines = std::fs::read_to_string(&ledger).unwrap();
    let expected: Vec<&str> = ["start", "end"].repeat(n);
    assert_eq!(lines.lines().collect::<Vec<_>>(), expected, "every waiter runs, never two at once");
}

#[test]
fn a_withdrawal_reaches_a_slow_server_after_the_attempt_it_withdraws() {
    let _serial = serial();
    let fleet = Fleet::start(3);
    let proxy = Proxy::start(fleet.servers[2].port);
    let urls = format!("{},{},{}", fleet.servers[0].url(), fleet.servers[1].url(), proxy.url());
    let key = unique_key("ordered");
    // The scripts are already known there, as on any server redlock used
    // before: the attempt's first request is the one that sets.
    #[allow(dead_code)]
    mod bodies {
        include!(concat!(env!("OUT_DIR"), "/scripts.rs"));
    }
    for (script, _) in [bodies::ACQUIRE, bodies::RELEASE] {
        let _: String = fleet.servers[2].cmd(&["SCRIPT", "LOAD", script]);
    }
    // Server 0 votes for someone else; server 1 will grant; server 2
    // decides, and its traffic is held back for 2s.
    plant(&fleet, &key, &[0], "someone-else", Duration::from_secs(60));
    let delay = Duration::from_secs(2);
    proxy.set(Mode::Delay(delay));
    let running = Redlock::new(&urls)
        .args(["--node-timeout", "500ms", "run", "-n", "--key", &key, "--", "true"])
        .spawn();
    let start = Instant::now();
    while proxy.accepted() == 0 {
        assert!(start.elapsed() < HANG, "redlock never connected to the slow server");
        std::thread::sleep(Duration::from_millis(1));
    }
    // The attempt's request is now held in the proxy; anything sent later
    // on another connection would overtake it.
    std::thread::sleep(Duration::from_millis(100));
    let sent = Instant::now();
    proxy.set(Mode::Pass);
    let out = running.wait();
    assert_ne!(out.code(), 75, "nobody holds the lock: {}", out.stderr);
    // Let the held-back request reach the server (the delay is the
    // proxy's own, not a guess at scheduling), then look for a dead token.
    std::thread::sleep((delay + Duration::from_millis(500)).saturating_sub(sent.elapsed()));
    let stored = lock_key(&key);
    assert_eq!(
        fleet.values(&stored)[1..],
        [None, None],
        "a withdrawn attempt left its token behind (exit {}):\n{}",
        out.code(),
        out.stderr
    );
}
