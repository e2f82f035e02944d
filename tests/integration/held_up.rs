//! Hosts held up at the edges the fault campaign did not reach at first: a
//! `--once-per` host frozen past its tick, a `-n` whose first call waited
//! in a stalled server's queue, and a `-n` whose node timeout outlives the
//! grant records it relies on.

use std::io::{BufRead, BufReader, Read};
use std::time::{Duration, SystemTime};

use crate::harness::redis::{Build, NO_SCRIPTS};
use crate::harness::{Fleet, RedisServer, Redlock, lock_key, send_signal, unique_key};
use crate::tick::next_tick;

/// Three servers with scripting, and three without it
/// (src/lock/noscript.rs): whether each has it.
fn fleets() -> [(Fleet, bool); 2] {
    [
        (Fleet::start(3), true),
        (Fleet::start_build_with(Build::default_build(), 3, NO_SCRIPTS), false),
    ]
}

/// Keeps `server` busy in a Lua loop for `busy`, from another connection
/// (or paused, where scripts are refused): every call that arrives
/// meanwhile waits in its queue.
fn stall(server: &RedisServer, busy: Duration, scripts: bool) -> std::thread::JoinHandle<()> {
    let mut conn = server.conn();
    if !scripts {
        let _: String = server.cmd(&["CLIENT", "PAUSE", &busy.as_millis().to_string(), "ALL"]);
        return std::thread::spawn(|| ());
    }
    let micros = busy.as_micros().to_string();
    std::thread::spawn(move || {
        let script = "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] \
                      while true do local n = redis.call('TIME') \
                      if n[1] * 1000000 + n[2] - s > tonumber(ARGV[1]) then return 1 end end";
        let _: i64 = redis::cmd("EVAL").arg(script).arg(0).arg(&micros).query(&mut conn).unwrap();
    })
}

/// A `--once-per` host frozen after it computed its tick (here in its
/// `--jitter` sleep, as a suspended VM would be) until the tick is over
/// and the servers' record of the tick's run is gone (it expires a minute
/// after the tick; deleted here to the same effect): the servers refuse
/// the tick as over, and the host skips it, saying so. It ran the tick a
/// second time when the servers judged only by the record.
#[test]
fn a_host_frozen_past_its_tick_skips_it_once_the_record_is_gone() {
    for (fleet, _) in fleets() {
        frozen_past_its_tick(&fleet);
    }
}

fn frozen_past_its_tick(fleet: &Fleet) {
    let key = unique_key("frozen-tick");
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let job = format!("echo \"$REDLOCK_TICK\" >> {}", ran.display());
    let every = Duration::from_secs(3);
    let host = |extra: &[&str]| {
        Redlock::on(fleet)
            .args(["-v", "--log-format", "json", "run", "--once-per", "3s", "-k", &key])
            .args(extra)
            .args(["--", "sh", "-c", &job])
    };
    // A jitter too short to stop the host inside it: try the next tick.
    let (mut frozen, start) = (0..5)
        .find_map(|_| {
            let start = next_tick(every, Duration::from_millis(100));
            let mut b = host(&["--jitter", "2500ms"]).spawn();
            let mut err = BufReader::new(b.child.stderr.take().unwrap());
            let mut line = String::new();
            while err.read_line(&mut line).unwrap() > 0 && !line.contains("\"jitter\"") {
                line.clear();
            }
            let event: serde_json::Value = serde_json::from_str(&line).unwrap();
            if event["sleep_ms"].as_u64().unwrap() < 400 {
                b.child.kill().unwrap();
                b.child.wait().unwrap();
                return None;
            }
            send_signal(b.pid(), libc::SIGSTOP);
            Some(((b, err), start))
        })
        .expect("five jitters in a row under 400 ms");
    // Another host runs the tick meanwhile.
    host(&["-n"]).run().expect(0);
    // Past the tick's end plus the clock allowance, with its record gone.
    std::thread::sleep(
        (start + every + Duration::from_secs(2))
            .duration_since(SystemTime::now())
            .unwrap_or_default(),
    );
    for server in &fleet.servers {
        let _: i64 = server.cmd(&["DEL", &(lock_key(&key) + ":last")]);
    }
    send_signal(frozen.0.pid(), libc::SIGCONT);
    let mut rest = String::new();
    frozen.1.read_to_string(&mut rest).unwrap();
    let status = frozen.0.child.wait().unwrap();
    let ticks = std::fs::read_to_string(&ran).unwrap();
    assert_eq!(ticks.lines().count(), 1, "the tick ran twice: {ticks}\n{rest}");
    assert_eq!(status.code(), Some(75), "{rest}");
    assert!(rest.contains("ago by the servers' clocks"), "{rest}");
}

/// A `-n` whose first call waited in two stalled servers' queues (a slow
/// script ahead of it) while another run took the lock and released it,
/// after the `-n` began: the grants it then got replaced that run's
/// record, so it is busy, and its command never runs. It ran when the
/// servers judged "since it began" by their clocks when they ran the call.
#[test]
fn dash_n_sees_a_take_while_its_first_call_waited_in_a_queue() {
    for (fleet, scripts) in fleets() {
        take_while_queued(&fleet, scripts);
    }
}

