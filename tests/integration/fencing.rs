//! Fencing numbers, holder identity and the JSON event stream.

use std::time::{Duration, Instant};

use crate::harness::{Fleet, RedisServer, Redlock, fence_key, unique_key, wait_for_file};

/// Takes and releases `key`: its fence. With `--wait`, not `-n`: `-n`
/// counts a take made within one answer's latency before its start as
/// made meanwhile (the start by a server's clock is known to within that),
/// and the previous iteration's take, a few ms old, can be (an fsync of
/// `appendfsync always` on a loaded machine delays the answer).
fn acquire_fence(fleet: &Fleet, key: &str) -> u64 {
    let out = Redlock::on(fleet).args(["acquire", "--wait", "10s", "--json", "--key", key]).run();
    out.expect(0);
    let json = out.json();
    let token = json["token"].as_str().unwrap().to_owned();
    assert!(json["validity_ms"].as_u64().is_some_and(|v| v > 0));
    Redlock::on(fleet).args(["release", "--key", key, "--token", &token]).run().expect(0);
    json["fence"].as_u64().unwrap_or_else(|| out.fail("no fence"))
}

#[test]
fn two_hundred_acquisitions_draw_strictly_increasing_fences() {
    let fleet = Fleet::start(5);
    let key = unique_key("fences");
    let mut last = 0;
    for _ in 0..200 {
        let fence = acquire_fence(&fleet, &key);
        assert!(fence > last, "fence {fence} after {last}");
        last = fence;
    }
    assert_eq!(fleet.servers[0].get(&fence_key(&key)), Some(last.to_string()));
    // The counter expires: the default 30s TTL plus the 1s linger.
    let pttl = fleet.servers[0].pttl(&fence_key(&key));
    assert!(pttl > 0 && pttl <= 31_000, "counter PTTL {pttl}");
}

#[test]
fn fences_keep_increasing_while_a_minority_restarts_with_its_data() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut fleet = Fleet { servers: (0..5).map(|_| RedisServer::start_with(&aof)).collect() };
    let key = unique_key("fences-restart");
    let mut last = 0;
    let mut down: Vec<usize> = Vec::new();
    let mut restarts = 0;
    for i in 0..200 {
        if i % 8 == 0 {
            // Bring back a stopped server (from its AOF) or stop another,
            // never more than two of five at a time. With two down the next
            // event is always a restart, so 25 events hold at least 12
            // restarts whatever the coin says (a uniform pick of any server
            // gave fewer than 3 about once in 700 runs).
            if down.len() == 2 || (!down.is_empty() && fastrand::bool()) {
                let pick = down.swap_remove(fastrand::usize(..down.len()));
                fleet.servers[pick].restart();
                restarts += 1;
            } else {
                let up: Vec<usize> = (0..5).filter(|s| !down.contains(s)).collect();
                let pick = up[fastrand::usize(..up.len())];
                fleet.servers[pick].stop();
                down.push(pick);
            }
        }
        let fence = acquire_fence(&fleet, &key);
        assert!(fence > last, "fence {fence} after {last} (down: {down:?})");
        last = fence;
    }
    assert!(restarts >= 12, "only {restarts} restarts");
}

#[test]
fn status_names_the_holder_and_its_fence() {
    let fleet = Fleet::start(3);
    let key = unique_key("identity");
    let dir = tempfile::tempdir().unwrap();
    let (facts, done) = (dir.path().join("facts"), dir.path().join("done"));
    let script = format!(
        "echo \"$PPID $REDLOCK_FENCE\" > {f}.tmp && mv {f}.tmp {f}; while [ ! -e {d} ]; do sleep 0.02; done",
        f = facts.display(),
        d = done.display()
    );
    let running = Redlock::on(&fleet).args(["run", "--key", &key, "-c", &script]).spawn();
    wait_for_file(&facts);
    let facts = std::fs::read_to_string(&facts).unwrap();
    let (pid, fence) = facts.trim().split_once(' ').unwrap();
    assert_eq!(pid, running.pid().to_string(), "the child's parent is redlock");
    let out = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
    out.expect(0);
    let holder = &out.json()["holder"];
    assert_eq!(holder["pid"].as_u64().map(|p| p.to_string()).as_deref(), Some(pid));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(holder["host"], host.trim());
    assert_eq!(holder["fence"].as_u64().map(|f| f.to_string()).as_deref(), Some(fence));
    assert!(holder["held_ms"].as_u64().is_some());
    assert!(holder["acquired_at"].as_str().is_some_and(|t| t.ends_with('Z')));
    let table = Redlock::on(&fleet).args(["status", "--key", &key]).run();
    table.expect(0);
    assert!(table.stdout.contains(&format!("pid {pid} (since ")), "{}", table.stdout);
    assert!(table.stdout.contains(&format!("fence {fence}")), "{}", table.stdout);
    std::fs::write(&done, "").unwrap();
    running.wait().expect(0);
}

#[test]
fn json_events_parse_and_follow_the_documented_order() {
    let fleet = Fleet::start(3);
    let key = unique_key("events");
    let start = Instant::now();
    let out = Redlock::on(&fleet)
        .args(["-v", "--log-format", "json", "run", "--key", &key, "--ttl", "1s"])
        .args(["--", "sh", "-c", "sleep 1.2; exit 4"])
        .run();
    out.expect(4);
    let mut names: Vec<String> = Vec::new();
    for line in out.stderr.lines() {
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| out.fail(&format!("not JSON ({e}): {line}")));
        assert!(event["ts_ms"].as_u64().is_some() && event["msg"].is_string(), "{line}");
        let name = event["event"].as_str().unwrap_or_else(|| out.fail("no event name")).to_owned();
        match name.as_str() {
            "acquire_attempt" => {
                let servers = event["servers"].as_array().unwrap();
                assert_eq!(servers.len(), 3);
                assert!(servers.iter().any(|s| s["latency_ms"].as_f64().is_some()));
            }
            "acquired" => {
                assert_eq!(event["quorum"], 2);
                assert!(
                    event["fence"].as_u64().is_some() && event["validity_ms"].as_u64().is_some()
                );
            }
            "child_exited" => assert_eq!(event["exit_code"], 4),
            // A release is done once a quorum deleted; the rest land after.
            "released" => assert!(event["deleted"].as_u64().is_some_and(|n| n >= 2), "{line}"),
            _ => {}
        }
        if names.last() != Some(&name) {
            names.push(name);
        }
    }
    assert_eq!(
        names,
        ["acquire_attempt", "acquired", "child_started", "renewed", "child_exited", "released"],
        "{}",
        out.stderr
    );
    assert!(start.elapsed() < Duration::from_secs(30));
}
