//! A Redis Cluster as one member of the quorum (`redis+cluster://`): each
//! lock goes to the master of its hash slot, predicted here by
//! [`redlock::server::cluster::key_slot`] of the lock's server-side key and
//! checked against the nodes' own `CLUSTER KEYSLOT` and keys; a slot moved
//! away is a failure of the member (never a vote) and the next call goes
//! to the new master; a cluster node given as a plain server is refused at
//! once with one line that says what to do.

use std::time::Duration;

use redlock::lock::{Held, KeyLayout};
use redlock::server::cluster::key_slot;
use redlock::server::{Server, ServerUrl, Tls};

use crate::harness::cluster::RedisCluster;
use crate::harness::{RedisServer, Redlock, lock_key, unique_key, wait_for_file};

/// A key of this test run whose lock lives on each master, in master order.
fn a_key_per_master(cluster: &RedisCluster, name: &str) -> Vec<(String, u16)> {
    let masters = cluster.current_masters();
    let mut found: Vec<Option<(String, u16)>> = vec![None; masters.len()];
    for i in 0.. {
        let key = unique_key(&format!("{name}-{i}"));
        let slot = key_slot(lock_key(&key).as_bytes());
        let at = masters.iter().position(|m| m.port == cluster.master_of(slot).port).expect("ours");
        if found[at].is_none() {
            found[at] = Some((key, slot));
        }
        if found.iter().all(Option::is_some) {
            break;
        }
    }
    found.into_iter().map(|k| k.expect("found")).collect()
}

/// A library fleet of `urls` with the node timeout `timeout`, for tests
/// that must hold one connection across a change of the cluster.
fn library_fleet(urls: &[String], quorum: usize, timeout: Duration) -> redlock::lock::Fleet {
    let servers = urls
        .iter()
        .map(|u| Server::new(ServerUrl::parse(u).expect("a URL"), timeout, &Tls::default()))
        .collect::<Result<Vec<_>, _>>()
        .expect("servers");
    // Started a moment ago: trusted, as the harness trusts them.
    redlock::lock::Fleet::new(servers, quorum, 0.01).with_restart_window(None)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// Waits until the lock `key`'s keys are gone from the masters but for its
/// run history (kept for days), which is beside the lock on its master.
fn left_only_the_history(cluster: &RedisCluster, key: &str) {
    cluster.wait_keys(1, Duration::from_secs(10));
    let history = KeyLayout::Native.history_key(key);
    let slot = key_slot(history.as_bytes());
    let len: i64 = cluster.master_of(slot).cmd(&["LLEN", &history]);
    assert!(len > 0, "the history {history} is on the lock's master");
}

#[test]
fn each_lock_goes_to_the_master_of_its_slot() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let keys = a_key_per_master(&cluster, "route");
    let mut tokens = Vec::new();
    for (key, slot) in &keys {
        let master = cluster.master_of(*slot);
        let asked: i64 = master.cmd(&["CLUSTER", "KEYSLOT", &lock_key(key)]);
        assert_eq!(i64::from(*slot), asked, "the slot of {}", lock_key(key));
        let out = Redlock::new(&url).args(["acquire", "-n", "--key", key, "--ttl", "2s"]).run();
        out.expect(0);
        let token = out.line().to_owned();
        assert_eq!(master.get(&lock_key(key)).as_deref(), Some(token.as_str()), "on its master");
        Redlock::new(&url).args(["acquire", "-n", "--key", key]).run().expect(75);
        Redlock::new(&url)
            .args(["extend", "--key", key, "--token", &token, "--ttl", "3s"])
            .run()
            .expect(0);
        assert!(master.pttl(&lock_key(key)) > 2_000, "extended on its master");
        let status = Redlock::new(&url).args(["status", "--key", key, "--json"]).run();
        status.expect(0);
        let json = status.json();
        assert_eq!(json["quorum"], 1);
        assert_eq!(json["servers"].as_array().map(Vec::len), Some(1), "one member: {json}");
        assert_eq!(json["holder"]["token"], token.as_str());
        tokens.push(token);
    }
    // Each master holds exactly its own lock (and its fence counter).
    for m in cluster.current_masters() {
        assert_eq!(crate::harness::cluster::kept_keys(m), 2, "master {}", m.port);
    }
    // A key with braces: routed by the slot of its server-side name
    // (`redlock:{%7Bx%7D...}`), not of the key as typed (`{x}...`, whose tag
    // is `x`), which here is another master's.
    let braced = (0..)
        .map(|i| format!("{{x}}{}", unique_key(&format!("braced-{i}"))))
        .find(|k| {
            cluster.master_of(key_slot(k.as_bytes())).port
                != cluster.master_of(key_slot(lock_key(k).as_bytes())).port
        })
        .expect("a key whose two slots differ");
    let out = Redlock::new(&url).args(["acquire", "-n", "--key", &braced, "--ttl", "1s"]).run();
    out.expect(0);
    let master = cluster.master_of(key_slot(lock_key(&braced).as_bytes()));
    assert_eq!(master.get(&lock_key(&braced)).as_deref(), Some(out.line()));
    for ((key, _), token) in keys.iter().zip(&tokens) {
        Redlock::new(&url).args(["release", "--key", key, "--token", token]).run().expect(0);
        Redlock::new(&url).args(["status", "--key", key]).run().expect(1);
    }
    // The fence counters expire one linger after their TTL.
    cluster.wait_empty(Duration::from_secs(10));
}

