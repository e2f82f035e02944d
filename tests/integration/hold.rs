//! `redlock hold`: a freeze that keeps its key by renewal within
//! `--max-ttl`, takes it back after a loss (the gap in the history, with
//! whoever held the key meanwhile), ends at its deadline, on SIGTERM or on
//! `release --force`, shows its note and end to every waiter and in
//! `status`, and pauses a cron job of its key fleet-wide.

use std::time::{Duration, Instant};

use crate::harness::{Fleet, Redlock, Running, send_signal, unique_key};
use crate::tick::next_tick;

/// A generous bound on a freeze's reaction (a renewal, a retake): only a hang fails it.
const REACT: Duration = Duration::from_secs(20);

/// `hold -k KEY --for DUR --note NOTE` on `servers`, with a short
/// `--max-ttl` so that the lock's TTL (and a restarted server's window)
/// is `max_ttl`.
pub(crate) fn hold(servers: &str, max_ttl: &str, key: &str, length: &str, note: &str) -> Running {
    Redlock::new(servers)
        .args(["--max-ttl", max_ttl, "hold", "-k", key, "--for", length, "--note", note])
        .spawn()
}

/// `status --json` of `key` on `servers`.
fn status(servers: &str, key: &str) -> serde_json::Value {
    Redlock::new(servers).args(["status", "-k", key, "--json"]).run().json()
}

