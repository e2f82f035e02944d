//! A Redis Cluster node given as a server: redlock does not route by slot
//! yet (issue 14, item 4), so a lock whose slot another node owns is
//! refused at once with one line that says what the server is, never
//! waited on as if the lock were busy.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{RedisServer, Redlock};

#[test]
fn a_cluster_node_is_refused_at_once_not_waited_on() {
    let nodes: Vec<RedisServer> =
        (0..3).map(|_| RedisServer::start_with(&["--cluster-enabled", "yes"])).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
    let made = Command::new("/usr/bin/redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("/usr/bin/redis-cli (Debian package redis-tools)");
    assert!(made.status.success(), "cluster create: {}", String::from_utf8_lossy(&made.stdout));
    let start = Instant::now();
    while !nodes[0].cmd::<String>(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
        assert!(start.elapsed() < Duration::from_secs(10), "the cluster never became ok");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = nodes[0].url();
    let mut refused = 0;
    for i in 0..8 {
        let key = format!("cluster-{i}");
        let out = Redlock::new(&url).args(["acquire", "--key", &key, "--wait", "10s"]).run();
        if out.status.code() == Some(0) {
            continue; // This node owns the key's slot.
        }
        out.expect(69)
            .stderr_has("a Redis Cluster node")
            .stderr_has("cannot lock through a cluster");
        assert!(out.elapsed < Duration::from_secs(3), "waited {:?} on a redirect", out.elapsed);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        refused += 1;
    }
    // Two thirds of the slots live on the other nodes.
    assert!(refused > 0, "no key of 8 was redirected");
}
