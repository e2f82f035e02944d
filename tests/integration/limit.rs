//! `--limit N`: at most N holders at once, exactly, by N places that are
//! each an ordinary Redlock lock (src/slots.rs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::ledger::{audit, section};
use crate::harness::{
    Fleet, Redlock, bin, lock_key, pid_in, process_alive, unique_key, wait_for_file,
};

/// The server-side name of place `slot` of `key`, from the README: place 1
/// is the lock key, place S the companion `redlock:{KEY}:slot:S`.
fn slot_key(key: &str, slot: u32) -> String {
    if slot == 1 { lock_key(key) } else { format!("{}:slot:{slot}", lock_key(key)) }
}

#[test]
fn twelve_contenders_with_limit_three_never_exceed_three_while_servers_restart() {
    let mut fleet = Fleet::start(5);
    let urls = fleet.urls();
    let key = unique_key("limit3");
    let dir = tempfile::tempdir().unwrap();
    let script = section(dir.path(), "0.3");
    let deadline = Instant::now() + Duration::from_secs(12);
    let codes: Arc<Mutex<BTreeMap<i32, usize>>> = Arc::default();
    let contenders: Vec<_> = (0..12)
        .map(|_| {
            let (urls, key, script, codes) =
                (urls.clone(), key.clone(), script.clone(), Arc::clone(&codes));
            std::thread::spawn(move || {
                while Instant::now() < deadline {
                    let out = Redlock::new(&urls)
                        .args(["--node-timeout", "200ms", "run", "--key", &key, "--ttl", "2s"])
                        .args(["--limit", "3", "--wait", "20s", "-c", &script])
                        .run();
                    if ![0, 69, 70, 75].contains(&out.code()) {
                        out.fail("exited with an undocumented code");
                    }
                    *codes.lock().unwrap().entry(out.code()).or_default() += 1;
                }
            })
        })
        .collect();
    // Two of five servers killed (losing every key) and brought back only
    // after the TTL has passed: Redlock's delayed restart.
    for pair in [[0, 1], [3, 4]] {
        std::thread::sleep(Duration::from_secs(2));
        for i in pair {
            fleet.servers[i].stop();
        }
        std::thread::sleep(Duration::from_millis(2500));
        for i in pair {
            fleet.servers[i].start_again();
        }
    }
    for c in contenders {
        c.join().unwrap();
    }
    let (most, sections) = audit(dir.path());
    eprintln!("limit 3: {sections} sections, at most {most} inside, codes {:?}", codes.lock());
    assert!(most <= 3, "{most} holders inside at once with --limit 3");
    assert_eq!(most, 3, "never 3 inside at once: the limit admits fewer than 3");
    assert!(sections >= 20, "only {sections} sections");
}