/// Waits until a freeze holds `key` (its token says when it ends).
pub(crate) fn frozen(servers: &str, key: &str) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let json = status(servers, key);
        if json["holder"]["freeze_until"].is_string() {
            return json;
        }
        assert!(start.elapsed() < REACT, "no freeze on {key}: {json}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The entries of `key`'s history that are a freeze's gap, once there is one.
fn gaps(servers: &str, key: &str) -> Vec<serde_json::Value> {
    let start = Instant::now();
    loop {
        let out = Redlock::new(servers).args(["history", "-k", key, "--json"]).run();
        let json = out.json();
        let gaps: Vec<serde_json::Value> = json["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["outcome"] == "gap")
            .cloned()
            .collect();
        if !gaps.is_empty() {
            return gaps;
        }
        assert!(start.elapsed() < REACT, "no gap recorded for {key}: {json}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ends a running freeze with SIGTERM: exit 0, the signal named.
pub(crate) fn terminate(freeze: Running) -> crate::harness::Output {
    send_signal(freeze.pid(), libc::SIGTERM);
    let out = freeze.wait();
    out.expect(0).stderr_has("SIGTERM: ended the freeze of");
    out
}

/// The case: one server stopped and another restarted without its
/// data (no vote for `--max-ttl` plus 1 s). The renewals cannot reach a
/// quorum, the validity ends, and the freeze says so, takes the key back
/// as soon as the restarted server votes, and records the gap.
#[test]
fn a_freeze_lost_to_a_stopped_server_and_a_restart_is_taken_back_with_the_gap_recorded() {
    let mut fleet = Fleet::start(3);
    // Old enough to vote: the window is --max-ttl 2s plus 1 s.
    std::thread::sleep(Duration::from_secs(3));
    let key = unique_key("hold-restart");
    let urls = fleet.urls();
    let freeze = Redlock::new(&urls)
        .distrust_restarts()
        .args(["--max-ttl", "2s", "hold", "-k", &key, "--for", "60s", "--note", "no deploys"])
        .spawn();
    frozen(&urls, &key);
    fleet.servers[0].stop();
    fleet.servers[1].restart();
    let gap = gaps(&urls, &key).remove(0);
    assert!(gap["duration_ms"].as_u64().unwrap() > 0, "{gap}");
    assert_eq!(gap["note"], "no deploys", "{gap}");
    assert!(gap["start"].is_string() && gap["end"].is_string(), "start and end: {gap}");
    // Taken back: a freeze holds the key again.
    let json = frozen(&urls, &key);
    assert_eq!(json["holder"]["note"], "no deploys", "{json}");
    let table = Redlock::new(&urls).args(["history", "-k", &key]).run();
    assert!(table.stdout.contains("a freeze's gap, taken back at"), "{}", table.stdout);
    assert!(table.stdout.contains("nobody held it meanwhile"), "{}", table.stdout);
    let out = terminate(freeze);
    out.stderr_has(&format!("hold: lost {key} at "))
        // 1 of 3 once the restart is seen; 2 of 3 when the renewal that
        // failed came before the restarted server answered again.
        .stderr_has(" of 3 servers can vote); taking it back")
        .stderr_has(&format!("hold: took {key} back after a gap of "));
}

/// redlock frozen (SIGSTOP) past its lock's validity: the key lapses, a
/// deploy slips in and finishes, and the freeze, thawed, finds its token
/// gone after its validity (a loss, not a forced release), takes the key
/// back and names the deploy in the gap's history entry.
#[test]
fn a_run_that_slipped_in_during_a_gap_is_named_in_the_history() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let key = unique_key("hold-slipped");
    let freeze = hold(&urls, "1s", &key, "60s", "freeze");
    frozen(&urls, &key);
    send_signal(freeze.pid(), libc::SIGSTOP);
    let deploy = Redlock::new(&urls)
        .args(["run", "--wait", "10s", "--note", "hotfix 2.4.2", "-k", &key, "--"])
        .args(["sleep", "0.3"])
        .run();
    deploy.expect(0);
    send_signal(freeze.pid(), libc::SIGCONT);
    let gap = gaps(&urls, &key).remove(0);
    let meanwhile = gap["meanwhile"].as_array().unwrap_or_else(|| panic!("{gap}"));
    assert!(meanwhile.iter().any(|m| m["note"] == "hotfix 2.4.2"), "the deploy is named: {gap}");
    let table = Redlock::new(&urls).args(["history", "-k", &key]).run();
    assert!(table.stdout.contains("held meanwhile by "), "{}", table.stdout);
    assert!(table.stdout.contains("(note \"hotfix 2.4.2\")"), "{}", table.stdout);
    frozen(&urls, &key);
    terminate(freeze).stderr_has("took").stderr_lacks("released by force");
}

/// redlock frozen (SIGSTOP) past its lock's validity and past the
/// freeze's end (or sent SIGTERM meanwhile): a deploy slipped in, so the
/// freeze did not hold to its end. Thawed, it records the gap with the
/// deploy named and says so: 70 at its end (it did not hold the key
/// throughout), 0 on SIGTERM (a person ended it), never the 0 of a freeze
/// that held and released.
#[test]
fn a_freeze_stopped_past_its_end_records_the_gap_and_says_so() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    // The end, SIGTERM before the end was passed too, SIGTERM alone.
    for (signal, length) in
        [(None, "3s"), (Some(libc::SIGTERM), "3s"), (Some(libc::SIGTERM), "60s")]
    {
        let key = unique_key("hold-stopped-end");
        let freeze = hold(&urls, "1s", &key, length, "freeze");
        frozen(&urls, &key);
        let started = Instant::now();
        send_signal(freeze.pid(), libc::SIGSTOP);
        let deploy = Redlock::new(&urls)
            .args(["run", "--wait", "10s", "--note", "hotfix 2.4.3", "-k", &key, "--"])
            .args(["sleep", "0.3"])
            .run();
        deploy.expect(0);
        if let Some(signal) = signal {
            send_signal(freeze.pid(), signal);
        }
        std::thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
        send_signal(freeze.pid(), libc::SIGCONT);
        let out = freeze.wait();
        let ended = out.expect(if signal.is_some() { 0 } else { 70 });
        ended.stderr_has("lost since").stderr_lacks("; released");
        let gap = gaps(&urls, &key).remove(0);
        let meanwhile = gap["meanwhile"].as_array().unwrap_or_else(|| panic!("{gap}"));
        assert!(meanwhile.iter().any(|m| m["note"] == "hotfix 2.4.3"), "named: {gap}");
    }
}

/// Every waiter's busy line and `status` (text and JSON) say that a
/// freeze holds the key, until when, and why.
#[test]
fn a_waiter_and_status_show_the_freeze_s_note_and_end() {
    let fleet = Fleet::start(1);
    let urls = fleet.urls();
    let key = unique_key("hold-shown");
    let freeze = hold(&urls, "3s", &key, "60s", "Black Friday, ask alice");
    let json = frozen(&urls, &key);
    let until = json["holder"]["freeze_until"].as_str().unwrap().to_owned();
    assert!(until.ends_with("+00:00") && until.len() == 25, "{until}");
    assert_eq!(json["holder"]["note"], "Black Friday, ask alice");
    assert!(json["holder"]["freeze_until_ms"].as_u64().is_some(), "{json}");
    let line = format!("held by a freeze until {until}: \"Black Friday, ask alice\" (host ");
    let busy = Redlock::new(&urls).args(["run", "--wait", "1s", "-k", &key, "--", "true"]).run();
    busy.expect(75).stderr_has(&line);
    let table = Redlock::new(&urls).args(["status", "-k", &key]).run();
    table.expect(0);
    assert!(table.stdout.contains(&line), "{}", table.stdout);
    terminate(freeze);
}

/// `status`'s queue lines say where each waiter runs: its CI job and note.
#[test]
fn status_queue_lines_show_each_waiter_s_job_and_note() {
    let fleet = Fleet::start(1);
    let urls = fleet.urls();
    let key = unique_key("hold-queue");
    let freeze = hold(&urls, "3s", &key, "60s", "freeze");
    frozen(&urls, &key);
    let waiter = Redlock::new(&urls)
        .env("CI_JOB_URL", "https://gitlab.example.com/ops/app/-/jobs/77")
        .args(["run", "--wait", "30s", "--note", "deploy 2.4.1", "-k", &key, "--", "true"])
        .spawn();
    fleet.servers[0].await_waiters(&key, 1);
    let start = Instant::now();
    let table = loop {
        let table = Redlock::new(&urls).args(["status", "-k", &key]).run();
        if table.stdout.contains("queued 1:") {
            break table;
        }
        assert!(start.elapsed() < REACT, "no queue line: {}", table.stdout);
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        table.stdout.contains(
            ", CI job https://gitlab.example.com/ops/app/-/jobs/77, note \"deploy 2.4.1\", waiting since "
        ),
        "{}",
        table.stdout
    );
    let json = status(&urls, &key);
    assert_eq!(json["queue"][0]["note"], "deploy 2.4.1", "{json}");
    assert_eq!(json["queue"][0]["job"], "https://gitlab.example.com/ops/app/-/jobs/77", "{json}");
    terminate(freeze);
    waiter.wait().expect(0);
}

/// `release --force` by someone else ends the freeze with 70, and the
/// freeze does not take the key back.
#[test]
fn release_force_ends_a_freeze_with_70_and_it_stays_released() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let key = unique_key("hold-force");
    let freeze = hold(&urls, "3s", &key, "60s", "freeze");
    frozen(&urls, &key);
    Redlock::new(&urls).args(["release", "-k", &key, "--force"]).run().expect(0);
    let out = freeze.wait();
    out.expect(70).stderr_has("was released by force (release --force)").stderr_lacks("took");
    Redlock::new(&urls).args(["status", "-k", &key]).run().expect(1);
}

/// SIGTERM (systemd's stop, a person's Ctrl-C) ends the freeze at once
/// and releases the key: the next deploy does not wait for its TTL.
#[test]
fn sigterm_ends_a_freeze_with_0_and_releases_it_at_once() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let key = unique_key("hold-term");
    let freeze = hold(&urls, "30s", &key, "60s", "freeze");
    frozen(&urls, &key);
    let signalled = Instant::now();
    let out = terminate(freeze);
    out.stderr_has("released");
    assert!(signalled.elapsed() < Duration::from_secs(5), "{:?}", signalled.elapsed());
    // Free at once, not after the 30 s TTL.
    let next = Redlock::new(&urls).args(["run", "-n", "-k", &key, "--", "true"]).run();
    next.expect(0);
}

/// The freeze ends by itself at its deadline: released, exit 0.
#[test]
fn a_freeze_ends_at_its_deadline() {
    let fleet = Fleet::start(1);
    let urls = fleet.urls();
    let key = unique_key("hold-deadline");
    let out = Redlock::new(&urls).args(["hold", "-k", &key, "--for", "1500ms"]).run();
    out.expect(0)
        .stderr_has(&format!("hold: the freeze of {key} ended at "))
        .stderr_has("; released");
    assert!(out.elapsed >= Duration::from_millis(1500), "{:?}", out.elapsed);
    assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
    Redlock::new(&urls).args(["status", "-k", &key]).run().expect(1);
}

/// A `--once-per` job whose key a freeze holds past the tick's end skips
/// its tick at once and quietly (without -v, nothing: the freeze was
/// deliberate), and `check` reports the tick paused with the freeze's
/// note, not missed.
#[test]
fn a_cron_tick_during_a_freeze_is_skipped_quietly_and_check_reports_it_paused() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let key = unique_key("hold-cron");
    let every = Duration::from_secs(3);
    let job = ["run", "--once-per", "3s", "-E", "0", "-k", &key, "--", "true"];
    next_tick(every, Duration::from_millis(50));
    Redlock::new(&urls).args(job).run().expect(0);
    let freeze = hold(&urls, "3s", &key, "60s", "Black Friday");
    frozen(&urls, &key);
    next_tick(every, Duration::from_millis(50));
    let skipped = Redlock::new(&urls).args(job).run();
    skipped.expect(0).within(Duration::from_secs(2));
    assert_eq!(skipped.stderr, "", "a paused tick mails nobody");
    let told = Redlock::new(&urls).args(["-v"]).args(job).run();
    told.expect(0).stderr_has("is paused: held by a freeze until");
    next_tick(every, Duration::from_millis(50));
    let check = Redlock::new(&urls).args(["check", "-k", &key, "--max-age", "1h"]).run();
    check.expect(0);
    assert!(
        check.stdout.contains("1 earlier ticks paused by a freeze (not missed)"),
        "{}",
        check.stdout
    );
    assert!(check.stdout.contains("\"Black Friday\""), "{}", check.stdout);
    assert!(!check.stdout.contains("did not run"), "{}", check.stdout);
    let json = Redlock::new(&urls).args(["check", "-k", &key, "--max-age", "1h", "--json"]).run();
    let json = json.json();
    assert_eq!((json["paused_count"].as_u64(), json["missed_count"].as_u64()), (Some(1), Some(0)));
    terminate(freeze);
}

