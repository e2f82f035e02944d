//! "Never unguarded": a frozen, stopped or suspended redlock still stops its
//! command in time; accepted flags never stop a healthy job; `extend` never
//! shortens; a stop reaches the whole job at once; re-entry only inside the
//! holder's own process tree. (The suspend case is a unit test of the
//! supervisor with a clock moved by hand: `cmd::run`'s tests.)

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::harness::pty::Terminal;
use crate::harness::{
    Fleet, Redlock, bin, lock_key, pid_in, process_alive, read, send_signal, unique_key,
    wait_for_file, wait_gone,
};

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// The state letter of `/proc/PID/stat` (`T` stopped, `Z` zombie, ...).
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// `(pid, pgrp)` of the `redlock-guard` children of `parent`.
fn guards_of(parent: i32) -> Vec<(i32, i32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if head.ends_with("(redlock-guard") && fields.get(1) == Some(&parent.to_string().as_str()) {
            found.push((pid, fields[2].parse().unwrap()));
        }
    }
    found
}

/// Tries `acquire -n` until it succeeds; returns the wall-clock time (ns)
/// at which the successful attempt started.
fn contender_acquires(fleet: &Fleet, key: &str) -> u128 {
    let start = Instant::now();
    loop {
        let at = now_ns();
        let out = Redlock::on(fleet).args(["acquire", "-n", "--ttl", "30s", "--key", key]).run();
        if out.status.code() == Some(0) {
            return at;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the lock never became free");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A command that appends the wall-clock time in ns to `path` every 20 ms.
fn ticker(path: &Path) -> String {
    format!("while :; do date +%s%N >> {}; sleep 0.02; done", path.display())
}

/// [`ticker`] as one process that never forks, for job-control tests: a
/// shell loop that forks `date` can be caught by Ctrl-Z between vfork and
/// exec, where dash waits in the kernel for a stopped child and cannot stop
/// itself; no job-control shell sees such a job stop, with or without
/// redlock.
fn perl_ticker(path: &Path) -> String {
    format!(
        r#"perl -MTime::HiRes=sleep,time -e 'while (1) {{ open my $f, ">>", "{}"; print $f int(time*1e9), "\n"; close $f; sleep 0.02 }}'"#,
        path.display()
    )
}

/// An interactive bash at a terminal, with REDLOCK_SERVERS set, at its prompt.
fn shell(fleet: &Fleet) -> Terminal {
    let mut bash = Command::new("bash");
    crate::harness::isolate(&mut bash)
        .args(["--norc", "--noprofile", "-i"])
        .env("PS1", "$ ")
        .env("TERM", "dumb")
        .env("REDLOCK_SERVERS", fleet.urls());
    let mut term = Terminal::spawn(bash, false);
    term.expect("$ ", Duration::from_secs(10));
    term
}

/// Waits until `path` grows past `before`.
fn grows(path: &Path, before: &str) {
    let start = Instant::now();
    while read(path) == before {
        assert!(start.elapsed() < Duration::from_secs(10), "{} never grew", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Scenario 1: redlock frozen by SIGSTOP. The guard kills the command
/// before the key expires on a quorum; a contender then takes the lock, and
/// the command wrote nothing after that; on SIGCONT redlock exits 70.
/// `REDLOCK_FROZEN_RUNS=20` repeats it and prints the margins (the time from
/// the command's last write to the key's expiry on a quorum).
#[test]
fn a_frozen_redlock_s_command_dies_before_the_key_expires() {
    let runs: usize =
        std::env::var("REDLOCK_FROZEN_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
    let fleet = Fleet::start(3);
    let mut margins = Vec::new();
    for _ in 0..runs {
        let key = unique_key("frozen");
        let dir = tempfile::tempdir().unwrap();
        let writes = dir.path().join("writes");
        let holder = Redlock::on(&fleet)
            .args(["run", "--ttl", "2s", "--key", &key, "-c", &ticker(&writes)])
            .spawn();
        wait_for_file(&writes);
        send_signal(holder.pid(), libc::SIGSTOP);
        // Let a renewal already on the wire land, then read when the key
        // expires on each server; a contender can take it once a quorum
        // (2 of 3) expired.
        std::thread::sleep(Duration::from_millis(100));
        let t0 = now_ns();
        let mut expiries: Vec<u128> = fleet
            .servers
            .iter()
            // A server whose SET the winning round did not wait for may
            // not hold the key at all: free already.
            .map(|s| t0 + u128::try_from(s.pttl(&lock_key(&key)).max(0)).unwrap() * 1_000_000)
            .collect();
        expiries.sort_unstable();
        let acquired_at = contender_acquires(&fleet, &key);
        let text = read(&writes);
        let last: u128 = text.lines().last().unwrap().parse().unwrap();
        assert!(
            last < acquired_at,
            "the frozen redlock's command wrote {} ms after a contender started taking the lock",
            (last - acquired_at) / 1_000_000
        );
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(read(&writes), text, "the command still writes after the lock was taken");
        margins.push(i128::try_from(expiries[1]).unwrap() - i128::try_from(last).unwrap());
        send_signal(holder.pid(), libc::SIGCONT);
        holder.wait().expect(70).stderr_has(&format!(
            "the lock on {key} ran out of validity, and its guard killed the command"
        ));
        Redlock::on(&fleet).args(["release", "--force", "--key", &key]).run();
    }
    let ms: Vec<f64> = margins.iter().map(|m| *m as f64 / 1e6).collect();
    eprintln!("command death -> key expiry on a quorum, ms: {ms:.1?}");
    assert!(margins.iter().all(|m| *m > 0), "the command outlived the key: {ms:?}");
}

/// Scenario 2: at a terminal with `stty tostop`, redlock writes (-v) while
/// the command owns the terminal: it is not stopped by SIGTTOU, keeps
/// renewing, and its guard is in a group of its own, not stopped either.
#[test]
fn sigttou_never_stops_redlock_at_a_tostop_terminal() {
    let fleet = Fleet::start(1);
    let key = unique_key("tostop");
    let dir = tempfile::tempdir().unwrap();
    let writes = dir.path().join("writes");
    let mut cmd = Command::new(bin());
    crate::harness::isolate(&mut cmd).env("REDLOCK_SERVERS", fleet.urls()).args([
        "-v",
        "run",
        "--ttl",
        "1s",
        "--key",
        &key,
        "--",
        "sh",
        "-c",
        &ticker(&writes),
    ]);
    let mut term = Terminal::spawn(cmd, true);
    wait_for_file(&writes);
    let redlock = i32::try_from(term.child.id()).unwrap();
    // Three renewals' worth, each announced on the terminal.
    term.pump(Duration::from_millis(2500));
    assert_ne!(state(redlock), Some('T'), "redlock was stopped; the terminal:\n{}", term.screen);
    assert!(term.screen.contains("renewed"), "{}", term.screen);
    assert!(fleet.values(&lock_key(&key))[0].is_some(), "the lock lapsed: {}", term.screen);
    let guards = guards_of(redlock);
    assert_eq!(guards.len(), 1, "one guard");
    // SAFETY: getpgid only reads process state.
    let redlock_group = unsafe { libc::getpgid(redlock) };
    assert_ne!(guards[0].1, redlock_group, "the guard must not be in redlock's group");
    assert_ne!(state(guards[0].0), Some('T'), "the guard was stopped");
    term.send(b"\x03");
    let status = term.child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{}", term.screen);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None]);
}

/// Scenario 3: Ctrl-Z in an interactive shell stops the job and gives the
/// prompt back; `fg` resumes it under the renewed lock. A suspension longer
/// than the validity ends with the command killed by the guard, the lock
/// free for others, and exit 70 on `fg`.
#[test]
fn ctrl_z_suspends_the_job_and_fg_resumes_it() {
    let fleet = Fleet::start(1);
    let key = unique_key("ctrlz");
    let dir = tempfile::tempdir().unwrap();
    let writes = dir.path().join("writes");
    let mut term = shell(&fleet);
    let line = format!("{} run --ttl 2s --key {key} -- {}\n", bin(), perl_ticker(&writes));
    term.send(line.as_bytes());
    wait_for_file(&writes);

    term.send(b"\x1a");
    term.expect("Stopped", Duration::from_secs(10));
    term.expect("$ ", Duration::from_secs(10));
    let frozen = read(&writes);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read(&writes), frozen, "the job still runs after Ctrl-Z");

    term.send(b"fg\n");
    let start = Instant::now();
    while read(&writes) == frozen {
        assert!(start.elapsed() < Duration::from_secs(10), "fg did not resume the job");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Held and renewed again after the resume.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(fleet.values(&lock_key(&key))[0].is_some());

    term.send(b"\x1a");
    term.expect("Stopped", Duration::from_secs(10));
    term.expect("$ ", Duration::from_secs(10));
    // Suspended past the validity: the lock lapses and the guard kills the job.
    contender_acquires(&fleet, &key);
    let stopped = read(&writes);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(read(&writes), stopped);
    term.send(b"fg\n");
    term.expect("$ ", Duration::from_secs(10));
    term.send(b"echo status=$?\n");
    term.expect("status=70", Duration::from_secs(10));
    assert!(
        term.screen
            .contains(&format!("the lock on {key} ran out of validity, and its guard killed")),
        "{}",
        term.screen
    );
}

/// Scenario 5: flag combinations that would stop a healthy job are usage
/// errors naming the flags; the defaults run a job longer than the TTL.
#[test]
fn flags_that_would_stop_a_healthy_job_are_refused() {
    let fleet = Fleet::start(3);
    let key = unique_key("flags");
    for args in [
        vec!["--ttl", "3s", "--kill-after", "2s", "--", "sleep", "2"],
        vec!["--ttl", "3s", "--renew-every", "2500ms", "--", "sleep", "2"],
        vec!["--ttl", "15ms", "--", "sleep", "0.2"],
        vec!["--ttl", "30s", "--kill-after", "20s", "--", "true"],
    ] {
        let mut all = vec!["run", "--key", &key];
        all.extend(args);
        let out = Redlock::on(&fleet).args(&all).run();
        out.expect(64).stderr_has("do not fit").stderr_has("--kill-after");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    Redlock::on(&fleet)
        .args(["run", "--ttl", "1s", "--key", &key, "--", "sleep", "2.5"])
        .run()
        .expect(0);
}

/// Scenario 6: `extend` inside a job (the token from REDLOCK_TOKEN) with a
/// shorter TTL leaves the job's lock as long as it was.
#[test]
fn extend_never_shortens_the_lock() {
    let fleet = Fleet::start(3);
    let key = unique_key("extend");
    let dir = tempfile::tempdir().unwrap();
    let extended = dir.path().join("extended");
    let script =
        format!("{} extend --key {key} --ttl 1s && touch {}; sleep 4", bin(), extended.display());
    let holder =
        Redlock::on(&fleet).args(["run", "--ttl", "60s", "--key", &key, "-c", &script]).spawn();
    wait_for_file(&extended);
    for s in &fleet.servers {
        assert!(s.pttl(&lock_key(&key)) > 50_000, "extend --ttl 1s shortened the lock");
    }
    std::thread::sleep(Duration::from_millis(1500));
    Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run().expect(75);
    holder.wait().expect(0);
}

/// Scenario 7: a lost lock stops the whole job at once: a daemon that left
/// the command's group gets the `--on-lost` signal together with the group
/// (not only a SIGKILL after the command was reaped), and is dead when
/// redlock exits.
#[test]
fn a_stop_reaches_daemons_with_the_group() {
    let fleet = Fleet::start(1);
    let key = unique_key("daemon-stop");
    let dir = tempfile::tempdir().unwrap();
    let (daemon, termed) = (dir.path().join("daemon"), dir.path().join("termed"));
    let script = format!(
        "(setsid sh -c 'trap \"echo TERM >> {t}\" TERM; echo $$ > {d}; \
         while :; do sleep 0.02; done' &); trap '' TERM; while :; do sleep 0.02; done",
        t = termed.display(),
        d = daemon.display()
    );
    let holder =
        Redlock::on(&fleet).args(["run", "--ttl", "2s", "--key", &key, "-c", &script]).spawn();
    let daemon_pid = pid_in(&daemon);
    fleet.servers[0].hang();
    let out = holder.wait();
    fleet.servers[0].resume();
    out.expect(70);
    assert!(wait_gone(daemon_pid, Duration::from_millis(100)), "the daemon survived the stop");
    assert!(read(&termed).contains("TERM"), "the daemon never got the stop signal: {}", out.stderr);
}

/// Scenario 9: re-entry only for a process inside the holder's tree; a
/// process elsewhere that knows the token waits like anyone else.
#[test]
fn a_process_outside_the_holder_s_tree_does_not_re_enter() {
    let fleet = Fleet::start(3);
    let key = unique_key("reentry-outside");
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    let script = format!("echo $REDLOCK_TOKEN > {}; sleep 3", token.display());
    let holder = Redlock::on(&fleet).args(["run", "--key", &key, "-c", &script]).spawn();
    wait_for_file(&token);
    let start = Instant::now();
    while !read(&token).ends_with('\n') {
        assert!(start.elapsed() < Duration::from_secs(10), "no token written");
        std::thread::sleep(Duration::from_millis(5));
    }
    let stolen = read(&token).trim().to_owned();
    let outsider = dir.path().join("outsider");
    Redlock::on(&fleet)
        .env("REDLOCK_KEY", &key)
        .env("REDLOCK_TOKEN", &stolen)
        .args(["run", "-n", "--key", &key, "--", "touch", outsider.to_str().unwrap()])
        .run()
        .expect(75);
    assert!(!outsider.exists(), "a process outside the holder's tree ran under its lock");
    holder.wait().expect(0);
}

/// Scenario 9: a nested run whose re-entry check cannot reach a quorum ends
/// at once with 69 instead of waiting on its own holder.
#[test]
fn a_nested_run_that_cannot_check_its_lock_fails_at_once() {
    let fleet = Fleet::start(1);
    let key = unique_key("reentry-unreachable");
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("code");
    let script = format!(
        "REDLOCK_SERVERS=redis://127.0.0.1:1 {} run --wait 30s --key {key} -- true; echo $? > {}",
        bin(),
        code.display()
    );
    Redlock::on(&fleet)
        .args(["run", "--key", &key, "-c", &script])
        .run()
        .expect(0)
        .within(Duration::from_secs(10));
    assert_eq!(read(&code).trim(), "69");
}

/// Scenario 9: a signal that arrives during the re-entry check ends the
/// nested redlock with 128+N; the command never starts.
#[test]
fn a_signal_during_the_re_entry_check_ends_redlock() {
    let fleet = Fleet::start(3);
    let key = unique_key("reentry-signal");
    let dir = tempfile::tempdir().unwrap();
    let (pid, code, ran) =
        (dir.path().join("pid"), dir.path().join("code"), dir.path().join("ran"));
    // One server hung: the status round waits for it (a node timeout of
    // 1 s), which leaves time to signal the nested redlock mid-check. The
    // command ignores SIGTERM, so a signal forwarded to it once it started
    // would not hide that it ran.
    let script = format!(
        "{bin} run --key {key} -- sh -c \"trap '' TERM; touch {ran}\" & echo $! > {pid}; \
         wait $!; echo $? > {code}",
        bin = bin(),
        ran = ran.display(),
        pid = pid.display(),
        code = code.display()
    );
    fleet.servers[2].hang();
    let holder = Redlock::on(&fleet).args(["run", "--key", &key, "-c", &script]).spawn();
    let nested = pid_in(&pid);
    std::thread::sleep(Duration::from_millis(300));
    send_signal(nested, libc::SIGTERM);
    let out = holder.wait();
    fleet.servers[2].resume();
    out.expect(0);
    assert_eq!(read(&code).trim(), "143", "{}", out.stderr);
    assert!(!ran.exists(), "the command started after the signal");
    assert!(!process_alive(nested));
}

/// Ctrl-Z on a redlock that a wrapper runs (`bash -c`, make, an outer
/// redlock): the wrapper's whole group stops, so the shell gets its prompt
/// back, and `fg` resumes the job.
#[test]
fn ctrl_z_through_a_wrapper_gives_the_prompt_back() {
    let fleet = Fleet::start(1);
    let key = unique_key("ctrlz-wrapped");
    let dir = tempfile::tempdir().unwrap();
    let (writes, script) = (dir.path().join("writes"), dir.path().join("job.sh"));
    let job = format!("{} run --ttl 3s --key {key} -- {}\n", bin(), perl_ticker(&writes));
    std::fs::write(&script, job).unwrap();
    let mut term = shell(&fleet);
    term.send(format!("bash {}\n", script.display()).as_bytes());
    wait_for_file(&writes);
    term.send(b"\x1a");
    term.expect("Stopped", Duration::from_secs(10));
    term.expect("$ ", Duration::from_secs(10));
    term.send(b"fg\n");
    grows(&writes, &read(&writes));
    term.send(b"\x03");
    term.expect("$ ", Duration::from_secs(10));
    term.send(b"echo status=$?\n");
    term.expect("status=130", Duration::from_secs(10));
}

/// Ctrl-Z, `bg`, and the job ends in the background: the shell keeps its
/// terminal (redlock gives back only what it handed out).
#[test]
fn a_job_that_ends_after_bg_leaves_the_shell_its_terminal() {
    let fleet = Fleet::start(1);
    let key = unique_key("bg");
    let mut term = shell(&fleet);
    let line = format!("{} run --key {key} -- sleep 1\n", bin());
    term.send(line.as_bytes());
    std::thread::sleep(Duration::from_millis(300));
    term.send(b"\x1a");
    term.expect("Stopped", Duration::from_secs(10));
    term.expect("$ ", Duration::from_secs(10));
    term.send(b"bg\n");
    term.expect("$ ", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(1500));
    term.send(b"echo alive\n");
    term.expect("alive", Duration::from_secs(10));
    assert!(term.child.try_wait().unwrap().is_none(), "the shell exited: {}", term.screen);
}

/// A process the command left in its own group is stopped once the command
/// exits, before the lock is released.
#[test]
fn a_leftover_in_the_command_s_group_is_stopped() {
    let fleet = Fleet::start(1);
    let key = unique_key("leftover-group");
    let dir = tempfile::tempdir().unwrap();
    let pid = dir.path().join("pid");
    let script =
        format!("sh -c 'echo $$ > {}; exec sleep 30' >/dev/null 2>&1 & sleep 0.3", pid.display());
    Redlock::on(&fleet).args(["run", "--key", &key, "-c", &script]).run().expect(0);
    let leftover = pid_in(&pid);
    assert!(wait_gone(leftover, Duration::from_millis(200)), "the leftover still runs");
}
