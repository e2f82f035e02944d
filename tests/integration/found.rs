//! Bugs the fault campaign (`tests/campaign`) found, each kept as a named
//! reproduction: every test here failed before its fix.

use std::time::Duration;

use crate::harness::{Fleet, Redlock, send_signal, unique_key, wait_for_file};

/// Campaign `mixed` (seed 857004376): redlock frozen while its command ran
/// and ended by itself (exit 0), resumed after the lock's validity; its
/// guard had fired at the deadline, and redlock reported the lock lost and
/// exited 70, losing the command's own status. The guard's SIGKILL came
/// after the command had exited: its status stands.
#[test]
fn a_command_that_ended_while_redlock_was_frozen_keeps_its_status() {
    let fleet = Fleet::start(3);
    let key = unique_key("frozen-exit");
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let job = format!("touch {}; sleep 0.3; exit 3", started.display());
    let running = Redlock::on(&fleet)
        .args(["run", "--ttl", "1s", "-k", &key, "--", "sh", "-c", &job])
        .spawn();
    wait_for_file(&started);
    send_signal(running.pid(), libc::SIGSTOP);
    // The command exits 0.3 s in; the guard fires at the validity's end.
    std::thread::sleep(Duration::from_millis(2000));
    send_signal(running.pid(), libc::SIGCONT);
    running.wait().expect(3);
}