#[test]
fn a_cluster_is_one_member_beside_plain_servers() {
    let cluster = RedisCluster::start(3, 0);
    let mut plain = [RedisServer::start(), RedisServer::start()];
    let servers = format!("{},{},{}", cluster.url(), plain[0].url(), plain[1].url());
    // One cluster URL, however many seeds, is one member of three: quorum 2.
    Redlock::new(&servers)
        .args(["--quorum", "4", "status", "--key", "k"])
        .run()
        .expect(64)
        .stderr_has("3 server(s)");
    // A key whose slot is not on the master of slot 0 nor on the first seed.
    let (key, _) = a_key_per_master(&cluster, "mixed").pop().expect("a key");
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let script =
        format!("touch {}; while [ ! -e {} ]; do sleep 0.02; done", ready.display(), go.display());
    let running =
        Redlock::new(&servers).args(["run", "--key", &key, "--ttl", "1s", "-c", &script]).spawn();
    wait_for_file(&ready);
    let slot = key_slot(lock_key(&key).as_bytes());
    let master = cluster.master_of(slot);
    let token = master.get(&lock_key(&key)).expect("the cluster member holds it");
    assert_eq!(plain[0].get(&lock_key(&key)), Some(token.clone()));
    // With one plain server gone, the lock lives on the cluster's vote:
    // three renewal periods with the cluster and one plain server.
    plain[1].stop();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(master.get(&lock_key(&key)), Some(token), "renewed on the cluster");
    std::fs::write(&go, "").unwrap();
    running.wait().expect(0);
    assert_eq!(master.get(&lock_key(&key)), None, "released on the cluster");
    left_only_the_history(&cluster, &key);
}

