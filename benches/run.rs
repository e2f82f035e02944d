#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `run` benchmarks, against 5 local Redis servers:
//! - handoff: a waiter (`redlock acquire --wait`, already subscribed) and a
//!   holder that releases: time until the waiter prints its token;
//! - overhead: `redlock run --key k -- true` beside `true` and
//!   `flock FILE true`, timed by hyperfine (Debian package `hyperfine`);
//! - memory: the supervisor's peak RSS while its child sleeps and the
//!   watchdog renews;
//! - contention: 8 processes, each looping wait-acquire (the library's
//!   waiting path), a tiny critical section, release, on one key: sections
//!   per second and overlaps;
//! - process loop: 8 loops of whole `redlock run --wait 1m -- true`
//!   processes on one key, the way a shell script contends: sections per
//!   second.
//!
//! Handoff, overhead and contention are each measured twice, with the wait
//! queue (the default) and `--unordered` (the baseline), and reported as
//! a ratio. Each row is also measured against the raw floor in the same run
//! (`common::raw`: plain `SET NX PX` and compare-and-delete over blocking
//! sockets, retrying after a random pause under 1 ms, as the peers' floor
//! does) and guarded: a ratio past its bound makes the benchmark exit
//! with 1 (`common::raw::Guards`).
//!
//! Run: `cargo bench --bench run` (env `ROUNDS`, default 100 handoffs;
//! `CONTENTION_SECS`, default 10, for the contention and the process loop;
//! `ONLY=loop,contention` picks figures; `BIN` runs another build's
//! binary as the processes).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::redis_harness::Fleet;
use redlock::cli::LogFormat;
use redlock::lock::Attempt;
use redlock::lock::{Held, Request, Wait};
use redlock::output::Log;

/// The binary under test: this build's, or another (`BIN`, to compare
/// two builds' processes against the same harness).
fn bin() -> String {
    std::env::var("BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_redlock").to_owned())
}
const SERVERS: usize = 5;
const CONTENDERS: usize = 8;
/// Set in a contention worker's environment: `URLS|KEY|SECS|DIR`.
const WORKER: &str = "REDLOCK_BENCH_WORKER";

fn env_or(var: &str, default: u64) -> u64 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn main() {
    common::trust_fresh_servers();
    common::raw::once_if_asked();
    if let Ok(spec) = std::env::var(WORKER) {
        worker(&spec);
        return;
    }
    let mut guards = common::raw::Guards::default();
    let servers = Fleet::start(SERVERS);
    let urls = servers.urls();
    println!("{SERVERS} local redis-server processes");
    // Each figure of the wait queue beside its baseline, the
    // unordered mode (`--unordered`), measured in the same run.
    let rounds = env_or("ROUNDS", 100);
    let secs = Duration::from_secs(env_or("CONTENTION_SECS", 10));
    if wanted("handoff") {
        let ordered = handoff(&servers, &urls, rounds, &[]);
        let unordered = handoff(&servers, &urls, rounds, &["--unordered"]);
        let raw = raw_handoff(&urls, rounds);
        println!(
            "handoff ratio ordered/unordered: median {:.2}, p99 {:.2}",
            ordered.0.as_secs_f64() / unordered.0.as_secs_f64(),
            ordered.1.as_secs_f64() / unordered.1.as_secs_f64()
        );
        let ratio = ordered.0.as_secs_f64() / raw.0.as_secs_f64();
        guards.check("W2 handoff median", ratio, 2.6, "<= 2x and < 1.5 ms", true);
    }
    if wanted("overhead")
        && let Some(ratio) = overhead(&urls)
    {
        guards.check("whole run -- true", ratio, 2.3, "<= rslock once (peers' bench)", true);
    }
    if wanted("memory") {
        memory(&urls);
    }
    if wanted("contention") {
        let ordered = contention(&servers, &urls, secs, Side::Ordered);
        let unordered = contention(&servers, &urls, secs, Side::Unordered);
        let raw = contention(&servers, &urls, secs, Side::Raw);
        println!(
            "contention ratio ordered/unordered: sections/s {:.2}, script calls per section {:.2}",
            ordered.0 / unordered.0,
            ordered.1 / unordered.1
        );
        guards.check("W3 sections/s", ordered.0 / raw.0, 0.5, ">= rslock", false);
        // Not a ratio to the floor: the slowest process's sections over
        // the fastest's.
        guards.check("W3 fairness", ordered.2, 0.6, "slowest/fastest >= 0.8", false);
    }
    if wanted("loop") {
        let ordered = process_loop(&urls, secs, &[]);
        let unordered = process_loop(&urls, secs, &["--unordered"]);
        let raw = process_loop(&urls, secs, RAW);
        println!("process loop ratio ordered/unordered: sections/s {:.2}", ordered / unordered);
        guards.check("W3 as processes", ordered / raw, 0.5, ">= 300/s", false);
    }
    guards.finish();
}

