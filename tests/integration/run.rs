//! `redlock run` end to end: exit statuses, the child's environment,
//! mutual exclusion under concurrency and with servers down, renewal, the
//! lost-lock path, signals, parent death, --keep, --max-hold, re-entry and
//! busy handling.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::pty::Terminal;
use crate::harness::{
    Fleet, Redlock, bin, lock_key, pid_in, process_alive, read, send_signal, take_over, unique_key,
    wait_for_file, wait_gone,
};

#[test]
fn exit_statuses_pass_through() {
    let fleet = Fleet::start(1);
    let key = unique_key("status");
    for (script, code) in [
        ("exit 0", 0),
        ("exit 3", 3),
        ("exit 255", 255),
        ("kill -TERM $$", 128 + 15),
        ("kill -KILL $$", 128 + 9),
    ] {
        Redlock::on(&fleet)
            .args(["run", "--key", &key, "--", "sh", "-c", script])
            .run()
            .expect(code);
    }
    Redlock::on(&fleet)
        .args(["run", "--key", &key, "--", "/nonexistent/command"])
        .run()
        .expect(127)
        .stderr_has("command not found: /nonexistent/command");
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    Redlock::on(&fleet)
        .args(["run", "--key", &key, "--"])
        .args([&plain])
        .run()
        .expect(126)
        .stderr_has("cannot execute");
    Redlock::on(&fleet).args(["run", "--key", &key, "--"]).run().expect(64);
    // Nothing left behind by any of them, failed spawns included.
    assert_eq!(fleet.values(&lock_key(&key)), vec![None]);
}

#[test]
fn a_script_without_a_shebang_runs_with_thousands_of_arguments() {
    // The shell runs a script without `#!` (execvpe's ENOEXEC fallback),
    // which copies the argument vector onto the stack of the process
    // that starts the command: a small stack in redlock's own memory
    // overflowed into it (abort after the command ran).
    let fleet = Fleet::start(1);
    let key = unique_key("noshebang");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("count");
    std::fs::write(&script, "echo \"args: $#\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let args: Vec<String> = (0..30_000).map(|i| i.to_string()).collect();
    let out =
        Redlock::on(&fleet).args(["run", "--key", &key, "--"]).args([&script]).args(&args).run();
    out.expect(0);
    assert_eq!(out.stdout.trim(), "args: 30000", "{}", out.stderr);
}

#[test]
fn the_child_gets_the_token_that_is_in_redis_and_the_key_is_gone_after() {
    let fleet = Fleet::start(3);
    let key = unique_key("env");
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let script = format!(
        "echo \"$REDLOCK_KEY $REDLOCK_TOKEN\" > {}; redis-cli -p {} GET '{}' >> {}",
        seen.display(),
        fleet.servers[0].port,
        lock_key(&key),
        seen.display()
    );
    Redlock::on(&fleet).args(["run", "--key", &key, "-c", &script]).run().expect(0);
    let seen = read(&seen);
    let mut lines = seen.lines();
    let (env_key, token) = lines.next().unwrap().split_once(' ').unwrap();
    assert_eq!(env_key, key);
    assert_eq!(lines.next(), Some(token), "REDLOCK_TOKEN is the value in Redis");
    assert_eq!(fleet.values(&lock_key(&key)), vec![None, None, None]);
}

/// Runs `n` concurrent `run --wait` on one key; each child checks that no
/// other is inside its critical section and records its fence. Returns the
/// fences in the order the children entered, and the overlaps seen.
pub fn contend(fleet: &Fleet, n: usize) -> (Vec<u64>, usize) {
    let key = unique_key("contend");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let script = format!(
        "mkdir {d}/inside 2>/dev/null || echo overlap >> {d}/overlaps; \
         echo $REDLOCK_FENCE >> {d}/ran; sleep 0.05; rmdir {d}/inside"
    );
    let running: Vec<_> = (0..n)
        .map(|_| {
            Redlock::on(fleet)
                .args(["--node-timeout", "200ms", "run", "--key", &key, "--wait", "50s"])
                .args(["--ttl", "5s", "-c", &script])
                .spawn()
        })
        .collect();
    for r in running {
        r.wait().expect(0);
    }
    let fences = read(&dir.path().join("ran")).lines().map(|l| l.parse().unwrap()).collect();
    let overlaps = read(&dir.path().join("overlaps")).lines().count();
    (fences, overlaps)
}

/// Asserts 8 children ran, none overlapped, and each drew a larger fence
/// than the one before it.
fn assert_exclusive(fleet: &Fleet) {
    let (fences, overlaps) = contend(fleet, 8);
    assert_eq!((fences.len(), overlaps), (8, 0), "fences {fences:?}");
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "fences in entry order: {fences:?}");
}

