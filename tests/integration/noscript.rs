//! No scripting required: servers that refuse `EVALSHA`/`EVAL` (renamed
//! away in their configuration, or an ACL user without `@scripting`) get
//! the same lock through plain commands (`WATCH`/`MULTI`/`EXEC` on a
//! connection of its own, src/lock/noscript.rs).

use std::time::{Duration, Instant};

use crate::harness::redis::{Build, NO_SCRIPTS};
use crate::harness::{Fleet, RedisServer, Redlock, fence_key, lock_key, root, unique_key};

/// Generous bound for "promptly": far above the work, far below a hang.
const PROMPT: Duration = Duration::from_secs(10);

/// `n` servers of `build` with scripting renamed away.
fn renamed(build: Build, n: usize) -> Fleet {
    Fleet::start_build_with(build, n, NO_SCRIPTS)
}

/// `run` against servers without scripting neither hangs nor fails: it
/// takes the lock, runs the command, and releases.
fn run_does_not_hang(fleet: &Fleet) {
    let key = unique_key("noscript-run");
    let started = Instant::now();
    let out = Redlock::on(fleet)
        .args(["run", "-n", "--ttl", "2s", "--key", &key, "--", "echo", "ran"])
        .run();
    out.expect(0).within(PROMPT);
    assert_eq!(out.stdout.trim(), "ran", "{}", out.stderr);
    assert!(started.elapsed() < PROMPT);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; fleet.servers.len()]);
}

/// acquire, status, extend, set-TTL-free release: values and TTLs checked
/// on every server; a wrong token changes nothing.
fn cycle(fleet: &Fleet) {
    let servers = fleet.urls();
    let n = fleet.servers.len();
    let key = unique_key("noscript-cycle");
    Redlock::new(&servers).args(["status", "--key", &key]).run().expect(1);
    let (token, _) = Redlock::new(&servers).acquire(&key, "10s");
    assert_eq!(fleet.values(&lock_key(&key)), vec![Some(token.clone()); n]);
    let status = Redlock::new(&servers).args(["status", "--key", &key, "--json"]).run();
    status.expect(0);
    let json = status.json();
    assert_eq!(json["held"], true);
    assert_eq!(json["holder"]["token"], token.as_str());
    Redlock::new(&servers)
        .args(["extend", "--key", &key, "--token", "not-the-token", "--ttl", "60s"])
        .run()
        .expect(70);
    Redlock::new(&servers)
        .args(["release", "--key", &key, "--token", "not-the-token"])
        .run()
        .expect(70);
    Redlock::new(&servers)
        .args(["extend", "--key", &key, "--token", &token, "--ttl", "60s"])
        .run()
        .expect(0);
    for s in &fleet.servers {
        assert!(s.pttl(&lock_key(&key)) > 10_000, "extend raised the TTL on {}", s.name());
        assert!(s.pttl(&fence_key(&key)) > 10_000, "extend kept the counter on {}", s.name());
    }
    // Busy: -n exits 75 and names the holder; the holder's keys untouched.
    Redlock::new(&servers)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(75)
        .within(PROMPT)
        .stderr_has("held by");
    assert_eq!(fleet.values(&lock_key(&key)), vec![Some(token.clone()); n]);
    Redlock::new(&servers).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; n]);
    Redlock::new(&servers).args(["status", "--key", &key]).run().expect(1);
}

/// Fences strictly increase across holders and across `run`s.
fn fences_increase(fleet: &Fleet) {
    let servers = fleet.urls();
    let key = unique_key("noscript-fence");
    let mut last = 0;
    for _ in 0..5 {
        let (token, fence) = Redlock::new(&servers).acquire(&key, "5s");
        assert!(fence > last, "fence {fence} after {last}");
        last = fence;
        Redlock::new(&servers).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    }
    for _ in 0..3 {
        let out = Redlock::new(&servers)
            .args([
                "run",
                "-n",
                "--ttl",
                "2s",
                "--key",
                &key,
                "--",
                "sh",
                "-c",
                "echo $REDLOCK_FENCE",
            ])
            .run();
        out.expect(0);
        let fence: u64 = out.stdout.trim().parse().unwrap_or_else(|_| out.fail("no fence"));
        assert!(fence > last, "run's fence {fence} after {last}");
        last = fence;
    }
}