fn take_while_queued(fleet: &Fleet, scripts: bool) {
    let key = unique_key("stalled-queue");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("config.toml");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // The `-n` begins, and waits for its configuration.
    let late = Redlock::on(fleet)
        .env("REDLOCK_CONFIG", &fifo.display().to_string())
        .args(["-v", "run", "-n", "--key", &key, "--", "echo", "ran"])
        .spawn();
    std::thread::sleep(Duration::from_millis(100));
    // A take since it began, released.
    Redlock::on(fleet).args(["run", "-n", "--key", &key, "--", "true"]).run().expect(0);
    let stalls: Vec<_> =
        fleet.servers[1..].iter().map(|s| stall(s, Duration::from_millis(700), scripts)).collect();
    std::thread::sleep(Duration::from_millis(100));
    std::fs::write(&fifo, "# read once the take is over and the queues are stalled\n").unwrap();
    let out = late.wait();
    for stall in stalls {
        stall.join().unwrap();
    }
    out.expect(75).stderr_has("after this run began");
    assert!(!out.stdout.contains("ran"), "{}", out.stdout);
}

/// A `-n` (of `run` or `acquire`) whose node timeout could outlast the
/// grant records it reads is refused before any server is written: its
/// last call could be answered after a take made early in it was
/// forgotten. A wait, which does not look back, takes any node timeout
/// below the TTL.
#[test]
fn dash_n_refuses_a_node_timeout_the_records_do_not_outlive() {
    let fleet = Fleet::start(1);
    let key = unique_key("long-node-timeout");
    let run = ["run", "-n", "--ttl", "60s", "-k", &key, "--", "true"];
    let acquire = ["acquire", "-n", "--ttl", "60s", "-k", &key];
    for cmd in [&run[..], &acquire] {
        let out = Redlock::on(&fleet).args(["--node-timeout", "10s"]).args(cmd).run();
        out.expect(64).stderr_has("--node-timeout 10.0s: -n looks back over grant records");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    assert_eq!(fleet.dbsizes(), vec![0], "nothing written on a usage error");
    for wait in ["-n", "--wait=1m"] {
        let timeout = if wait == "-n" { "9s" } else { "12s" };
        Redlock::on(&fleet)
            .args([
                "--node-timeout",
                timeout,
                "run",
                "--ttl",
                "60s",
                wait,
                "-k",
                &key,
                "--",
                "true",
            ])
            .run()
            .expect(0);
    }
}

/// Two of three servers may evict keys (`maxmemory-policy allkeys-lru`
/// under a `maxmemory`): the record of a tick or of a take may vanish
/// there, so they get no vote for `--once-per` or `-n` (69 here, and `-v`
/// says why), while a plain lock still takes them; `doctor` calls them an
/// error. They ran the tick, and could run it twice once the records were
/// evicted.
#[test]
fn evicting_servers_get_no_vote_for_ticks_or_dash_n() {
    let fleet = Fleet::start(3);
    for server in &fleet.servers[1..] {
        let _: String = server.cmd(&["CONFIG", "SET", "maxmemory", "100mb"]);
        let _: String = server.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    }
    let key = unique_key("evicting");
    for once in [&["--once-per", "1h", "-n"][..], &["-n"]] {
        let out = Redlock::on(&fleet)
            .args(["-v", "run", "-k", &key])
            .args(once)
            .args(["--", "echo", "ran"])
            .run();
        out.expect(69).stderr_has("maxmemory-policy allkeys-lru may evict the record");
        assert!(!out.stdout.contains("ran"), "{once:?}: {}", out.stdout);
    }
    Redlock::on(&fleet).args(["run", "-k", &key, "--", "true"]).run().expect(0);
    Redlock::on(&fleet)
        .args(["doctor"])
        .run()
        .expect(69)
        .stderr_has("no vote for --once-per or -n");
}

/// A run whose lock `release --force` deleted while its command ran (no
/// renewal came between) exits 70, the lost lock's code, with a line that
/// names the command's own status: another holder may have run beside it,
/// so a wrapper must not read it as a success. It exited 0 with a warning.
#[test]
fn a_run_whose_lock_was_forced_away_exits_70_naming_its_status() {
    let fleet = Fleet::start(3);
    let key = unique_key("forced-away");
    let dir = tempfile::tempdir().unwrap();
    let held = dir.path().join("held");
    let go = dir.path().join("go");
    let job =
        format!("touch {}; while [ ! -e {} ]; do sleep 0.05; done", held.display(), go.display());
    let run = Redlock::on(&fleet).args(["run", "-k", &key, "--", "sh", "-c", &job]).spawn();
    crate::harness::wait_for_file(&held);
    Redlock::on(&fleet).args(["release", "--force", "-k", &key]).run().expect(0);
    std::fs::write(&go, "").unwrap();
    let out = run.wait();
    out.expect(70).stderr_has("the lock was gone when the command exited with 0");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}
