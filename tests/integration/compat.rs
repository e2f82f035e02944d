//! The compatibility matrix: one representative subset of
//! the engine and `run` tests, run against every server build the harness
//! knows ([`Build`]): Debian's Redis 7.0, Valkey 8.1 and Redis 6.2. Between
//! them the tests make redlock send every script it has (acquire, withdraw,
//! extend, set-TTL, release, raise-fence, status, queue, record, skip,
//! history) and every plain command (`SUBSCRIBE`/`PUBLISH` for wake-ups,
//! `DEL` for `--force`, doctor's `PING`, `INFO`, `TIME`, `CONFIG GET`).
//!
//! One module per build (`compat::valkey81::...`), so that a failure names
//! the build, and `cargo test --test integration compat::redis62` runs one
//! row of the README's table.

use std::time::{Duration, Instant};

use crate::harness::redis::Build;
use crate::harness::{
    Fleet, RedisServer, Redlock, fence_key, lock_key, pid_in, take_over, unique_key, wait_for_file,
};

/// Generous bound for "promptly": far above the work, far below a hang.
const PROMPT: Duration = Duration::from_secs(5);

/// `n` servers of `build`, after checking that they are that build.
fn fleet(build: Build, n: usize) -> Fleet {
    let fleet = Fleet::start_build(build, n);
    assert_version(build, &fleet.servers[0]);
    fleet
}

/// Asserts that `server` runs `build` (Valkey reports its own version in
/// `valkey_version`; its `redis_version` is the Redis it is compatible with).
fn assert_version(build: Build, server: &RedisServer) {
    let info: String = server.cmd(&["INFO", "server"]);
    let field = if build == Build::Valkey81 { "valkey_version:" } else { "redis_version:" };
    let version = info.lines().find_map(|l| l.strip_prefix(field)).unwrap_or("").trim();
    assert!(
        version.starts_with(build.version_prefix()),
        "{build:?}: {field}{version}, want {}x",
        build.version_prefix()
    );
}

/// acquire.lua, extend.lua, release.lua, status.lua: the whole cycle, with
/// the values and TTLs checked on each server.
fn acquire_extend_release_status(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-cycle");
    Redlock::on(&fleet).args(["status", "--key", &key]).run().expect(1);
    let (token, _) = Redlock::on(&fleet).acquire(&key, "10s");
    assert_eq!(fleet.values(&lock_key(&key)), vec![Some(token.clone()); 3]);
    let status = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
    status.expect(0);
    let json = status.json();
    assert_eq!(json["held"], true);
    assert_eq!(json["holder"]["token"], token.as_str());
    let ttl = json["ttl_ms"].as_u64().unwrap_or_else(|| status.fail("no ttl_ms"));
    assert!(ttl > 5_000 && ttl <= 10_000, "{ttl}");
    Redlock::on(&fleet)
        .args(["extend", "--key", &key, "--token", &token, "--ttl", "60s"])
        .run()
        .expect(0);
    for s in &fleet.servers {
        assert!(s.pttl(&lock_key(&key)) > 10_000, "extend raised the TTL on {}", s.name());
    }
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3]);
    Redlock::on(&fleet).args(["status", "--key", &key]).run().expect(1);
}

/// A wrong token neither extends nor releases (exit 70), and the key keeps
/// its value and TTL.
fn a_wrong_token_is_lost(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-wrong");
    let (token, _) = Redlock::on(&fleet).acquire(&key, "20s");
    Redlock::on(&fleet)
        .args(["extend", "--key", &key, "--token", "not-the-token", "--ttl", "60s"])
        .run()
        .expect(70)
        .stderr_has("not held by this token");
    Redlock::on(&fleet)
        .args(["release", "--key", &key, "--token", "not-the-token"])
        .run()
        .expect(70);
    for s in &fleet.servers {
        assert_eq!(s.get(&lock_key(&key)).as_deref(), Some(token.as_str()));
        let pttl = s.pttl(&lock_key(&key));
        assert!(pttl > 0 && pttl <= 20_000, "{pttl}");
    }
}