#[test]
fn eight_contenders_on_five_servers_never_overlap() {
    assert_exclusive(&Fleet::start(5));
}

#[test]
fn eight_contenders_with_two_of_five_servers_down_never_overlap() {
    let mut fleet = Fleet::start(5);
    fleet.servers[0].stop();
    fleet.servers[3].stop();
    assert_exclusive(&fleet);
}

#[test]
fn renewal_keeps_a_one_second_lock_through_a_three_second_child() {
    let fleet = Fleet::start(3);
    let key = unique_key("renew");
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let holder = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--ttl", "1s", "--"])
        .args(["sh", "-c", &format!("touch {}; sleep 3", ready.display())])
        .spawn();
    wait_for_file(&ready);
    let start = Instant::now();
    let mut refused = 0;
    while start.elapsed() < Duration::from_millis(2700) {
        Redlock::on(&fleet).args(["acquire", "-n", "--key", &key, "--ttl", "1s"]).run().expect(75);
        refused += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    holder.wait().expect(0);
    assert!(refused >= 5, "only {refused} attempts");
    assert_eq!(fleet.values(&lock_key(&key)), vec![None, None, None]);
}

/// Starts `run` with a child that writes its pid and a ready file, then
/// overwrites the key on a majority: the lock is lost.
fn lose_the_lock(on_lost: &[&str], child: &str) -> (crate::harness::Output, i32, Duration) {
    let fleet = Fleet::start(3);
    let key = unique_key("lost");
    let dir = tempfile::tempdir().unwrap();
    let pid = dir.path().join("pid");
    let script = format!("echo $$ > {}; {child}", pid.display());
    let running = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--ttl", "2s"])
        .args(on_lost)
        .args(["-c", &script])
        .spawn();
    let child = pid_in(&pid);
    let ended = take_over(&fleet.servers[..2], &key, child);
    (running.wait(), child, ended)
}

#[test]
fn a_lost_lock_stops_the_child_before_the_validity_ends() {
    let (out, child, elapsed) = lose_the_lock(&[], "sleep 30");
    out.expect(70).stderr_has("lost the lock");
    // Two lines: the stop when it happens, and the final error; no failed
    // release that reads like a second error.
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    assert!(lines[0].starts_with("redlock: lost the lock: extend "), "{}", out.stderr);
    assert!(lines[0].contains("sent SIGTERM to the command"), "{}", out.stderr);
    assert!(lines[1].starts_with("redlock: lost the lock at "), "{}", out.stderr);
    assert!(lines[1].ends_with("stopped the command with SIGTERM"), "{}", out.stderr);
    assert!(!process_alive(child), "child {child} still runs");
    // The lock was valid for at most 2s from before the child started.
    assert!(elapsed < Duration::from_secs(2), "stopped only after {elapsed:?}");
}

#[test]
fn a_child_that_ignores_the_stop_signal_is_killed_before_the_validity_ends() {
    // The short `sleep` exits at once and stays a zombie (the exec'd
    // `sleep 30` never reaps it) until redlock adopts and reaps it: a
    // zombie runs nothing, so it is no leftover to wait for.
    let script = "trap '' INT TERM; sleep 0.1 & exec sleep 30";
    let (out, child, elapsed) = lose_the_lock(&["--on-lost", "INT"], script);
    out.expect(70).stderr_has("SIGKILL").stderr_lacks("left processes");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    assert!(lines[1].ends_with("with SIGINT, then SIGKILL"), "{}", out.stderr);
    assert!(!process_alive(child), "child {child} still runs");
    assert!(elapsed < Duration::from_secs(2), "killed only after {elapsed:?}");
}

#[test]
fn a_daemon_that_left_the_group_is_stopped_when_the_command_exits() {
    let fleet = Fleet::start(1);
    let key = unique_key("daemon");
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let (daemon, worker, termed) = (path("daemon"), path("worker"), path("termed"));
    // A daemon in a session of its own, with a worker of its own; on TERM
    // it notes it and exits, orphaning the worker.
    let script = format!(
        "setsid sh -c 'trap \"echo TERM > {termed}; exit 0\" TERM; echo $$ > {daemon}; \
         sleep 30 & echo $! > {worker}; wait' & \
         while [ ! -s {worker} ]; do sleep 0.01; done; exit 3"
    );
    let out = Redlock::on(&fleet).args(["run", "--key", &key, "-c", &script]).run();
    out.expect(3).stderr_has("left processes running");
    for pid in [pid_in(Path::new(&daemon)), pid_in(Path::new(&worker))] {
        assert!(!process_alive(pid), "{pid} still runs without the lock");
    }
    assert_eq!(read(Path::new(&termed)).trim(), "TERM", "the daemon was not asked to stop first");
}

#[test]
fn orphans_that_exit_while_the_command_runs_are_reaped() {
    let fleet = Fleet::start(1);
    let key = unique_key("orphans");
    let dir = tempfile::tempdir().unwrap();
    let (ready, done) = (dir.path().join("ready"), dir.path().join("done"));
    // 50 double-forked `true`s: each is orphaned, adopted by redlock, exits.
    let script = format!(
        "for i in $(seq 50); do (true &); done; touch {}; while [ ! -e {} ]; do sleep 0.02; done",
        ready.display(),
        done.display()
    );
    let running = Redlock::on(&fleet).args(["run", "--key", &key, "-c", &script]).spawn();
    wait_for_file(&ready);
    let zombies = || {
        let Ok(procs) = std::fs::read_dir("/proc") else { return 0 };
        procs
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                let rest: Vec<&str> = stat
                    .rsplit_once(')')
                    .map(|(_, r)| r.split_whitespace().collect())
                    .unwrap_or_default();
                rest.len() > 1 && rest[0] == "Z" && rest[1] == running.pid().to_string()
            })
            .count()
    };
    let start = Instant::now();
    while zombies() > 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "{} zombies under redlock", zombies());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(&done, "").unwrap();
    running.wait().expect(0);
}

