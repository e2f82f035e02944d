//! Adversarial checks of the wait queue kept by the acquire script: order
//! survives a withdrawn attempt, a dead head costs at
//! most one entry lifetime, disordered queues still serve everyone with
//! no overlap, and a handoff costs a bounded number of script calls.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::{Fleet, Redlock, Running, lock_key, queue_keys, send_signal, unique_key};

/// The members queued on one server, first first.
fn order(fleet: &Fleet, i: usize, key: &str) -> Vec<String> {
    fleet.servers[i].cmd(&["ZRANGE", &queue_keys(key)[0], "0", "-1"])
}

/// Waits until every server in `servers` queues `n` waiters of `key`.
fn await_queued(fleet: &Fleet, servers: &[usize], key: &str, n: usize) {
    let start = Instant::now();
    while servers.iter().any(|&i| order(fleet, i, key).len() != n) {
        assert!(start.elapsed() < Duration::from_secs(10), "no {n} queued on {key}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Plants a foreign holder of `key` on `servers` for `ms`.
fn plant(fleet: &Fleet, servers: &[usize], key: &str, value: &str, ms: u64) {
    for &i in servers {
        let _: redis::Value =
            fleet.servers[i].cmd(&["SET", &lock_key(key), value, "PX", &ms.to_string()]);
    }
}

/// A waiter that appends `name` to `dir/order`, checking for overlap.
fn waiter(fleet: &Fleet, key: &str, dir: &Path, name: &str, wait: &str) -> Running {
    let d = dir.display();
    let body = format!(
        "mkdir {d}/inside 2>/dev/null || echo overlap >> {d}/overlaps; \
         echo {name} >> {d}/order; sleep 0.05; rmdir {d}/inside"
    );
    Redlock::on(fleet)
        .args(["run", "-k", key, "--ttl", "2s", "--wait", wait, "--", "sh", "-c", &body])
        .spawn()
}

fn evalsha_calls(fleet: &Fleet) -> usize {
    fleet.servers.iter().map(|s| s.calls(&["evalsha", "eval"])).sum()
}

fn no_overlaps(dir: &Path) {
    let o = std::fs::read_to_string(dir.join("overlaps")).unwrap_or_default();
    assert!(o.is_empty(), "two holders at once {} time(s)", o.lines().count());
}

#[test]
fn a_head_whose_attempt_is_withdrawn_keeps_its_place() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-withdrawn");
    let dir = tempfile::tempdir().unwrap();
    // Two different foreign holders on servers 0 and 1: no quorum is
    // possible, and server 2 (free) grants every attempt of the head,
    // which then withdraws it there.
    // Both waiters first queue on all three servers (held everywhere),
    // then server 2 is freed by hand.
    plant(&fleet, &[0], &key, "foreign-a", 3000);
    plant(&fleet, &[1, 2], &key, "foreign-b", 3000);
    let a = waiter(&fleet, &key, dir.path(), "A", "15s");
    await_queued(&fleet, &[0, 1, 2], &key, 1);
    let head = order(&fleet, 2, &key);
    let b = waiter(&fleet, &key, dir.path(), "B", "15s");
    await_queued(&fleet, &[0, 1, 2], &key, 2);
    let _: redis::Value = fleet.servers[2].cmd(&["DEL", &lock_key(&key)]);
    // Let the head attempt (and withdraw) a few times.
    std::thread::sleep(Duration::from_millis(1200));
    // Between a grant on server 2 and its withdrawal the head's entry is
    // out of that queue by design (the grant serves it, the withdrawal puts
    // it back), and under load that moment can be read: a reading is taken
    // again until none of the head's attempts is in flight. A place put
    // back behind the second waiter stays there and fails the test.
    let start = Instant::now();
    let mut now: Vec<Vec<String>> = (0..3).map(|i| order(&fleet, i, &key)).collect();
    while now.iter().any(|q| q.len() != 2 || q[0] != head[0])
        && start.elapsed() < Duration::from_secs(1)
    {
        std::thread::sleep(Duration::from_millis(20));
        now = (0..3).map(|i| order(&fleet, i, &key)).collect();
    }
    for (i, now) in now.iter().enumerate() {
        assert_eq!(now.len(), 2, "server {i}: {now:?}");
        assert_eq!(now[0], head[0], "server {i} lost the head's place: {now:?}");
    }
    a.wait().expect(0);
    b.wait().expect(0);
    assert_eq!(std::fs::read_to_string(dir.path().join("order")).unwrap(), "A\nB\n");
    no_overlaps(dir.path());
}

#[test]
fn a_killed_head_delays_the_next_by_at_most_a_lifetime() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-dead-head");
    let dir = tempfile::tempdir().unwrap();
    plant(&fleet, &[0, 1, 2], &key, "foreign", 1500);
    let a = Redlock::on(&fleet)
        .args(["run", "-k", &key, "--ttl", "2s", "--wait", "20s", "--", "sleep", "30"])
        .spawn();
    await_queued(&fleet, &[0, 1, 2], &key, 1);
    let b = waiter(&fleet, &key, dir.path(), "B", "20s");
    await_queued(&fleet, &[0, 1, 2], &key, 2);
    send_signal(a.pid(), 9);
    let killed = Instant::now();
    let out = b.wait();
    out.expect(0);
    let took = killed.elapsed();
    // The planted holder expires within 1.5 s, the dead entry within one
    // lifetime (5 s) of its last refresh; allow 2 s more.
    assert!(took < Duration::from_millis(8500), "the next waiter ran {took:?} after the kill");
    let _ = a.wait();
}

#[test]
fn disordered_queues_still_serve_everyone_once_and_alone() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-disordered");
    let dir = tempfile::tempdir().unwrap();
    plant(&fleet, &[0, 1, 2], &key, "foreign", 2500);
    let names = ["W0", "W1", "W2"];
    let mut running = Vec::new();
    for (n, name) in names.iter().enumerate() {
        running.push(waiter(&fleet, &key, dir.path(), name, "20s"));
        await_queued(&fleet, &[0, 1, 2], &key, n + 1);
    }
    // Rewrite the order so that each server names a different head.
    let members = order(&fleet, 0, &key);
    let [q, _] = queue_keys(&key);
    for i in 0..3 {
        for (j, m) in members.iter().enumerate() {
            let score = 1_700_000_000_000u64 + ((j + 3 - i) % 3) as u64;
            let _: redis::Value = fleet.servers[i].cmd(&["ZADD", &q, &score.to_string(), m]);
        }
        let heads = order(&fleet, i, &key);
        assert_eq!(heads[0], members[i], "server {i} was not disordered");
    }
    for r in running {
        r.wait().expect(0);
    }
    let served = std::fs::read_to_string(dir.path().join("order")).unwrap();
    let mut got: Vec<&str> = served.lines().collect();
    got.sort();
    assert_eq!(got, names);
    no_overlaps(dir.path());
    // Nothing of the queue left behind once the lifetimes pass (the fence
    // counter and the grant record live on a while).
    std::thread::sleep(Duration::from_millis(5500));
    assert_eq!(fleet.dbsizes().iter().filter(|&&n| n > 2).count(), 0, "{:?}", fleet.dbsizes());
}

