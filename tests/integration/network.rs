//! Slow and cut-off servers, through the harness's TCP proxy.

use std::time::{Duration, Instant};

use crate::harness::proxy::{Mode, Proxy};
use crate::harness::{Fleet, Redlock, lock_key, pid_in, process_alive, unique_key, wait_for_file};

/// The fleet's servers each behind a proxy; returns the proxies and the
/// `--servers` value that goes through them.
fn proxied(fleet: &Fleet) -> (Vec<Proxy>, String) {
    let proxies: Vec<Proxy> = fleet.servers.iter().map(|s| Proxy::start(s.port)).collect();
    let urls = proxies.iter().map(Proxy::url).collect::<Vec<_>>().join(",");
    (proxies, urls)
}

#[test]
fn a_slow_minority_does_not_slow_acquisition() {
    let fleet = Fleet::start(5);
    let (proxies, urls) = proxied(&fleet);
    for p in &proxies[..2] {
        p.set(Mode::Delay(Duration::from_secs(2)));
    }
    let key = unique_key("slow");
    let out = Redlock::new(&urls)
        .args(["--node-timeout", "300ms", "--log-format", "json"])
        .args(["acquire", "-n", "--key", &key])
        .run();
    out.expect(0).within(Duration::from_secs(2));
    let acquired = out
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "acquired")
        .unwrap_or_else(|| out.fail("no acquired event"));
    // The verdict came from the three fast servers, not after the node timeout.
    let waited = acquired["waited_ms"].as_u64().unwrap();
    assert!(waited < 300, "acquisition took {waited}ms");
    assert_eq!(acquired["granted"], 3);
}

#[test]
fn a_partition_of_the_majority_stops_the_child_before_the_validity_ends() {
    let fleet = Fleet::start(3);
    let (proxies, urls) = proxied(&fleet);
    let key = unique_key("partition");
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let running = Redlock::new(&urls)
        .args(["--node-timeout", "200ms", "run", "--key", &key, "--ttl", "2s"])
        .args(["-c", &format!("echo $$ > {}; exec sleep 30", pid_file.display())])
        .spawn();
    let child = pid_in(&pid_file);
    let cut = Instant::now();
    proxies[0].set(Mode::Stall);
    proxies[1].set(Mode::Stall);
    while process_alive(child) {
        assert!(cut.elapsed() < Duration::from_secs(10), "child still runs");
        std::thread::sleep(Duration::from_millis(2));
    }
    let stopped_after = cut.elapsed();
    // The last good renewal started before the cut; its validity ends at most
    // 2s (the TTL) after it.
    assert!(stopped_after < Duration::from_secs(2), "child stopped only after {stopped_after:?}");
    let out = running.wait();
    out.expect(70).stderr_has("lost the lock");
    // The failing renewal, and the final error: no more.
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    assert!(lines[0].starts_with("redlock: renewal failed, retrying with "), "{}", out.stderr);
    assert!(lines[1].contains("could not renew in time"), "{}", out.stderr);
}

#[test]
fn dropped_connections_are_reestablished_on_the_next_renewal() {
    let fleet = Fleet::start(3);
    let (proxies, urls) = proxied(&fleet);
    let key = unique_key("dropped");
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let running = Redlock::new(&urls)
        .args(["--log-format", "json", "run", "--key", &key, "--ttl", "1s"])
        .args(["-c", &format!("touch {}; sleep 2", ready.display())])
        .spawn();
    wait_for_file(&ready);
    let before: Vec<usize> = proxies.iter().map(Proxy::accepted).collect();
    for p in &proxies {
        p.drop_connections();
    }
    let out = running.wait();
    out.expect(0);
    let after: Vec<usize> = proxies.iter().map(Proxy::accepted).collect();
    assert!(after.iter().zip(&before).all(|(a, b)| a > b), "no reconnect: {before:?} -> {after:?}");
    assert!(!out.stderr.contains("\"event\":\"lost\""), "{}", out.stderr);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None, None, None]);
}
