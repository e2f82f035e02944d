//! `REDLOCK_TEST_PORTS`: every port the harness listens on (servers,
//! Sentinels, proxies, silent listeners) stays in the caller's range.

use std::process::Command;

use crate::harness::proxy::Proxy;
use crate::harness::redis::{PORTS_VAR, listen};
use crate::harness::{Fleet, Redlock, unique_key};

/// The range the child run is confined to: far from the kernel's
/// ephemeral ports (32768-60999 by default on Linux).
const RANGE: (u16, u16) = (21_000, 21_999);

/// Run by [`the_harness_keeps_to_redlock_test_ports`] with the range set.
#[test]
#[ignore = "run by the_harness_keeps_to_redlock_test_ports with REDLOCK_TEST_PORTS set"]
fn ports_in_range_child() {
    let raw = std::env::var(PORTS_VAR).expect("run with REDLOCK_TEST_PORTS");
    let fleet = Fleet::start(2);
    let proxy = Proxy::start(fleet.servers[0].port);
    let silent = listen();
    let ports = [
        fleet.servers[0].port,
        fleet.servers[1].port,
        proxy.port,
        silent.local_addr().unwrap().port(),
    ];
    for port in ports {
        assert!((RANGE.0..=RANGE.1).contains(&port), "port {port} outside {PORTS_VAR}={raw}");
    }
    Redlock::on(&fleet)
        .args(["run", "-n", "--key", &unique_key("ports"), "--", "true"])
        .run()
        .expect(0);
}

#[test]
fn the_harness_keeps_to_redlock_test_ports() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ports::ports_in_range_child", "--ignored", "--nocapture"])
        .env(PORTS_VAR, format!("{}-{}", RANGE.0, RANGE.1))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the child run failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