/// The heart of the safety argument: once the lock's slot has moved, the
/// old master's answer (MOVED) is a failure of the member, not a vote: an
/// extend through it is "unavailable", never "not held" (which would call
/// the lock lost); the connection is dropped, and the next call goes to
/// the new master, which got the key with the slot.
#[test]
fn a_moved_slot_is_a_failure_never_a_vote_then_the_new_master() {
    let cluster = RedisCluster::start(3, 0);
    let key = unique_key("moved");
    let slot = key_slot(lock_key(&key).as_bytes());
    let out =
        Redlock::new(&cluster.url()).args(["acquire", "-n", "--key", &key, "--ttl", "30s"]).run();
    out.expect(0);
    let token = out.line().to_owned();
    let old = cluster.master_of(slot).port;
    // A node timeout long enough that no re-confirmation happens between
    // the move and the next call: the old connection is still in use.
    let fleet = library_fleet(&[cluster.url()], 1, Duration::from_secs(20));
    let rt = runtime();
    rt.block_on(async {
        let lock =
            fleet.extend(&key, Held::of(&token), Duration::from_secs(30)).await.expect("extended");
        assert_eq!(lock.granted, (1, 1));
        let to = cluster.current_masters().into_iter().find(|m| m.port != old).expect("another");
        cluster.move_slot(slot, to);
        assert_eq!(to.get(&lock_key(&key)).as_deref(), Some(token.as_str()), "moved with its slot");
        match fleet.extend(&key, Held::of(&token), Duration::from_secs(30)).await {
            Err(redlock::error::Error::Unavailable { what, failures, .. }) => {
                let text = failures.to_string();
                assert!(text.contains("MOVED") && text.contains("not counted"), "{what}: {text}");
            }
            other => panic!("an extend through the old master: {other:?}"),
        }
        let lock = fleet
            .extend(&key, Held::of(&token), Duration::from_secs(30))
            .await
            .expect("the new master");
        assert_eq!(lock.granted, (1, 1));
        // Once a node timeout has passed, the owner is confirmed again
        // before a call: a slot moved meanwhile costs no failed call.
        let quick = library_fleet(&[cluster.url()], 1, Duration::from_millis(300));
        quick.extend(&key, Held::of(&token), Duration::from_secs(30)).await.expect("extended");
        let third = cluster
            .current_masters()
            .into_iter()
            .find(|m| m.port != old && m.port != to.port)
            .expect("a third master");
        cluster.move_slot(slot, third);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let lock = quick
            .extend(&key, Held::of(&token), Duration::from_secs(30))
            .await
            .expect("confirmed again");
        assert_eq!(lock.granted, (1, 1));
        quick.release(&key, Held::of(&token)).await.expect("released");
        quick.drain().await;
    });
    assert_eq!(cluster.master_of(slot).get(&lock_key(&key)), None);
}

/// `run` holds through a slot migration (`redis-cli --cluster reshard`
/// does the same steps): its renewals end on the new master, and a
/// contender, asking the cluster afresh, is routed there and refused.
#[test]
fn a_run_holds_through_a_slot_migration() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let key = unique_key("reshard");
    let slot = key_slot(lock_key(&key).as_bytes());
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let script =
        format!("touch {}; while [ ! -e {} ]; do sleep 0.02; done", ready.display(), go.display());
    let running =
        Redlock::new(&url).args(["run", "--key", &key, "--ttl", "2s", "-c", &script]).spawn();
    wait_for_file(&ready);
    let old = cluster.master_of(slot).port;
    let to = cluster.current_masters().into_iter().find(|m| m.port != old).expect("another");
    cluster.move_slot(slot, to);
    // Longer than the TTL: held only if renewals reach the new master.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(to.get(&lock_key(&key)).is_some(), "renewed on the new master");
    Redlock::new(&url)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(75)
        .stderr_has("is held by");
    std::fs::write(&go, "").unwrap();
    running.wait().expect(0);
    assert_eq!(to.get(&lock_key(&key)), None, "released on the new master");
    left_only_the_history(&cluster, &key);
}

#[test]
fn two_contenders_never_both_hold() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let key = unique_key("contend");
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("inside");
    // Each run checks that nobody else is inside, then stays a moment.
    let script = format!(
        "if [ -e {p} ]; then echo overlap; exit 3; fi; touch {p}; sleep 0.1; rm {p}",
        p = inside.display()
    );
    let runs: Vec<_> = (0..6)
        .map(|_| {
            Redlock::new(&url)
                .args(["run", "--key", &key, "--ttl", "2s", "--wait", "30s", "-c", &script])
                .spawn()
        })
        .collect();
    for run in runs {
        run.wait().expect(0).stderr_lacks("overlap");
    }
    left_only_the_history(&cluster, &key);
}