/// Busy: `-n` exits 75 with the holder named, `-E 0` is silent, and an
/// attempt that lost on 3 of 5 takes back (withdraw.lua) what it set on
/// the other 2 and nothing else.
fn busy_attempts_exit_75_and_take_back_their_votes(build: Build) {
    let fleet = fleet(build, 5);
    let key = unique_key("compat-busy");
    for s in &fleet.servers[..3] {
        let _: String = s.cmd(&["SET", &lock_key(&key), "someone-else", "PX", "60000"]);
    }
    Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run().expect(75).within(PROMPT);
    let other = Some("someone-else".to_owned());
    assert_eq!(
        fleet.values(&lock_key(&key)),
        vec![other.clone(), other.clone(), other, None, None]
    );
    let held = unique_key("compat-held");
    Redlock::on(&fleet).acquire(&held, "30s");
    Redlock::on(&fleet)
        .args(["run", "-n", "--key", &held, "--", "echo", "should-not-run"])
        .run()
        .expect(75)
        .stderr_has("is held by");
    let quiet = Redlock::on(&fleet)
        .args(["run", "-n", "-E", "0", "--key", &held, "--", "echo", "should-not-run"])
        .run();
    quiet.expect(0);
    assert_eq!((quiet.stdout.as_str(), quiet.stderr.as_str()), ("", ""));
}

/// Fences strictly increase over successive holders, `status` shows the
/// holder's, and a counter one server has ahead of the others is written
/// back (raise_fence.lua) so that a quorum has the holder's fence.
fn fences_increase_and_are_raised_to_a_quorum(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-fence");
    let mut last = 0;
    for _ in 0..10 {
        let (token, fence) = Redlock::on(&fleet).acquire(&key, "5s");
        assert!(fence > last, "fence {fence} after {last}");
        last = fence;
        Redlock::on(&fleet).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    }
    // Two counters ahead of every clock by different amounts: whichever
    // two servers the round hears first, the largest draw is on one of them
    // only, and must be written back to another before the lock is held.
    let ahead = last + 10_000_000;
    for (s, counter) in fleet.servers[..2].iter().zip([ahead, ahead + 5]) {
        let _: String = s.cmd(&["SET", &fence_key(&key), &counter.to_string(), "PX", "60000"]);
    }
    let (_, fence) = Redlock::on(&fleet).acquire(&key, "5s");
    assert!(fence == ahead + 1 || fence == ahead + 6, "fence {fence}: not the largest draw");
    let raised = fleet.values(&fence_key(&key));
    let with_fence = raised.iter().filter(|c| c.as_deref() == Some(fence.to_string().as_str()));
    assert!(with_fence.count() >= 2, "fence {fence}, counters {raised:?}: no quorum has it");
    let status = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
    status.expect(0);
    assert_eq!(status.json()["holder"]["fence"].as_u64(), Some(fence));
}

/// `release --force` deletes whoever holds the lock; a key of another type
/// is reported at once (69, WRONGTYPE) and never overwritten.
fn force_release_and_a_key_of_the_wrong_type(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-force");
    Redlock::on(&fleet).acquire(&key, "30s");
    Redlock::on(&fleet).args(["release", "--key", &key, "--force"]).run().expect(0);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3]);

    let hash = unique_key("compat-hash");
    for s in &fleet.servers {
        let _: i64 = s.cmd(&["HSET", &lock_key(&hash), "field", "data"]);
    }
    Redlock::on(&fleet)
        .args(["acquire", "--wait", "10s", "--key", &hash])
        .run()
        .expect(69)
        .within(PROMPT)
        .stderr_has("WRONGTYPE");
    Redlock::on(&fleet).args(["status", "--key", &hash]).run().expect(69).stderr_has("WRONGTYPE");
    for s in &fleet.servers {
        let field: Option<String> = s.cmd(&["HGET", &lock_key(&hash), "field"]);
        assert_eq!(field.as_deref(), Some("data"));
    }
}

