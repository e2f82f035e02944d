//! `check` as an alert and the metrics an alert rule reads: missed ticks
//! with their reasons (`--max-missed`, `--since`), every failed run of the
//! window (`--require-success`), a hung run (`--max-runtime`), and a
//! host that only skipped (`redlock_runs_total 0`, `redlock_last_tick_ran`).
//!
//! Ticks are 2 s long and every step is aligned to a tick's start (plus
//! 100 ms), so no step straddles a boundary by chance; each check runs
//! within the tick it expects.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::harness::{Fleet, Output, Redlock, unique_key, wait_for_file};

const EVERY: Duration = Duration::from_secs(2);

/// Sleeps until 100 ms past the start of the next 2 s tick; its start, s.
pub(crate) fn next_tick() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let every_ms = EVERY.as_millis();
    let start = (now.as_millis() / every_ms + 1) * every_ms;
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(start).unwrap() + 100);
    std::thread::sleep(at.duration_since(SystemTime::now()).unwrap_or_default());
    u64::try_from(start / 1000).unwrap()
}

/// `run --once-per 2s -n -E 0 -k KEY -- sh -c SCRIPT`, on `servers`.
pub(crate) fn tick_run(servers: &str, key: &str, script: &str, extra: &[&str]) -> Output {
    Redlock::new(servers)
        .args(["run", "--once-per", "2s", "-n", "-E", "0", "-k", key])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .run()
}

/// `check -k KEY --max-age 1h ARGS`.
fn check(fleet: &Fleet, key: &str, args: &[&str]) -> Output {
    Redlock::on(fleet).args(["check", "-k", key, "--max-age", "1h"]).args(args).run()
}