#[test]
fn doctor_names_the_cluster_and_is_fit() {
    let cluster = RedisCluster::start(3, 0);
    let out = Redlock::new(&cluster.url()).args(["doctor"]).run();
    out.expect(0).stderr_lacks("cluster_enabled");
    assert!(out.stdout.contains("cluster 127.0.0.1:"), "{}", out.stdout);
    assert!(out.stdout.contains("3 masters"), "{}", out.stdout);
    assert!(!out.stdout.contains("cannot lock through"), "{}", out.stdout);
    let json = Redlock::new(&cluster.url()).args(["doctor", "--json"]).run();
    json.expect(0);
    let json = json.json();
    assert_eq!(json["clusters"][0]["masters"], 3, "{json}");
    assert_eq!(json["clusters"][0]["slots_covered"], 16384, "{json}");
}

#[test]
fn bad_cluster_urls_are_one_line_usage_errors() {
    for (url, says) in [
        ("redis+cluster://", "no node"),
        ("redis+cluster://127.0.0.1:x", "bad node address"),
        ("redis+cluster://127.0.0.1:7000/3", "database 0 only"),
        ("redis+cluster://:secret@127.0.0.1:7000?x=1", "no parameters"),
    ] {
        let out = Redlock::new(url).args(["status", "--key", "k"]).run();
        out.expect(64).stderr_has(says).stderr_lacks("secret");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    // A cluster URL is one member: a quorum of two is more than it has.
    Redlock::new("redis+cluster://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3")
        .args(["--quorum", "2", "status", "--key", "k"])
        .run()
        .expect(64)
        .stderr_has("1 server(s)");
    // A plain server is not a cluster: it says so, at once, as a configuration error.
    let plain = RedisServer::start();
    let url = format!("redis+cluster://127.0.0.1:{}", plain.port);
    let out = Redlock::new(&url).args(["acquire", "--key", "k", "--wait", "10s"]).run();
    out.expect(69).stderr_has("not a cluster node").stderr_has("use redis://");
    assert!(out.elapsed < Duration::from_secs(3), "waited {:?}", out.elapsed);
}

#[test]
fn raw_keys_through_a_cluster_share_the_slot_or_are_refused() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let key = format!("{{{}}}.job", unique_key("raw"));
    let out =
        Redlock::new(&url).args(["--raw-key", "acquire", "-n", "--key", &key, "--ttl", "1s"]).run();
    out.expect(0);
    let slot = key_slot(key.as_bytes());
    assert_eq!(cluster.master_of(slot).get(&key).as_deref(), Some(out.line()));
    let fence = KeyLayout::Raw.fence_key(&key);
    assert!(cluster.master_of(slot).get(&fence).is_some(), "the counter beside it: {fence}");
    let out = Redlock::new(&url).args(["--raw-key", "acquire", "--key", "a}b"]).run();
    out.expect(64).stderr_has("another slot");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    cluster.wait_empty(Duration::from_secs(10));
}

/// A cluster node given as a plain `redis://` server: a lock whose slot
/// another node owns is refused at once, with one line that says to list
/// the cluster as `redis+cluster://`, never waited on as if it were busy.
#[test]
fn a_cluster_node_given_as_a_plain_server_is_refused_with_what_to_do() {
    let cluster = RedisCluster::start(3, 0);
    let node = &cluster.nodes[0];
    let url = node.url();
    let mut refused = 0;
    for i in 0..8 {
        let key = unique_key(&format!("plain-{i}"));
        let slot = key_slot(lock_key(&key).as_bytes());
        let asked: i64 = node.cmd(&["CLUSTER", "KEYSLOT", &lock_key(&key)]);
        assert_eq!(i64::from(slot), asked, "the slot of {}", lock_key(&key));
        let out = Redlock::new(&url)
            .args(["acquire", "--key", &key, "--wait", "10s", "--ttl", "1s"])
            .run();
        if cluster.master_of(slot).port == node.port {
            out.expect(0); // This node owns the key's slot.
            continue;
        }
        out.expect(69).stderr_has("a Redis Cluster node").stderr_has("redis+cluster://");
        assert!(out.elapsed < Duration::from_secs(3), "waited {:?} on a redirect", out.elapsed);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        refused += 1;
    }
    // Two thirds of the slots live on the other nodes.
    assert!(refused > 0, "no key of 8 was redirected");
}

