#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The cron burst: `CONTENDERS` processes (default 1,000) run
//! `redlock run -n -E 0 --key K -- JOB` released together by one gate, as
//! cron releases a fleet at the top of the minute, `TICKS` times (default
//! 5), against 5 local Redis servers. For each tick: how many commands ran
//! (it must be one), the exit codes, the time from the gate to each
//! process's decision (its last acquire attempt, from its JSON log) at the
//! median, p99 and max, and the lock commands the servers executed (acquire
//! and withdrawal scripts, from `INFO commandstats`).
//!
//! It also reports the servers' side of a tick: the peak of connected
//! clients on any server (`INFO clients`, sampled every 20 ms) and the CPU
//! time the 5 servers spent (`INFO cpu`).
//!
//! Run: `cargo bench --bench burst` (env `CONTENDERS`, `TICKS`, `BACKLOG`
//! for the servers' `tcp-backlog`, default Redis's 511, and `JITTER`, e.g.
//! `5s`, to run the contenders with `--jitter`).
//! Everything shares this machine's CPUs: the servers here compete with a
//! thousand starting processes, which real servers do not.

#[path = "../tests/integration/harness/burst.rs"]
mod burst;
mod common;

use std::time::Duration;

use common::redis_harness::{Fleet, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_redlock");
const SERVERS: usize = 5;

fn env_or(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Lock commands executed so far on `server`: the scripts redlock runs
/// (EVALSHA, EVAL) and the SCRIPT LOADs that come with withdrawals and
/// NOSCRIPT fallbacks.
fn lock_commands(server: &RedisServer) -> u64 {
    let info: String = server.cmd(&["INFO", "commandstats"]);
    info.lines()
        .filter(|l| {
            l.starts_with("cmdstat_evalsha:")
                || l.starts_with("cmdstat_eval:")
                || l.starts_with("cmdstat_script|load:")
        })
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// A number field of `INFO section` on `server`.
fn info_field(server: &RedisServer, section: &str, field: &str) -> f64 {
    let info: String = server.cmd(&["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// CPU seconds (user + system) `server` has used so far.
fn cpu_seconds(server: &RedisServer) -> f64 {
    info_field(server, "cpu", "used_cpu_user") + info_field(server, "cpu", "used_cpu_sys")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let contenders = env_or("CONTENDERS", 1000);
    let ticks = env_or("TICKS", 5);
    let backlog = std::env::var("BACKLOG").unwrap_or_else(|_| "511".to_owned());
    let jitter = std::env::var("JITTER").ok();
    let servers = Fleet {
        servers: (0..SERVERS)
            .map(|_| RedisServer::start_with(&["--tcp-backlog", &backlog]))
            .collect(),
    };
    let urls = servers.urls();
    let key = format!("bench-burst-{}", std::process::id());
    println!(
        "{contenders} contenders at once{}, {ticks} ticks, {SERVERS} local redis-server (tcp-backlog {backlog}), {} CPUs",
        jitter.as_ref().map_or(String::new(), |j| format!(" with --jitter {j}")),
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    println!(
        "| tick | runs | exit codes | decision p50 | p99 | max | lock commands | per contender | peak clients | server CPU |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut exactly_one = 0;
    for t in 0..ticks {
        let before: u64 = servers.servers.iter().map(lock_commands).sum();
        let cpu_before: f64 = servers.servers.iter().map(cpu_seconds).sum();
        let mut args = vec!["--log-format", "json", "run", "-n", "-E", "0", "--key", &key];
        if let Some(j) = &jitter {
            args.extend(["--jitter", j]);
        }
        let sampling = std::sync::atomic::AtomicBool::new(true);
        let (tick, peak) = std::thread::scope(|scope| {
            // The sampler's own connection counts once; it is taken off.
            let sampler = scope.spawn(|| {
                let mut peak = 0.0f64;
                while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                    for s in &servers.servers {
                        peak = peak.max(info_field(s, "clients", "connected_clients") - 1.0);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                peak
            });
            let tick = burst::tick(BIN, contenders, &args, &[("REDLOCK_SERVERS", &urls)], || {});
            sampling.store(false, std::sync::atomic::Ordering::Relaxed);
            (tick, sampler.join().unwrap())
        });
        let cpu: f64 = servers.servers.iter().map(cpu_seconds).sum::<f64>() - cpu_before;
        let after: u64 = servers.servers.iter().map(lock_commands).sum();
        let mut decided: Vec<Duration> = tick.parts.iter().map(|p| p.decided).collect();
        decided.sort();
        let codes: Vec<String> = tick
            .codes()
            .iter()
            .map(|(code, n)| format!("{}×{n}", code.map_or("signal".to_owned(), |c| c.to_string())))
            .collect();
        if tick.runs == 1 {
            exactly_one += 1;
        }
        let commands = after - before;
        println!(
            "| {t} | {} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {commands} | {:.1} | {peak:.0} | {cpu:.2} s |",
            tick.runs,
            codes.join(", "),
            ms(common::percentile(&decided, 0.5)),
            ms(common::percentile(&decided, 0.99)),
            ms(decided[decided.len() - 1]),
            commands as f64 / contenders as f64,
        );
        let attempts: Vec<usize> = tick
            .parts
            .iter()
            .map(|p| p.stderr.matches("\"event\":\"acquire_attempt\"").count())
            .collect();
        let splits: usize =
            tick.parts.iter().map(|p| p.stderr.matches("\"outcome\":\"split\"").count()).sum();
        let split_errors =
            tick.parts.iter().filter(|p| p.stderr.contains("no holder has a quorum")).count();
        println!(
            "  attempts per process: max {}, total {}; split rounds {splits}; split errors {split_errors}",
            attempts.iter().max().unwrap_or(&0),
            attempts.iter().sum::<usize>()
        );
        for p in tick.parts.iter().filter(|p| p.code != Some(0)).take(2) {
            println!("  exit {:?}: {}", p.code, p.stderr.lines().last().unwrap_or(""));
        }
    }
    println!("ticks with exactly one run: {exactly_one} / {ticks}");
}