#[test]
fn a_handoff_among_four_waiters_costs_at_most_twenty_script_calls() {
    let fleet = Fleet::start(5);
    let key = unique_key("q-calls");
    let dir = tempfile::tempdir().unwrap();
    // A real holder that releases (and announces) when told to.
    let go = dir.path().join("go");
    let hold = format!("while [ ! -f {} ]; do sleep 0.01; done", go.display());
    let holder = Redlock::on(&fleet)
        .args(["run", "-k", &key, "--ttl", "2s", "--", "sh", "-c", &hold])
        .spawn();
    let start = Instant::now();
    while fleet.values(&lock_key(&key)).iter().filter(|v| v.is_some()).count() < 5 {
        assert!(start.elapsed() < Duration::from_secs(10), "the holder never held");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut running = Vec::new();
    for n in 0..4 {
        running.push(waiter(&fleet, &key, dir.path(), &format!("W{n}"), "20s"));
        await_queued(&fleet, &[0, 1, 2, 3, 4], &key, n + 1);
    }
    for s in &fleet.servers {
        let _: redis::Value = s.cmd(&["CONFIG", "RESETSTAT"]);
    }
    std::fs::write(&go, "").unwrap();
    holder.wait().expect(0);
    for r in running {
        r.wait().expect(0);
    }
    // Every run also writes one history entry per server after its release
    // (scripts/record.lua, LPUSH): those are not lock scripts.
    let history: usize = fleet
        .servers
        .iter()
        .map(|s| s.cmd::<usize>(&["LLEN", &format!("{}:history", lock_key(&key))]))
        .sum();
    assert_eq!(history, 25, "one history entry per run and server");
    let calls = evalsha_calls(&fleet) - history;
    no_overlaps(dir.path());
    assert_eq!(std::fs::read_to_string(dir.path().join("order")).unwrap(), "W0\nW1\nW2\nW3\n");
    assert!(calls <= 4 * 20, "{calls} script calls for 4 handoffs over 5 servers");
    eprintln!("lock-script calls per handoff: {} (+{history} history writes)", calls as f64 / 4.0);
}

#[test]
fn no_wait_while_others_queue_is_busy_and_takes_no_place() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-nowait");
    let dir = tempfile::tempdir().unwrap();
    plant(&fleet, &[0, 1, 2], &key, "foreign", 1500);
    let w = waiter(&fleet, &key, dir.path(), "W", "10s");
    await_queued(&fleet, &[0, 1, 2], &key, 1);
    Redlock::on(&fleet).args(["run", "-k", &key, "-n", "--", "true"]).run().expect(75);
    for i in 0..3 {
        assert_eq!(order(&fleet, i, &key).len(), 1, "server {i}: -n joined the queue");
    }
    w.wait().expect(0);
}

