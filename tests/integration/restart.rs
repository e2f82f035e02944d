//! A server restarted without its data votes for no one until no holder
//! can still rely on a key it forgot (`--max-ttl` plus 1 s): the delayed
//! restart that Redlock's safety needs, enforced by redlock itself.
//!
//! The tests run with `--max-ttl 3s` (so a restarted server waits 4 s) on
//! servers that have been up that long, and without the harness's
//! `REDLOCK_TRUST_RESTARTS` ([`Redlock::distrust_restarts`]).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::proxy::{Mode, Proxy};
use crate::harness::{Fleet, Redlock, Running, lock_key, unique_key, wait_for_file};

/// The longest TTL of these tests, and how long a restarted server waits.
const MAX_TTL: &str = "3s";
const WINDOW: Duration = Duration::from_secs(4);

/// `n` servers that have been up for the whole window.
fn aged_fleet(n: usize) -> Fleet {
    let fleet = Fleet::start(n);
    std::thread::sleep(WINDOW);
    fleet
}

fn redlock(servers: &str) -> Redlock {
    Redlock::new(servers).distrust_restarts().args(["--max-ttl", MAX_TTL])
}

/// `run -n --ttl 3s -k KEY --`.
fn run_n(key: &str) -> [&str; 7] {
    ["run", "-n", "--ttl", MAX_TTL, "-k", key, "--"]
}

/// The holder has exactly a quorum (A and B; C was unreachable from it).
/// B restarts empty: B and C are free, and a second run could get in at
/// once, beside the first, unless B's grant counts towards no quorum.
#[test]
fn a_server_restarted_empty_gives_no_vote_to_a_second_holder() {
    let mut fleet = aged_fleet(3);
    let key = unique_key("restart-empty");
    let dir = tempfile::tempdir().unwrap();
    let (_proxy, holder) = holder_on_a_and_b(&fleet, &key, dir.path());
    fleet.servers[1].restart();
    second_run_never_overlaps(&fleet, &key, dir.path());
    let _ = holder.wait();
}

/// A holder of `key` on exactly a quorum: A and B, C reached through a
/// proxy that holds everything and then drops it; its command keeps
/// `DIR/inside` while it runs. Renewals 2 s apart: a second run comes
/// before the holder learns of a restart at its next renewal.
fn holder_on_a_and_b(fleet: &Fleet, key: &str, dir: &Path) -> (Proxy, Running) {
    let inside = dir.join("inside");
    let proxy = Proxy::start(fleet.servers[2].port);
    proxy.set(Mode::Stall);
    let holder_servers =
        format!("{},{},{}", fleet.servers[0].url(), fleet.servers[1].url(), proxy.url());
    let holder = redlock(&holder_servers)
        .args(["run", "--ttl", MAX_TTL, "--renew-every", "2s", "--kill-after", "100ms"])
        .args(["--node-timeout", "200ms", "-k", key, "--"])
        .args(["sh", "-c"])
        .args([format!(
            "touch {i}; trap 'rm -f {i}; exit 143' TERM; sleep 6 & wait; rm -f {i}",
            i = inside.display()
        )])
        .spawn();
    wait_for_file(&inside);
    // What the holder sent C is never delivered.
    proxy.drop_connections();
    (proxy, holder)
}

/// A second `run -n` of `key` on the whole fleet may run once the holder
/// ([`holder_on_a_and_b`]) has lost its lock and stopped its command:
/// never beside it.
fn second_run_never_overlaps(fleet: &Fleet, key: &str, dir: &Path) {
    let (inside, overlap) = (dir.join("inside"), dir.join("overlap"));
    let check = format!("test -e {} && touch {}; true", inside.display(), overlap.display());
    let out = redlock(&fleet.urls()).args(["-v"]).args(run_n(key)).args(["sh", "-c", &check]).run();
    assert!(!overlap.exists(), "a second holder ran beside the first:\n{}", out.stderr);
}

/// One server restarted: the others make a quorum at once, and a routine
/// restart is no failure: nothing is said without `-v` (it warned that 1
/// of 3 servers failed), and `-v` says the server has no vote yet.
#[test]
fn one_restarted_server_costs_nothing_while_the_others_make_a_quorum() {
    let mut fleet = aged_fleet(3);
    let key = unique_key("restart-one");
    fleet.servers[0].restart();
    let out = redlock(&fleet.urls()).args(run_n(&key)).args(["true"]).run();
    out.expect(0).within(Duration::from_secs(2));
    assert_eq!(out.stderr, "", "a restart within its window is no failure");
    let out = redlock(&fleet.urls()).args(["-v"]).args(run_n(&key)).args(["true"]).run();
    out.expect(0).stderr_has("1 without a vote yet").stderr_lacks("failed");
}

/// A whole fleet restarted: no lock until the window passes, with a line
/// that says why, then at once.
#[test]
fn a_fleet_restarted_at_once_locks_again_after_the_window() {
    let mut fleet = Fleet::start(3);
    let key = unique_key("restart-all");
    for s in &mut fleet.servers {
        s.restart();
    }
    let restarted = Instant::now();
    let flags = ["run", "--ttl", "1s", "-k", &key];
    let out = redlock(&fleet.urls()).args(flags).args(["-n", "--", "true"]).run();
    out.expect(69).stderr_has("votes in").stderr_has("servers without a vote yet (quorum 2)");
    // status says which servers have no vote, and why.
    let status = redlock(&fleet.urls()).args(["status", "-k", &key, "--json"]).run();
    let json = status.json();
    for server in json["servers"].as_array().unwrap() {
        assert!(server["no_vote"].as_str().is_some_and(|v| v.contains("started")), "{json}");
    }
    let table = redlock(&fleet.urls()).args(["status", "-k", &key]).run();
    assert!(table.stdout.contains("no vote: it started"), "{}", table.stdout);
    let out = redlock(&fleet.urls()).args(flags).args(["--wait", "20s", "--", "true"]).run();
    out.expect(0).stderr_has("votes in");
    let took = restarted.elapsed();
    assert!(took >= WINDOW - Duration::from_secs(1), "a restarted server voted after {took:?}");
    assert!(took < WINDOW + Duration::from_secs(3), "locked only after {took:?}");
}