/// A paused tick's metrics: it did not run (`redlock_last_tick_ran 0`)
/// and a freeze paused it (`redlock_last_tick_paused 1`), which the
/// missed-tick alert of docs/recipes.md leaves out, so a planned freeze
/// pages nobody; the first tick after the freeze says 0 again.
#[test]
fn a_paused_tick_s_metrics_say_it_was_paused_not_missed() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let key = unique_key("hold-metrics");
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("job.prom").display().to_string();
    let every = Duration::from_secs(3);
    let job = ["run", "--once-per", "3s", "-E", "0", "--metrics-file", &prom, "-k", &key];
    let run = || {
        Redlock::new(&urls).args(job).args(["--", "true"]).run().expect(0);
    };
    let read = || std::fs::read_to_string(&prom).unwrap();
    let has = |text: &str, name: &str, value: u8| {
        text.contains(&format!("{name}{{key=\"{key}\"}} {value}\n"))
    };
    next_tick(every, Duration::from_millis(50));
    run();
    assert!(has(&read(), "redlock_last_tick_ran", 1), "{}", read());
    let freeze = hold(&urls, "3s", &key, "60s", "Black Friday");
    frozen(&urls, &key);
    next_tick(every, Duration::from_millis(50));
    run();
    let text = read();
    assert!(has(&text, "redlock_last_tick_paused", 1), "a paused tick: {text}");
    assert!(has(&text, "redlock_last_tick_ran", 0), "it did not run: {text}");
    terminate(freeze);
    next_tick(every, Duration::from_millis(50));
    run();
    let text = read();
    assert!(has(&text, "redlock_last_tick_paused", 0), "{text}");
    assert!(has(&text, "redlock_last_tick_ran", 1), "{text}");
}