#[test]
fn a_waiter_out_of_time_leaves_no_queue_behind() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-deadline");
    let dir = tempfile::tempdir().unwrap();
    plant(&fleet, &[0, 1, 2], &key, "foreign", 3000);
    let w = waiter(&fleet, &key, dir.path(), "W", "1s");
    await_queued(&fleet, &[0, 1, 2], &key, 1);
    w.wait().expect(75);
    // The planted key (3 s) and the entry (one 5 s lifetime) expire.
    std::thread::sleep(Duration::from_millis(5600));
    // What may stay is the skip record (`:skips`, kept a week by design),
    // and only with a TTL; the queue and the lock are gone.
    for s in &fleet.servers {
        let keys: Vec<String> = s.cmd(&["KEYS", "*"]);
        for k in &keys {
            assert!(k.ends_with(":skips"), "left behind: {k} in {keys:?}");
            assert!(s.pttl(k) > 0, "{k} never expires");
        }
    }
}

#[test]
fn a_queue_key_of_another_type_fails_fast_and_takes_nothing() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-wrongtype");
    let [q, _] = queue_keys(&key);
    for s in &fleet.servers {
        let _: redis::Value = s.cmd(&["SET", &q, "not-a-zset"]);
    }
    let out = Redlock::on(&fleet).args(["run", "-k", &key, "--wait", "2s", "--", "true"]).run();
    eprintln!("wrongtype: code {} stderr {}", out.code(), out.stderr);
    assert_ne!(out.code(), 0, "ran under a lock whose queue it could not read");
    assert!(fleet.values(&lock_key(&key)).iter().all(|v| v.is_none()), "a vote was left");
}

