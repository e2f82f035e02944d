//! The keys redlock writes: fences that never go backwards, even
//! across a server that lost its data; nothing left on the servers once the
//! lifetimes pass; no key of anyone else's read as a lock or deleted; and
//! the key as given (`--raw-key`) for other Redlock clients.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{Fleet, RedisServer, Redlock, lock_key, root, unique_key, wait_for_file};

/// How long a fencing counter outlives the TTL of the last acquisition that
/// wrote it (the README's "Lifetimes").
const LINGER: Duration = Duration::from_secs(1);

/// How long a run history outlives the last run (the README's "Run history").
const HISTORY_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;

/// One acquire and release: the fence.
fn cycle(fleet: &Fleet, key: &str, ttl: &str) -> u64 {
    let (token, fence) = Redlock::on(fleet).acquire(key, ttl);
    Redlock::on(fleet).args(["release", "--key", key, "--token", &token]).run().expect(0);
    fence
}

/// How long a grant record outlives its grant (`redlock:{KEY}:last`,
/// src/lock/record.rs `RECORD_LIFE`) when it holds no tick.
const RECORD_LIFE_MS: i64 = 20_000;

/// Waits until every running server holds no key but run histories and
/// grant records (kept on purpose, bounded and expiring, checked here), at
/// most `limit`.
fn wait_for_no_locks(fleet: &Fleet, limit: Duration) {
    let start = Instant::now();
    loop {
        let left: Vec<Vec<String>> = fleet
            .servers
            .iter()
            .map(|s| {
                let keys: Vec<String> = s.cmd(&["KEYS", "*"]);
                for k in keys.iter().filter(|k| k.ends_with(":history")) {
                    let pttl = s.pttl(k);
                    assert!(pttl > 0 && pttl <= HISTORY_RETENTION_MS, "{k}: PTTL {pttl}");
                }
                for k in keys.iter().filter(|k| k.ends_with(":last")) {
                    let pttl = s.pttl(k);
                    assert!(pttl > 0 && pttl <= RECORD_LIFE_MS, "{k}: PTTL {pttl}");
                }
                let kept = |k: &String| k.ends_with(":history") || k.ends_with(":last");
                keys.into_iter().filter(|k| !kept(k)).collect()
            })
            .collect();
        if left.iter().all(Vec::is_empty) {
            return;
        }
        assert!(start.elapsed() < limit, "keys {left:?} after {limit:?}: keys left behind");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The six steps: a majority keeps its data, the quorums meet only
/// on the server that lost it (restarted later than the TTL, as Redlock's
/// delayed-restart rule asks), and the fence still goes up.
#[test]
fn fences_increase_across_a_server_that_lost_its_data_and_restarted_late() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut fleet = Fleet {
        servers: vec![RedisServer::start(), RedisServer::start(), RedisServer::start_with(&aof)],
    };
    let key = unique_key("late-restart");
    // 1. S3 shuts down cleanly: it loses nothing it acknowledged.
    fleet.servers[2].shutdown(true);
    // 2. Two cycles, granted by S1 and S2.
    let f1 = cycle(&fleet, &key, "2s");
    let f2 = cycle(&fleet, &key, "2s");
    assert!(f2 > f1, "fence {f2} after {f1}");
    // 3. S3 comes back from its AOF.
    fleet.servers[2].start_again();
    // 4. S1 loses everything and comes back later than the TTL.
    fleet.servers[0].shutdown(false);
    std::thread::sleep(Duration::from_millis(2500));
    fleet.servers[0].start_again();
    // 5. S2 freezes.
    fleet.servers[1].hang();
    // 6. S1 and S3 grant the next acquisition.
    let (token, f3) = Redlock::on(&fleet).acquire(&key, "2s");
    assert!(f3 > f2, "step 6: fence {f3} after {f2}: the fence went backwards");
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    // And the one after it, on the same two servers.
    let f4 = cycle(&fleet, &key, "2s");
    assert!(f4 > f3, "fence {f4} after {f3}");
    fleet.servers[1].resume();
}

#[test]
fn two_hundred_runs_on_two_hundred_keys_leave_nothing_behind() {
    let fleet = Fleet::start(3);
    assert_eq!(fleet.dbsizes(), vec![0, 0, 0]);
    for i in 0..200 {
        let key = unique_key(&format!("litter-{i}"));
        Redlock::on(&fleet)
            .args(["run", "--key", &key, "--ttl", "1s", "--", "true"])
            .run()
            .expect(0);
    }
    // Locks that are never released, only left to expire.
    for i in 0..5 {
        Redlock::on(&fleet).acquire(&unique_key(&format!("litter-expired-{i}")), "200ms");
    }
    // (A supervised run gets 1s: a shorter TTL can lapse under CPU load.)
    wait_for_no_locks(&fleet, Duration::from_secs(1) + LINGER + Duration::from_secs(5));
}

#[test]
fn runs_of_one_key_further_apart_than_the_lifetimes_draw_increasing_fences() {
    let fleet = Fleet::start(3);
    let key = unique_key("apart");
    let fence = || {
        let out = Redlock::on(&fleet)
            .args(["run", "--key", &key, "--ttl", "1s", "--", "sh", "-c"])
            .args(["echo $REDLOCK_FENCE"])
            .run();
        out.expect(0);
        out.line().parse::<u64>().unwrap_or_else(|_| out.fail("no fence on stdout"))
    };
    let mut last = fence();
    for _ in 0..3 {
        wait_for_no_locks(&fleet, Duration::from_secs(1) + LINGER + Duration::from_secs(5));
        let next = fence();
        assert!(next > last, "fence {next} after {last}, once the counters had expired");
        last = next;
    }
}

/// The holder's round ends with S1 and S2; S3, whose counter contenders
/// that reached only it have raised, grants the lock late. `status` must
/// show the fence the holder's command got, not S3's.
#[test]
fn status_shows_the_fence_the_holder_got_under_contention() {
    let fleet = Fleet::start(3);
    let key = unique_key("status-fence");
    let s3 = fleet.servers[2].url();
    for _ in 0..5 {
        let out = Redlock::new(&s3).args(["acquire", "-n", "--key", &key]).run();
        out.expect(0);
        Redlock::new(&s3).args(["release", "--key", &key, "--token", out.line()]).run().expect(0);
    }
    let dir = tempfile::tempdir().unwrap();
    let (facts, done) = (dir.path().join("facts"), dir.path().join("done"));
    let script = format!(
        "echo \"$REDLOCK_FENCE\" > {f}.tmp && mv {f}.tmp {f}; while [ ! -e {d} ]; do sleep 0.02; done",
        f = facts.display(),
        d = done.display()
    );
    fleet.servers[2].hang();
    let running =
        Redlock::on(&fleet).args(["run", "--key", &key, "--ttl", "20s", "-c", &script]).spawn();
    wait_for_file(&facts);
    let fence = std::fs::read_to_string(&facts).unwrap().trim().to_owned();
    // Late by more than a proposal window.
    std::thread::sleep(Duration::from_millis(300));
    fleet.servers[2].resume();
    let start = Instant::now();
    while fleet.servers[2].get(&lock_key(&key)).is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "S3 never granted the holder");
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..3 {
        Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run().expect(75);
    }
    let out = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
    out.expect(0);
    let shown = out.json()["holder"]["fence"].as_u64().map(|f| f.to_string());
    assert_eq!(
        shown.as_deref(),
        Some(fence.as_str()),
        "status fence vs the holder's REDLOCK_FENCE"
    );
    std::fs::write(&done, "").unwrap();
    running.wait().expect(0);
}