/// Servers that keep every write (`appendonly yes`, `appendfsync always`)
/// lost nothing in a restart, and vote at once; so does any server with
/// `--trust-restarts`.
#[test]
fn servers_that_keep_their_data_and_trusted_ones_vote_at_once() {
    let mut fleet = Fleet::start_build_with(
        crate::harness::redis::Build::Redis7,
        3,
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let key = unique_key("restart-kept");
    fleet.servers[0].restart();
    redlock(&fleet.urls()).args(run_n(&key)).args(["true"]).run().expect(0);
    let mut fleet = Fleet::start(3);
    for s in &mut fleet.servers {
        s.restart();
    }
    redlock(&fleet.urls())
        .args(["--trust-restarts"])
        .args(run_n(&key))
        .args(["true"])
        .run()
        .expect(0);
}

/// The holder has exactly a quorum (A and B; C was unreachable from it).
/// A restarts empty, without persistence, then has it switched on at
/// runtime (`appendonly yes`, `appendfsync always`): its configuration now
/// reads as a server that keeps every write, but it kept none of the
/// holder's. A second run must get no vote from it.
#[test]
fn persistence_switched_on_after_a_restart_buys_no_vote() {
    let mut fleet = aged_fleet(3);
    let key = unique_key("restart-aof-at-runtime");
    let dir = tempfile::tempdir().unwrap();
    let (_proxy, holder) = holder_on_a_and_b(&fleet, &key, dir.path());
    let a = &mut fleet.servers[0];
    a.shutdown(false);
    a.start_again();
    let _: String = a.cmd(&["CONFIG", "SET", "appendonly", "yes"]);
    let _: String = a.cmd(&["CONFIG", "SET", "appendfsync", "always"]);
    // The switch is done once its rewrite is: from then on nothing in
    // the configuration tells this server from one started with it.
    let switched = Instant::now();
    loop {
        let info: String = a.cmd(&["INFO", "persistence"]);
        let done = ["aof_enabled:1", "aof_rewrite_in_progress:0", "aof_rewrite_scheduled:0"]
            .iter()
            .all(|f| info.lines().any(|l| l.trim() == *f));
        if done {
            break;
        }
        assert!(switched.elapsed() < Duration::from_secs(10), "no AOF rewrite:\n{info}");
        std::thread::sleep(Duration::from_millis(10));
    }
    second_run_never_overlaps(&fleet, &key, dir.path());
    let _ = holder.wait();
}

/// `doctor` judges a server's vote by acquire's rule, and says why a
/// server with persistence switched on after its start has none.
#[test]
fn doctor_says_persistence_switched_on_after_the_start_buys_no_vote() {
    let mut server = crate::harness::RedisServer::start();
    server.shutdown(false);
    server.start_again();
    let _: String = server.cmd(&["CONFIG", "SET", "appendonly", "yes"]);
    let _: String = server.cmd(&["CONFIG", "SET", "appendfsync", "always"]);
    let out = redlock(&server.url()).args(["doctor", "--ttl", MAX_TTL]).run();
    let report = format!("{}{}", out.stdout, out.stderr);
    assert!(report.contains("no vote until 4.0s after its start"), "{report}");
    assert!(report.contains("rewritten since it started"), "{report}");
}

/// A key seen on a restarted server is no holder's vote: a holder found
/// there and on one other server of three has no quorum of voting
/// servers, so a `-n` is not told "busy" (which skipped, in the
/// campaign, a tick that nobody ran); it runs once that value lapses.
#[test]
fn a_value_on_a_restarted_server_is_no_holders_vote() {
    let mut fleet = aged_fleet(3);
    let key = unique_key("restart-held");
    fleet.servers[0].restart();
    for i in [0, 2] {
        let _: String = fleet.servers[i].cmd(&["SET", &lock_key(&key), "elsewhere", "PX", "1500"]);
    }
    let out = redlock(&fleet.urls()).args(["-v"]).args(run_n(&key)).args(["true"]).run();
    out.expect(0).stderr_lacks("busy");
}

/// A holder's vote that a hung server executes only when it wakes, after
/// the holder won without it, ran and released, is no take of the lock
/// at that moment: a `-n` that began in between (here asking again, its
/// first round short of a quorum: one server restarted, one hung) must
/// not skip as "taken since this began" a run nobody else made.
#[test]
fn a_late_vote_landing_after_its_release_is_no_take() {
    let mut fleet = aged_fleet(3);
    let key = unique_key("restart-late-vote");
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let quick = ["--node-timeout", "200ms", "--ttl", MAX_TTL, "-k", &key];
    fleet.servers[1].hang();
    // Won on A and C; its vote and release wait in B's socket.
    redlock(&fleet.urls()).args(["run"]).args(quick).args(["--", "true"]).run().expect(0);
    fleet.servers[0].restart();
    let second = redlock(&fleet.urls())
        .args(["-v", "run", "-n"])
        .args(quick)
        .args(["--", "touch", ran.to_str().unwrap()])
        .spawn();
    std::thread::sleep(Duration::from_millis(600));
    fleet.servers[1].resume();
    let out = second.wait();
    out.expect(0);
    assert!(ran.exists(), "the second run did not run:\n{}", out.stderr);
}
