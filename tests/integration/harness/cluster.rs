//! A real Redis Cluster for tests: `redis-server --cluster-enabled yes`
//! nodes (through [`RedisServer`], on free loopback ports, killed on drop)
//! joined by `redis-cli --cluster create`, with the helpers the cluster
//! tests need: which master owns a slot, and moving a slot (with its keys)
//! from one master to another the way `redis-cli --cluster reshard` does.

use std::process::Command;
use std::time::{Duration, Instant};

use super::redis::RedisServer;

/// Debian's `redis-cli` (`apt-get install redis-tools`).
pub const CLI_BINARY: &str = "/usr/bin/redis-cli";

/// The nodes' `cluster-node-timeout`: how long before a silent master is
/// failed over (short, for the failover test).
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// A running cluster: the masters first, then their replicas.
pub struct RedisCluster {
    /// Every node, masters first.
    pub nodes: Vec<RedisServer>,
    /// How many of `nodes` were created as masters.
    pub masters: usize,
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each and waits
    /// until every node says `cluster_state:ok` and agrees on the slots.
    pub fn start(masters: usize, replicas: usize) -> RedisCluster {
        RedisCluster::start_with(masters, replicas, &[])
    }

    /// [`RedisCluster::start`] with extra `redis-server` arguments on every
    /// node (e.g. [`super::redis::NO_SCRIPTS`]).
    pub fn start_with(masters: usize, replicas: usize, extra: &[&str]) -> RedisCluster {
        let timeout = NODE_TIMEOUT_MS.to_string();
        let mut args = vec!["--cluster-enabled", "yes", "--cluster-node-timeout", &timeout];
        args.extend_from_slice(extra);
        let nodes: Vec<RedisServer> =
            (0..masters * (1 + replicas)).map(|_| RedisServer::start_with(&args)).collect();
        let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        // A TLS cluster (`--tls-cluster yes` among `extra`): redis-cli
        // speaks TLS too, trusting the nodes' CA.
        let ca = extra.iter().position(|a| *a == "--tls-ca-cert-file").map(|i| extra[i + 1]);
        let tls: Vec<&str> = ca.map(|ca| vec!["--tls", "--cacert", ca]).unwrap_or_default();
        let made = Command::new(CLI_BINARY)
            .args(&tls)
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .unwrap_or_else(|e| panic!("{CLI_BINARY}: {e} (apt-get install redis-tools)"));
        assert!(made.status.success(), "cluster create: {}", String::from_utf8_lossy(&made.stdout));
        let cluster = RedisCluster { nodes, masters };
        cluster.wait_settled();
        cluster
    }