/// Every key redlock wrote expires: DBSIZE back to 0 once TTL plus linger
/// have passed.
fn everything_expires(fleet: &Fleet) {
    let servers = fleet.urls();
    let key = unique_key("noscript-expire");
    let (token, _) = Redlock::new(&servers).acquire(&key, "1s");
    Redlock::new(&servers).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    Redlock::new(&servers).acquire(&key, "1s");
    let deadline = Instant::now() + Duration::from_secs(30);
    while fleet.dbsizes().iter().any(|&n| n != 0) {
        assert!(Instant::now() < deadline, "keys left: {:?}", fleet.dbsizes());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `run` with a TTL of 1s over a 2.5s command: renewed (extend) through
/// the hold, released at the end; `--keep` shortens the lock (set-TTL).
fn run_renews_and_releases(fleet: &Fleet) {
    let servers = fleet.urls();
    let key = unique_key("noscript-renew");
    let out = Redlock::new(&servers)
        .args(["run", "--ttl", "1s", "--key", &key, "--", "sh", "-c", "sleep 2.5; echo done"])
        .run();
    out.expect(0).within(PROMPT);
    assert_eq!(out.stdout.trim(), "done", "{}", out.stderr);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; fleet.servers.len()]);
    Redlock::new(&servers)
        .args(["run", "--ttl", "1s", "--keep", "20s", "--key", &key, "--", "true"])
        .run()
        .expect(0);
    for s in &fleet.servers {
        let pttl = s.pttl(&lock_key(&key));
        assert!(pttl > 10_000 && pttl <= 20_000, "--keep on {}: {pttl}", s.name());
    }
    // What needs a script there ends at once, in one line.
    let shared = Redlock::new(&servers)
        .args(["run", "--shared", "--key", &unique_key("noscript-shared"), "--", "true"])
        .run();
    shared.expect(69).within(PROMPT).stderr_has("refuses scripts");
    assert_eq!(shared.stderr.lines().count(), 1, "{}", shared.stderr);
}

/// Two contenders looping `run` on one key are never inside together.
fn two_contenders_never_both_hold(fleet: &Fleet) {
    let key = unique_key("noscript-excl");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("inside");
    let log = dir.path().join("log");
    let script = format!(
        "if [ -e {m} ]; then echo OVERLAP >> {l}; fi; touch {m}; sleep 0.2; rm -f {m}; echo ok >> {l}",
        m = marker.display(),
        l = log.display()
    );
    let contenders: Vec<_> = (0..2)
        .map(|_| {
            let urls = fleet.urls();
            let (key, script) = (key.clone(), script.clone());
            std::thread::spawn(move || {
                for _ in 0..4 {
                    Redlock::new(&urls)
                        .args([
                            "run", "--ttl", "2s", "--wait", "20s", "--key", &key, "--", "sh", "-c",
                            &script,
                        ])
                        .run()
                        .expect(0);
                }
            })
        })
        .collect();
    for c in contenders {
        c.join().unwrap();
    }
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(!log.contains("OVERLAP"), "both held at once:\n{log}");
    assert_eq!(log.lines().count(), 8, "{log}");
}

mod redis7_renamed {
    use super::*;

    #[test]
    fn run_does_not_hang() {
        super::run_does_not_hang(&renamed(Build::Redis7, 3));
    }

    #[test]
    fn cycle() {
        super::cycle(&renamed(Build::Redis7, 3));
    }

    #[test]
    fn fences_increase() {
        super::fences_increase(&renamed(Build::Redis7, 3));
    }

    #[test]
    fn everything_expires() {
        super::everything_expires(&renamed(Build::Redis7, 3));
    }

    #[test]
    fn two_contenders_never_both_hold() {
        super::two_contenders_never_both_hold(&renamed(Build::Redis7, 3));
    }

    #[test]
    fn run_renews_and_releases() {
        super::run_renews_and_releases(&renamed(Build::Redis7, 3));
    }

    /// A mixed fleet: two servers with scripts, one without.
    #[test]
    fn mixed_fleet() {
        let mut servers: Vec<RedisServer> =
            (0..2).map(|_| RedisServer::start_build(Build::Redis7, &[])).collect();
        servers.push(RedisServer::start_build(Build::Redis7, NO_SCRIPTS));
        let fleet = Fleet { servers };
        super::cycle(&fleet);
        super::fences_increase(&fleet);
        super::two_contenders_never_both_hold(&fleet);
    }
}