#[test]
fn unordered_and_ordered_waiters_on_one_key_all_pass_alone() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-mixed");
    let dir = tempfile::tempdir().unwrap();
    plant(&fleet, &[0, 1, 2], &key, "foreign", 1500);
    let d = dir.path().display();
    let mut running = Vec::new();
    for n in 0..4 {
        let body = format!(
            "mkdir {d}/inside 2>/dev/null || echo overlap >> {d}/overlaps; \
             echo M{n} >> {d}/order; sleep 0.05; rmdir {d}/inside"
        );
        let mut args = vec!["run", "-k", &key, "--ttl", "2s", "--wait", "15s"];
        if n % 2 == 1 {
            args.push("--unordered");
        }
        args.extend(["--", "sh", "-c", &body]);
        running.push(Redlock::on(&fleet).args(args).spawn());
    }
    for r in running {
        r.wait().expect(0);
    }
    let served = std::fs::read_to_string(dir.path().join("order")).unwrap();
    assert_eq!(served.lines().count(), 4, "{served}");
    no_overlaps(dir.path());
}

#[test]
fn a_dead_waiter_never_turns_a_free_lock_into_a_skip() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-dead-waiter");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let held = dir.path().join("held");
    let holder = Redlock::on(&fleet)
        .args(["run", "-k", &key, "--", "sh", "-c", &format!("touch {d}/held; sleep 1")])
        .spawn();
    crate::harness::wait_for_file(&held);
    // A waiter queues behind the holder, then dies without a word.
    let w = Redlock::on(&fleet).args(["run", "-k", &key, "--wait", "1m", "--", "true"]).spawn();
    await_queued(&fleet, &[0, 1, 2], &key, 1);
    send_signal(w.pid(), 9);
    let _ = w.wait();
    holder.wait().expect(0);
    // The lock is free: a cron burst must run the tick, not skip it.
    let started = Instant::now();
    let burst: Vec<Running> = (0..3)
        .map(|h| {
            let job = format!("echo host{h} >> {d}/ran");
            Redlock::on(&fleet)
                .args(["run", "-n", "-E", "0", "-k", &key, "--", "sh", "-c", &job])
                .spawn()
        })
        .collect();
    for b in burst {
        b.wait().expect(0);
    }
    let ran = std::fs::read_to_string(dir.path().join("ran")).unwrap_or_default();
    assert!(!ran.is_empty(), "a free lock was reported busy to every host of the burst");
    // `-n` runs only if nobody took the lock since it began: the hosts
    // that settled the dead waiter's turn after the first one ran are busy.
    assert_eq!(ran.lines().count(), 1, "the burst ran the tick more than once:\n{ran}");
    // Taken within one entry lifetime (5 s) of the dead waiter's last refresh.
    assert!(started.elapsed() < Duration::from_secs(7), "took {:?}", started.elapsed());
}

/// A queue whose order names a waiter the deadlines no longer know (one of
/// the two keys evicted, or edited by hand): a release must still end
/// cleanly, not fail with a Lua error after it deleted the key (found by
/// review: `release` exited 69 with the key already gone).
#[test]
fn a_waiter_missing_from_the_deadlines_does_not_fail_a_release() {
    let fleet = Fleet::start(3);
    let key = unique_key("q-orphan");
    let out = Redlock::on(&fleet).args(["acquire", "-n", "-k", &key]).run();
    out.expect(0);
    let token = out.stdout.trim().to_owned();
    let [order, deadlines] = queue_keys(&key);
    for s in &fleet.servers {
        let _: i64 = s.cmd(&["ZADD", &order, "1", "orphan"]);
        let _: i64 = s.cmd(&["DEL", &deadlines]);
    }
    let out = Redlock::on(&fleet).args(["release", "-k", &key, "--token", &token]).run();
    out.expect(0);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3]);
}
