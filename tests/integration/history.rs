//! The run history: entries written by every `run`, merged from
//! the servers by `history`, skips counted, `check`'s verdicts, and the
//! `--metrics-file` for node_exporter.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::harness::{Fleet, Output, RedisServer, Redlock, lock_key, unique_key};

/// The README's count bound and retention ("Run history").
const MAX_ENTRIES: usize = 100;
const RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;

fn history_key(key: &str) -> String {
    format!("{}:history", lock_key(key))
}

fn skips_key(key: &str) -> String {
    format!("{}:skips", lock_key(key))
}

/// `run --key KEY -- sh -c SCRIPT`: the output.
fn run(fleet: &Fleet, key: &str, script: &str) -> Output {
    Redlock::on(fleet).args(["run", "--key", key, "--", "sh", "-c", script]).run()
}

/// `history --json` with the expected exit code: the object.
fn history(fleet: &Fleet, key: &str, code: i32) -> serde_json::Value {
    let out = Redlock::on(fleet).args(["history", "--key", key, "--json"]).run();
    out.expect(code);
    out.json()
}

/// The entries' (outcome, exit code) pairs, newest first.
fn outcomes(history: &serde_json::Value) -> Vec<(String, u64)> {
    history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["outcome"].as_str().unwrap().to_owned(), e["exit_code"].as_u64().unwrap()))
        .collect()
}

/// Asserts that `key` on `server` expires within the retention, and not long before it.
fn assert_retained(server: &RedisServer, key: &str) {
    let pttl = server.pttl(key);
    assert!(
        pttl > RETENTION_MS - 60_000 && pttl <= RETENTION_MS,
        "{key}: PTTL {pttl}, want about {RETENTION_MS}"
    );
}

#[test]
fn history_survives_one_server_down_and_one_restarted_empty() {
    let mut fleet = Fleet::start(3);
    let key = unique_key("history");
    run(&fleet, &key, "true").expect(0);
    run(&fleet, &key, "exit 3").expect(3);
    run(&fleet, &key, "kill -TERM $$").expect(143);
    let want =
        vec![("signaled".to_owned(), 143), ("exited".to_owned(), 3), ("exited".to_owned(), 0)];
    let all = history(&fleet, &key, 0);
    assert_eq!(outcomes(&all), want, "{all}");
    let newest = &all["entries"][0];
    assert!(newest["fence"].as_u64().is_some(), "{newest}");
    assert!(newest["pid"].as_u64().is_some() && newest["host"].as_str().is_some(), "{newest}");
    for server in &fleet.servers {
        assert_retained(server, &history_key(&key));
    }
    let text = Redlock::on(&fleet).args(["history", "--key", &key]).run();
    text.expect(0);
    assert!(text.stdout.contains("killed by SIGTERM") && text.stdout.contains("exit 3"));

    // One server down: the others have every entry.
    fleet.servers[0].stop();
    assert_eq!(outcomes(&history(&fleet, &key, 0)), want);
    // Back, empty: the union still has them, without duplicates.
    fleet.servers[0].start_again();
    assert_eq!(fleet.servers[0].dbsize(), 0);
    assert_eq!(outcomes(&history(&fleet, &key, 0)), want);
    // A run while one server is down is recorded on the others, with no warning.
    fleet.servers[2].stop();
    run(&fleet, &key, "true").expect(0).stderr_lacks("history:");
    fleet.servers[2].start_again();
    assert_eq!(outcomes(&history(&fleet, &key, 0)).len(), 4);
    // Fewer than a quorum answer: what they have is shown, and it says so.
    fleet.servers[1].stop();
    fleet.servers[2].stop();
    let partial = history(&fleet, &key, 69);
    assert_eq!(partial["complete"], false);
    Redlock::on(&fleet).args(["check", "--key", &key, "--max-age", "1h"]).run().expect(2);
}