mod valkey81_renamed {
    use super::*;

    #[test]
    fn run_does_not_hang() {
        super::run_does_not_hang(&renamed(Build::Valkey81, 3));
    }

    #[test]
    fn cycle() {
        super::cycle(&renamed(Build::Valkey81, 3));
    }

    #[test]
    fn fences_increase_and_everything_expires() {
        let fleet = renamed(Build::Valkey81, 3);
        super::fences_increase(&fleet);
        super::everything_expires(&fleet);
    }

    #[test]
    fn two_contenders_never_both_hold() {
        super::two_contenders_never_both_hold(&renamed(Build::Valkey81, 3));
    }

    #[test]
    fn run_renews_and_releases() {
        super::run_renews_and_releases(&renamed(Build::Valkey81, 3));
    }
}

/// The README's no-scripting ACL on Redis 7.0: a user refused `EVALSHA`
/// (NOPERM) gets every lock operation all the same.
mod redis7_acl {
    use super::*;

    /// The README's `ACL SETUSER locker-noscript` line, split into arguments.
    fn readme_acl() -> Vec<String> {
        let path = root().join("README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let line = readme
            .lines()
            .find(|l| l.starts_with("ACL SETUSER locker-noscript "))
            .expect("the no-scripting ACL line");
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_documented_acl_without_scripting_is_enough() {
        let fleet = Fleet::start_build(Build::Redis7, 3);
        let acl = readme_acl();
        let args: Vec<&str> = acl.iter().map(String::as_str).collect();
        for s in &fleet.servers {
            let ok: String = s.cmd(&args);
            assert_eq!(ok, "OK");
        }
        let urls: Vec<String> = fleet
            .servers
            .iter()
            .map(|s| format!("redis://locker-noscript:CHANGE-ME@127.0.0.1:{}", s.port))
            .collect();
        let urls = urls.join(",");
        // The user really is refused scripts.
        let key = format!("lock-{}", unique_key("acl"));
        let denied = redis::cmd("EVAL")
            .arg("return 1")
            .arg(0)
            .query::<i64>(
                &mut redis::Client::open(format!(
                    "redis://locker-noscript:CHANGE-ME@127.0.0.1:{}",
                    fleet.servers[0].port
                ))
                .unwrap()
                .get_connection()
                .unwrap(),
            )
            .unwrap_err();
        assert_eq!(denied.code(), Some("NOPERM"), "{denied}");
        let (token, first) = Redlock::new(&urls).acquire(&key, "10s");
        assert_eq!(fleet.values(&lock_key(&key)), vec![Some(token.clone()); 3]);
        Redlock::new(&urls).args(["status", "--key", &key]).run().expect(0);
        Redlock::new(&urls)
            .args(["extend", "--key", &key, "--token", &token, "--ttl", "60s"])
            .run()
            .expect(0);
        Redlock::new(&urls).args(["acquire", "-n", "--key", &key]).run().expect(75);
        Redlock::new(&urls).args(["release", "--key", &key, "--token", &token]).run().expect(0);
        assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3]);
        let out = Redlock::new(&urls)
            .args([
                "run",
                "--ttl",
                "1s",
                "--key",
                &key,
                "--",
                "sh",
                "-c",
                "sleep 1.5; echo $REDLOCK_FENCE",
            ])
            .run();
        out.expect(0);
        let fence: u64 = out.stdout.trim().parse().unwrap_or_else(|_| out.fail("no fence"));
        assert!(fence > first, "fence {fence} after {first}");
        assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3]);
    }
}

/// An ACL user refused scripts *and* part of WATCH/MULTI/EXEC has no way
/// to lock at all: every operation ends at once (exit 69), in one line
/// naming the servers and the missing permission, never waits as if the
/// lock were busy, never panics, and leaves no key behind (a refused
/// `MULTI` must not let the writes after it run outside a transaction).
mod acl_without_transactions {
    use super::*;

    /// "At once": far below `--wait 5s`, far above the work.
    const AT_ONCE: Duration = Duration::from_secs(2);

