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
