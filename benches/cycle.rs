#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]
//! One uncontended acquire+release cycle through the library against 5
//! local Redis servers, beside two floors measured in the same run: the
//! same servers driven with plain commands (one parallel `SET NX PX` round,
//! then one parallel compare-and-delete round per cycle) through redis-rs,
//! the library's client, and through blocking sockets (`common::raw`, the
//! peers' raw floor). The ratio to the raw floor is guarded
//! (`common::raw::Guards`): past its bound the benchmark exits with 1.
//!
//! Run: `cargo bench --bench cycle` (env `CYCLES` sets the samples per side).

mod common;

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redlock::lock::{Attempt, Held};

const SERVERS: usize = 5;
const BLOCK: usize = 500;

fn main() {
    let cycles: usize = std::env::var("CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(5000);
    let servers: Vec<_> =
        (0..SERVERS).map(|_| common::redis_harness::RedisServer::start()).collect();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (lib, unfenced, floor, bare) = runtime.block_on(async {
        let urls = servers.iter().map(|s| s.url()).collect::<Vec<_>>().join(",");
        let fleet = common::fleet(&urls);
        let mut raw = Vec::new();
        for s in &servers {
            let client = redis::Client::open(s.url()).unwrap();
            raw.push(client.get_multiplexed_async_connection().await.unwrap());
        }
        // The plain compare-and-delete (no release announcement): the floor.
        let release = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
        );
        let ttl = Duration::from_secs(10);

        let lib_cycle = async |i: usize, fence: bool| {
            let key = format!("bench-lib-{i}");
            let token = redlock::token::Token::new().to_string();
            let t = Instant::now();
            match fleet.try_acquire(&key, &token, ttl, fence).await.attempt {
                Attempt::Acquired(_) => {}
                other => panic!("uncontended acquire failed: {other:?}"),
            }
            fleet.release(&key, Held::of(&token)).await.unwrap();
            t.elapsed()
        };
        let raw_cycle = async |i: usize| {
            let key = format!("bench-raw-{i}");
            let token = redlock::token::Token::new().to_string();
            let t = Instant::now();
            let set = join_all(raw.iter().map(|c| {
                let mut c = c.clone();
                let (key, token) = (key.clone(), token.clone());
                async move {
                    redis::cmd("SET")
                        .arg(&key)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(10_000)
                        .query_async::<Option<String>>(&mut c)
                        .await
                }
            }))
            .await;
            assert!(set.iter().all(|r| matches!(r, Ok(Some(_)))));
            let del = join_all(raw.iter().map(|c| {
                let mut c = c.clone();
                let (key, token, release) = (key.clone(), token.clone(), &release);
                async move { release.key(&key).arg(&token).invoke_async::<i64>(&mut c).await }
            }))
            .await;
            assert!(del.iter().all(|r| matches!(r, Ok(1))));
            t.elapsed()
        };
        let mut plain = common::raw::Raw::connect(&urls);
        let mut bare_cycle = |i: usize| {
            let key = format!("bench-bare-{i}");
            let token = redlock::token::Token::new().to_string();
            let t = Instant::now();
            assert_eq!(plain.acquire(&key, &token, ttl), SERVERS);
            assert_eq!(plain.release(&key, &token), SERVERS);
            t.elapsed()
        };
        // Warm up connections and script caches on every side.
        for i in 0..200 {
            lib_cycle(i, true).await;
            lib_cycle(i + 100_000, false).await;
            raw_cycle(i).await;
            bare_cycle(i);
        }
        // Interleave blocks so that machine noise hits every side alike.
        let (mut lib, mut unfenced, mut floor, mut bare) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut i = 1000;
        while lib.len() < cycles {
            for _ in 0..BLOCK {
                lib.push(lib_cycle(i, true).await);
                i += 1;
            }
            for _ in 0..BLOCK {
                unfenced.push(lib_cycle(i, false).await);
                i += 1;
            }
            for _ in 0..BLOCK {
                floor.push(raw_cycle(i).await);
                i += 1;
            }
            for _ in 0..BLOCK {
                bare.push(bare_cycle(i));
                i += 1;
            }
        }
        (lib, unfenced, floor, bare)
    });
    let report = |name: &str, mut v: Vec<Duration>| {
        v.sort();
        let (m, p) = (common::percentile(&v, 0.5), common::percentile(&v, 0.99));
        println!(
            "{name:<32} n={:<6} median {:>7.1}µs  p99 {:>7.1}µs",
            v.len(),
            m.as_secs_f64() * 1e6,
            p.as_secs_f64() * 1e6
        );
        (m, p)
    };
    println!("acquire+release cycle, {SERVERS} local redis-server processes, 1 client");
    let (lm, lp) = report("redlock library (fencing on)", lib);
    let (um, up) = report("redlock library (--no-fence)", unfenced);
    let (fm, fp) = report("floor through redis-rs", floor);
    let (bm, bp) = report("raw floor (blocking sockets)", bare);
    println!(
        "fencing cost: median {:+.1}µs  p99 {:+.1}µs",
        (lm.as_secs_f64() - um.as_secs_f64()) * 1e6,
        (lp.as_secs_f64() - up.as_secs_f64()) * 1e6
    );
    println!(
        "ratio library/floor through redis-rs: median {:.2}x  p99 {:.2}x",
        lm.as_secs_f64() / fm.as_secs_f64(),
        lp.as_secs_f64() / fp.as_secs_f64()
    );
    // W1 of the peers' bench: the library against the raw floor.
    let mut guards = common::raw::Guards::default();
    guards.check("W1 median", lm.as_secs_f64() / bm.as_secs_f64(), 1.9, "<= 1.10x", true);
    guards.check("W1 p99", lp.as_secs_f64() / bp.as_secs_f64(), 1.9, "<= 1.10x", true);
    guards.finish();
}