    /// Waits (at most 20 s) until every live node says `cluster_state:ok`
    /// and gives the same slot map, with each replica's link up.
    pub fn wait_settled(&self) {
        let start = Instant::now();
        loop {
            let maps: Vec<Option<Vec<(i64, i64, i64)>>> =
                self.live().map(|n| n.ok().then(|| slot_map(&n))).collect();
            let agreed = maps.iter().all(|m| m.is_some() && *m == maps[0]);
            let covered = maps[0]
                .as_ref()
                .is_some_and(|m| m.iter().map(|(a, b, _)| b - a + 1).sum::<i64>() == 16384);
            let linked = self.live().all(|n| {
                let info: String = n.server.cmd(&["INFO", "replication"]);
                !info.contains("role:slave") || info.contains("master_link_status:up")
            });
            if agreed && covered && linked {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the cluster never settled: {maps:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn live(&self) -> impl Iterator<Item = Node<'_>> {
        self.nodes.iter().filter(|n| n.is_running()).map(|server| Node { server })
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...` (`rediss+cluster://`
    /// for TLS nodes): every master as a seed.
    pub fn url(&self) -> String {
        let seeds: Vec<String> =
            self.nodes[..self.masters].iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let scheme = if self.nodes[0].url().starts_with("rediss:") { "rediss" } else { "redis" };
        format!("{scheme}+cluster://{}", seeds.join(","))
    }

    /// The node that masters `slot` now, as the first live node says.
    pub fn master_of(&self, slot: u16) -> &RedisServer {
        let node = self.live().next().expect("a live node");
        let port = slot_map(&node)
            .into_iter()
            .find(|(a, b, _)| (*a..=*b).contains(&i64::from(slot)))
            .map(|(_, _, port)| port)
            .unwrap_or_else(|| panic!("no master for slot {slot}"));
        self.nodes.iter().find(|n| i64::from(n.port) == port).expect("the master is ours")
    }

    /// The masters now, in slot order.
    pub fn current_masters(&self) -> Vec<&RedisServer> {
        let node = self.live().next().expect("a live node");
        let mut out: Vec<&RedisServer> = Vec::new();
        for (_, _, port) in slot_map(&node) {
            let n = self.nodes.iter().find(|n| i64::from(n.port) == port).expect("ours");
            if !out.iter().any(|o| o.port == n.port) {
                out.push(n);
            }
        }
        out
    }

    /// Moves `slot` and its keys to `to`, as `redis-cli --cluster reshard`
    /// does: IMPORTING on `to`, MIGRATING on the owner, `MIGRATE` of every
    /// key (TTLs kept), then `SETSLOT NODE` on every master.
    pub fn move_slot(&self, slot: u16, to: &RedisServer) {
        let from = self.master_of(slot);
        assert_ne!(from.port, to.port, "slot {slot} is already there");
        let (from_id, to_id): (String, String) =
            (from.cmd(&["CLUSTER", "MYID"]), to.cmd(&["CLUSTER", "MYID"]));
        let slot = slot.to_string();
        let _: String = to.cmd(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]);
        let _: String = from.cmd(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]);
        let keys: Vec<String> = from.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, "1000"]);
        if !keys.is_empty() {
            let port = to.port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: String = from.cmd(&args);
        }
        for node in [to, from] {
            let _: String = node.cmd(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
        }
        for node in self.current_masters() {
            if node.port != to.port && node.port != from.port {
                let _: String = node.cmd(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
            }
        }
        self.wait_settled();
    }

    /// The number of keys on each master, grant records aside
    /// ([`kept_keys`]).
    pub fn dbsizes(&self) -> Vec<i64> {
        self.current_masters().iter().map(|n| kept_keys(n)).collect()
    }

    /// Waits (at most `limit`) until no master holds a key.
    pub fn wait_empty(&self, limit: Duration) {
        self.wait_keys(0, limit);
    }

    /// Waits (at most `limit`) until the masters hold `total` keys in all
    /// (a `run` leaves its history entry, kept for days).
    pub fn wait_keys(&self, total: i64, limit: Duration) {
        let start = Instant::now();
        while self.dbsizes().iter().sum::<i64>() != total {
            assert!(start.elapsed() < limit, "keys on the masters: {:?}", self.dbsizes());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The keys on `node`, but for grant records (`redlock:{KEY}:last`,
/// src/lock/record.rs), which outlive a lock by design for at most
/// `RECORD_LIFE` (20 s) when they hold no tick: their expiry is checked
/// here instead.
pub fn kept_keys(node: &RedisServer) -> i64 {
    let keys: Vec<String> = node.cmd(&["KEYS", "*"]);
    let mut n = 0;
    for k in keys {
        if k.starts_with("redlock:{") && (k.ends_with("}:last") || k.contains("}:last:")) {
            let pttl = node.pttl(&k);
            assert!(pttl > 0 && pttl <= 20_000, "{k}: PTTL {pttl}");
        } else {
            n += 1;
        }
    }
    n
}

/// One node, for the settling checks.
struct Node<'a> {
    server: &'a RedisServer,
}

impl Node<'_> {
    fn ok(&self) -> bool {
        self.server.cmd::<String>(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
    }
}

/// `CLUSTER SLOTS` of `node` as (first, last, master port), sorted.
fn slot_map(node: &Node<'_>) -> Vec<(i64, i64, i64)> {
    let reply: redis::Value = node.server.cmd(&["CLUSTER", "SLOTS"]);
    let redis::Value::Array(ranges) = reply else { panic!("CLUSTER SLOTS: {reply:?}") };
    let mut out: Vec<(i64, i64, i64)> = ranges
        .iter()
        .map(|r| match r {
            redis::Value::Array(f) => match (&f[0], &f[1], &f[2]) {
                (redis::Value::Int(a), redis::Value::Int(b), redis::Value::Array(m)) => {
                    let redis::Value::Int(port) = m[1] else { panic!("port: {m:?}") };
                    (*a, *b, port)
                }
                other => panic!("CLUSTER SLOTS entry: {other:?}"),
            },
            other => panic!("CLUSTER SLOTS entry: {other:?}"),
        })
        .collect();
    out.sort();
    out
}
