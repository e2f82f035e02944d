#![allow(clippy::unwrap_used, clippy::expect_used)]
//! How well `--limit 3` uses its places, against 5 local Redis servers:
//! 8 contenders each run `redlock run --limit 3 --wait 30s` of a 0.3 s job
//! three times, the README's "at most 3 backups at once" recipe in small.
//! 24 jobs on 3 places take 2.4 s when every place is used. For each
//! repetition: the whole time, and the time-weighted number of jobs inside
//! while anyone waits (3.0 is full use). Then the same with 2 of the 5
//! servers stopped 1 s in (the rest still make a quorum), and the same
//! shape with `--shared` readers, which never need to wait for each other.
//!
//! Run: `cargo bench --bench limit` (env `REPS`, default 20; `BIN`, another
//! redlock binary to measure, for interleaved comparisons).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::redis_harness::Fleet;

fn bin() -> String {
    std::env::var("BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_redlock").to_owned())
}

/// One repetition: 8 loops of 3 runs with `flags`; when `stop_two`, servers
/// 3 and 4 are killed 1 s in. Returns (whole time, average inside while
/// anyone waits, most inside).
fn repetition(flags: &str, stop_two: bool) -> (Duration, f64, i64) {
    let mut fleet = Fleet::start(5);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let job = format!(
        "echo \"in $(date +%s%N)\" >> {d}/ledger; sleep 0.3; echo \"out $(date +%s%N)\" >> {d}/ledger"
    );
    let script = format!(
        "for i in 1 2 3; do echo \"wait $(date +%s%N)\" >> {d}/ledger; \
         {} -q run {flags} --wait 30s --key k -- sh -c '{job}' || echo failed >> {d}/failures; done",
        bin()
    );
    let loops: Vec<_> = (0..8)
        .map(|_| {
            Command::new("sh")
                .args(["-c", &script])
                .env("REDLOCK_SERVERS", fleet.urls())
                .env("REDLOCK_CONFIG", "/dev/null")
                .spawn()
                .unwrap()
        })
        .collect();
    if stop_two {
        std::thread::sleep(Duration::from_secs(1));
        fleet.servers[3].stop();
        fleet.servers[4].stop();
    }
    for mut l in loops {
        l.wait().unwrap();
    }
    assert!(!dir.path().join("failures").exists(), "a run failed");
    usage(dir.path())
}

fn usage(dir: &Path) -> (Duration, f64, i64) {
    let ledger = std::fs::read_to_string(dir.join("ledger")).unwrap();
    let mut events: Vec<(u128, String)> = ledger
        .lines()
        .map(|l| {
            let (what, at) = l.split_once(' ').unwrap();
            (at.parse().unwrap(), what.to_owned())
        })
        .collect();
    events.sort();
    let (mut waiting, mut inside, mut most, mut weighted, mut span) =
        (0i64, 0i64, 0i64, 0f64, 0f64);
    for pair in events.windows(2) {
        let ((t, what), (next, _)) = (&pair[0], &pair[1]);
        match what.as_str() {
            "wait" => waiting += 1,
            "in" => {
                waiting -= 1;
                inside += 1;
            }
            _ => inside -= 1,
        }
        most = most.max(inside);
        if waiting > 0 {
            weighted += (next - t) as f64 * inside as f64;
            span += (next - t) as f64;
        }
    }
    let whole = events.last().unwrap().0 - events[0].0;
    (Duration::from_nanos(whole as u64), weighted / span.max(1.0), most)
}

fn report(name: &str, goal: (f64, f64), runs: &[(Duration, f64, i64)]) {
    let mut whole: Vec<f64> = runs.iter().map(|r| r.0.as_secs_f64()).collect();
    let mut used: Vec<f64> = runs.iter().map(|r| r.1).collect();
    whole.sort_by(f64::total_cmp);
    used.sort_by(f64::total_cmp);
    let met = runs.iter().filter(|r| r.0.as_secs_f64() <= goal.0 && r.1 >= goal.1).count();
    println!(
        "{name}: whole {:.2}/{:.2}/{:.2} s, used {:.2}/{:.2}/{:.2} (min/median/max), most inside {}; \
         {met} of {} met <= {:.1} s and >= {:.1}",
        whole[0],
        whole[whole.len() / 2],
        whole[whole.len() - 1],
        used[0],
        used[used.len() / 2],
        used[used.len() - 1],
        runs.iter().map(|r| r.2).max().unwrap_or(0),
        runs.len(),
        goal.0,
        goal.1,
    );
}

fn main() {
    common::trust_fresh_servers();
    let reps: usize = std::env::var("REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    println!("{} ({reps} repetitions each)", bin());
    let healthy: Vec<_> = (0..reps).map(|_| repetition("--limit 3", false)).collect();
    report("--limit 3, 5 servers", (2.9, 2.7), &healthy);
    let degraded: Vec<_> = (0..reps).map(|_| repetition("--limit 3", true)).collect();
    report("--limit 3, 2 of 5 servers stopped at 1 s", (2.9, 2.5), &degraded);
    let shared: Vec<_> = (0..reps).map(|_| repetition("--shared", false)).collect();
    // Readers never wait for each other: 3 rounds of 0.3 s, 8 inside at
    // once; what is left is each run's own start-up (the "used" figure
    // counts the moments between runs, when a loop has begun its next run
    // and is not inside yet).
    report("--shared, 5 servers (8 readers at once)", (1.2, 0.0), &shared);
}