/// `run` with a 1s TTL keeps its lock through a 2.5s child (renewals),
/// gives the child the token that is on the servers, and releases at exit.
fn run_renews_and_releases(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-renew");
    let dir = tempfile::tempdir().unwrap();
    let (ready, seen) = (dir.path().join("ready"), dir.path().join("seen"));
    let script = format!(
        "echo \"$REDLOCK_TOKEN\" > {}; touch {}; sleep 2.5",
        seen.display(),
        ready.display()
    );
    let holder =
        Redlock::on(&fleet).args(["run", "--key", &key, "--ttl", "1s", "-c", &script]).spawn();
    wait_for_file(&ready);
    let token = std::fs::read_to_string(&seen).unwrap().trim().to_owned();
    let start = Instant::now();
    let mut refused = 0;
    while start.elapsed() < Duration::from_millis(2000) {
        Redlock::on(&fleet).args(["acquire", "-n", "--key", &key, "--ttl", "1s"]).run().expect(75);
        let on_servers = fleet.values(&lock_key(&key));
        assert!(
            on_servers.iter().filter(|v| v.as_deref() == Some(token.as_str())).count() >= 2,
            "the child's token {token} on {on_servers:?}"
        );
        refused += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    holder.wait().expect(0);
    assert!(refused >= 5, "only {refused} attempts");
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3]);
}

/// A lock taken over on a majority: `run` stops the child before the
/// validity ends and exits 70.
fn a_lost_lock_stops_the_child(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-lost");
    let dir = tempfile::tempdir().unwrap();
    let pid = dir.path().join("pid");
    let running = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--ttl", "2s"])
        .args(["-c", &format!("echo $$ > {}; sleep 30", pid.display())])
        .spawn();
    let elapsed = take_over(&fleet.servers[..2], &key, pid_in(&pid));
    running.wait().expect(70).stderr_has("lost the lock");
    assert!(elapsed < Duration::from_secs(2), "stopped only after {elapsed:?}");
}

/// `--keep` shortens the lock's TTL to the rest of the keep time
/// (set_ttl.lua) instead of deleting it.
fn keep_holds_the_lock_after_the_child(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-keep");
    Redlock::on(&fleet).args(["run", "--key", &key, "--keep", "5s", "--", "true"]).run().expect(0);
    for s in &fleet.servers {
        let pttl = s.pttl(&lock_key(&key));
        assert!(pttl > 3000 && pttl <= 5000, "kept for the rest of 5s: {pttl}");
    }
    Redlock::on(&fleet).args(["run", "-n", "--key", &key, "--", "true"]).run().expect(75);
}

/// Two waiters queue (the acquire script's queue) in arrival order, subscribed to the
/// release channel; each release wakes the head, and they run in order.
fn waiters_queue_and_wake_on_release(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-queue");
    let (token, _) = Redlock::on(&fleet).acquire(&key, "60s");
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order");
    let waiter = |name: &str| {
        Redlock::on(&fleet)
            .args(["run", "--key", &key, "--ttl", "5s", "--wait", "50s", "-c"])
            .args([format!("echo {name} >> {}", order.display())])
            .spawn()
    };
    let first = waiter("first");
    fleet.servers[0].await_waiters(&key, 1);
    let second = waiter("second");
    fleet.servers[0].await_waiters(&key, 2);
    let released = Instant::now();
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    first.wait().expect(0);
    second.wait().expect(0);
    // Woken, not polled at the backoff's pace.
    assert!(released.elapsed() < PROMPT, "the waiters took {:?}", released.elapsed());
    assert_eq!(std::fs::read_to_string(&order).unwrap(), "first\nsecond\n");
}

