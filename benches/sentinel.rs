#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]
//! What a vote through a Sentinel group costs: one uncontended
//! acquire+extend+release cycle through the library on a group (a master,
//! one replica, three Sentinels, all local), beside the same cycle on the
//! same master named as a plain server, in interleaved blocks so that
//! machine noise hits both alike. The difference is the group's price:
//! finding the master through a majority of the Sentinels (again at most
//! once a node timeout) and the `WAIT` after each vote (acquire, extend)
//! until the replica has the write.
//!
//! Run: `cargo bench --bench sentinel` (env `CYCLES` sets the samples per side).

// The test harness's servers; `sentinel` finds `redis` as its sibling.
#[path = "../tests/integration/harness/redis.rs"]
#[allow(dead_code)]
mod redis;
#[path = "../tests/integration/harness/sentinel.rs"]
#[allow(dead_code)]
mod sentinel;

use std::time::{Duration, Instant};

use redlock::lock::{Attempt, Fleet, Held};
use redlock::server::{Server, ServerUrl, split_list};

const BLOCK: usize = 200;

/// The library's fleet over `urls` (a `--servers` value), majority quorum,
/// 1s node timeout.
fn fleet(urls: &str) -> Fleet {
    let servers: Vec<Server> = split_list(urls)
        .into_iter()
        .map(|u| {
            Server::new(ServerUrl::parse(u).unwrap(), Duration::from_secs(1), &Default::default())
                .unwrap()
        })
        .collect();
    let quorum = servers.len() / 2 + 1;
    // Started a moment ago: trusted (else none votes for a minute).
    Fleet::new(servers, quorum, 0.01).with_restart_window(None)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let cycles: usize = std::env::var("CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let group = sentinel::SentinelGroup::start();
    let master = group.master();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (through_group, plain) = runtime.block_on(async {
        let via_group = fleet(&group.url());
        let direct = fleet(&master.url());
        let ttl = Duration::from_secs(10);
        let cycle = async |fleet: &Fleet, key: String| {
            let token = redlock::token::Token::new().to_string();
            let t = Instant::now();
            match fleet.try_acquire(&key, &token, ttl, true).await.attempt {
                Attempt::Acquired(_) => {}
                other => panic!("uncontended acquire failed: {other:?}"),
            }
            fleet.extend(&key, Held::of(&token), ttl).await.unwrap();
            fleet.release(&key, Held::of(&token)).await.unwrap();
            t.elapsed()
        };
        for i in 0..100 {
            cycle(&via_group, format!("bench-group-{i}")).await;
            cycle(&direct, format!("bench-plain-{i}")).await;
        }
        let (mut through_group, mut plain) = (Vec::new(), Vec::new());
        let mut i = 1000;
        while through_group.len() < cycles {
            for _ in 0..BLOCK {
                through_group.push(cycle(&via_group, format!("bench-group-{i}")).await);
                i += 1;
            }
            for _ in 0..BLOCK {
                plain.push(cycle(&direct, format!("bench-plain-{i}")).await);
                i += 1;
            }
        }
        via_group.drain().await;
        direct.drain().await;
        (through_group, plain)
    });
    let report = |name: &str, mut v: Vec<Duration>| {
        v.sort();
        let (m, p) = (percentile(&v, 0.5), percentile(&v, 0.99));
        println!(
            "{name:<40} n={:<6} median {:>7.1}µs  p99 {:>7.1}µs",
            v.len(),
            m.as_secs_f64() * 1e6,
            p.as_secs_f64() * 1e6
        );
        (m, p)
    };
    println!("acquire+extend+release, one member, local servers, 1 client");
    let (gm, gp) = report("Sentinel group (majority + WAIT)", through_group);
    let (pm, pp) = report("its master as a plain server", plain);
    println!(
        "group cost per cycle: median {:+.1}µs  p99 {:+.1}µs",
        (gm.as_secs_f64() - pm.as_secs_f64()) * 1e6,
        (gp.as_secs_f64() - pp.as_secs_f64()) * 1e6
    );
}