#[test]
fn history_keeps_the_newest_hundred_entries() {
    let server = RedisServer::start();
    let fleet = Fleet { servers: vec![server] };
    let key = unique_key("bound");
    let list = history_key(&key);
    let server = &fleet.servers[0];
    for i in 0..MAX_ENTRIES {
        let entry = format!(
            r#"{{"token":"old-{i}","host":"h","pid":1,"start_ms":{i},"duration_ms":1,"outcome":"exited","exit_code":0,"fence":null}}"#
        );
        let _: i64 = server.cmd(&["LPUSH", &list, &entry]);
    }
    run(&fleet, &key, "true").expect(0);
    let len: i64 = server.cmd(&["LLEN", &list]);
    assert_eq!(len, i64::try_from(MAX_ENTRIES).unwrap(), "the list is trimmed");
    let oldest: Vec<String> = server.cmd(&["LRANGE", &list, "-1", "-1"]);
    assert!(oldest[0].contains("\"old-1\""), "the oldest entry went: {oldest:?}");
    let out = Redlock::on(&fleet).args(["history", "--key", &key, "-n", "100", "--json"]).run();
    out.expect(0);
    let entries = out.json()["entries"].as_array().unwrap().clone();
    assert_eq!(entries.len(), MAX_ENTRIES);
    assert_ne!(entries[0]["host"], "h", "the real run is the newest");
    Redlock::on(&fleet).args(["history", "--key", &key, "-n", "101"]).run().expect(64);
}

#[test]
fn skips_are_counted_not_listed() {
    let fleet = Fleet::start(3);
    let key = unique_key("skips");
    let held = Redlock::on(&fleet).args(["acquire", "--key", &key, "--ttl", "30s"]).run();
    held.expect(0);
    for _ in 0..3 {
        Redlock::on(&fleet)
            .args(["run", "-n", "-E", "0", "--key", &key, "--", "true"])
            .run()
            .expect(0)
            .stderr_lacks("history:");
    }
    let h = history(&fleet, &key, 0);
    assert_eq!(h["skips"]["count"], 3, "{h}");
    assert!(h["skips"]["last_holder"].as_str().unwrap().contains("is held by"), "{h}");
    assert_eq!(h["entries"].as_array().unwrap().len(), 0, "no entry per skip");
    for server in &fleet.servers {
        assert_retained(server, &skips_key(&key));
    }
    let text = Redlock::on(&fleet).args(["history", "--key", &key]).run();
    text.expect(0);
    assert!(text.stdout.contains("skips: 3 since"), "{}", text.stdout);
}

/// `check`: the line and the exit code.
fn check(fleet: &Fleet, key: &str, more: &[&str], code: i32) -> String {
    let out = Redlock::on(fleet).args(["check", "--key", key]).args(more).run();
    out.expect(code);
    out.line().to_owned()
}