#[test]
fn on_lost_ignore_keeps_the_child_and_its_status() {
    let (out, _, _) = lose_the_lock(&["--on-lost", "ignore"], "sleep 1.5; exit 5");
    out.expect(5).stderr_has("--on-lost ignore keeps the command running");
}

#[test]
fn each_forwarded_signal_reaches_the_child_exactly_once() {
    let fleet = Fleet::start(1);
    let key = unique_key("signals");
    let dir = tempfile::tempdir().unwrap();
    let (log, ready, done) =
        (dir.path().join("log"), dir.path().join("ready"), dir.path().join("done"));
    let names = ["INT", "TERM", "HUP", "QUIT", "USR1", "USR2"];
    let traps: String =
        names.iter().map(|n| format!("trap 'echo {n} >> {}' {n}; ", log.display())).collect();
    let script = format!(
        "{traps} touch {}; while [ ! -e {} ]; do sleep 0.02; done",
        ready.display(),
        done.display()
    );
    let running = Redlock::on(&fleet)
        .own_group()
        .args(["run", "--key", &key, "--", "sh", "-c", &script])
        .spawn();
    wait_for_file(&ready);
    let signals =
        [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];
    for (i, (signal, name)) in signals.iter().zip(names).enumerate() {
        // Even ones to redlock alone (kill), odd ones to its whole process
        // group, as a terminal sends Ctrl-C.
        let target = if i % 2 == 0 { running.pid() } else { -running.pid() };
        send_signal(target, *signal);
        let start = Instant::now();
        while !read(&log).lines().any(|l| l == name) {
            assert!(start.elapsed() < Duration::from_secs(10), "{name} never reached the child");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    std::fs::write(&done, "").unwrap();
    running.wait().expect(0);
    let log = read(&log);
    for name in names {
        assert_eq!(log.lines().filter(|l| *l == name).count(), 1, "{name} in:\n{log}");
    }
    assert_eq!(fleet.values(&lock_key(&key)), vec![None]);
}

#[test]
fn killing_redlock_kills_the_command_s_group_and_the_lock_expires() {
    let fleet = Fleet::start(1);
    let key = unique_key("sigkill");
    let dir = tempfile::tempdir().unwrap();
    let (pid, worker) = (dir.path().join("pid"), dir.path().join("worker"));
    // The parent-death signal reaches the shell alone; the guard kills the
    // rest of the group (the worker) too.
    let script = format!(
        "sleep 30 >/dev/null 2>&1 & echo $! > {}; echo $$ > {}; wait",
        worker.display(),
        pid.display()
    );
    let running =
        Redlock::on(&fleet).args(["run", "--key", &key, "--ttl", "3s", "-c", &script]).spawn();
    let (child, worker) = (pid_in(&pid), pid_in(&worker));
    send_signal(running.pid(), libc::SIGKILL);
    for pid in [child, worker] {
        assert!(wait_gone(pid, Duration::from_secs(10)), "{pid} outlived redlock");
    }
    let out = running.wait();
    assert!(out.status.code().is_none(), "redlock was killed");
    let pttl = fleet.servers[0].pttl(&lock_key(&key));
    assert!(pttl > 0 && pttl <= 3000, "the lock stays until its TTL: {pttl}");
}

#[test]
fn keep_holds_the_lock_after_the_child_exits() {
    let fleet = Fleet::start(3);
    let key = unique_key("keep");
    Redlock::on(&fleet).args(["run", "--key", &key, "--keep", "5s", "--", "true"]).run().expect(0);
    for s in &fleet.servers {
        let pttl = s.pttl(&lock_key(&key));
        assert!(pttl > 3000 && pttl <= 5000, "kept for the rest of 5s: {pttl}");
    }
    Redlock::on(&fleet).args(["run", "-n", "--key", &key, "--", "true"]).run().expect(75);
}

#[test]
fn max_hold_stops_the_child_and_its_grandchildren_with_124() {
    let fleet = Fleet::start(1);
    let key = unique_key("maxhold");
    let dir = tempfile::tempdir().unwrap();
    let grandchild = dir.path().join("grandchild");
    let script = format!("sleep 30 & echo $! > {}; wait", grandchild.display());
    let running = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--max-hold", "500ms", "-c", &script])
        .spawn();
    let grandchild = pid_in(&grandchild);
    running.wait().expect(124).stderr_has("--max-hold");
    assert!(wait_gone(grandchild, Duration::from_secs(5)), "grandchild {grandchild} still runs");
    assert_eq!(fleet.values(&lock_key(&key)), vec![None]);
}

#[test]
fn a_nested_run_on_the_same_key_runs_directly() {
    let fleet = Fleet::start(1);
    let key = unique_key("reentry");
    let inner = format!("{} run -n --key {key} -- sh -c 'echo inner-ran'", bin());
    let out = Redlock::on(&fleet).args(["run", "-n", "--key", &key, "-c", &inner]).run();
    out.expect(0);
    assert_eq!(out.line(), "inner-ran");
}

#[test]
fn busy_with_conflict_exit_code_zero_is_silent() {
    let fleet = Fleet::start(1);
    let key = unique_key("cron");
    Redlock::on(&fleet).args(["acquire", "--key", &key]).run().expect(0);
    let out = Redlock::on(&fleet)
        .args(["run", "-n", "-E", "0", "--key", &key, "--", "echo", "should-not-run"])
        .run();
    out.expect(0);
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("", ""));
    Redlock::on(&fleet)
        .args(["run", "-n", "--key", &key, "--", "echo", "should-not-run"])
        .run()
        .expect(75)
        .stderr_has("is held by");
}

#[test]
fn a_waiter_subscribes_and_runs_once_the_holder_releases() {
    let fleet = Fleet::start(3);
    let key = unique_key("wake");
    let token = Redlock::on(&fleet).args(["acquire", "--key", &key, "--ttl", "60s"]).run();
    token.expect(0);
    let waiter = Redlock::on(&fleet)
        .args(["run", "--key", &key, "--wait", "50s", "--", "echo", "ran"])
        .spawn();
    fleet.servers[0].await_waiters(&key, 1);
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", token.line()]).run().expect(0);
    let out = waiter.wait();
    out.expect(0);
    assert_eq!(out.line(), "ran");
}

#[test]
fn jitter_sleeps_at_most_its_bound_before_the_first_attempt() {
    let fleet = Fleet::start(1);
    let key = unique_key("jitter");
    let out = Redlock::on(&fleet)
        .args(["-v", "run", "--key", &key, "--jitter", "300ms", "--", "true"])
        .run();
    out.expect(0);
    let slept = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("redlock: --jitter: sleeping "))
        .and_then(|d| d.strip_suffix("ms"))
        .and_then(|ms| ms.parse::<u64>().ok())
        .unwrap_or_else(|| out.fail("should say how long it sleeps"));
    assert!(slept <= 300, "{slept}ms");
    assert!(out.elapsed >= Duration::from_millis(slept));
}