/// `process_loop`'s `extra` for the raw floor's processes instead of
/// redlock's ([`common::raw::once_if_asked`]).
const RAW: &[&str] = &["raw"];

/// The floor of [`handoff`]: a holder releases while a waiter retries
/// `SET NX` after random pauses under 1 ms; how long until the waiter
/// holds it. Returns the median and p99.
fn raw_handoff(urls: &str, rounds: u64) -> (Duration, Duration) {
    let mut holder = common::raw::Raw::connect(urls);
    let mut samples = Vec::new();
    for i in 0..rounds + 10 {
        let key = format!("bench-raw-handoff-{i}");
        assert!(holder.acquire(&key, "holder", Duration::from_secs(60)) >= holder.quorum());
        let (urls, waiting) = (urls.to_owned(), key.clone());
        let waiter = std::thread::spawn(move || {
            let mut raw = common::raw::Raw::connect(&urls);
            raw.acquire_retrying(&waiting, "waiter", Duration::from_secs(10));
            let held = Instant::now();
            raw.release(&waiting, "waiter");
            held
        });
        // The waiter connected and retries.
        std::thread::sleep(Duration::from_millis(20));
        let start = Instant::now();
        holder.release(&key, "holder");
        let took = waiter.join().unwrap().duration_since(start);
        if i >= 10 {
            samples.push(took);
        }
    }
    samples.sort_unstable();
    let figures = (common::percentile(&samples, 0.5), common::percentile(&samples, 0.99));
    println!("handoff, raw floor (a waiter polling SET NX): {}", common::summary(samples));
    figures
}

/// Whether the figure `name` is measured: all of them, or those listed in
/// `ONLY` (comma-separated: handoff, overhead, memory, contention, loop).
fn wanted(name: &str) -> bool {
    std::env::var("ONLY").map_or(true, |only| only.split(',').any(|n| n.trim() == name))
}

/// (e) 8 loops of whole `redlock run --wait 1m -- true` processes on one
/// key for `secs`: sections (runs that exited 0) per second.
fn process_loop(urls: &str, secs: Duration, extra: &[&str]) -> f64 {
    let key = format!("bench-loop{}", extra.join(""));
    let end = Instant::now() + secs;
    let loops: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let (urls, key, extra) = (urls.to_owned(), key.clone(), extra.join(" "));
            std::thread::spawn(move || {
                let mut runs = 0u64;
                while Instant::now() < end {
                    let status = if extra == "raw" {
                        Command::new(std::env::current_exe().unwrap())
                            .env(common::raw::RAW_ONCE, format!("{urls}|{key}"))
                            .status()
                            .unwrap()
                    } else {
                        Command::new(bin())
                            .env("REDLOCK_SERVERS", &urls)
                            .args(["run", "--key", &key, "--wait", "1m"])
                            .args(extra.split_whitespace())
                            .args(["--", "true"])
                            .status()
                            .unwrap()
                    };
                    assert!(status.success(), "a run failed: {status}");
                    runs += 1;
                }
                runs
            })
        })
        .collect();
    let mut per_loop: Vec<u64> = loops.into_iter().map(|l| l.join().unwrap()).collect();
    per_loop.sort_unstable();
    let sections: u64 = per_loop.iter().sum();
    let rate = sections as f64 / secs.as_secs_f64();
    let what = match extra {
        RAW => "the raw floor's acquire, `true`, release".to_owned(),
        _ => format!(
            "`redlock run --wait 1m {}-- true`",
            extra.iter().map(|e| format!("{e} ")).collect::<String>()
        ),
    };
    println!(
        "process loop ({CONTENDERS} loops of {what}, one key, {}s): {sections} sections, {rate:.0}/s, \
         per loop {}..{}",
        secs.as_secs(),
        per_loop[0],
        per_loop[per_loop.len() - 1],
    );
    rate
}