#[test]
fn status_and_force_release_leave_an_application_key_alone() {
    let fleet = Fleet::start(3);
    let key = unique_key("appdata");
    for s in &fleet.servers {
        let _: String = s.cmd(&["SET", &key, "important"]);
    }
    let intact = |fleet: &Fleet| {
        assert_eq!(fleet.values(&key), vec![Some("important".to_owned()); 3]);
        assert!(fleet.servers.iter().all(|s| s.pttl(&key) == -1), "the key got an expiry");
    };
    Redlock::on(&fleet).args(["status", "--key", &key]).run().expect(1);
    Redlock::on(&fleet).args(["release", "--key", &key, "--force"]).run().expect(0);
    intact(&fleet);
    let (token, _) = Redlock::on(&fleet).acquire(&key, "10s");
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    intact(&fleet);

    // With the key as given, the application's key is what a lock would be:
    // status says so, and --force refuses to delete a value redlock did not write.
    let status = Redlock::on(&fleet).args(["--raw-key", "status", "--key", &key]).run();
    status.expect(0);
    assert!(status.stdout.contains("another client"), "{}", status.stdout);
    Redlock::on(&fleet)
        .args(["--raw-key", "release", "--key", &key, "--force"])
        .run()
        .expect(64)
        .stderr_has("not a redlock lock")
        .stderr_has("--force-any-value");
    intact(&fleet);
    Redlock::on(&fleet)
        .args(["--raw-key", "release", "--key", &key, "--force-any-value"])
        .run()
        .expect(0);
    assert_eq!(fleet.values(&key), vec![None, None, None]);
}