    /// `build` servers whose user `locker-notx` is the README's
    /// no-scripting user with `extra` rules appended (`-multi -exec`...).
    fn fleet_with_user(build: Build, extra: &[&str]) -> (Fleet, String) {
        let fleet = Fleet::start_build(build, 3);
        let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
        let line = readme
            .lines()
            .find(|l| l.starts_with("ACL SETUSER locker-noscript "))
            .expect("the no-scripting ACL line");
        let mut args: Vec<&str> = line.split_whitespace().collect();
        args[2] = "locker-notx";
        args.extend_from_slice(extra);
        for s in &fleet.servers {
            let ok: String = s.cmd(&args);
            assert_eq!(ok, "OK");
        }
        let urls: Vec<String> = fleet
            .servers
            .iter()
            .map(|s| format!("redis://locker-notx:CHANGE-ME@127.0.0.1:{}", s.port))
            .collect();
        (fleet, urls.join(","))
    }

    /// Exit 69 at once, one line on stderr naming the servers and the
    /// `missing` command (NOPERM), no password, no panic. The line names
    /// at least a quorum's worth (2 of 3) of servers: a round ends as soon
    /// as the quorum is out of reach, and the third answer may come after.
    fn one_line_naming(out: &crate::harness::Output, fleet: &Fleet, missing: &str) {
        out.expect(69).within(AT_ONCE).stderr_has("permission denied").stderr_has(missing);
        out.stderr_lacks("CHANGE-ME").stderr_lacks("panicked");
        if out.stderr.trim_end().lines().count() != 1 {
            out.fail("should print one line on stderr");
        }
        let named = fleet.servers.iter().filter(|s| out.stderr.contains(&s.name())).count();
        if named < 2 {
            out.fail("should name the servers");
        }
    }

    /// acquire and `run --wait 5s` are refused at once for lack of
    /// `missing`; status too for lack of `status_missing`, or, when that is
    /// `None` (it needs no WATCH), answers "free".
    fn refused_at_once(build: Build, extra: &[&str], missing: &str, status_missing: Option<&str>) {
        let (fleet, urls) = fleet_with_user(build, extra);
        let key = format!("lock-{}", unique_key("notx"));
        let acquire = Redlock::new(&urls).args(["acquire", "-n", "--key", &key]).run();
        one_line_naming(&acquire, &fleet, missing);
        let run = Redlock::new(&urls)
            .args(["run", "--wait", "5s", "--ttl", "2s", "--key", &key, "--", "true"])
            .run();
        one_line_naming(&run, &fleet, missing);
        let status = Redlock::new(&urls).args(["status", "--key", &key]).run();
        match status_missing {
            Some(missing) => one_line_naming(&status, &fleet, missing),
            None => {
                status.expect(1).within(AT_ONCE);
            }
        }
        assert_eq!(fleet.dbsizes(), vec![0; 3], "keys left behind");
    }

    #[test]
    fn redis7_no_multi_no_exec() {
        refused_at_once(Build::Redis7, &["-multi", "-exec"], "'multi'", Some("'multi'"));
    }

    #[test]
    fn redis7_no_transaction_category() {
        refused_at_once(Build::Redis7, &["-@transaction"], "'watch'", Some("'multi'"));
    }

    #[test]
    fn redis7_no_watch() {
        refused_at_once(Build::Redis7, &["-watch"], "'watch'", None);
    }

    /// `MULTI` allowed, `EXEC` refused: the transaction is queued and
    /// never runs.
    #[test]
    fn redis7_no_exec() {
        refused_at_once(Build::Redis7, &["-exec"], "'exec'", Some("'exec'"));
    }

    #[test]
    fn valkey81_no_multi_no_exec() {
        refused_at_once(Build::Valkey81, &["-multi", "-exec"], "'multi'", Some("'multi'"));
    }

    #[test]
    fn valkey81_no_transaction_category() {
        refused_at_once(Build::Valkey81, &["-@transaction"], "'watch'", Some("'multi'"));
    }

    #[test]
    fn valkey81_no_watch() {
        refused_at_once(Build::Valkey81, &["-watch"], "'watch'", None);
    }

    #[test]
    fn valkey81_no_exec() {
        refused_at_once(Build::Valkey81, &["-exec"], "'exec'", Some("'exec'"));
    }
}