#[test]
fn check_says_fresh_stale_failed_and_unknown() {
    let mut fleet = Fleet::start(3);
    let key = unique_key("check");
    let line = check(&fleet, &key, &["--max-age", "1h"], 2);
    assert!(line.starts_with(&format!("UNKNOWN - {key} has no recorded run")), "{line}");

    run(&fleet, &key, "true").expect(0);
    let line = check(&fleet, &key, &["--max-age", "1h", "--require-success"], 0);
    assert!(line.starts_with(&format!("OK - {key} ran ")), "{line}");
    assert!(line.ends_with(", exit 0"), "{line}");

    run(&fleet, &key, "exit 3").expect(3);
    check(&fleet, &key, &["--max-age", "1h"], 0);
    let line = check(&fleet, &key, &["--max-age", "1h", "--require-success"], 1);
    assert!(line.starts_with("WARNING - ") && line.contains("exit 3"), "{line}");
    let json = Redlock::on(&fleet)
        .args(["check", "--key", &key, "--max-age", "1h", "--require-success", "--json"])
        .run();
    json.expect(1);
    assert_eq!(json.json()["status"], "failed");

    // A successful run two hours ago, and nothing since.
    let stale = unique_key("stale");
    let two_hours_ago = SystemTime::now() - Duration::from_secs(2 * 3600);
    let start_ms = two_hours_ago.duration_since(UNIX_EPOCH).unwrap().as_millis();
    let entry = format!(
        r#"{{"token":"t","host":"web-3","pid":1,"start_ms":{start_ms},"duration_ms":1,"outcome":"exited","exit_code":0,"fence":null}}"#
    );
    for server in &fleet.servers {
        let _: i64 = server.cmd(&["LPUSH", &history_key(&stale), &entry]);
    }
    let line = check(&fleet, &stale, &["--max-age", "1h"], 1);
    assert_eq!(
        line,
        format!("WARNING - {stale} ran 2h ago on web-3, exit 0; older than --max-age 1h")
    );
    check(&fleet, &stale, &["--max-age", "3h"], 0);

    // A run still going started within --max-age: OK, though the last
    // finished one is stale.
    let holding = Redlock::on(&fleet).args(["acquire", "--key", &stale, "--ttl", "30s"]).run();
    holding.expect(0);
    let line = check(&fleet, &stale, &["--max-age", "1h", "--require-success"], 0);
    assert!(line.starts_with(&format!("OK - {stale} is running on ")), "{line}");

    // The servers cannot say.
    fleet.servers[0].stop();
    fleet.servers[1].stop();
    let line = check(&fleet, &key, &["--max-age", "1h"], 2);
    assert!(line.starts_with("UNKNOWN - "), "{line}");
}

/// A freeze's gap (the entry `redlock hold` writes for the time it lost
/// the key) is no run: `history --json` gives it no success (`succeeded`
/// null, where a run has true or false), and `check --require-success`
/// does not count it as a failed run.
#[test]
fn a_freeze_s_gap_has_no_success_and_is_no_failed_run() {
    let fleet = Fleet::start(1);
    let key = unique_key("gap");
    run(&fleet, &key, "true").expect(0);
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
    let gap = format!(
        r#"{{"token":"g","host":"web-3","pid":1,"start_ms":{now_ms},"duration_ms":1000,"outcome":"gap","exit_code":0,"fence":null}}"#
    );
    let _: i64 = fleet.servers[0].cmd(&["LPUSH", &history_key(&key), &gap]);
    let json = history(&fleet, &key, 0);
    let entry = |outcome: &str| {
        json["entries"].as_array().unwrap().iter().find(|e| e["outcome"] == outcome).cloned()
    };
    let gap = entry("gap").unwrap_or_else(|| panic!("no gap: {json}"));
    assert!(gap["succeeded"].is_null(), "a gap has no success: {gap}");
    assert_eq!(entry("exited").unwrap()["succeeded"], true, "{json}");
    let line = check(&fleet, &key, &["--max-age", "1h", "--require-success"], 0);
    assert!(line.starts_with(&format!("OK - {key} ran ")), "{line}");
}

/// The metrics file, parsed by a real Prometheus text-format parser: each
/// sample's value by metric name.
fn metrics(path: &std::path::Path) -> std::collections::HashMap<String, f64> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    scrape
        .samples
        .into_iter()
        .map(|s| {
            let v = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                other => panic!("{}: unexpected {other:?}\n{text}", s.metric),
            };
            assert!(s.labels.get("key").is_some(), "{}: no key label\n{text}", s.metric);
            (s.metric, v)
        })
        .collect()
}