/// Bad input: one line, exit 64, nothing written to any server.
#[test]
fn bad_input_is_a_usage_error_and_writes_nothing() {
    let fleet = Fleet::start(1);
    let urls = fleet.urls();
    let key = unique_key("hold-bad");
    let long = "n".repeat(201);
    let cases: [&[&str]; 7] = [
        &["hold", "-k", &key],
        &["hold", "-k", &key, "--for", "0"],
        &["hold", "-k", &key, "--for", "soon"],
        &["hold", "-k", &key, "--for", "32d"],
        &["hold", "-k", &key, "--for", "1h", "--note", "a\u{1b}[2Jb"],
        &["hold", "-k", &key, "--for", "1h", "--note", &long],
        &["--max-ttl", "50ms", "hold", "-k", &key, "--for", "1h"],
    ];
    for args in cases {
        let out = Redlock::new(&urls).args(args).run();
        out.expect(64);
        assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
    }
    assert_eq!(fleet.servers[0].dbsize(), 0, "nothing written");
}

/// A key held by someone else when the freeze starts: the freeze waits in
/// the queue, naming the holder, and gives up with the busy exit after
/// `--wait`; nothing of it is left on the servers.
#[test]
fn a_freeze_that_finds_the_key_held_waits_then_is_busy() {
    let fleet = Fleet::start(1);
    let urls = fleet.urls();
    let key = unique_key("hold-busy");
    let deploy = Redlock::new(&urls)
        .args(["run", "--note", "deploy 2.4.1", "-k", &key, "--", "sleep", "30"])
        .spawn();
    let start = Instant::now();
    while Redlock::new(&urls).args(["status", "-k", &key]).run().code() != 0 {
        assert!(start.elapsed() < REACT, "the deploy never took {key}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Redlock::new(&urls).args(["hold", "-k", &key, "--for", "1h", "--wait", "1s"]).run();
    out.expect(75).stderr_has("note \"deploy 2.4.1\"").stderr_lacks("froze");
    assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
    send_signal(deploy.pid(), libc::SIGTERM);
    let _ = deploy.wait();
}
