//! Bugs the fault campaign (`tests/campaign`) and the reviews of its
//! round found, each kept as a named reproduction: every test here failed
//! before its fix.

use std::time::Duration;

use crate::harness::proxy::{Mode, Proxy};
use crate::harness::{Fleet, Redlock, lock_key, send_signal, unique_key, wait_for_file};

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

/// The pids of `pid`'s children.
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let ppid = stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1));
        if ppid.and_then(|p| p.parse::<i32>().ok()) == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// Campaign `freeze-all` (seed 874449656): redlock, its guard and its
/// command frozen together past the lock's validity (a paused VM), then
/// resumed together: the guard killed the command at once, and redlock
/// saw the command's SIGKILL before the guard's own report of it, so it
/// exited 137 ("ended by signal 9", as if not by redlock) instead of 70.
#[test]
fn a_command_the_guard_killed_after_a_freeze_is_reported_lost() {
    let fleet = Fleet::start(1);
    for _ in 0..3 {
        let key = unique_key("freeze-all");
        let dir = tempfile::tempdir().unwrap();
        let started = dir.path().join("started");
        let job = format!("touch {}; sleep 5", started.display());
        let running = Redlock::on(&fleet)
            .args(["run", "--ttl", "1s", "-k", &key, "--", "sh", "-c", &job])
            .spawn();
        wait_for_file(&started);
        let mut all = vec![running.pid()];
        all.extend(children(running.pid()));
        let grandchildren: Vec<i32> = all[1..].iter().flat_map(|p| children(*p)).collect();
        all.extend(grandchildren);
        for p in &all {
            send_signal(*p, libc::SIGSTOP);
        }
        std::thread::sleep(Duration::from_millis(1500));
        for p in &all {
            send_signal(*p, libc::SIGCONT);
        }
        running.wait().expect(70).stderr_has("lost the lock");
    }
}

/// Review: a run that held the lock and then failed (its command not
/// found, exit 127) treated its stragglers as those of a process that held
/// nothing and cut them off after 100 ms: the release to a slow server
/// (20 ms away each way) was never sent, and that server kept the lock for
/// its TTL (3 times in 3 before the fix).
#[test]
fn a_run_that_held_the_lock_and_failed_releases_it_on_a_slow_server_too() {
    let fleet = Fleet::start(3);
    let proxy = Proxy::start(fleet.servers[2].port);
    proxy.set(Mode::Delay(Duration::from_millis(20)));
    let servers = format!("{},{},{}", fleet.servers[0].url(), fleet.servers[1].url(), proxy.url());
    let key = unique_key("held-then-failed");
    Redlock::new(&servers)
        .args(["run", "--ttl", "30s", "-k", &key, "--", "/nonexistent/command"])
        .run()
        .expect(127);
    // What the proxy still carries lands.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(fleet.values(&lock_key(&key)), vec![None; 3], "a server kept the lock");
}