#[test]
fn the_metrics_file_parses_and_its_counters_survive_across_runs() {
    let fleet = Fleet::start(1);
    let key = unique_key("metrics");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.prom");
    let file = path.display().to_string();
    let run_with = |script: &str| {
        Redlock::on(&fleet)
            .args(["run", "-n", "-E", "0", "--metrics-file", &file, "--key", &key, "--"])
            .args(["sh", "-c", script])
            .run()
    };
    run_with("exit 0").expect(0);
    let m = metrics(&path);
    assert_eq!((m["redlock_runs_total"], m["redlock_last_ran"]), (1.0, 1.0), "{m:?}");
    assert_eq!(m["redlock_last_exit_code"], 0.0);
    run_with("exit 4").expect(4);
    // A skip: the lock is held elsewhere.
    let held = Redlock::on(&fleet).args(["acquire", "--key", &key]).run();
    held.expect(0);
    run_with("true").expect(0);
    let m = metrics(&path);
    assert_eq!(m["redlock_runs_total"], 2.0, "{m:?}");
    assert_eq!(m["redlock_skips_total"], 1.0, "{m:?}");
    assert_eq!(m["redlock_last_ran"], 0.0, "{m:?}");
    assert_eq!(m["redlock_last_exit_code"], 4.0, "the last run's code outlives a skip");
    assert!(m["redlock_last_end_timestamp_seconds"] >= m["redlock_last_start_timestamp_seconds"]);
    assert!(m["redlock_last_duration_seconds"] >= 0.0 && m["redlock_last_wait_seconds"] >= 0.0);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file left behind: {names:?}");
    assert!(names.iter().any(|n| n == "job.prom") && names.iter().any(|n| n == ".job.prom.lock"));
}

/// The metrics file's samples by metric name and `key` label.
fn metrics_by_key(path: &std::path::Path) -> std::collections::HashMap<(String, String), f64> {
    let text = std::fs::read_to_string(path).unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let mut out = std::collections::HashMap::new();
    for s in scrape.samples {
        let v = match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
            other => panic!("{}: unexpected {other:?}\n{text}", s.metric),
        };
        let key = s.labels.get("key").unwrap_or_else(|| panic!("no key label\n{text}"));
        let old = out.insert((s.metric.clone(), key.to_owned()), v);
        assert!(old.is_none(), "{} {{key={key:?}}} twice\n{text}", s.metric);
    }
    out
}

/// Two jobs, one file (one textfile per host, as node_exporter's collector
/// has it): each key keeps its own series, also when both update the file
/// at once.
#[test]
fn one_metrics_file_keeps_each_key_s_series() {
    let fleet = Fleet::start(1);
    let keys = [unique_key("metrics-a"), unique_key("metrics-b")];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.prom");
    let file = path.display().to_string();
    let run = |key: &str, code: &str| {
        Redlock::on(&fleet)
            .args(["-q", "run", "-n", "--metrics-file", &file, "--key", key, "--"])
            .args(["sh", "-c", &format!("exit {code}")])
            .run()
    };
    run(&keys[0], "3").expect(3);
    run(&keys[1], "0").expect(0);
    run(&keys[0], "3").expect(3);
    let m = metrics_by_key(&path);
    let of = |metric: &str, key: &str| m[&(metric.to_owned(), key.to_owned())];
    assert_eq!(of("redlock_runs_total", &keys[0]), 2.0, "{m:?}");
    assert_eq!(of("redlock_runs_total", &keys[1]), 1.0, "{m:?}");
    assert_eq!(of("redlock_last_exit_code", &keys[0]), 3.0, "{m:?}");
    assert_eq!(of("redlock_last_exit_code", &keys[1]), 0.0, "{m:?}");
    // Concurrent updates lose no run of either key.
    std::thread::scope(|scope| {
        for key in &keys {
            scope.spawn(|| {
                for _ in 0..8 {
                    run(key, "0").expect(0);
                }
            });
        }
    });
    let m = metrics_by_key(&path);
    let of = |metric: &str, key: &str| m[&(metric.to_owned(), key.to_owned())];
    assert_eq!(of("redlock_runs_total", &keys[0]), 10.0, "{m:?}");
    assert_eq!(of("redlock_runs_total", &keys[1]), 9.0, "{m:?}");
    let prom: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(prom, ["host.prom"], "no other file the collector would read");
}

