#![allow(clippy::unwrap_used, clippy::expect_used)]

//! Long-running proofs, in their own test binary so that their load never
//! skews the timing bounds of the integration tests (cargo runs test
//! binaries one after the other). The two tests here also run one at a
//! time. By default 30 s of chaos and 15 s of load, enough for every
//! bound below (a 30 s chaos run injects about 25 faults, 10 needed, and
//! runs about 350 sections, 30 needed) in the default test run's budget;
//! `REDLOCK_CHAOS_SECS` and `REDLOCK_LOAD_SECS` lengthen them.

#[path = "../integration/harness/mod.rs"]
mod harness;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::{Fleet, Redlock, ledger, lock_key, process_alive, unique_key};

static SERIAL: Mutex<()> = Mutex::new(());

fn secs(var: &str, default: u64) -> Duration {
    Duration::from_secs(std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// The critical section: a ledger line on entry and exit (also when stopped
/// by SIGTERM), and a mkdir that fails if anyone else is inside.
fn critical_section(dir: &std::path::Path, pause: &str) -> String {
    let d = dir.display();
    format!(
        "trap 'rmdir {d}/inside 2>/dev/null; echo \"exit $REDLOCK_FENCE $(date +%s%N)\" >> {d}/ledger; exit 143' TERM; \
         echo \"enter $REDLOCK_FENCE $(date +%s%N)\" >> {d}/ledger; \
         mkdir {d}/inside 2>/dev/null || echo overlap >> {d}/overlaps; \
         echo $$ >> {d}/pids; sleep {pause}; rmdir {d}/inside; \
         echo \"exit $REDLOCK_FENCE $(date +%s%N)\" >> {d}/ledger"
    )
}

/// Checks a ledger: sorted by time, entries and exits alternate. Returns
/// the number of complete critical sections.
fn audit(dir: &std::path::Path) -> usize {
    let overlaps = std::fs::read_to_string(dir.join("overlaps")).unwrap_or_default();
    assert!(overlaps.is_empty(), "mkdir saw {} overlap(s)", overlaps.lines().count());
    let ledger = std::fs::read_to_string(dir.join("ledger")).unwrap_or_default();
    let mut events: Vec<(u128, bool, String)> = ledger
        .lines()
        .map(|l| {
            let parts: Vec<&str> = l.split(' ').collect();
            (parts[2].parse().unwrap(), parts[0] == "enter", parts[1].to_owned())
        })
        .collect();
    events.sort();
    let mut inside: Option<&str> = None;
    let mut sections = 0;
    for (t, enter, fence) in &events {
        match (enter, inside) {
            (true, None) => inside = Some(fence),
            (true, Some(other)) => {
                panic!("overlap at {t}: fence {fence} entered while {other} was inside")
            }
            (false, Some(f)) if f == fence => {
                inside = None;
                sections += 1;
            }
            (false, _) => panic!("exit of fence {fence} at {t} without its entry"),
        }
    }
    assert!(inside.is_none(), "a critical section never ended");
    sections
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Up,
    Hung(Instant),
    Down(Instant),
}

/// `n` threads that run `script` under `key` (with `extra` flags) until
/// `deadline`, each run waiting at most 10 s, counting exit codes.
fn contend(
    n: usize,
    urls: &str,
    key: &str,
    extra: &[&str],
    script: &str,
    deadline: Instant,
    codes: &Arc<Mutex<BTreeMap<i32, usize>>>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let (urls, key, script, codes) =
                (urls.to_owned(), key.to_owned(), script.to_owned(), Arc::clone(codes));
            let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
            std::thread::spawn(move || {
                while Instant::now() < deadline {
                    let out = Redlock::new(&urls)
                        .args(["--node-timeout", "200ms", "run", "--key", &key, "--ttl", "2s"])
                        .args(&extra)
                        .args(["--wait", "10s", "-c", &script])
                        .run();
                    let code = out.code();
                    if ![0, 69, 70, 75].contains(&code) {
                        out.fail("exited with an undocumented code");
                    }
                    *codes.lock().unwrap().entry(code).or_default() += 1;
                }
            })
        })
        .collect()
}

