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
//! And where a contender's time goes (the `phases` line, p50/p99 over the
//! processes, from each one's last `acquire_attempt` event, which `-v`
//! logs with every server's answer time from the round's start): `start`,
//! from the gate to the round's start (exec, start-up, configuration);
//! `first`, `quorum` and `last`, the round's fastest, third and slowest
//! answers (each answer is the connection, the facts it asks and the
//! acquire script, in one pipeline); `after`, from the decision to the exit
//! (withdrawals, the skip counter, the release of a winner's lock, exit).
//!
//! Run: `cargo bench --bench burst` (env `CONTENDERS`, `TICKS`, `BURST_BIN`
//! for another build's binary, to compare two builds run alternately, `BACKLOG`
//! for the servers' `tcp-backlog`, default Redis's 511, `JITTER`, e.g.
//! `5s`, to run the contenders with `--jitter`, and `ONCE_PER`, seconds,
//! e.g. `10`, to run them with `--once-per`, each tick of the bench released
//! 100 ms into a tick of that length), and `SERVER_NICE`, e.g. `-10`, to
//! renice the servers: a model of servers on machines of their own, which
//! a thousand starting processes do not starve of CPU; not the default).
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

/// The answer times (from the round's start) of a contender's last round,
/// fastest first, from its last `acquire_attempt` event; empty when it
/// logged none.
fn answers(stderr: &str) -> Vec<Duration> {
    let event = stderr
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "acquire_attempt");
    let mut times: Vec<Duration> = event
        .as_ref()
        .and_then(|e| e["servers"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|s| s["latency_ms"].as_f64())
        .map(|ms| Duration::from_secs_f64(ms / 1e3))
        .collect();
    times.sort();
    times
}

/// The `phases` line: p50/p99 of each phase over the contenders that
/// logged their round (see the module doc).
fn phases(tick: &burst::Tick) -> String {
    let mut columns: [(&str, Vec<Duration>); 5] = [
        ("start", vec![]),
        ("first", vec![]),
        ("quorum", vec![]),
        ("last", vec![]),
        ("after", vec![]),
    ];
    for part in &tick.parts {
        let times = answers(&part.stderr);
        let (Some(first), Some(last)) = (times.first(), times.last()) else { continue };
        let quorum = times.get(SERVERS / 2).unwrap_or(last);
        let start = part.decided.saturating_sub(*last);
        let after = part.exited.saturating_sub(part.decided);
        for (i, d) in [start, *first, *quorum, *last, after].into_iter().enumerate() {
            columns[i].1.push(d);
        }
    }
    columns
        .iter_mut()
        .map(|(name, v)| {
            v.sort();
            if v.is_empty() {
                return format!("{name} -");
            }
            let (p50, p99) = (common::percentile(v, 0.5), common::percentile(v, 0.99));
            format!("{name} {:.0}/{:.0} ms", ms(p50), ms(p99))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let contenders = env_or("CONTENDERS", 1000);
    let bin = std::env::var("BURST_BIN").unwrap_or_else(|_| BIN.to_owned());
    let ticks = env_or("TICKS", 5);
    let backlog = std::env::var("BACKLOG").unwrap_or_else(|_| "511".to_owned());
    let jitter = std::env::var("JITTER").ok();
    let once_per = std::env::var("ONCE_PER").ok().map(|s| format!("{s}s"));
    let period_ms: Option<u128> =
        std::env::var("ONCE_PER").ok().and_then(|s| s.parse::<u128>().ok()).map(|s| s * 1000);
    let servers = Fleet {
        servers: (0..SERVERS)
            .map(|_| RedisServer::start_with(&["--tcp-backlog", &backlog]))
            .collect(),
    };
    if let Ok(nice) = std::env::var("SERVER_NICE") {
        for s in &servers.servers {
            let pid = s.pid().to_string();
            let ok = std::process::Command::new("renice")
                .args(["-n", &nice, "-p", &pid])
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "renice -n {nice} -p {pid} failed");
        }
    }
    let urls = servers.urls();
    let key = format!("bench-burst-{}", std::process::id());
    println!(
        "{contenders} contenders at once{}, {ticks} ticks, {SERVERS} local redis-server (tcp-backlog {backlog}), {} CPUs",
        jitter.as_ref().map_or(String::new(), |j| format!(" with --jitter {j}"))
            + &once_per.as_ref().map_or(String::new(), |d| format!(" with --once-per {d}"))
            + &std::env::var("SERVER_NICE")
                .map_or(String::new(), |n| format!(", servers at nice {n}")),
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
        let mut args = vec!["--log-format", "json", "-v", "run", "-n", "-E", "0", "--key", &key];
        if let Some(j) = &jitter {
            args.extend(["--jitter", j]);
        }
        if let Some(d) = &once_per {
            args.extend(["--once-per", d]);
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
            // With --once-per, the gate opens 100 ms into a fresh tick, so
            // that each tick of the bench is one tick of redlock's.
            let align = || {
                if let Some(p) = period_ms {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis();
                    let wait = p - now % p + 100;
                    std::thread::sleep(Duration::from_millis(u64::try_from(wait).unwrap()));
                }
            };
            let tick = burst::tick(&bin, contenders, &args, &[("REDLOCK_SERVERS", &urls)], align);
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
        println!("  phases p50/p99: {}", phases(&tick));
        for p in tick.parts.iter().filter(|p| p.code != Some(0)).take(2) {
            println!("  exit {:?}: {}", p.code, p.stderr.lines().last().unwrap_or(""));
        }
    }
    println!("ticks with exactly one run: {exactly_one} / {ticks}");
}