/// The trap of per-server sets, by hand: with 3 servers and N = 2, holders
/// on {A,B} and {B,C}; a set-based semaphore would admit a third on
/// {A,C} (each set holds 2). Here the third finds each place held on one
/// of its two servers, so it holds no place on a quorum and is refused.
/// Waits until the vote that `token`'s won round sent to `server` while it
/// was hung has landed on `place` (a won round lets it land), at most 10 s,
/// and deletes it: the holder then holds the place on exactly the others.
fn take_back_late_vote(server: &crate::harness::RedisServer, place: &str, token: &str) {
    let start = Instant::now();
    while server.get(place).as_deref() != Some(token) {
        assert!(start.elapsed() < Duration::from_secs(10), "no late vote on {place}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let _: i64 = server.cmd(&["DEL", place]);
}

#[test]
fn the_third_holder_on_a_c_is_refused() {
    let fleet = Fleet::start(3);
    let key = unique_key("pairs");
    let acquire = |extra: &[&str]| {
        Redlock::on(&fleet)
            .args(["--node-timeout", "200ms", "acquire", "--key", &key, "--limit", "2"])
            .args(["--ttl", "60s", "--json"])
            .args(extra)
            .run()
    };
    let [a, b, c] = [&fleet.servers[0], &fleet.servers[1], &fleet.servers[2]];
    c.hang();
    let first = acquire(&["-n"]);
    c.resume();
    first.expect(0);
    assert_eq!(first.json()["slot"], 1);
    let first = first.json()["token"].as_str().unwrap().to_owned();
    take_back_late_vote(c, &slot_key(&key, 1), &first);
    a.hang();
    let second = acquire(&["-n"]);
    a.resume();
    second.expect(0);
    assert_eq!(second.json()["slot"], 2);
    let second = second.json()["token"].as_str().unwrap().to_owned();
    take_back_late_vote(a, &slot_key(&key, 2), &second);
    assert_eq!(a.get(&slot_key(&key, 1)).as_deref(), Some(first.as_str()));
    assert_eq!(c.get(&slot_key(&key, 2)).as_deref(), Some(second.as_str()));
    b.hang();
    let third = acquire(&["-n"]);
    b.resume();
    assert_ne!(third.code(), 0, "a third holder with --limit 2");
    third.stderr_has("no holder has a quorum");
    for s in &fleet.servers {
        for slot in [1, 2] {
            let v = s.get(&slot_key(&key, slot));
            assert!(v.is_none() || v == Some(first.clone()) || v == Some(second.clone()), "{v:?}");
        }
    }
    // With every server up, the same third contender is plainly busy.
    acquire(&["-n"]).expect(75).stderr_has("all 2 places");
}

#[test]
fn a_limit_run_that_loses_its_place_stops_the_child_and_exits_70() {
    let fleet = Fleet::start(3);
    let key = unique_key("limit-lost");
    let dir = tempfile::tempdir().unwrap();
    let (slot_file, pid_file) = (dir.path().join("slot"), dir.path().join("pid"));
    // Place 1 taken by another holder, so the run gets place 2.
    let other = Redlock::on(&fleet).args(["acquire", "--key", &key, "--limit", "2"]).run();
    other.expect(0);
    let script = format!(
        "echo $REDLOCK_SLOT > {s}.tmp && mv {s}.tmp {s}; echo $$ > {p}; exec sleep 60",
        s = slot_file.display(),
        p = pid_file.display()
    );
    let running = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--limit", "2", "--ttl", "1s", "-c", &script])
        .spawn();
    let child = pid_in(&pid_file);
    assert_eq!(std::fs::read_to_string(&slot_file).unwrap().trim(), "2");
    for s in &fleet.servers {
        let _: () = s.cmd(&["SET", &slot_key(&key, 2), "stolen", "PX", "60000"]);
    }
    let start = Instant::now();
    let out = running.wait();
    out.expect(70);
    assert!(start.elapsed() < Duration::from_secs(5), "stopped after {:?}", start.elapsed());
    assert!(!process_alive(child), "the child outlived the lost place");
    assert_eq!(fleet.values(&slot_key(&key, 1)), vec![Some(other.line().to_owned()); 3]);
}

#[test]
fn a_holder_with_another_limit_is_refused_and_nothing_is_taken() {
    let fleet = Fleet::start(3);
    let key = unique_key("limit-mismatch");
    let tokens: Vec<String> = (1..=3)
        .map(|_| {
            let out = Redlock::on(&fleet).args(["acquire", "--key", &key, "--limit", "3"]).run();
            out.expect(0);
            out.line().to_owned()
        })
        .collect();
    let before: Vec<_> = (1..=4).map(|s| fleet.values(&slot_key(&key, s))).collect();
    for limit in ["1", "2", "4"] {
        let start = Instant::now();
        Redlock::on(&fleet)
            .args(["run", "--key", &key, "--limit", limit, "--wait", "20s", "--", "true"])
            .run()
            .expect(64)
            .stderr_has("--limit 3")
            .stderr_has(&format!("--limit {limit}"));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the wait went on: {:?}",
            start.elapsed()
        );
    }
    Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run().expect(64);
    let after: Vec<_> = (1..=4).map(|s| fleet.values(&slot_key(&key, s))).collect();
    assert_eq!(before, after, "a refused contender changed a place");
    assert_eq!(after[3], vec![None; 3], "place 4 taken");
    assert_eq!(after[0], vec![Some(tokens[0].clone()); 3]);
}

#[test]
fn limit_zero_is_a_usage_error_and_nothing_is_written() {
    let fleet = Fleet::start(1);
    let key = unique_key("limit0");
    Redlock::on(&fleet)
        .args(["run", "--key", &key, "--limit", "0", "--", "true"])
        .run()
        .expect(64)
        .stderr_has("--limit 0");
    Redlock::on(&fleet).args(["acquire", "--key", &key, "--limit", "0"]).run().expect(64);
    assert_eq!(fleet.dbsizes(), vec![0]);
}

#[test]
fn status_lists_every_place_and_force_frees_them_all() {
    let fleet = Fleet::start(3);
    let key = unique_key("limit-status");
    let mut fences = Vec::new();
    let mut tokens = Vec::new();
    for slot in 1..=2 {
        if slot == 2 {
            // One holder: its own fence is the key's counter.
            let one = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
            assert_eq!(one.json()["holders"][0]["fence"].as_u64(), Some(fences[0]));
        }
        let out =
            Redlock::on(&fleet).args(["acquire", "--key", &key, "--limit", "3", "--json"]).run();
        out.expect(0);
        let json = out.json();
        assert_eq!(json["slot"], slot);
        tokens.push(json["token"].as_str().unwrap().to_owned());
        fences.push(json["fence"].as_u64().unwrap());
    }
    assert!(fences[1] > fences[0], "fences per key, across places: {fences:?}");
    let out = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
    out.expect(0);
    let json = out.json();
    assert_eq!(json["limit"], 3);
    let holders = json["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 2, "{json}");
    for (h, (token, fence)) in holders.iter().zip(tokens.iter().zip(&fences)) {
        assert_eq!(h["token"], token.as_str());
        // Two holders share the key's counter: neither fence can be read back.
        assert!(h["fence"].is_null(), "{h} (own fence {fence})");
        assert!(h["ttl_ms"].as_u64().is_some_and(|t| t > 0));
        assert!(h["pid"].as_u64().is_some() && h["host"].is_string());
    }
    let table = Redlock::on(&fleet).args(["status", "--key", &key]).run();
    table.expect(0);
    assert!(table.stdout.contains("2 of 3 places"), "{}", table.stdout);
    assert!(table.stdout.contains(&tokens[1][..8]), "{}", table.stdout);
    // The token alone finds its place: extend and release place 2.
    Redlock::on(&fleet)
        .args(["extend", "--key", &key, "--token", &tokens[1], "--ttl", "55s"])
        .run()
        .expect(0);
    // Above the 30 s it was taken with.
    assert!(fleet.servers[0].pttl(&slot_key(&key, 2)) > 40_000);
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &tokens[1]]).run().expect(0);
    assert_eq!(fleet.values(&slot_key(&key, 2)), vec![None; 3]);
    // A place above a free place 1 is found with --limit; --force frees all.
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &tokens[0]]).run().expect(0);
    for _ in 0..3 {
        Redlock::on(&fleet).args(["acquire", "--key", &key, "--limit", "3"]).run().expect(0);
    }
    Redlock::on(&fleet).args(["release", "--key", &key, "--force"]).run().expect(0);
    for slot in 1..=3 {
        assert_eq!(fleet.values(&slot_key(&key, slot)), vec![None; 3], "place {slot}");
    }
    Redlock::on(&fleet).args(["status", "--key", &key, "--limit", "3"]).run().expect(1);
}

