//! `redlock doctor` against real servers: a healthy set, a server listed
//! twice, an evicting server, and an unreachable one (password redacted).

use crate::harness::{Fleet, RedisServer, Redlock};

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
    let servers = format!("{},{},{},{unreachable}", good.url(), good.url(), lru.url());
    let out = Redlock::new(&servers).args(["doctor"]).run();
    out.expect(1);
    let text = &out.stdout;
    assert!(
        text.contains(&format!("{} and {} are the same server", good.name(), good.name())),
        "{text}"
    );
    assert!(text.contains(&format!("{}: maxmemory-policy allkeys-lru", lru.name())), "{text}");
    assert!(text.contains("unreachable: 127.0.0.1:1: doctor: connection refused"), "{text}");
    let json = Redlock::new(&servers).args(["doctor", "--json"]).run();
    json.expect(1);
    assert_eq!(json.json()["warnings"].as_array().map(Vec::len), Some(3));
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
