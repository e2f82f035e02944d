//! Found by an adversarial review of the 2026-11-25 changes (the leftover
//! check without a process scan, the acquire script rewrite, Redis Cluster
//! routing, MULTI sent alone): each test failed on the code it reviewed,
//! but the leftover test, which holds the fast path to its argument.

use std::time::Duration;

use crate::harness::cluster::RedisCluster;
use crate::harness::{RedisServer, Redlock, fence_key, lock_key, unique_key};

/// One Redis Cluster listed as three
/// `redis+cluster://` members (one per seed: a natural way to "list the
/// cluster's nodes") makes three quorum members that all route to the one
/// master of the lock's slot. The first SET NX there wins, the other two
/// find the key held by the attempt's own token, and redlock reports the
/// FREE lock as busy, held by itself: with the cron recipe (`-n -E 0`) the
/// job is skipped silently on every tick, forever. Expected: the command
/// runs, or redlock refuses the configuration (the same server answered
/// twice) with a non-busy exit code; never "busy".
#[test]
fn one_cluster_listed_as_three_members_is_never_busy() {
    let cluster = RedisCluster::start(3, 0);
    let servers: Vec<String> = cluster.nodes[..cluster.masters]
        .iter()
        .map(|n| format!("redis+cluster://127.0.0.1:{}", n.port))
        .collect();
    let servers = servers.join(",");
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let key = unique_key("cluster-thrice");
    let out = Redlock::new(&servers)
        .args(["run", "-n", "-E", "0", "--key", &key, "--", "touch"])
        .args([ran.to_str().unwrap()])
        .run();
    let skipped_as_busy = out.code() == 0 && !ran.exists();
    if skipped_as_busy || out.code() == 75 {
        out.fail("a free lock was reported busy: the job never runs");
    }
    out.expect(69).stderr_has("listed more than once");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}

/// The same plain server listed three times (so before today too; the
/// cluster case above is the natural way to hit it).
#[test]
fn one_server_listed_three_times_is_never_busy() {
    let server = RedisServer::start();
    let servers = [server.url(), server.url(), server.url()].join(",");
    let key = unique_key("thrice");
    let out = Redlock::new(&servers).args(["acquire", "--wait", "5s", "--key", &key]).run();
    if out.code() == 75 {
        out.fail("a free lock was reported busy (held by our own token)");
    }
    // A mistake in the server list (64), not servers down (69).
    out.expect(64).stderr_has("listed twice").stderr_has("list each server once");
    assert!(out.elapsed < Duration::from_secs(2), "waited {:?} on a configuration", out.elapsed);
}

/// acquire.lua writes the fence counter
/// (`SET ... GET`) before it reads the old value, so a counter that is not
/// a number is overwritten by an attempt that then fails with a raw Lua
/// error ("attempt to perform arithmetic on a nil value"). Before the
/// rewrite the failing attempt wrote nothing to the counter. Expected: the
/// failing attempt leaves the counter as it found it (as a WRONGTYPE lock
/// key is left untouched).
#[test]
fn a_failed_attempt_leaves_a_garbage_fence_counter_untouched() {
    let server = RedisServer::start();
    let key = unique_key("garbage-fence");
    server.cmd::<()>(&["SET", &fence_key(&key), "garbage", "PX", "60000"]);
    let out = Redlock::new(&server.url()).args(["acquire", "-n", "--key", &key]).run();
    out.expect(69);
    assert_eq!(server.get(&fence_key(&key)).as_deref(), Some("garbage"), "{}", out.line());
    assert_eq!(server.get(&lock_key(&key)), None);
}

/// The leftover fast path (child::nothing_left) never lets a job
/// process escape. The command exits at once while its children, in new
/// sessions and double-forked, are still forking; every one of them must
/// be stopped, on every run.
#[test]
fn leftovers_forking_in_new_sessions_are_always_stopped() {
    let server = RedisServer::start();
    let key = unique_key("escape");
    // A sleep of a length no other test uses marks the job's processes.
    let mark = format!("sleep {}", 500_000 + std::process::id() % 400_000);
    let script = format!(
        "setsid sh -c 'for i in 1 2 3; do ({mark} &); done; exec {mark}' & (({mark} &) &); exit 0"
    );
    for _ in 0..15 {
        Redlock::new(&server.url()).args(["run", "-q", "--key", &key, "-c", &script]).run();
    }
    std::thread::sleep(Duration::from_millis(300));
    let left = std::process::Command::new("pgrep").args(["-f", &mark]).output().unwrap();
    let left = String::from_utf8_lossy(&left.stdout).trim().to_owned();
    if !left.is_empty() {
        let _ = std::process::Command::new("pkill").args(["-KILL", "-f", &mark]).status();
        panic!("job processes escaped the lock: {left}");
    }
}

/// An ACL user as Redis 7 creates it by default (`acl-pubsub-default
/// resetchannels`: no pub/sub channel) with `-@scripting`, so on the
/// no-script path; returns its URL.
fn user_without_channels(server: &RedisServer, name: &str, scripts: bool) -> String {
    let scripting = if scripts { "+@scripting" } else { "-@scripting" };
    server.cmd::<()>(&[
        "ACL",
        "SETUSER",
        name,
        "on",
        ">pw",
        "~*",
        "resetchannels",
        "+@all",
        scripting,
    ]);
    format!("redis://{name}:pw@127.0.0.1:{}", server.port)
}

/// On the no-script path the release was
/// `MULTI; DEL; PUBLISH; EXEC`; for a user without channel permissions
/// (Redis 7's default for a new ACL user) the PUBLISH is refused at queue
/// time and EXEC aborts, so the DEL never happens: `release` exits 69 and
/// the lock stays held for its whole TTL after every `run`, although
/// `acquire` succeeded and `doctor` calls the server fit (its note speaks
/// only of waiters not being woken). Expected: the release deletes the key
/// (the announcement is best effort) and exits 0.
#[test]
fn a_user_without_channels_releases_without_scripts() {
    let server = RedisServer::start();
    let url = user_without_channels(&server, "nochan", false);
    let key = unique_key("nochan-noscript");
    let out = Redlock::new(&url).args(["acquire", "-n", "--key", &key]).run();
    out.expect(0);
    let token = out.stdout.trim().to_owned();
    let out = Redlock::new(&url).args(["release", "--key", &key, "--token", &token]).run();
    assert_eq!(server.get(&lock_key(&key)), None, "the lock is still held: {}", out.line());
    out.expect(0);
}

/// The same user with scripts: release.lua
/// deletes the key and then fails on PUBLISH, so `release` reports exit 69
/// ("can't publish to the channel") for a lock it did release.
#[test]
fn a_user_without_channels_releases_with_scripts() {
    let server = RedisServer::start();
    let url = user_without_channels(&server, "nochan2", true);
    let key = unique_key("nochan-script");
    let out = Redlock::new(&url).args(["acquire", "-n", "--key", &key]).run();
    out.expect(0);
    let token = out.stdout.trim().to_owned();
    let out = Redlock::new(&url).args(["release", "--key", &key, "--token", &token]).run();
    assert_eq!(server.get(&lock_key(&key)), None);
    out.expect(0);
}