/// A failover inside the cluster: the master of the lock's slot is killed
/// while a `run` holds the lock through the cluster and two plain servers.
/// Until a replica takes over, the cluster member fails (its vote is not
/// there, the plain servers keep the quorum); once it has, the renewals
/// reach the promoted replica, which had the lock by replication.
#[test]
fn a_failover_in_the_cluster_moves_the_vote_to_the_promoted_replica() {
    let mut cluster = RedisCluster::start(3, 1);
    let plain = [RedisServer::start(), RedisServer::start()];
    let servers = format!("{},{},{}", cluster.url(), plain[0].url(), plain[1].url());
    let key = unique_key("failover");
    let slot = key_slot(lock_key(&key).as_bytes());
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let script =
        format!("touch {}; while [ ! -e {} ]; do sleep 0.02; done", ready.display(), go.display());
    // A TTL longer than the failover takes (about 2 s with a node timeout
    // of 1 s), so that the replica still has the lock when promoted.
    let running =
        Redlock::new(&servers).args(["run", "--key", &key, "--ttl", "5s", "-c", &script]).spawn();
    wait_for_file(&ready);
    let old = cluster.master_of(slot).port;
    let token = cluster.master_of(slot).get(&lock_key(&key)).expect("held on the cluster");
    let at = cluster.nodes.iter().position(|n| n.port == old).expect("ours");
    cluster.nodes[at].stop();
    cluster.wait_settled();
    let new = cluster.master_of(slot);
    assert_ne!(new.port, old, "a replica took over");
    // The promoted replica had the lock; a renewal there raises its TTL.
    let first = new.pttl(&lock_key(&key));
    assert!(first > 0, "the promoted replica has the lock: {first}");
    let start = std::time::Instant::now();
    while new.pttl(&lock_key(&key)) <= first {
        assert!(start.elapsed() < Duration::from_secs(10), "never renewed on {}", new.port);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(new.get(&lock_key(&key)), Some(token));
    std::fs::write(&go, "").unwrap();
    running.wait().expect(0);
    assert_eq!(new.get(&lock_key(&key)), None, "released on the new master");
}

/// The README's smallest ACL, plus `+cluster|slots`, locks through a
/// cluster; without it redlock says at once what to grant.
#[test]
fn an_acl_user_needs_cluster_slots_and_is_told_so() {
    let cluster = RedisCluster::start(3, 0);
    let acl = crate::readme::recipe("acl");
    let words: Vec<&str> = acl.split_whitespace().collect();
    for node in &cluster.nodes {
        let _: String = node.cmd(&words);
    }
    let url = cluster.url().replace("redis+cluster://", "redis+cluster://locker:CHANGE-ME@");
    let key = format!("lock-{}", unique_key("acl"));
    let out = Redlock::new(&url).args(["acquire", "--key", &key, "--wait", "10s"]).run();
    out.expect(69).stderr_has("grant +cluster|slots");
    assert!(out.elapsed < Duration::from_secs(3), "waited {:?}", out.elapsed);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    for node in &cluster.nodes {
        let _: String = node.cmd(&["ACL", "SETUSER", "locker", "+cluster|slots"]);
    }
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let touch = format!("touch {}", ran.display());
    Redlock::new(&url).args(["run", "--key", &key, "--ttl", "1s", "-c", &touch]).run().expect(0);
    assert!(ran.exists());
}

/// Without scripting, each operation is `WATCH`/`MULTI`/`EXEC` on a
/// connection of its own: through a cluster, that connection goes to the
/// master of the lock's slot too (here a braced key, whose slot as typed is
/// another master's).
#[test]
fn without_scripts_the_transaction_goes_to_the_slots_master() {
    let cluster = RedisCluster::start_with(3, 0, crate::harness::redis::NO_SCRIPTS);
    let url = cluster.url();
    let mut keys: Vec<String> =
        a_key_per_master(&cluster, "noscript").into_iter().map(|k| k.0).collect();
    keys.push(
        (0..)
            .map(|i| format!("{{y}}{}", unique_key(&format!("noscript-braced-{i}"))))
            .find(|k| {
                cluster.master_of(key_slot(k.as_bytes())).port
                    != cluster.master_of(key_slot(lock_key(k).as_bytes())).port
            })
            .expect("a key whose two slots differ"),
    );
    for key in &keys {
        let master = cluster.master_of(key_slot(lock_key(key).as_bytes()));
        let out = Redlock::new(&url).args(["acquire", "-n", "--key", key, "--ttl", "1s"]).run();
        out.expect(0);
        let token = out.line().to_owned();
        assert_eq!(master.get(&lock_key(key)).as_deref(), Some(token.as_str()), "{key}");
        Redlock::new(&url).args(["acquire", "-n", "--key", key]).run().expect(75);
        Redlock::new(&url)
            .args(["extend", "--key", key, "--token", &token, "--ttl", "2s"])
            .run()
            .expect(0);
        assert!(master.pttl(&lock_key(key)) > 1_000, "extended on its master");
        Redlock::new(&url).args(["release", "--key", key, "--token", &token]).run().expect(0);
        assert_eq!(master.get(&lock_key(key)), None);
    }
    cluster.wait_empty(Duration::from_secs(10));
}

/// `--limit` places and `--shared` holders are companions of the lock key,
/// in its slot: they work through a cluster, on the lock's master.
#[test]
fn limit_places_and_shared_holders_live_in_the_locks_slot() {
    let cluster = RedisCluster::start(3, 0);
    let url = cluster.url();
    let key = unique_key("places");
    let master = cluster.master_of(key_slot(lock_key(&key).as_bytes()));
    for _ in 0..2 {
        Redlock::new(&url)
            .args(["acquire", "-n", "--key", &key, "--limit", "2", "--ttl", "1s"])
            .run()
            .expect(0);
    }
    Redlock::new(&url).args(["acquire", "-n", "--key", &key, "--limit", "2"]).run().expect(75);
    let kept = crate::harness::cluster::kept_keys(master);
    assert_eq!(kept, 3, "two places and the fence counter, on the lock's master");
    let shared = unique_key("shared");
    for _ in 0..2 {
        Redlock::new(&url)
            .args(["acquire", "-n", "--key", &shared, "--shared", "--ttl", "1s"])
            .run()
            .expect(0);
    }
    Redlock::new(&url).args(["acquire", "-n", "--key", &shared, "--ttl", "1s"]).run().expect(75);
    cluster.wait_empty(Duration::from_secs(10));
}

/// `rediss+cluster://`: TLS to every node (the seeds and the slot's
/// master), trusting a private CA, on a cluster whose bus speaks TLS too.
#[test]
fn a_tls_cluster_through_rediss_cluster() {
    let certs = crate::harness::tls::Certs::make();
    let mut args = certs.server_args("server", false);
    args.extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cluster = RedisCluster::start_with(3, 0, &args);
    let url = cluster.url();
    assert!(url.starts_with("rediss+cluster://"), "{url}");
    let ca = certs.path("ca.pem").display().to_string();
    for (key, slot) in a_key_per_master(&cluster, "tls") {
        let out = Redlock::new(&url).args(["--tls-ca", &ca, "acquire", "-n", "--key", &key]).run();
        out.expect(0);
        let master = cluster.master_of(slot);
        assert_eq!(master.get(&lock_key(&key)).as_deref(), Some(out.line()), "on its master");
        Redlock::new(&url)
            .args(["--tls-ca", &ca, "release", "--key", &key, "--token", out.line()])
            .run()
            .expect(0);
    }
    // Without the CA, the seeds' certificates are refused: a configuration
    // error, at once.
    let out = Redlock::new(&url)
        .args(["acquire", "--key", &unique_key("tls-no-ca"), "--wait", "10s"])
        .run();
    out.expect(69).stderr_has("TLS");
    assert!(out.elapsed < Duration::from_secs(3), "waited {:?}", out.elapsed);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}

/// When no seed answers the re-confirmation (here the only seed, reached
/// through a proxy, is gone), the master the connection is bound to keeps
/// no vote, although it still names itself the owner of the lock's slot:
/// a master cut off from its cluster does so until it is replaced. As a
/// Sentinel group's master, it votes only while a majority of the listed
/// nodes that find it confirm it.
#[test]
fn with_no_seed_answering_the_slots_master_keeps_no_vote() {
    let cluster = RedisCluster::start(3, 0);
    let key = unique_key("seedless");
    let slot = key_slot(lock_key(&key).as_bytes());
    let owner = cluster.master_of(slot).port;
    let other = cluster.current_masters().into_iter().find(|m| m.port != owner).expect("another");
    let proxy = crate::harness::proxy::Proxy::start(other.port);
    let out =
        Redlock::new(&cluster.url()).args(["acquire", "-n", "--key", &key, "--ttl", "5s"]).run();
    out.expect(0);
    let token = out.line().to_owned();
    let seed = format!("redis+cluster://127.0.0.1:{}", proxy.port);
    let fleet = library_fleet(&[seed], 1, Duration::from_millis(300));
    runtime().block_on(async {
        fleet.extend(&key, Held::of(&token), Duration::from_secs(5)).await.expect("extended");
        drop(proxy);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let e = fleet
            .extend(&key, Held::of(&token), Duration::from_secs(5))
            .await
            .expect_err("no vote");
        assert!(e.to_string().contains("no slot map from a majority"), "{e}");
        fleet.drain().await;
    });
    Redlock::new(&cluster.url())
        .args(["release", "--key", &key, "--token", &token])
        .run()
        .expect(0);
    cluster.wait_empty(Duration::from_secs(10));
}

#[test]
fn rediss_cluster_at_a_plain_or_silent_port_asks_whether_it_is_a_tls_port() {
    let plain = crate::harness::RedisServer::start();
    // A port that accepts connections and never says a word.
    let silent = crate::harness::redis::listen();
    let silent_port = silent.local_addr().unwrap().port();
    for port in [plain.port, silent_port] {
        let url = format!("rediss+cluster://127.0.0.1:{port}");
        Redlock::new(&url)
            .args(["--node-timeout", "300ms", "acquire", "-n", "--key", &unique_key("tls")])
            .run()
            .expect(69)
            .stderr_has("is it a TLS port?");
    }
}

/// Seeds of two different clusters behind one URL: their node IDs do not
/// overlap, so the member fails instead of taking whichever answers first,
/// and doctor says so as an error.
#[test]
fn seeds_of_two_clusters_make_the_member_fail() {
    let first = RedisCluster::start(3, 0);
    let mut second = RedisCluster::start(3, 0);
    let url = format!(
        "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
        second.nodes[0].port, first.nodes[0].port
    );
    let key = unique_key("two-clusters");
    let a = Redlock::new(&url).args(["acquire", "-n", "--key", &key, "--ttl", "30s"]).run();
    let doctor = Redlock::new(&url).args(["doctor"]).run();
    second.nodes[0].stop();
    let b = Redlock::new(&url).args(["acquire", "-n", "--key", &key, "--ttl", "30s"]).run();
    assert!(
        !(a.code() == 0 && b.code() == 0),
        "two holders: {} and {}\n{}\n{}",
        a.line(),
        b.line(),
        a.stderr,
        b.stderr
    );
    a.expect(69).stderr_has("different clusters");
    assert!(doctor.stdout.contains("error: "), "{}", doctor.stdout);
    assert!(!doctor.stdout.contains("verdict: works"), "{}", doctor.stdout);
}
