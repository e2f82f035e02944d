//! What both benchmark binaries need: local servers (the test harness's),
//! the library's fleet over them, and percentiles.

#![allow(dead_code, clippy::cast_possible_truncation)]

pub mod raw;
#[path = "../../tests/integration/harness/redis.rs"]
pub mod redis_harness;

use std::time::Duration;

use redlock::lock::Fleet;
use redlock::server::{Server, ServerUrl};

/// The library's fleet over `urls` (a `--servers` value), majority quorum,
/// 1s node timeout, the default drift factor.
pub fn fleet(urls: &str) -> Fleet {
    let servers: Vec<Server> = urls
        .split(',')
        .map(|u| {
            Server::new(ServerUrl::parse(u).unwrap(), Duration::from_secs(1), &Default::default())
                .unwrap()
        })
        .collect();
    let quorum = servers.len() / 2 + 1;
    // The servers were started a moment ago: trusted, as if they had kept
    // their data (else none votes for a minute).
    Fleet::new(servers, quorum, 0.01).with_restart_window(None)
}

/// Makes every redlock this benchmark starts trust the servers it just
/// started (`REDLOCK_TRUST_RESTARTS`): a server up for less than
/// `--max-ttl` plus 1 s may have lost a holder's lock in a restart, and
/// otherwise gets no vote for a minute. Call first thing in `main`.
pub fn trust_fresh_servers() {
    // SAFETY: called at the start of `main`, before any thread exists, so
    // nothing reads the environment concurrently.
    unsafe { std::env::set_var("REDLOCK_TRUST_RESTARTS", "1") };
}

/// The `p` quantile (0..=1) of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Median and p99 of `v`, in milliseconds, as one line.
pub fn summary(mut v: Vec<Duration>) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!(
        "n={} median {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        v.len(),
        ms(percentile(&v, 0.5)),
        ms(percentile(&v, 0.99)),
        ms(v[v.len() - 1])
    )
}
