//! `--shared`: many shared holders or one exclusive, never both
//! (src/shared.rs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::ledger::{rw_audit, rw_section};
use crate::harness::{Fleet, Redlock, bin, lock_key, pid_in, process_alive, unique_key};

fn readers_key(key: &str) -> String {
    format!("{}:readers", lock_key(key))
}

#[test]
fn shared_holders_overlap_and_an_exclusive_one_never_overlaps_anything() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let key = unique_key("rw");
    let dir = tempfile::tempdir().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let codes: Arc<Mutex<BTreeMap<i32, usize>>> = Arc::default();
    let workers: Vec<_> = (0..8)
        .map(|i| {
            let shared = i < 6;
            let mode = if shared { "shared" } else { "exclusive" };
            let script = rw_section(dir.path(), mode, "0.3");
            let (urls, key, codes) = (urls.clone(), key.clone(), Arc::clone(&codes));
            std::thread::spawn(move || {
                while Instant::now() < deadline {
                    let mut cmd = Redlock::new(&urls).args(["run", "--key", &key, "--ttl", "2s"]);
                    if shared {
                        cmd = cmd.args(["--shared"]);
                    }
                    let out = cmd.args(["--wait", "20s", "-c", &script]).run();
                    if out.code() != 0 {
                        out.fail("a run failed");
                    }
                    *codes.lock().unwrap().entry(out.code()).or_default() += 1;
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let audit = rw_audit(dir.path());
    eprintln!("shared: {audit:?}, codes {:?}", codes.lock());
    assert!(audit.most_shared >= 2, "shared holders never overlapped: {audit:?}");
    assert!(audit.exclusive >= 2, "exclusive holders barely ran: {audit:?}");
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3], "left held");
    assert_eq!(fleet.values(&readers_key(&key)), vec![None; 3], "entries left");
}

#[test]
fn an_exclusive_waiter_gets_in_while_shared_holders_keep_arriving() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let key = unique_key("rw-starve");
    let dir = tempfile::tempdir().unwrap();
    let stream_end = Instant::now() + Duration::from_secs(12);
    // A new shared holder every 250 ms, each inside for 1 s: without the
    // queue, the key would never be free of shared holders until the end.
    let stream = {
        let (urls, key, script) =
            (urls.clone(), key.clone(), rw_section(dir.path(), "shared", "1"));
        std::thread::spawn(move || {
            let mut runs = Vec::new();
            while Instant::now() < stream_end {
                let urls = urls.clone();
                let (key, script) = (key.clone(), script.clone());
                runs.push(std::thread::spawn(move || {
                    Redlock::new(&urls)
                        .args(["run", "--shared", "--key", &key, "--ttl", "2s", "--wait", "30s"])
                        .args(["-c", &script])
                        .run()
                        .expect(0);
                }));
                std::thread::sleep(Duration::from_millis(250));
            }
            for r in runs {
                r.join().unwrap();
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let start = Instant::now();
    Redlock::new(&urls)
        .args(["run", "--key", &key, "--ttl", "2s", "--wait", "30s"])
        .args(["-c", &rw_section(dir.path(), "exclusive", "0.2")])
        .run()
        .expect(0);
    let waited = start.elapsed();
    assert!(Instant::now() < stream_end, "the exclusive holder got in only after the stream ended");
    assert!(waited < Duration::from_secs(6), "the exclusive holder waited {waited:?}");
    stream.join().unwrap();
    let audit = rw_audit(dir.path());
    assert_eq!(audit.exclusive, 1);
    assert!(audit.most_shared >= 2, "{audit:?}");
}

#[test]
fn a_shared_run_that_loses_its_hold_stops_the_child_and_exits_70() {
    let fleet = Fleet::start(3);
    let key = unique_key("rw-lost");
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let running = Redlock::on(&fleet)
        .args(["run", "--shared", "--key", &key, "--ttl", "1s", "-c", &script])
        .spawn();
    let child = pid_in(&pid_file);
    for s in &fleet.servers {
        let _: i64 = s.cmd(&["DEL", &readers_key(&key)]);
    }
    let start = Instant::now();
    running.wait().expect(70).stderr_has("no shared hold");
    assert!(start.elapsed() < Duration::from_secs(5), "stopped after {:?}", start.elapsed());
    assert!(!process_alive(child), "the child outlived the lost hold");
}

#[test]
fn modes_and_limits_do_not_mix() {
    let fleet = Fleet::start(3);
    let key = unique_key("rw-mix");
    Redlock::on(&fleet)
        .args(["run", "--shared", "--limit", "2", "--key", &key, "--", "true"])
        .run()
        .expect(64)
        .stderr_has("--limit 2 with --shared");
    assert_eq!(fleet.dbsizes(), vec![0; 3]);
    let limited = Redlock::on(&fleet).args(["acquire", "--key", &key, "--limit", "2"]).run();
    limited.expect(0);
    Redlock::on(&fleet)
        .args(["acquire", "--shared", "-n", "--key", &key])
        .run()
        .expect(64)
        .stderr_has("--shared");
    Redlock::on(&fleet).args(["release", "--key", &key, "--force"]).run().expect(0);
    let shared = Redlock::on(&fleet).args(["acquire", "--shared", "--key", &key]).run();
    shared.expect(0);
    Redlock::on(&fleet)
        .args(["acquire", "--limit", "2", "-n", "--key", &key])
        .run()
        .expect(64)
        .stderr_has("shared holders");
    // An exclusive contender is plainly busy, and says with whom.
    Redlock::on(&fleet)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(75)
        .stderr_has("shared holders");
}

#[test]
fn status_lists_shared_holders_and_force_frees_them() {
    let fleet = Fleet::start(3);
    let key = unique_key("rw-status");
    let mut tokens = Vec::new();
    let mut fences = Vec::new();
    for _ in 0..2 {
        let out = Redlock::on(&fleet).args(["acquire", "--shared", "--key", &key, "--json"]).run();
        out.expect(0);
        tokens.push(out.json()["token"].as_str().unwrap().to_owned());
        fences.push(out.json()["fence"].as_u64().unwrap());
    }
    assert!(fences[1] > fences[0], "{fences:?}");
    let out = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
    out.expect(0);
    let json = out.json();
    assert_eq!(json["shared"], true);
    let mut listed: Vec<&str> =
        json["holders"].as_array().unwrap().iter().map(|h| h["token"].as_str().unwrap()).collect();
    listed.sort_unstable();
    let mut expected: Vec<&str> = tokens.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(listed, expected);
    let table = Redlock::on(&fleet).args(["status", "--key", &key]).run();
    assert!(table.stdout.contains("2 shared holder(s)"), "{}", table.stdout);
    // A shared token extends and releases its own entry.
    Redlock::on(&fleet)
        .args(["extend", "--key", &key, "--token", &tokens[0], "--ttl", "60s"])
        .run()
        .expect(0);
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &tokens[0]]).run().expect(0);
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &tokens[0]]).run().expect(70);
    // The exclusive holder after them gets a larger fence.
    Redlock::on(&fleet).args(["release", "--key", &key, "--force"]).run().expect(0);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3]);
    assert_eq!(fleet.values(&readers_key(&key)), vec![None; 3]);
    let out = Redlock::on(&fleet).args(["acquire", "--key", &key, "--json", "-n"]).run();
    out.expect(0);
    assert!(out.json()["fence"].as_u64().unwrap() > fences[1]);
}