/// Runs leave history entries (record.lua), busy skips are counted
/// (skip.lua), `history` and `check` read them back (history.lua).
fn history_records_runs_and_skips(build: Build) {
    let fleet = fleet(build, 3);
    let key = unique_key("compat-history");
    Redlock::on(&fleet).args(["run", "--key", &key, "--", "true"]).run().expect(0);
    Redlock::on(&fleet).args(["run", "--key", &key, "--", "sh", "-c", "exit 3"]).run().expect(3);
    let (token, _) = Redlock::on(&fleet).acquire(&key, "30s");
    Redlock::on(&fleet).args(["run", "-n", "-E", "0", "--key", &key, "--", "true"]).run().expect(0);
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    let out = Redlock::on(&fleet).args(["history", "--key", &key, "--json"]).run();
    out.expect(0);
    let h = out.json();
    let codes: Vec<u64> = h["entries"]
        .as_array()
        .unwrap_or_else(|| out.fail("no entries"))
        .iter()
        .filter_map(|e| e["exit_code"].as_u64())
        .collect();
    assert_eq!(codes, vec![3, 0], "{h}");
    assert_eq!(h["skips"]["count"], 1, "{h}");
    Redlock::on(&fleet).args(["check", "--key", &key, "--max-age", "1m"]).run().expect(0);
    Redlock::on(&fleet)
        .args(["check", "--key", &key, "--max-age", "1m", "--require-success"])
        .run()
        .expect(1);
}

/// `doctor` reads the build's version, role and persistence, and finds
/// the three servers fit (or fit with notes).
fn doctor_reads_the_build(build: Build) {
    let fleet = fleet(build, 3);
    let out = Redlock::on(&fleet).args(["doctor", "--json"]).run();
    let json = out.json();
    assert_eq!(json["verdict"], "fit", "{json}");
    for s in json["servers"].as_array().unwrap_or_else(|| out.fail("no servers")) {
        assert_eq!(s["reachable"], true, "{s}");
        assert_eq!(s["role"], "master", "{s}");
        // Valkey 8.1 reports its own version apart from the Redis one it
        // is compatible with (7.2).
        let (field, want) = match build {
            Build::Valkey81 => ("valkey_version", build.version_prefix()),
            _ => ("version", build.version_prefix()),
        };
        assert!(s[field].as_str().is_some_and(|v| v.starts_with(want)), "{s}");
    }
}

/// A majority down: unavailable (69) promptly, and the minority that
/// granted is cleaned up.
fn a_majority_down_is_unavailable(build: Build) {
    let mut fleet = fleet(build, 3);
    fleet.servers[1].stop();
    fleet.servers[2].stop();
    let key = unique_key("compat-down");
    Redlock::on(&fleet)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .within(PROMPT)
        .stderr_has("connection refused");
    assert_eq!(fleet.servers[0].get(&lock_key(&key)), None);
}

macro_rules! matrix {
    ($($module:ident: $build:expr;)*) => {$(
        mod $module {
            use super::*;

            #[test]
            fn acquire_extend_release_status() {
                super::acquire_extend_release_status($build);
            }
            #[test]
            fn a_wrong_token_is_lost() {
                super::a_wrong_token_is_lost($build);
            }
            #[test]
            fn busy_attempts_exit_75_and_take_back_their_votes() {
                super::busy_attempts_exit_75_and_take_back_their_votes($build);
            }
            #[test]
            fn fences_increase_and_are_raised_to_a_quorum() {
                super::fences_increase_and_are_raised_to_a_quorum($build);
            }
            #[test]
            fn force_release_and_a_key_of_the_wrong_type() {
                super::force_release_and_a_key_of_the_wrong_type($build);
            }
            #[test]
            fn run_renews_and_releases() {
                super::run_renews_and_releases($build);
            }
            #[test]
            fn a_lost_lock_stops_the_child() {
                super::a_lost_lock_stops_the_child($build);
            }
            #[test]
            fn keep_holds_the_lock_after_the_child() {
                super::keep_holds_the_lock_after_the_child($build);
            }
            #[test]
            fn waiters_queue_and_wake_on_release() {
                super::waiters_queue_and_wake_on_release($build);
            }
            #[test]
            fn history_records_runs_and_skips() {
                super::history_records_runs_and_skips($build);
            }
            #[test]
            fn doctor_reads_the_build() {
                super::doctor_reads_the_build($build);
            }
            #[test]
            fn a_majority_down_is_unavailable() {
                super::a_majority_down_is_unavailable($build);
            }
        }
    )*};
}

matrix! {
    redis7: Build::Redis7;
    valkey81: Build::Valkey81;
    redis62: Build::Redis62;
}
