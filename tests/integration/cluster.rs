//! A Redis Cluster node given as a server: redlock does not route by slot
//! yet (issue 14, item 4), so a lock whose slot another node owns is
//! refused at once with one line that says what the server is, never
//! waited on as if the lock were busy. Which keys are refused is predicted
//! by [`redlock::server::cluster::key_slot`] of the lock's server-side key, checked
//! against the node's own `CLUSTER KEYSLOT` and the slots it owns.

use std::process::Command;
use std::time::{Duration, Instant};

use redlock::lock::KeyLayout;
use redlock::server::cluster::key_slot;

use crate::harness::{RedisServer, Redlock};

/// The slot ranges the node owns, from the `myself` line of `CLUSTER NODES`.
fn own_slots(node: &RedisServer) -> Vec<(u16, u16)> {
    let nodes: String = node.cmd(&["CLUSTER", "NODES"]);
    let me = nodes.lines().find(|l| l.contains("myself")).expect("a myself line");
    me.split(' ')
        .skip(8)
        .filter(|r| !r.starts_with('['))
        .map(|r| match r.split_once('-') {
            Some((a, b)) => (a.parse().expect("slot"), b.parse().expect("slot")),
            None => (r.parse().expect("slot"), r.parse().expect("slot")),
        })
        .collect()
}

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
    let owned = own_slots(&nodes[0]);
    let mut refused = 0;
    for i in 0..8 {
        let key = format!("cluster-{i}");
        let server_key = KeyLayout::Native.lock_key(&key);
        let slot = key_slot(server_key.as_bytes());
        let asked: i64 = nodes[0].cmd(&["CLUSTER", "KEYSLOT", &server_key]);
        assert_eq!(i64::from(slot), asked, "the slot of {server_key}");
        let mine = owned.iter().any(|&(a, b)| (a..=b).contains(&slot));
        let out = Redlock::new(&url).args(["acquire", "--key", &key, "--wait", "10s"]).run();
        if mine {
            out.expect(0); // This node owns the key's slot.
            continue;
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