#[test]
fn the_builds_and_deploys_recipe_never_mixes_them() {
    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let recipe =
        crate::readme::recipe("builds-deploys").replace("shared-cache", &unique_key("cache"));
    let build_line = recipe.lines().find(|l| l.ends_with("make build")).unwrap();
    let deploy_line = recipe.lines().find(|l| l.ends_with("./deploy.sh")).unwrap();
    let (build, deploy) = (dir.path().join("build.sh"), dir.path().join("deploy.sh"));
    std::fs::write(&build, rw_section(dir.path(), "shared", "0.5")).unwrap();
    std::fs::write(&deploy, rw_section(dir.path(), "exclusive", "0.3")).unwrap();
    let build_cmd = build_line.replace("make build", &format!("sh {}", build.display()));
    let deploy_cmd = deploy_line.replace("./deploy.sh", &format!("sh {}", deploy.display()));
    let mut children: Vec<_> = (0..3).map(|_| crate::readme::sh(&fleet, &build_cmd)).collect();
    children.push(crate::readme::sh(&fleet, &deploy_cmd));
    children.extend((0..3).map(|_| crate::readme::sh(&fleet, &build_cmd)));
    for child in children {
        let out = crate::readme::finished(child);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let audit = rw_audit(dir.path());
    assert_eq!((audit.shared, audit.exclusive), (6, 1), "{audit:?}");
    assert!(audit.most_shared >= 2, "the builds never ran side by side: {audit:?}");
}

#[test]
fn a_nested_run_inside_a_shared_hold_reenters_shared_and_refuses_exclusive() {
    let fleet = Fleet::start(1);
    let key = unique_key("rw-nested");
    let bin = bin();
    let script = format!(
        "{bin} run --shared --key {key} -- true && echo shared-ok; \
         {bin} run --key {key} --wait 5s -- true; echo \"exclusive $?\""
    );
    let out = Redlock::on(&fleet).args(["run", "--shared", "--key", &key, "-c", &script]).run();
    out.expect(0);
    assert!(out.stdout.contains("shared-ok"), "{}", out.stdout);
    assert!(out.stdout.contains("exclusive 64"), "{}", out.stdout);
}

/// Issue 12: a shared waiter takes a place in the key's queue like an
/// exclusive one, so it is served in its turn: before an exclusive waiter
/// that came after it.
#[test]
fn a_shared_waiter_is_served_before_an_exclusive_waiter_that_came_later() {
    let fleet = Fleet::start(3);
    let key = unique_key("rw-order");
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order");
    let holder = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--ttl", "2s", "--", "sleep", "1.5"])
        .spawn();
    let start = Instant::now();
    while fleet.values(&lock_key(&key)).iter().flatten().count() < 3 {
        assert!(start.elapsed() < Duration::from_secs(5), "the holder never held");
        std::thread::sleep(Duration::from_millis(10));
    }
    let append = |name: &str| format!("echo {name} >> {}; sleep 0.2", order.display());
    let shared = Redlock::on(&fleet)
        .args(["run", "--shared", "--key", &key, "--ttl", "2s", "--wait", "20s"])
        .args(["-c", &append("shared")])
        .spawn();
    std::thread::sleep(Duration::from_millis(400));
    let exclusive = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--ttl", "2s", "--wait", "20s", "-c", &append("exclusive")])
        .spawn();
    holder.wait().expect(0);
    shared.wait().expect(0);
    exclusive.wait().expect(0);
    assert_eq!(std::fs::read_to_string(&order).unwrap(), "shared\nexclusive\n");
}

/// Issue 12: exclusive holders that keep coming, each queued behind the
/// last, do not starve a shared waiter: its place comes up in turn.
#[test]
fn a_shared_waiter_gets_in_while_exclusive_holders_keep_arriving() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let key = unique_key("rw-starve-shared");
    let dir = tempfile::tempdir().unwrap();
    let stream_end = Instant::now() + Duration::from_secs(10);
    // Three exclusive loopers: one holds, the others queue, and each
    // queues again as soon as it is out.
    let loopers: Vec<_> = (0..3)
        .map(|_| {
            let (urls, key) = (urls.clone(), key.clone());
            let script = rw_section(dir.path(), "exclusive", "0.15");
            std::thread::spawn(move || {
                while Instant::now() < stream_end {
                    Redlock::new(&urls)
                        .args(["run", "--key", &key, "--ttl", "2s", "--wait", "30s", "-c", &script])
                        .run()
                        .expect(0);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let start = Instant::now();
    Redlock::new(&urls)
        .args(["run", "--shared", "--key", &key, "--ttl", "2s", "--wait", "7s"])
        .args(["-c", &rw_section(dir.path(), "shared", "0.1")])
        .run()
        .expect(0);
    let waited = start.elapsed();
    assert!(waited < Duration::from_secs(4), "the shared holder waited {waited:?}");
    for l in loopers {
        l.join().unwrap();
    }
    let audit = rw_audit(dir.path());
    assert_eq!(audit.shared, 1, "{audit:?}");
}

/// Readers never wait for each other: 8 loops of 3 shared runs of a
/// 0.3 s job on 5 servers, and every reader is inside as soon as it
/// starts (no writer queues).
#[test]
fn readers_never_wait_while_only_readers_hold_the_lock() {
    let fleet = Fleet::start(5);
    let key = unique_key("rw-readers");
    let dir = tempfile::tempdir().unwrap();
    let loops = crate::limit::limit_loops(&fleet, &key, dir.path(), (8, 3, "0.3"), &["--shared"]);
    for l in loops {
        assert!(l.wait_with_output().unwrap().status.success());
    }
    let failures = std::fs::read_to_string(dir.path().join("failures")).unwrap_or_default();
    assert!(failures.is_empty(), "runs failed: {failures}");
    let (whole, used) = crate::limit::limit_usage(dir.path());
    eprintln!("24 shared runs of 0.3 s: {whole:?}, {used:.2} inside while anyone waited");
    // Three rounds of 0.3 s if nobody waits, plus the runs' own start-up;
    // a reader that waited for a pause would add hundreds of milliseconds.
    assert!(whole < Duration::from_millis(2500), "took {whole:?}");
}

/// A shared `-n` that meets shared holders with an exclusive waiter queued
/// ahead of it is busy at once, naming the shared holders (it used to
/// settle "free, another waiter's turn" for the queue's hold-up, 6 s).
#[test]
fn a_shared_no_wait_behind_a_queued_writer_is_busy_at_once() {
    let fleet = Fleet::start(3);
    let key = unique_key("rw-n-queued");
    let dir = tempfile::tempdir().unwrap();
    let held = dir.path().join("held");
    let reader = Redlock::on(&fleet)
        .args(["run", "--shared", "-k", &key, "--", "sh", "-c"])
        .args([format!("touch {}; sleep 5", held.display())])
        .spawn();
    crate::harness::wait_for_file(&held);
    let writer =
        Redlock::on(&fleet).args(["run", "-k", &key, "--wait", "1m", "--", "true"]).spawn();
    fleet.servers[0].await_waiters(&key, 1);
    let start = Instant::now();
    let out = Redlock::on(&fleet).args(["run", "--shared", "-n", "-k", &key, "--", "true"]).run();
    let took = start.elapsed();
    out.expect(75);
    assert!(out.stderr.contains("shared holders"), "{}", out.stderr);
    assert!(took < Duration::from_secs(2), "busy after {took:?}");
    reader.wait().expect(0);
    writer.wait().expect(0);
}