/// The textfile has the servers' health of each invocation: a degraded
/// quorum shows in monitoring, not only in a cron mail.
#[test]
fn the_metrics_file_says_how_many_servers_answered_and_failed() {
    use crate::harness::proxy::{Mode, Proxy};
    let fleet = Fleet::start(2);
    // The live servers answer after the refusal, which the verdict then
    // certainly waited for.
    let slow: Vec<Proxy> = fleet.servers.iter().map(|s| Proxy::start(s.port)).collect();
    for proxy in &slow {
        proxy.set(Mode::Delay(Duration::from_millis(20)));
    }
    let servers = format!("{},{},redis://127.0.0.1:1", slow[0].url(), slow[1].url());
    let key = unique_key("metrics-health");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.prom");
    let file = path.display().to_string();
    let run = |servers: &str| {
        Redlock::new(servers)
            .args(["-q", "run", "-n", "--metrics-file", &file, "--key", &key, "--", "true"])
            .run()
    };
    run(&servers).expect(0);
    let m = metrics(&path);
    assert_eq!(m["redlock_last_servers"], 3.0, "{m:?}");
    assert_eq!(m["redlock_last_servers_failed"], 1.0, "{m:?}");
    assert_eq!(m["redlock_last_servers_answered"], 2.0, "{m:?}");
    run(&fleet.urls()).expect(0);
    let m = metrics(&path);
    assert_eq!((m["redlock_last_servers"], m["redlock_last_servers_failed"]), (2.0, 0.0), "{m:?}");
}

/// A server in its restart window answers but may not vote yet: the
/// textfile counts it apart, as `redlock_last_servers_no_vote`, neither
/// answered nor failed, so the failing-server alert does not fire for a
/// routine restart (issue 52 item 4).
#[test]
fn the_metrics_file_counts_a_server_without_a_vote_yet_apart_from_failures() {
    use crate::harness::proxy::{Mode, Proxy};
    let fleet = Fleet::start(2);
    // The two old servers are out of their window (--max-ttl 3s plus 1 s).
    std::thread::sleep(Duration::from_millis(4_500));
    let young = RedisServer::start();
    // The young server's answer comes first, so the verdict waits for it.
    let slow: Vec<Proxy> = fleet.servers.iter().map(|s| Proxy::start(s.port)).collect();
    for proxy in &slow {
        proxy.set(Mode::Delay(Duration::from_millis(50)));
    }
    let servers = format!("{},{},{}", slow[0].url(), slow[1].url(), young.url());
    let key = unique_key("metrics-no-vote");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.prom");
    let file = path.display().to_string();
    Redlock::new(&servers)
        .distrust_restarts()
        .args(["-q", "--max-ttl", "3s", "run", "--wait", "2s", "--ttl", "3s"])
        .args(["--metrics-file", &file])
        .args(["--key", &key, "--", "true"])
        .run()
        .expect(0);
    let m = metrics(&path);
    assert_eq!(m["redlock_last_servers"], 3.0, "{m:?}");
    assert_eq!(m["redlock_last_servers_no_vote"], 1.0, "{m:?}");
    assert_eq!(m["redlock_last_servers_failed"], 0.0, "{m:?}");
    assert_eq!(m["redlock_last_servers_answered"], 2.0, "{m:?}");
}

/// A history or skip key of another type is no history of ours: the run
/// keeps its exit status, the write is refused (WRONGTYPE, in a warning),
/// and the value is left as it was, its expiry included (a PEXPIRE after a
/// failed write would have set one on someone else's key).
#[test]
fn a_history_key_of_another_type_is_refused_and_left_untouched() {
    let fleet = Fleet::start(3);
    let key = unique_key("history-type");
    for k in [history_key(&key), skips_key(&key)] {
        for s in &fleet.servers {
            let _: String = s.cmd(&["SET", &k, "not-ours"]);
        }
    }
    let out = run(&fleet, &key, "exit 4");
    out.expect(4);
    assert!(out.stderr.contains("WRONGTYPE"), "{}", out.stderr);
    let (token, _) = Redlock::on(&fleet).acquire(&key, "30s");
    let out = Redlock::on(&fleet).args(["run", "-n", "--key", &key, "--", "true"]).run();
    out.expect(75);
    assert!(out.stderr.contains("WRONGTYPE"), "{}", out.stderr);
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    for k in [history_key(&key), skips_key(&key)] {
        for s in &fleet.servers {
            assert_eq!(s.get(&k).as_deref(), Some("not-ours"), "{k}");
            assert_eq!(s.pttl(&k), -1, "{k}: someone else's value keeps its expiry");
        }
    }
}