#[test]
fn chaos_never_breaks_exclusion_and_keeps_progress() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let length = secs("REDLOCK_CHAOS_SECS", 30);
    let ttl = Duration::from_secs(2);
    let mut fleet = Fleet::start(5);
    let urls = fleet.urls();
    let key = unique_key("chaos");
    let dir = tempfile::tempdir().unwrap();
    let script = critical_section(dir.path(), "0.05");
    let deadline = Instant::now() + length;
    let codes: Arc<Mutex<BTreeMap<i32, usize>>> = Arc::default();
    let mut contenders = contend(6, &urls, &key, &[], &script, deadline, &codes);
    // `--limit 3` on another key under the same chaos (src/slots.rs).
    let limit_key = unique_key("chaos-limit");
    let limit_dir = tempfile::tempdir().unwrap();
    let limit_script = ledger::section(limit_dir.path(), "0.2");
    let limit_codes: Arc<Mutex<BTreeMap<i32, usize>>> = Arc::default();
    contenders.extend(contend(
        6,
        &urls,
        &limit_key,
        &["--limit", "3"],
        &limit_script,
        deadline,
        &limit_codes,
    ));

    // `--shared` on a third key: four shared contenders and two
    // exclusive ones (src/shared.rs).
    let rw_key = unique_key("chaos-rw");
    let rw_dir = tempfile::tempdir().unwrap();
    let rw_codes: Arc<Mutex<BTreeMap<i32, usize>>> = Arc::default();
    let shared_script = ledger::rw_section(rw_dir.path(), "shared", "0.2");
    let exclusive_script = ledger::rw_section(rw_dir.path(), "exclusive", "0.1");
    contenders.extend(contend(
        4,
        &urls,
        &rw_key,
        &["--shared"],
        &shared_script,
        deadline,
        &rw_codes,
    ));
    contenders.extend(contend(2, &urls, &rw_key, &[], &exclusive_script, deadline, &rw_codes));

    // The chaos driver: at most two of five servers faulty at any time.
    // A stopped server (no persistence) comes back only after the longest
    // TTL in use has passed: the delayed restart Redlock requires.
    let mut state = [Fault::Up; 5];
    let (mut hangs, mut stops) = (0, 0);
    while Instant::now() < deadline {
        let now = Instant::now();
        for (i, s) in state.iter_mut().enumerate() {
            match *s {
                Fault::Hung(until) if until <= now => {
                    fleet.servers[i].resume();
                    *s = Fault::Up;
                }
                Fault::Down(at) if at <= now => {
                    fleet.servers[i].restart();
                    *s = Fault::Up;
                }
                _ => {}
            }
        }
        let faulty = state.iter().filter(|s| **s != Fault::Up).count();
        if faulty < 2 && fastrand::bool() {
            let i = fastrand::usize(..5);
            if state[i] == Fault::Up {
                if fastrand::bool() {
                    fleet.servers[i].hang();
                    state[i] = Fault::Hung(now + Duration::from_millis(fastrand::u64(200..1500)));
                    hangs += 1;
                } else {
                    fleet.servers[i].stop();
                    state[i] = Fault::Down(now + ttl + Duration::from_millis(500));
                    stops += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for (i, s) in state.iter().enumerate() {
        match s {
            Fault::Hung(_) => fleet.servers[i].resume(),
            Fault::Down(_) => fleet.servers[i].restart(),
            Fault::Up => {}
        }
    }
    for c in contenders {
        c.join().unwrap();
    }
    let sections = audit(dir.path());
    let codes = codes.lock().unwrap().clone();
    let (most, limit_sections) = ledger::audit(limit_dir.path());
    let limit_codes = limit_codes.lock().unwrap().clone();
    let rw = ledger::rw_audit(rw_dir.path());
    let rw_codes = rw_codes.lock().unwrap().clone();
    eprintln!(
        "chaos {length:?}: {sections} critical sections, 0 overlaps, exit codes {codes:?}; \
         --limit 3: {limit_sections} sections, at most {most} inside at once, exit codes {limit_codes:?}; \
         --shared: {} shared and {} exclusive sections, at most {} shared inside at once, never mixed, exit codes {rw_codes:?}; \
         {hangs} hangs and {stops} delayed restarts injected",
        rw.shared, rw.exclusive, rw.most_shared
    );
    let minimum = usize::try_from(length.as_secs()).unwrap();
    assert!(sections >= minimum, "only {sections} critical sections in {length:?}");
    assert!(most <= 3, "{most} holders inside at once with --limit 3");
    assert_eq!(most, 3, "--limit 3 never had 3 holders inside at once");
    assert!(limit_sections >= minimum, "only {limit_sections} --limit sections in {length:?}");
    assert!(rw.most_shared >= 2, "shared holders never overlapped: {rw:?}");
    assert!(rw.exclusive >= minimum / 10, "too few exclusive sections: {rw:?}");
    assert!(hangs + stops >= 10, "too little chaos: {hangs} hangs, {stops} stops");
}

#[test]
fn fifty_concurrent_runs_on_five_keys() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let length = secs("REDLOCK_LOAD_SECS", 15);
    let fleet = Fleet::start(5);
    let urls = fleet.urls();
    let deadline = Instant::now() + length;
    let keys: Vec<(String, tempfile::TempDir)> =
        (0..5).map(|i| (unique_key(&format!("load{i}")), tempfile::tempdir().unwrap())).collect();
    let codes: Arc<Mutex<BTreeMap<i32, usize>>> = Arc::default();
    let workers: Vec<_> = (0..50)
        .map(|n| {
            let (key, dir) = &keys[n % 5];
            let (urls, key, codes) = (urls.clone(), key.clone(), Arc::clone(&codes));
            let script = critical_section(dir.path(), "0.01");
            std::thread::spawn(move || {
                while Instant::now() < deadline {
                    let out = Redlock::new(&urls)
                        .args(["run", "--key", &key, "--ttl", "5s", "--wait", "60s", "-c", &script])
                        .run();
                    if out.code() != 0 {
                        out.fail("a run under load failed");
                    }
                    *codes.lock().unwrap().entry(out.code()).or_default() += 1;
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut total = 0;
    for (key, dir) in &keys {
        let sections = audit(dir.path());
        total += sections;
        assert!(sections > 0, "{key} never ran");
        assert_eq!(fleet.values(&lock_key(key)), vec![None; 5], "{key} left locked");
        let pids = std::fs::read_to_string(dir.path().join("pids")).unwrap_or_default();
        for pid in pids.lines().filter_map(|p| p.parse::<i32>().ok()) {
            assert!(!process_alive(pid), "child {pid} of {key} leaked");
        }
    }
    eprintln!(
        "load {length:?}: 50 processes, 5 keys, {total} critical sections, 0 overlaps, exit codes {:?}",
        codes.lock().unwrap()
    );
}