fn redis_cli(server: &RedisServer, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &server.port.to_string(), "--raw"])
        .args(args)
        .output()
        .expect("redis-cli is installed with redis-server");
    assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A `redis-cli SET key value NX PX ttl` script and `redlock --raw-key` on
/// the same key exclude each other; without `--raw-key` they are different
/// locks and neither sees the other.
#[test]
fn raw_keys_exclude_and_are_excluded_by_redis_cli_set_nx() {
    let fleet = Fleet::start(3);
    let key = unique_key("interop");
    for s in &fleet.servers {
        assert_eq!(redis_cli(s, &["SET", &key, "script-holder", "NX", "PX", "60000"]), "OK");
    }
    Redlock::on(&fleet)
        .args(["--raw-key", "acquire", "-n", "--key", &key])
        .run()
        .expect(75)
        .stderr_has("another client");
    let native = Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run();
    native.expect(0);
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", native.line()]).run().expect(0);
    for s in &fleet.servers {
        assert_eq!(redis_cli(s, &["DEL", &key]), "1");
    }

    let out = Redlock::on(&fleet)
        .env("REDLOCK_RAW_KEY", "1")
        .args(["acquire", "-n", "--key", &key, "--ttl", "60s"])
        .run();
    out.expect(0);
    for s in &fleet.servers {
        assert_eq!(redis_cli(s, &["SET", &key, "script-holder", "NX", "PX", "60000"]), "");
        assert_eq!(s.get(&key).as_deref(), Some(out.line()));
    }
    Redlock::on(&fleet)
        .args(["--raw-key", "release", "--key", &key, "--token", out.line()])
        .run()
        .expect(0);
    assert_eq!(fleet.values(&key), vec![None, None, None]);
}

/// node-redlock (`SET NX PX` on the key as given, compare-and-delete) and
/// `redlock --raw-key` on the same key and servers exclude each other.
/// Ignored by default: it installs node-redlock with npm (network).
#[test]
#[ignore = "needs node and npm (installs redlock@5.0.0-beta.2 and ioredis@5): cargo test --test integration -- --ignored node_redlock"]
fn raw_keys_exclude_and_are_excluded_by_node_redlock() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let modules = tempfile::tempdir().unwrap();
    let npm = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "redlock@5.0.0-beta.2", "ioredis@5"])
        .current_dir(modules.path())
        .output()
        .expect("npm is installed");
    assert!(npm.status.success(), "npm install: {}", String::from_utf8_lossy(&npm.stderr));
    let script = root().join("tests/interop/node_redlock.cjs");
    let fleet = Fleet::start(3);
    let ports: Vec<String> = fleet.servers.iter().map(|s| s.port.to_string()).collect();
    let node = |mode: &str, key: &str| {
        let mut cmd = Command::new("node");
        cmd.arg(&script).args([mode, key, "20000"]).args(&ports);
        cmd.env("NODE_PATH", modules.path().join("node_modules"));
        cmd
    };
    let key = unique_key("node-redlock");

    // node-redlock holds it: redlock --raw-key is refused, redlock's own
    // namespace is another lock.
    let mut holder = node("hold", &key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node is installed");
    let mut value = String::new();
    BufReader::new(holder.stdout.take().unwrap()).read_line(&mut value).unwrap();
    let value = value.trim().to_owned();
    assert_eq!(fleet.values(&key), vec![Some(value.clone()); 3], "node-redlock's value");
    Redlock::on(&fleet)
        .args(["--raw-key", "acquire", "-n", "--key", &key])
        .run()
        .expect(75)
        .stderr_has("another client");
    let native = Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run();
    native.expect(0);
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", native.line()]).run().expect(0);
    holder.stdin.take().unwrap().write_all(b"release\n").unwrap();
    assert!(holder.wait().unwrap().success());
    assert_eq!(fleet.values(&key), vec![None, None, None]);

    // redlock --raw-key holds it: node-redlock is refused, and its release
    // (compare-and-delete of its own value) leaves redlock's lock alone.
    let out = Redlock::on(&fleet).args(["--raw-key", "acquire", "--key", &key]).run();
    out.expect(0);
    let tried = node("try", &key).output().unwrap();
    assert_eq!(tried.status.code(), Some(3), "{}", String::from_utf8_lossy(&tried.stdout));
    assert_eq!(fleet.values(&key), vec![Some(out.line().to_owned()); 3]);
    Redlock::on(&fleet)
        .args(["--raw-key", "release", "--key", &key, "--token", out.line()])
        .run()
        .expect(0);
    let tried = node("try", &key).output().unwrap();
    assert_eq!(tried.status.code(), Some(0), "{}", String::from_utf8_lossy(&tried.stderr));
}