/// The metrics file's directory may hold names planted by someone else:
/// a symbolic link at the temporary file's name (once `.NAME.<pid>.tmp`,
/// which anyone could guess) or at the sidecar lock's is never followed,
/// so the file it points to is neither written nor created.
#[test]
fn the_metrics_file_follows_no_symbolic_link() {
    use std::os::unix::fs::symlink;
    let fleet = Fleet::start(1);
    let key = unique_key("metrics-symlink");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.prom");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let run = |script: &str| {
        Redlock::on(&fleet)
            .args(["run", "-n", "--metrics-file", &path.display().to_string(), "--key", &key])
            .args(["--", "sh", "-c", script])
            .run()
    };
    // The command's parent is redlock: $PPID is the pid the name used.
    let plant = format!("ln -s {} {}/.job.prom.$PPID.tmp", victim.display(), dir.path().display());
    run(&plant).expect(0);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "the link was followed");
    assert!(!path.is_symlink(), "the link was renamed into place");
    assert_eq!(metrics(&path)["redlock_runs_total"], 1.0);

    let lock = dir.path().join(".job.prom.lock");
    std::fs::remove_file(&lock).unwrap();
    let made = dir.path().join("made-through-the-link");
    symlink(&made, &lock).unwrap();
    let out = run("true");
    out.expect(0).stderr_has(".job.prom.lock").stderr_has("symbolic link");
    assert!(!made.exists(), "the sidecar's link was followed");
    assert_eq!(metrics(&path)["redlock_runs_total"], 1.0, "no update without the lock");
}

/// A metrics file in a directory that others may write, without the
/// sticky bit, can be replaced or redirected by them: a usage error, found
/// before any server is contacted. /tmp's kind (sticky) is fine.
#[test]
fn a_metrics_file_in_a_directory_others_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let file = open.join("job.prom").display().to_string();
    let out = Redlock::new("redis://127.0.0.1:1")
        .args(["run", "-n", "--metrics-file", &file, "--key", "k", "--", "true"])
        .run();
    out.expect(64).stderr_has(&file).stderr_has("sticky");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(!open.join("job.prom").exists());

    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let fleet = Fleet::start(1);
    let key = unique_key("metrics-sticky");
    Redlock::on(&fleet)
        .args(["run", "--metrics-file", &file, "--key", &key, "--", "true"])
        .run()
        .expect(0);
    assert_eq!(metrics(&open.join("job.prom"))["redlock_runs_total"], 1.0);
}

/// A FIFO planted at the metrics file's name or the sidecar's (anyone may
/// make one in a sticky directory such as /tmp, where the file's name is
/// free) would block the open until someone reads or writes it: the
/// update fails with a warning instead, and the run ends.
#[test]
fn a_fifo_at_the_metrics_file_s_names_blocks_nothing() {
    let fleet = Fleet::start(1);
    let key = unique_key("metrics-fifo");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.prom");
    for planted in [dir.path().join(".job.prom.lock"), path.clone()] {
        let _ = std::fs::remove_file(&planted);
        let made = std::process::Command::new("mkfifo").arg(&planted).status().unwrap();
        assert!(made.success(), "mkfifo {}", planted.display());
        let out = Redlock::on(&fleet)
            .args(["run", "-n", "--metrics-file", &path.display().to_string(), "--key", &key])
            .args(["--", "true"])
            .run();
        out.expect(0).within(Duration::from_secs(10)).stderr_has("not a regular file");
        std::fs::remove_file(&planted).unwrap();
    }
}