/// A tick nobody fired and a tick whose hosts reached no quorum: each is
/// missed, with its reason, and `check` warns (exit 1) unless
/// `--max-missed` tolerates them or `--since` leaves one out.
#[test]
fn missed_ticks_warn_with_their_reasons_unless_tolerated() {
    let fleet = Fleet::start(3);
    let key = unique_key("alert-missed");
    let urls = fleet.urls();
    // One server of three and two that refuse: no quorum.
    let cut_off = format!("{},redis://127.0.0.1:1,redis://127.0.0.1:2", fleet.servers[0].url());
    // T runs; T+1's host reaches no quorum; T+2 runs; nobody fires in T+3.
    next_tick();
    tick_run(&urls, &key, "true", &[]).expect(0);
    next_tick();
    tick_run(&cut_off, &key, "true", &[]).expect(69);
    next_tick();
    tick_run(&urls, &key, "true", &[]).expect(0);
    next_tick();
    let t4 = next_tick();
    let out = check(&fleet, &key, &[]);
    out.expect(1);
    let line = out.line();
    assert!(line.starts_with("WARNING - "), "{line}");
    assert!(line.contains("2 earlier ticks did not run"), "{line}");
    assert!(line.contains("(no host fired)"), "{line}");
    assert!(line.contains("(hosts fired but could not reach a quorum of the servers)"), "{line}");
    assert!(line.contains("more than --max-missed 0"), "{line}");
    let v = check(&fleet, &key, &["--json"]).json();
    assert_eq!(v["status"], "missed", "{v}");
    assert_eq!(v["code"], 1, "{v}");
    assert_eq!(v["missed_count"], 2, "{v}");
    let reasons: Vec<&str> =
        v["missed"].as_array().unwrap().iter().map(|m| m["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["no-host", "no-quorum"], "{v}");
    assert_eq!(v["problems"][0]["kind"], "missed", "{v}");
    // One tolerated is not enough, two are.
    check(&fleet, &key, &["--max-missed", "1"]).expect(1);
    let out = check(&fleet, &key, &["--max-missed", "2"]);
    out.expect(0);
    assert!(out.line().starts_with("OK - "), "{}", out.line());
    // The last 3 s: T+2 (ran) and T+3 (missed), not T+1.
    let out = check(&fleet, &key, &["--since", "3s", "--max-missed", "1"]);
    out.expect(0);
    assert!(out.line().contains("1 earlier ticks did not run"), "{}", out.line());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    assert!(now < t4 + 2, "the checks ran past their tick; rerun on a quieter machine");
}

/// `--require-success` counts every run of the window: a failed run is
/// seen after a later one succeeded, until `--since` leaves it out.
#[test]
fn require_success_sees_an_earlier_failed_run_in_the_window() {
    let fleet = Fleet::start(3);
    let key = unique_key("alert-failed");
    let urls = fleet.urls();
    next_tick();
    tick_run(&urls, &key, "exit 3", &[]).expect(3);
    next_tick();
    tick_run(&urls, &key, "true", &[]).expect(0);
    let out = check(&fleet, &key, &["--require-success"]);
    out.expect(1);
    assert!(out.line().contains("did not succeed (exit 3)"), "{}", out.line());
    let v = check(&fleet, &key, &["--require-success", "--json"]).json();
    assert_eq!(v["status"], "failed", "{v}");
    // The last second holds only the run that succeeded.
    check(&fleet, &key, &["--require-success", "--since", "1s"]).expect(0);
}

/// A run still holding the lock past `--max-runtime` is a hung job; the
/// tick it runs is not missed while it runs.
#[test]
fn max_runtime_warns_of_a_run_still_holding_the_lock() {
    let fleet = Fleet::start(3);
    let key = unique_key("alert-hung");
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    next_tick();
    let job = format!("touch {}; sleep 5", started.display());
    let running = Redlock::on(&fleet)
        .args(["run", "--once-per", "2s", "-n", "-k", &key, "--", "sh", "-c", &job])
        .spawn();
    wait_for_file(&started);
    std::thread::sleep(Duration::from_millis(1_500));
    let out = check(&fleet, &key, &["--max-runtime", "1s"]);
    out.expect(1);
    assert!(out.line().contains("is running on"), "{}", out.line());
    assert!(out.line().contains("longer than --max-runtime 1"), "{}", out.line());
    let v = check(&fleet, &key, &["--max-runtime", "1s", "--json"]).json();
    assert_eq!(v["status"], "hung", "{v}");
    check(&fleet, &key, &["--max-runtime", "1m"]).expect(0);
    running.wait().expect(0);
}

/// The metrics an alert rule reads: a host that only skipped has
/// `redlock_runs_total 0`; each host says whether the last tick it saw
/// ran (`redlock_last_tick_ran`) and which tick that was.
#[test]
fn metrics_say_whether_the_last_tick_ran_and_count_runs_from_zero() {
    let fleet = Fleet::start(3);
    let key = unique_key("alert-metrics");
    let urls = fleet.urls();
    let cut_off = format!("{},redis://127.0.0.1:1,redis://127.0.0.1:2", fleet.servers[0].url());
    let dir = tempfile::tempdir().unwrap();
    let path = |host: &str| dir.path().join(format!("{host}.prom")).display().to_string();
    let (runner, skipper) = (path("runner"), path("skipper"));
    let t = next_tick();
    tick_run(&urls, &key, "true", &["--metrics-file", &runner]).expect(0);
    tick_run(&urls, &key, "true", &["--metrics-file", &skipper]).expect(0);
    let prom = std::fs::read_to_string(&skipper).unwrap();
    let series = |name: &str| format!("{name}{{key=\"{key}\"}}");
    assert!(prom.contains(&format!("{} 0\n", series("redlock_runs_total"))), "{prom}");
    assert!(prom.contains(&format!("{} 1\n", series("redlock_skips_total"))), "{prom}");
    assert!(prom.contains(&format!("{} 1\n", series("redlock_last_tick_ran"))), "{prom}");
    let seen = format!("{} {t}\n", series("redlock_last_tick_seen_timestamp_seconds"));
    assert!(prom.contains(&seen), "{prom}");
    let prom = std::fs::read_to_string(&runner).unwrap();
    assert!(prom.contains(&format!("{} 1\n", series("redlock_last_tick_ran"))), "{prom}");
    // The next tick reaches no quorum: as the host saw it, nobody ran it.
    let t1 = next_tick();
    tick_run(&cut_off, &key, "true", &["--metrics-file", &skipper]).expect(69);
    let prom = std::fs::read_to_string(&skipper).unwrap();
    assert!(prom.contains(&format!("{} 0\n", series("redlock_last_tick_ran"))), "{prom}");
    let seen = format!("{} {t1}\n", series("redlock_last_tick_seen_timestamp_seconds"));
    assert!(prom.contains(&seen), "{prom}");
    assert!(prom.contains(&format!("{} 1\n", series("redlock_skips_total"))), "not a skip: {prom}");
}

/// The two reasons a tick that hosts fired can still be missed: an
/// earlier run held the lock past the tick (its hosts found it busy), and
/// a host took the tick but died before recording its run (the others
/// skipped quietly, as it ran).
#[test]
fn a_tick_held_by_an_earlier_run_and_a_tick_whose_holder_died_say_so() {
    let fleet = Fleet::start(3);
    let key = unique_key("alert-held");
    let urls = fleet.urls();
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    // A: a run of 3 s, into B, whose host finds the lock held by it.
    next_tick();
    let long = Redlock::on(&fleet)
        .args(["run", "--once-per", "2s", "-n", "-k", &key, "--", "sleep", "3"])
        .spawn();
    next_tick();
    tick_run(&urls, &key, "true", &[]).expect(0);
    long.wait().expect(0);
    // C: a host takes it and is killed; another skips as it runs. The
    // lock's TTL of 1 s runs out before C ends, so nobody holds it then.
    next_tick();
    let job = format!("touch {}; sleep 10", started.display());
    let doomed = Redlock::on(&fleet)
        .args(["run", "--once-per", "2s", "--ttl", "1s", "-n", "-k", &key])
        .args(["--", "sh", "-c", &job])
        .spawn();
    wait_for_file(&started);
    tick_run(&urls, &key, "true", &[]).expect(0);
    crate::harness::send_signal(doomed.pid(), libc::SIGKILL);
    doomed.wait();
    next_tick();
    let v = check(&fleet, &key, &["--json"]).json();
    let reasons: Vec<&str> =
        v["missed"].as_array().unwrap().iter().map(|m| m["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["lost", "held"], "{v}");
    let out = check(&fleet, &key, &[]);
    out.expect(1);
    assert!(
        out.line().contains("(hosts fired but the lock was held by an earlier run)"),
        "{}",
        out.line()
    );
    assert!(out.line().contains("(taken, but no run was recorded"), "{}", out.line());
}

/// Skips written by an older redlock (the counter, no per-tick fields) in
/// a missed tick: its reason is unknown, not "no host fired".
#[test]
fn a_tick_skipped_by_an_older_redlock_has_an_unknown_reason() {
    let fleet = Fleet::start(3);
    let key = unique_key("alert-legacy");
    let urls = fleet.urls();
    next_tick();
    tick_run(&urls, &key, "true", &[]).expect(0);
    let t1 = next_tick();
    // What the skip script wrote before it counted ticks.
    let at = (t1 * 1000 + 300).to_string();
    let skips = format!("{}:skips", crate::harness::lock_key(&key));
    for server in &fleet.servers {
        let fields = ["count", "1", "since", &at, "at", &at, "host", "old", "holder", "h"];
        let _: i64 = server.cmd(&[&["HSET", skips.as_str()][..], &fields[..]].concat());
    }
    next_tick();
    tick_run(&urls, &key, "true", &[]).expect(0);
    next_tick();
    let out = check(&fleet, &key, &["--json"]);
    out.expect(1);
    let v = out.json();
    assert_eq!(v["missed"][0]["reason"], "unknown", "{v}");
    assert_eq!(v["missed_count"], 1, "{v}");
}
