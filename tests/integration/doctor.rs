//! `redlock doctor` against real servers: a healthy set, a server listed
//! twice, an evicting server, and an unreachable one (password redacted);
//! per server, how redlock talks to it (the command path, pub/sub) and
//! what it is (Redis or Valkey and the version, master or replica, plain,
//! Sentinel or Cluster).

use crate::harness::redis::{Build, NO_SCRIPTS};
use crate::harness::sentinel::{SERVICE, SentinelGroup};
use crate::harness::{Fleet, RedisServer, Redlock, unique_key};

/// The cells of `server`'s row in the text table, one space apart.
fn row(stdout: &str, server: &str) -> String {
    let line = stdout.lines().find(|l| l.split_whitespace().next() == Some(server));
    line.unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The JSON entry of `server`.
fn entry(json: &serde_json::Value, server: &str) -> serde_json::Value {
    let servers = json["servers"].as_array().cloned().unwrap_or_default();
    servers.into_iter().find(|s| s["server"] == server).unwrap_or_default()
}

#[test]
fn a_healthy_set_is_fit() {
    let fleet = Fleet::start(3);
    let out = Redlock::on(&fleet).args(["doctor"]).run();
    out.expect(0);
    assert!(out.stdout.contains("verdict: fit for Redlock"), "{}", out.stdout);
    let json = Redlock::on(&fleet).args(["doctor", "--json"]).run();
    json.expect(0);
    let json = json.json();
    assert_eq!(json["verdict"], "fit");
    assert_eq!(json["servers"].as_array().map(Vec::len), Some(3));
    assert_eq!(json["servers"][0]["role"], "master");
    assert!(json["servers"][0]["rtt_ms"].as_f64().is_some_and(|r| r > 0.0));
}

#[test]
fn flags_a_server_listed_twice_an_evicting_server_and_an_unreachable_one() {
    let good = RedisServer::start();
    let lru =
        RedisServer::start_with(&["--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru"]);
    let secret = "doctor-secret-991";
    let unreachable = format!("redis://:{secret}@127.0.0.1:1");
    // One URL listed twice verbatim: a configuration error the gate finds
    // before any server is asked (64, as every command refuses it).
    let twice = format!("{},{}", good.url(), good.url());
    Redlock::new(&twice).args(["doctor"]).run().expect(64).stderr_has("is listed twice");
    // Under two spellings only the servers tell: the same verdict, 64.
    let alias = good.url().replace("127.0.0.1", "localhost");
    let servers = format!("{},{alias},{},{unreachable}", good.url(), lru.url());
    // A server listed twice is an error (the lock refuses such a fleet),
    // and so is one that may evict (no vote for ticks or -n); the rest
    // warnings.
    let out = Redlock::new(&servers).args(["doctor"]).run();
    out.expect(64);
    let text = &out.stdout;
    let alias_name = good.name().replace("127.0.0.1", "localhost");
    assert!(
        text.contains(&format!("{} and {alias_name} are the same server", good.name())),
        "{text}"
    );
    assert!(text.contains(&format!("{}: maxmemory-policy allkeys-lru", lru.name())), "{text}");
    assert!(text.contains("unreachable: 127.0.0.1:1: doctor: connection refused"), "{text}");
    let json = Redlock::new(&servers).args(["doctor", "--json"]).run();
    json.expect(64);
    assert_eq!(json.json()["warnings"].as_array().map(Vec::len), Some(1));
    assert_eq!(json.json()["errors"].as_array().map(Vec::len), Some(2));
    for o in [&out, &json] {
        if o.stdout.contains(secret) || o.stderr.contains(secret) {
            o.fail("leaked the password");
        }
    }
}

#[test]
fn no_reachable_quorum_is_unavailable() {
    let fleet = Fleet::start(1);
    let servers = format!("{},redis://127.0.0.1:1,redis://127.0.0.1:2", fleet.urls());
    Redlock::new(&servers)
        .args(["doctor"])
        .run()
        .expect(69)
        .stderr_has("doctor: 1 of 3 servers answered");
}

/// The command path is what a lock operation takes, found per server: a
/// server with scripting renamed away takes WATCH/MULTI/EXEC (a note on
/// what it cannot do, not a warning), the others the scripts; Valkey shows
/// its own version.
#[test]
fn each_server_shows_its_command_path_and_its_kind_and_version() {
    let redis = RedisServer::start_build(Build::Redis7, &[]);
    let valkey = RedisServer::start_build(Build::Valkey81, &[]);
    let bare = RedisServer::start_build(Build::Redis7, NO_SCRIPTS);
    let servers = format!("{},{},{}", redis.url(), valkey.url(), bare.url());
    let out = Redlock::new(&servers).args(["doctor"]).run();
    out.expect(0);
    let text = &out.stdout;
    assert!(row(text, "SERVER").contains(" VERSION ROLE PATH PUB/SUB "), "{text}");
    for (server, kind, path) in [
        (&redis, "Redis 7.0.", "scripts"),
        (&valkey, "Valkey 8.1.", "scripts"),
        (&bare, "Redis 7.0.", "transaction"),
    ] {
        let row = row(text, &server.name());
        assert!(row.contains(kind), "{}: {kind}\n{text}", server.name());
        assert!(
            row.contains(&format!(" master {path} allowed ")),
            "{}: {path}\n{text}",
            server.name()
        );
    }
    let note = format!(
        "note: {}: refuses scripts: redlock locks there with WATCH/MULTI/EXEC",
        bare.name()
    );
    assert!(text.contains(&note) && text.contains("`--shared`"), "{text}");
    assert_eq!(text.matches("refuses scripts").count(), 1, "{text}");

    let out = Redlock::new(&servers).args(["doctor", "--json"]).run();
    out.expect(0);
    let json = out.json();
    for (server, engine, path) in [
        (&redis, "Redis 7.0.", "scripts"),
        (&valkey, "Valkey 8.1.", "scripts"),
        (&bare, "Redis 7.0.", "transaction"),
    ] {
        let s = entry(&json, &server.name());
        assert_eq!(s["path"], path, "{s}");
        assert_eq!(s["path_error"], serde_json::Value::Null, "{s}");
        assert_eq!(s["mode"], "standalone", "{s}");
        assert!(s["engine"].as_str().is_some_and(|e| e.starts_with(engine)), "{s}");
    }
}

/// An ACL user without `@scripting` takes the transaction path; one
/// without channels is refused pub/sub, which the table shows with its
/// cost; neither is a warning. One refused both scripts and `GET` (which
/// the transaction needs) has no path: a warning, not "transaction".
#[test]
fn acl_users_show_their_path_and_whether_they_may_subscribe() {
    let server = RedisServer::start();
    let users: [&[&str]; 3] = [
        &["ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-@scripting"],
        &["ACL", "SETUSER", "nochan", "on", ">pw", "~*", "resetchannels", "+@all"],
        &["ACL", "SETUSER", "noget", "on", ">pw", "~*", "&*", "+@all", "-@scripting", "-get"],
    ];
    for user in users {
        let ok: String = server.cmd(user);
        assert_eq!(ok, "OK");
    }
    let url = |user: &str| format!("redis://{user}:pw@127.0.0.1:{}", server.port);
    let name = server.name();

    let out = Redlock::new(&url("noscript")).args(["doctor"]).run();
    out.expect(0);
    assert!(row(&out.stdout, &name).contains(" master transaction allowed "), "{}", out.stdout);
    let json = Redlock::new(&url("noscript")).args(["doctor", "--json"]).run().json();
    assert_eq!(json["servers"][0]["path"], "transaction", "{json}");

    let out = Redlock::new(&url("nochan")).args(["doctor"]).run();
    out.expect(0);
    let text = &out.stdout;
    assert!(row(text, &name).contains(" master scripts refused (waiters poll) "), "{text}");
    assert!(text.contains("not woken by releases and retry on backoff alone"), "{text}");
    let json = Redlock::new(&url("nochan")).args(["doctor", "--json"]).run().json();
    assert_eq!(json["servers"][0]["pubsub"], "refused", "{json}");
    assert!(
        json["servers"][0]["pubsub_error"].as_str().is_some_and(|e| e.contains("channels")),
        "{json}"
    );
    assert_eq!(json["servers"][0]["path"], "scripts", "{json}");

    // Refused scripts and then the transaction too: the path is not
    // known, and that is a warning, never "transaction"; nothing panics.
    let out = Redlock::new(&url("noget")).args(["doctor"]).run();
    out.expect(1).stderr_lacks("panicked");
    let text = &out.stdout;
    assert!(row(text, &name).contains(" master unknown allowed "), "{text}");
    let warning =
        format!("warning: {name}: a lock operation failed there (without scripts, status");
    assert!(text.contains(&warning), "{text}");
    let json = Redlock::new(&url("noget")).args(["doctor", "--json"]).run().json();
    assert_eq!(json["servers"][0]["path"], "unknown", "{json}");
    assert!(
        json["servers"][0]["path_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("without scripts") && e.contains("'get'")),
        "{json}"
    );
}

/// A replica refuses writes and a cluster node redirects: both warned
/// about, with their role and mode in the table and the JSON.
#[test]
fn a_replica_and_a_cluster_node_are_warned_about() {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let node = RedisServer::start_with(&["--cluster-enabled", "yes"]);
    let servers = format!("{},{},{}", master.url(), replica.url(), node.url());
    let out = Redlock::new(&servers).args(["doctor"]).run();
    out.expect(1);
    let text = &out.stdout;
    assert!(row(text, &master.name()).contains(" master scripts "), "{text}");
    assert!(row(text, &replica.name()).contains(" replica "), "{text}");
    assert!(row(text, &node.name()).contains(" master (cluster) "), "{text}");
    let warned = |what: &str| text.lines().any(|l| l.starts_with("warning: ") && l.contains(what));
    assert!(
        warned(&format!("{}: role slave (a replica): it refuses writes", replica.name())),
        "{text}"
    );
    assert!(
        warned(&format!("{}: a Redis Cluster node (cluster_enabled:1)", node.name())),
        "{text}"
    );
    // The cluster node's failed status round is the same cause: one warning.
    assert_eq!(text.matches(&format!("warning: {}:", node.name())).count(), 1, "{text}");
    assert!(!text.contains(&format!("warning: {}:", master.name())), "{text}");

    let json = Redlock::new(&servers).args(["doctor", "--json"]).run().json();
    assert_eq!(entry(&json, &replica.name())["role"], "slave", "{json}");
    assert_eq!(entry(&json, &node.name())["mode"], "cluster", "{json}");
    assert_eq!(entry(&json, &master.name())["mode"], "standalone", "{json}");
}

/// A `redis+sentinel://` group shows as the master the Sentinels name,
/// with its mode.
#[test]
fn a_sentinel_group_shows_as_its_master() {
    let group = SentinelGroup::start();
    let out = Redlock::new(&group.url()).args(["doctor"]).run();
    let text = &out.stdout;
    let line = text.lines().nth(1).unwrap_or_default();
    let cells = line.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(cells.contains(" master (sentinel) scripts allowed "), "{text}");
    let json = Redlock::new(&group.url()).args(["doctor", "--json"]).run().json();
    assert_eq!(json["servers"][0]["mode"], "sentinel", "{json}");
    assert_eq!(json["servers"][0]["sentinel_service"], SERVICE, "{json}");
}

/// A Sentinel group whose master has no replica can never vote (a vote
/// through a group counts once a replica has the write): doctor says so
/// as an error, and a lock through it alone is unavailable.
#[test]
fn a_sentinel_group_without_a_replica_is_an_error() {
    let group = SentinelGroup::start_with(0, &[]);
    let url = group.url();
    let out = Redlock::new(&url).args(["doctor"]).run();
    assert_eq!(out.code(), 69, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("has no replica"), "{}", out.stdout);
    assert!(out.stdout.contains("can never vote"), "{}", out.stdout);
    assert!(out.stdout.contains("verdict: not fit"), "{}", out.stdout);
    let json = Redlock::new(&url).args(["doctor", "--json"]).run().json();
    assert_eq!(json["verdict"], "errors", "{json}");
    assert_eq!(json["sentinels"][0]["master_replicas"], 0, "{json}");
    Redlock::new(&url)
        .args(["acquire", "-n", "--key", &unique_key("no-replica")])
        .run()
        .expect(69)
        .stderr_has("0 of 1 replica(s) acknowledged");
}

/// The configuration itself is judged: 2 servers tolerate no failure (a
/// warning: no better than 1), one server tolerates none either (a note:
/// a valid choice), and servers all on this machine are said to be.
#[test]
fn the_setup_is_judged_two_servers_one_server_one_machine() {
    let fleet = Fleet::start(2);
    let json = Redlock::on(&fleet).args(["doctor", "--json"]).run();
    json.expect(1);
    let json = json.json();
    let warnings = json["warnings"].to_string();
    assert!(warnings.contains("2 servers (quorum 2) tolerate no failure"), "{json}");
    assert!(json["notes"].to_string().contains("every server is on this machine"), "{json}");
    let one = Redlock::new(&fleet.servers[0].url()).args(["doctor"]).run();
    one.expect(0);
    assert!(one.stdout.contains("note: one server: no failure is tolerated"), "{}", one.stdout);
}

/// A server started a moment ago without an append-only file has no vote
/// until no holder can rely on a key it may have lost: doctor and run say
/// when it will vote and how to make it vote at once, and neither says it
/// can never vote or that no server answered.
#[test]
fn a_freshly_started_server_votes_soon_and_the_fix_is_named() {
    let server = RedisServer::start();
    let fresh = |args: &[&str]| Redlock::new(&server.url()).distrust_restarts().args(args).run();
    let out = fresh(&["doctor"]);
    out.expect(69);
    for text in [&out.stdout, &out.stderr] {
        for wrong in ["never vote", "no server answered"] {
            if text.contains(wrong) {
                out.fail(&format!("says {wrong:?}"));
            }
        }
    }
    for fix in ["appendonly yes", "appendfsync always", "--trust-restarts", "can vote in "] {
        assert!(out.stdout.contains(fix), "{fix}: {}", out.stdout);
    }
    let key = unique_key("fresh");
    let out = fresh(&["run", "-n", "-k", &key, "--", "true"]);
    out.expect(69)
        .stderr_has("it started ")
        .stderr_lacks("restarted")
        .stderr_has("votes in ")
        .stderr_has("appendonly yes")
        .stderr_has("--trust-restarts");
}