/// (a) The holder releases; how long until the waiting process holds it.
/// Returns the median and p99.
fn handoff(servers: &Fleet, urls: &str, rounds: u64, extra: &[&str]) -> (Duration, Duration) {
    let rt = runtime();
    let fleet = common::fleet(urls);
    let mut samples = Vec::new();
    for i in 0..rounds + 10 {
        let key = format!("bench-handoff-{i}");
        let token = redlock::token::Token::new().to_string();
        let held = rt.block_on(fleet.try_acquire(&key, &token, Duration::from_secs(60), true));
        assert!(matches!(held.attempt, Attempt::Acquired(_)), "holder: {:?}", held.attempt);
        let mut waiter = Command::new(bin())
            .env("REDLOCK_SERVERS", urls)
            .args(["acquire", "--key", &key, "--ttl", "10s", "--wait", "1m"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Subscribed (on the first servers - quorum + 1 = 3): it has tried,
        // failed and is waiting.
        for s in &servers.servers[..3] {
            s.await_waiters(&key, 1);
        }
        let mut out = BufReader::new(waiter.stdout.take().unwrap());
        let start = Instant::now();
        rt.block_on(fleet.release(&key, Held::of(&token))).unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let took = start.elapsed();
        assert!(!line.trim().is_empty(), "the waiter printed no token");
        assert!(waiter.wait().unwrap().success());
        rt.block_on(fleet.release(&key, Held::of(line.trim()))).unwrap();
        // The first rounds warm up the page cache and the servers.
        if i >= 10 {
            samples.push(took);
        }
    }
    rt.block_on(fleet.drain());
    samples.sort_unstable();
    let figures = (common::percentile(&samples, 0.5), common::percentile(&samples, 0.99));
    println!("handoff (release -> waiter holds the lock) {extra:?}: {}", common::summary(samples));
    figures
}

/// (b) Whole-process overhead, by hyperfine, beside the raw floor's whole
/// process (this benchmark's binary as [`common::raw::once_if_asked`]).
/// Returns `redlock run -- true` over the floor (medians), when hyperfine ran.
fn overhead(urls: &str) -> Option<f64> {
    let dir = tempfile::tempdir().unwrap();
    let (flock_file, json) = (dir.path().join("flock"), dir.path().join("hyperfine.json"));
    let commands = [
        "true".to_owned(),
        format!("flock {} true", flock_file.display()),
        format!("{} run --key bench-overhead -- true", bin()),
        format!("{} run --unordered --key bench-overhead -- true", bin()),
        std::env::current_exe().unwrap().display().to_string(),
    ];
    let status = Command::new("hyperfine")
        .env("REDLOCK_SERVERS", urls)
        .env(common::raw::RAW_ONCE, format!("{urls}|bench-overhead-raw"))
        .args(["-N", "--warmup", "30", "--runs", "300", "--style", "basic", "--export-json"])
        .arg(&json)
        .args(&commands)
        .status();
    match status {
        Ok(s) if s.success() => {}
        _ => {
            println!("overhead: hyperfine did not run (apt-get install -y hyperfine)");
            return None;
        }
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let median_ms = |i: usize| report["results"][i]["median"].as_f64().unwrap() * 1e3;
    println!(
        "overhead (median): true {:.2} ms, flock {:.2} ms, redlock run {:.2} ms: {:.2} ms added over true; \
         --unordered {:.2} ms: {:.2} ms added; ratio of the added times ordered/unordered {:.2}; \
         raw floor's process {:.2} ms",
        median_ms(0),
        median_ms(1),
        median_ms(2),
        median_ms(2) - median_ms(0),
        median_ms(3),
        median_ms(3) - median_ms(0),
        (median_ms(2) - median_ms(0)) / (median_ms(3) - median_ms(0)),
        median_ms(4),
    );
    Some(median_ms(2) / median_ms(4))
}

/// (c) Peak RSS of the supervisor while its child sleeps and the watchdog
/// renews (`--ttl 1s`: a renewal every 333 ms).
fn memory(urls: &str) {
    let mut running = Command::new(bin())
        .env("REDLOCK_SERVERS", urls)
        .args(["run", "--key", "bench-memory", "--ttl", "1s", "--", "sleep", "2"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let status = std::fs::read_to_string(format!("/proc/{}/status", running.id())).unwrap();
    let field = |name: &str| {
        status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or("?").to_owned()
    };
    assert!(running.wait().unwrap().success());
    println!(
        "memory of `redlock run` while the child sleeps: peak RSS (VmHWM) {}, RSS {}",
        field("VmHWM:"),
        field("VmRSS:")
    );
}

/// Who contends in [`contention`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// The library's waiting path, with the wait queue.
    Ordered,
    /// The same, `--unordered`.
    Unordered,
    /// The raw floor, retrying ([`common::raw::Raw::acquire_retrying`]).
    Raw,
}

/// (d) 8 processes contend for one key through the library's waiting path
/// (`side`), or as the raw floor. Returns sections/s and script calls per
/// section (over all servers: acquire, queue, withdraw and release scripts)
/// and the slowest process's sections over the fastest's.
fn contention(servers: &Fleet, urls: &str, secs: Duration, side: Side) -> (f64, f64, f64) {
    let calls_before = script_calls(servers);
    let dir = tempfile::tempdir().unwrap();
    let key = format!("bench-contention-{side:?}");
    let spec = format!("{urls}|{key}|{}|{}|{side:?}", secs.as_secs(), dir.path().display());
    let workers: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .env(WORKER, &spec)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let (mut sections, mut overlaps, mut per_worker) = (0, 0, Vec::new());
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "a worker failed");
        let counts: Vec<u64> = String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        sections += counts[0];
        overlaps += counts[1];
        per_worker.push(counts[0]);
    }
    per_worker.sort_unstable();
    let calls = script_calls(servers) - calls_before;
    let rate = sections as f64 / secs.as_secs_f64();
    let per_section = calls as f64 / sections.max(1) as f64;
    let fairness = per_worker[0] as f64 / per_worker[per_worker.len() - 1].max(1) as f64;
    println!(
        "contention ({CONTENDERS} processes, one key, {}s, {side:?}): {sections} sections, \
         {rate:.0}/s, {overlaps} overlaps, per process {}..{} (slowest/fastest {:.2}), \
         {per_section:.1} script calls per section over {SERVERS} servers",
        secs.as_secs(),
        per_worker[0],
        per_worker[per_worker.len() - 1],
        fairness,
    );
    (rate, per_section, fairness)
}

/// Scripts run so far, summed over the servers (EVALSHA calls).
fn script_calls(servers: &Fleet) -> u64 {
    servers.servers.iter().map(|s| s.calls(&["evalsha"]) as u64).sum()
}

/// One contender: until the time is up, wait for the lock, check that
/// nobody else is inside (a directory only one can create), release.
/// Prints `sections overlaps`.
fn worker(spec: &str) {
    let parts: Vec<&str> = spec.split('|').collect();
    let (urls, key, secs, dir) = (parts[0], parts[1], parts[2].parse().unwrap(), parts[3]);
    let (ordered, raw) = (parts[4] == "Ordered", parts[4] == "Raw");
    let inside = std::path::Path::new(dir).join("inside");
    let end = Instant::now() + Duration::from_secs(secs);
    let (mut sections, mut overlaps) = (0u64, 0u64);
    if raw {
        let mut floor = common::raw::Raw::connect(urls);
        let token = format!("raw-{}", std::process::id());
        while Instant::now() < end {
            floor.acquire_retrying(key, &token, Duration::from_secs(10));
            if std::fs::create_dir(&inside).is_err() {
                overlaps += 1;
            }
            sections += 1;
            let _ = std::fs::remove_dir(&inside);
            floor.release(key, &token);
        }
        println!("{sections} {overlaps}");
        return;
    }
    let fleet = common::fleet(urls);
    let log = Log::new(0, true, LogFormat::Text);
    runtime().block_on(async {
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            let ttl = Duration::from_secs(10);
            let request = Request { ordered, ..Request::new(key, ttl, Wait::For(left)) };
            let Ok(lock) = redlock::wait::acquire(&fleet, &request, &log, None).await else {
                break;
            };
            if std::fs::create_dir(&inside).is_err() {
                overlaps += 1;
            }
            sections += 1;
            let _ = std::fs::remove_dir(&inside);
            fleet.release(key, lock.held()).await.unwrap();
        }
        fleet.drain().await;
    });
    println!("{sections} {overlaps}");
}