#[test]
fn at_a_terminal_the_command_reads_it_and_ctrl_c_reaches_it_once() {
    let fleet = Fleet::start(1);
    let key = unique_key("tty");
    let dir = tempfile::tempdir().unwrap();
    let (ints, done) = (dir.path().join("ints"), dir.path().join("done"));
    let script = format!(
        "trap 'echo INT >> {i}' INT; echo ready; read line; echo got:$line; \
         while [ ! -e {d} ]; do sleep 0.02; done; exit 7",
        i = ints.display(),
        d = done.display()
    );
    let mut cmd = std::process::Command::new(bin());
    crate::harness::isolate(&mut cmd)
        .env("REDLOCK_SERVERS", fleet.urls())
        .args(["run", "--key", &key, "--", "sh", "-c", &script]);
    let mut term = Terminal::spawn(cmd, false);
    term.expect("ready", Duration::from_secs(10));
    term.send(b"hello\n");
    term.expect("got:hello", Duration::from_secs(10));
    term.send(&[3]); // Ctrl-C
    let start = Instant::now();
    while read(&ints).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "Ctrl-C never reached the command");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(&done, "").unwrap();
    let status = term.child.wait().unwrap();
    assert_eq!(status.code(), Some(7), "{}", term.screen);
    assert_eq!(read(&ints).lines().count(), 1, "Ctrl-C reached the command more than once");
    assert_eq!(fleet.values(&lock_key(&key)), vec![None]);
}

/// A job cancelled by SIGTERM to redlock (a CI step cancelled, `kill`)
/// leaves one line once the lock is released, without `-v`, and exits
/// 128+15 as the command did. It left nothing.
#[test]
fn a_cancelled_job_leaves_one_line() {
    let fleet = Fleet::start(1);
    let key = unique_key("cancelled");
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!("touch {}; exec sleep 30", ready.display());
    let running =
        Redlock::on(&fleet).args(["run", "--key", &key, "--", "sh", "-c", &script]).spawn();
    wait_for_file(&ready);
    send_signal(running.pid(), libc::SIGTERM);
    let out = running.wait();
    out.expect(143);
    assert_eq!(
        out.stderr,
        format!("redlock: SIGTERM: passed to the command; released {key}\n"),
        "one line"
    );
    assert_eq!(fleet.values(&lock_key(&key)), vec![None]);
}