#[test]
fn a_waiter_takes_the_place_freed_as_soon_as_it_is_released() {
    let fleet = Fleet::start(3);
    let key = unique_key("limit-wait");
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let tokens: Vec<String> = (0..2)
        .map(|_| {
            let out = Redlock::on(&fleet).args(["acquire", "--key", &key, "--limit", "2"]).run();
            out.expect(0);
            out.line().to_owned()
        })
        .collect();
    let script = format!("echo $REDLOCK_SLOT > {r}.tmp && mv {r}.tmp {r}", r = ran.display());
    let waiter = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--limit", "2", "--wait", "30s", "-c", &script])
        .spawn();
    fleet.servers[0].await_waiters(&key, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!ran.exists(), "ran while both places were held");
    let released = Instant::now();
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &tokens[1]]).run().expect(0);
    wait_for_file(&ran);
    assert!(released.elapsed() < Duration::from_secs(2), "woke after {:?}", released.elapsed());
    assert_eq!(std::fs::read_to_string(&ran).unwrap().trim(), "2");
    waiter.wait().expect(0);
}

#[test]
fn the_backups_recipe_runs_at_most_three_at_once() {
    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let recipe = crate::readme::recipe("backups");
    assert!(recipe.contains("backup --to \"store-$REDLOCK_SLOT\""), "{recipe}");
    // The backup: a mkdir per store that fails when two share it, and a
    // count of everyone inside.
    let job = format!(
        "mkdir {d}/store-$REDLOCK_SLOT || echo shared >> {d}/overlaps; \
         ls {d} | grep -c store- >> {d}/inside; sleep 0.4; rmdir {d}/store-$REDLOCK_SLOT; \
         echo $REDLOCK_SLOT >> {d}/slots"
    );
    let script = recipe
        .replace("backups", &unique_key("backups"))
        .replace("backup --to \"store-$REDLOCK_SLOT\"", &job);
    let children: Vec<_> = (0..5).map(|_| crate::readme::sh(&fleet, &script)).collect();
    for child in children {
        let out = crate::readme::finished(child);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(!dir.path().join("overlaps").exists(), "two backups shared a store");
    let inside = std::fs::read_to_string(dir.path().join("inside")).unwrap();
    let most = inside.lines().filter_map(|l| l.trim().parse::<usize>().ok()).max().unwrap();
    assert!(most <= 3, "{most} backups at once");
    assert!(most >= 2, "the backups never ran side by side");
    let slots = std::fs::read_to_string(dir.path().join("slots")).unwrap();
    assert_eq!(slots.lines().count(), 5);
    assert!(slots.lines().all(|s| ["1", "2", "3"].contains(&s)), "{slots}");
}

/// `contenders` loops, each running `runs` times `redlock -q run --wait
/// 30s` with `mode` (`--limit 3`, `--shared`) of a `pause` job on `fleet`: each loop
/// writes `wait <ns>` before each run, and the job `in <ns>` and `out <ns>`,
/// to `dir/ledger`. Returns the loops, running.
pub fn limit_loops(
    fleet: &Fleet,
    key: &str,
    dir: &std::path::Path,
    (contenders, runs, pause): (usize, usize, &str),
    mode: &[&str],
) -> Vec<std::process::Child> {
    let d = dir.display();
    let bin = bin();
    let job = format!(
        "echo \"in $(date +%s%N)\" >> {d}/ledger; sleep {pause}; echo \"out $(date +%s%N)\" >> {d}/ledger"
    );
    let mode = mode.join(" ");
    let script = format!(
        "for i in $(seq {runs}); do echo \"wait $(date +%s%N)\" >> {d}/ledger; \
         {bin} -q run {mode} --wait 30s --key {key} -- sh -c '{job}' || echo \"failed $?\" >> {d}/failures; done"
    );
    (0..contenders)
        .map(|_| {
            crate::harness::isolate(&mut std::process::Command::new("sh"))
                .args(["-c", &script])
                .env("REDLOCK_SERVERS", fleet.urls())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// From a [`limit_loops`] ledger: the whole time from the first wait to
/// the last exit, and the time-weighted number of holders inside while
/// anyone waits.
pub fn limit_usage(dir: &std::path::Path) -> (Duration, f64) {
    let ledger = std::fs::read_to_string(dir.join("ledger")).unwrap();
    let mut events: Vec<(u128, &str)> = ledger
        .lines()
        .map(|l| {
            let (what, at) = l.split_once(' ').unwrap();
            (at.parse().unwrap(), what)
        })
        .collect();
    events.sort();
    let (mut waiting, mut inside, mut weighted, mut span) = (0i64, 0i64, 0f64, 0f64);
    for pair in events.windows(2) {
        let ((t, what), (next, _)) = (pair[0], pair[1]);
        match what {
            "wait" => waiting += 1,
            "in" => {
                waiting -= 1;
                inside += 1;
            }
            _ => inside -= 1,
        }
        if waiting > 0 {
            let dt = (next - t) as f64;
            weighted += dt * inside as f64;
            span += dt;
        }
    }
    let whole = events.last().unwrap().0 - events[0].0;
    (Duration::from_nanos(u64::try_from(whole).unwrap()), weighted / span.max(1.0))
}

#[test]
fn limit_three_keeps_three_places_busy_while_waiters_queue() {
    let fleet = Fleet::start(5);
    let key = unique_key("limit-use");
    let dir = tempfile::tempdir().unwrap();
    for child in limit_loops(&fleet, &key, dir.path(), (8, 3, "0.3"), &["--limit", "3"]) {
        assert!(child.wait_with_output().unwrap().status.success());
    }
    let failures = std::fs::read_to_string(dir.path().join("failures")).unwrap_or_default();
    assert!(failures.is_empty(), "runs failed: {failures}");
    let (whole, used) = limit_usage(dir.path());
    eprintln!(
        "24 runs of 0.3 s on 3 places: {whole:?}, {used:.2} inside on average while anyone waited"
    );
    // Full use takes 2.4 s and keeps 3 inside; a generous bound, that a
    // place left empty for a backoff step per release breaks.
    assert!(used >= 2.4, "only {used:.2} of 3 places used on average while waiters queued");
    assert!(whole < Duration::from_millis(4000), "took {whole:?}");
}
