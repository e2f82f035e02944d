//! What a newcomer reads: usage errors that keep the parser's content on
//! one line, and server errors that say what is wrong (wrong password, a
//! missing socket, TLS to a plain port, a bad URL, a renamed command).

use std::time::Duration;

use crate::harness::{Output, RedisServer, Redlock, bin, lock_key, root, unique_key};

/// Asserts exit 64 and one line on stderr holding every one of `expect`.
fn usage(args: &[&str], expect: &[&str]) -> Output {
    let out = Redlock::new("redis://127.0.0.1:1").args(args).run();
    out.expect(64);
    if out.stderr.lines().count() != 1 {
        out.fail("should print one line");
    }
    for e in expect {
        out.stderr_has(e);
    }
    out
}

#[test]
fn usage_errors_name_what_is_wrong_on_one_line() {
    usage(&["release", "--key", "m2"], &["--token <TOKEN>"]);
    usage(&["run", "--key", "a", "echo", "hello"], &["'echo'", "-- echo"]);
    usage(&["runn"], &["'runn'", "did you mean 'run'?"]);
    usage(&["run", "--key", "a", "--wait", "-10s", "--", "true"], &["--wait \"-10s\"", "negative"]);
    usage(&["run", "-k", "a", "-n", "-w", "5", "--", "true"], &["--no-wait", "--wait"]);
    usage(&["acquire", "-k", "a", "--wait", "soon"], &["--wait \"soon\"", "not a duration"]);
    usage(&["run", "-k", "a", "--metrics-file", "/", "--", "true"], &["--metrics-file /"]);
    usage(&["history", "-k", "a", "-n", "0"], &["-n 0", "between 1 and 100"]);
    usage(&["check", "-k", "a", "--max-age", "soon"], &["--max-age \"soon\"", "not a duration"]);
}

#[test]
fn redlock_alone_prints_a_short_usage_and_exits_64() {
    let out = Redlock::new("redis://127.0.0.1:1").run();
    out.expect(64).stderr_has("Usage: redlock").stderr_has("run");
    assert!(out.stdout.is_empty());
}

#[test]
fn wait_zero_tries_once_and_bare_numbers_are_seconds() {
    let server = RedisServer::start();
    let key = unique_key("flock-habits");
    let token = Redlock::new(&server.url()).args(["acquire", "-k", &key, "--ttl", "30"]).run();
    token.expect(0);
    assert!(server.pttl(&lock_key(&key)) > 25_000, "--ttl 30 is 30 seconds");
    Redlock::new(&server.url())
        .args(["run", "-k", &key, "--wait", "0", "--", "true"])
        .run()
        .expect(75)
        .within(Duration::from_secs(5));
    let out = Redlock::new(&server.url()).args(["run", "-k", &key, "-w", "1", "--", "true"]).run();
    out.expect(75);
    assert!(out.elapsed >= Duration::from_millis(900), "-w 1 waits a second: {:?}", out.elapsed);
}

/// Asserts one line on stderr (the error) that holds every one of `expect`.
fn one_line(out: &Output, expect: &[&str]) {
    if out.stderr.lines().count() != 1 {
        out.fail("should print one line");
    }
    for e in expect {
        out.stderr_has(e);
    }
}

/// Not busy-retried: a configuration error ends even an endless wait at once.
const AT_ONCE: Duration = Duration::from_secs(5);

#[test]
fn a_wrong_password_is_one_short_line_naming_the_servers() {
    let servers: Vec<RedisServer> =
        (0..3).map(|_| RedisServer::start_with(&["--requirepass", "right"])).collect();
    let urls: Vec<String> =
        servers.iter().map(|s| format!("redis://:wrong@127.0.0.1:{}", s.port)).collect();
    let out = Redlock::new(&urls.join(",")).args(["run", "-k", "k", "--", "true"]).run();
    out.expect(69).within(AT_ONCE);
    one_line(&out, &["WRONGPASS", "(same on "]);
    for s in &servers {
        assert!(out.stderr.contains(&s.name()), "every server named: {}", out.stderr);
    }
    assert!(out.stderr.len() < 200, "short: {}", out.stderr);
    assert!(!out.stderr.contains("wrong@"), "{}", out.stderr);
}

#[test]
fn url_mistakes_get_the_fix_as_a_hint() {
    usage(&["--servers", "127.0.0.1:6379", "status", "-k", "k"], &["use redis://127.0.0.1:6379"]);
    usage(
        &["--servers", "unix://tmp/redis.sock", "status", "-k", "k"],
        &["third slash", "unix:///tmp/redis.sock"],
    );
}

#[test]
fn a_missing_unix_socket_says_no_such_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("unix://{}/absent.sock", dir.path().display());
    let out = Redlock::new(&url).args(["run", "-k", "k", "--", "true"]).run();
    out.expect(69).within(AT_ONCE);
    one_line(&out, &["no such file", "absent.sock"]);
}

#[test]
fn tls_to_a_plain_port_says_tls() {
    let server = RedisServer::start();
    let url = format!("rediss://127.0.0.1:{}", server.port);
    let out = Redlock::new(&url)
        .args(["--node-timeout", "300ms", "run", "-n", "-k", "k", "--", "true"])
        .run();
    out.expect(69);
    one_line(&out, &["TLS", "rediss://"]);
}

#[test]
fn a_database_out_of_range_ends_at_once() {
    let server = RedisServer::start();
    let url = format!("redis://127.0.0.1:{}/99", server.port);
    let out = Redlock::new(&url).args(["run", "-k", "k", "--", "true"]).run();
    out.expect(69).within(AT_ONCE);
    one_line(&out, &["DB index is out of range"]);
}

#[test]
fn a_server_without_scripting_ends_at_once_instead_of_waiting_silently() {
    let server = RedisServer::start_with(&[
        "--rename-command",
        "EVAL",
        "",
        "--rename-command",
        "EVALSHA",
        "",
    ]);
    // The lock itself needs no scripting (src/lock/noscript.rs, tests in
    // tests/integration/noscript.rs); what does, `--shared`, ends at once in one line.
    let out = Redlock::new(&server.url()).args(["run", "--shared", "-k", "k", "--", "true"]).run();
    out.expect(69).within(AT_ONCE);
    one_line(&out, &["refuses scripts"]);
    if out.stderr.contains("with args") {
        out.fail("should not echo the script's arguments");
    }
}

#[test]
fn status_with_too_few_servers_says_unknown_not_free() {
    let server = RedisServer::start();
    let servers = format!("{},redis://127.0.0.1:1,redis://127.0.0.1:2", server.url());
    let out = Redlock::new(&servers).args(["status", "-k", "k", "--json"]).run();
    out.expect(69);
    assert_eq!(out.json()["held"], serde_json::Value::Null, "{}", out.stdout);
    let out = Redlock::new(&servers).args(["status", "-k", "k"]).run();
    out.expect(69);
    assert!(out.stdout.contains("unknown: only 1 of 3 servers answered"), "{}", out.stdout);
    // Free, when known, does not read as if a quorum held it.
    let free = Redlock::new(&server.url()).args(["status", "-k", "k"]).run();
    free.expect(1);
    assert!(free.stdout.contains("free: k is not held"), "{}", free.stdout);
    let json = Redlock::new(&server.url()).args(["status", "-k", "k", "--json"]).run();
    assert_eq!(json.expect(1).json()["held"], false);
}

#[test]
fn doctor_names_an_auth_error_as_such() {
    let server = RedisServer::start_with(&["--requirepass", "pw"]);
    let out = Redlock::new(&server.url_without_password()).args(["doctor"]).run();
    out.expect(69);
    let row = out.stdout.lines().find(|l| l.starts_with(&server.name())).unwrap_or_default();
    assert!(row.contains("auth error") && !row.contains("unreachable"), "{}", out.stdout);
}

/// A server with a password answers the eleven-word shared acquire, sent
/// before any AUTH, with a protocol error instead of NOAUTH: it is still
/// the missing password, at once, not a wait.
#[test]
fn a_missing_password_ends_a_shared_wait_at_once() {
    let server = RedisServer::start_with(&["--requirepass", "pw"]);
    let out = Redlock::new(&server.url_without_password())
        .args(["run", "--shared", "-k", "k", "--wait", "1m", "--", "true"])
        .run();
    out.expect(69).stderr_has("NOAUTH").within(Duration::from_secs(10));
}

#[test]
fn the_json_busy_warning_is_an_event() {
    let server = RedisServer::start();
    let key = unique_key("busy-event");
    Redlock::new(&server.url()).args(["acquire", "-k", &key]).run().expect(0);
    let out = Redlock::new(&server.url())
        .args(["--log-format", "json", "run", "-n", "-k", &key, "--", "true"])
        .run();
    out.expect(75);
    let busy = out
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["level"] == "warn")
        .unwrap_or_else(|| out.fail("no warn line"));
    assert_eq!(busy["event"], "busy", "{busy}");
}

#[test]
fn run_warns_once_when_a_server_is_down() {
    let fleet = crate::harness::Fleet::start(2);
    let servers = format!("{},redis://127.0.0.1:1", fleet.urls());
    let out =
        Redlock::new(&servers).args(["run", "-k", &unique_key("one-down"), "--", "true"]).run();
    out.expect(0);
    one_line(&out, &["1 of 3 servers failed", "127.0.0.1:1", "connection refused"]);
    let quiet = Redlock::new(&servers).args(["-q", "run", "-k", "k2", "--", "true"]).run();
    assert!(quiet.expect(0).stderr.is_empty(), "{}", quiet.stderr);
}

#[test]
fn status_of_split_votes_says_contended_and_names_no_holder() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let key = unique_key("contended");
    let _: String = servers[0].cmd(&["SET", &lock_key(&key), "vote-a", "PX", "60000"]);
    let _: String = servers[1].cmd(&["SET", &lock_key(&key), "vote-b", "PX", "60000"]);
    let out = Redlock::new(&urls.join(",")).args(["status", "-k", &key]).run();
    out.expect(1);
    assert!(out.stdout.contains("contended by 2 token(s) without a quorum"), "{}", out.stdout);
    assert!(!out.stdout.contains("held by"), "{}", out.stdout);
}

/// A server the round did not wait for is "not awaited", never a failure,
/// and the counts say what each server did.
#[test]
fn counts_say_what_each_server_did() {
    use crate::harness::proxy::{Mode, Proxy};
    let fleet = crate::harness::Fleet::start(3);
    let slow = Proxy::start(fleet.servers[2].port);
    slow.set(Mode::Delay(Duration::from_millis(300)));
    let servers = format!("{},{},{}", fleet.servers[0].url(), fleet.servers[1].url(), slow.url());
    let key = unique_key("counts");
    let out = Redlock::new(&servers)
        .args(["-v", "--node-timeout", "2s", "run", "-k", &key, "--", "true"])
        .run();
    out.expect(0);
    out.stderr_has(&format!("acquired {key} after 1 attempt(s)"))
        .stderr_has("granted by 2 of 3 (quorum 2), 1 not awaited")
        .stderr_has(&format!("released {key}: deleted on 2 of 3 (quorum 2), 1 not awaited"))
        .stderr_lacks("2/3");
    // One server up (and slow), two refusing: what failed is counted as
    // failed, the one not waited for is not counted as silent.
    let servers = format!("{},redis://127.0.0.1:1,redis://127.0.0.1:2", slow.url());
    let out = Redlock::new(&servers).args(["run", "-n", "-k", &key, "--", "true"]).run();
    out.expect(69);
    one_line(
        &out,
        &[
            &format!("acquire {key}: 2 of 3 servers failed (quorum 2), 1 not awaited: "),
            "127.0.0.1:1: connection refused (same on 127.0.0.1:2)",
        ],
    );
    out.stderr_lacks("0 of 3");
}

/// An error names the operation and the key once, not again for each
/// server.
#[test]
fn an_error_names_the_operation_once() {
    let server = RedisServer::start_with(&["--requirepass", "right"]);
    let url = format!("redis://:wrong@127.0.0.1:{}", server.port);
    let out = Redlock::new(&url).args(["run", "-k", "pw", "--", "true"]).run();
    out.expect(69);
    one_line(&out, &["acquire pw: 1 of 1 server failed (quorum 1): ", "WRONGPASS"]);
    assert_eq!(out.stderr.matches("acquire pw").count(), 1, "{}", out.stderr);
}

/// Every JSON line has an `event`, the error line too: a pipeline that
/// routes on it drops nothing, least of all the line that matters.
#[test]
fn every_json_line_is_an_event_the_error_too() {
    let lines = |out: &Output| -> Vec<serde_json::Value> {
        out.stderr
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| out.fail("a line is not JSON")))
            .collect()
    };
    let out = Redlock::new("redis://127.0.0.1:1")
        .args(["--log-format", "json", "-vv", "run", "-k", "k", "--wait", "300ms", "--", "true"])
        .run();
    out.expect(69);
    let all = lines(&out);
    assert!(all.len() > 2, "{}", out.stderr);
    for line in &all {
        assert!(line["event"].is_string(), "no event: {line}");
    }
    let last = all.last().unwrap();
    assert_eq!((&last["event"], &last["level"]), (&"error".into(), &"error".into()), "{last}");
    assert_eq!((&last["kind"], &last["exit_code"]), (&"unavailable".into(), &69.into()), "{last}");
    // A command line that does not parse, asking for JSON, gets JSON.
    let out = Redlock::new("redis://127.0.0.1:1").args(["--log-format=json", "runn"]).run();
    out.expect(64);
    let all = lines(&out);
    assert_eq!(all.len(), 1, "{}", out.stderr);
    assert_eq!((&all[0]["event"], &all[0]["kind"]), (&"error".into(), &"usage".into()));
}

/// Flags that would silently do the wrong thing are refused or corrected:
/// a single-dash long option (`-key=deploy` would lock the key
/// `ey=deploy`), a typo's nearest option and subcommand, a misspelt
/// scheme, URLs separated by spaces.
#[test]
fn flags_that_did_the_wrong_thing_are_refused_with_the_fix() {
    let out = usage(
        &["run", "-key=deploy", "--", "true"],
        &["'-key=deploy'", "-k with the value 'ey=deploy'"],
    );
    out.stderr_has("did you mean '--key=deploy'?");
    usage(&["run", "-k", "a", "-ttl", "5s", "--", "true"], &["did you mean '--ttl'?"]);
    usage(&["acquire", "-k", "a", "-wait", "5"], &["'-wait'", "did you mean '--wait'?"]);
    usage(&["-servers=redis://:pw@h:1", "status", "-k", "a"], &["did you mean '--servers="])
        .stderr_lacks("pw");
    usage(&["run", "--kye", "a", "--", "true"], &["did you mean '--key'?"])
        .stderr_lacks("--keep")
        .stderr_lacks("-- --kye");
    usage(&["run", "-k", "a", "--wiat", "5", "--", "true"], &["did you mean '--wait'?"]);
    usage(&["rn"], &["'rn'", "did you mean 'run'?"]);
    usage(&["--servers", "redis//host:6391", "status", "-k", "k"], &["use redis://host:6391"])
        .stderr_lacks("redis://redis");
    usage(
        &["--servers", "redis://a:1 redis://b:2", "status", "-k", "k"],
        &["separate servers with commas, not spaces: redis://a:1,redis://b:2"],
    )
    .stderr_lacks("invalid port");
    // A word after an option that takes a value is that value: a key may
    // begin with a dash.
    let server = RedisServer::start();
    Redlock::new(&server.url()).args(["run", "--key", "-wait", "--", "true"]).run().expect(0);
    Redlock::new(&server.url()).args(["run", "-k", "-ttl", "--", "true"]).run().expect(0);
    // `-key=deploy` locked nothing.
    let out = Redlock::new(&server.url()).args(["run", "-key=deploy", "--", "true"]).run();
    out.expect(64);
    assert_eq!(server.get(&lock_key("ey=deploy")), None);
}

/// `status` never names a process as the holder once it has ended: after
/// `run --keep`, the lock is kept by --keep, until a time; after
/// `acquire`, the pid is the caller's (which holds the token), and said
/// so.
#[test]
fn status_says_who_really_holds_the_lock() {
    let server = RedisServer::start();
    let key = unique_key("kept");
    Redlock::new(&server.url())
        .args(["run", "--keep", "20s", "-k", &key, "--", "true"])
        .run()
        .expect(0);
    let out = Redlock::new(&server.url()).args(["status", "-k", &key]).run();
    out.expect(0);
    let last = out.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with(&format!("held: {key} is kept by --keep until ")), "{}", out.stdout);
    assert!(last.contains(" ended at ") && last.contains("(exit 0)"), "{}", out.stdout);
    let json = Redlock::new(&server.url()).args(["status", "-k", &key, "--json"]).run();
    let holder = &json.expect(0).json()["holder"];
    assert_eq!(holder["run_ended"]["exit_code"], 0, "{holder}");
    assert!(holder["kept_until"].is_string(), "{holder}");
    assert_eq!(holder["process_ended"], true, "{holder}");

    // `acquire` run by a shell: the shell holds the token.
    let key = unique_key("caller");
    let script = format!("{} acquire -k {key} > /dev/null && echo $$", bin());
    let mut sh = std::process::Command::new("/bin/sh");
    crate::harness::isolate(&mut sh).env("REDLOCK_SERVERS", server.url()).args(["-c", &script]);
    let shell = sh.output().unwrap();
    assert!(shell.status.success(), "{shell:?}");
    let shell_pid: u64 = String::from_utf8_lossy(&shell.stdout).trim().parse().unwrap();
    let json = Redlock::new(&server.url()).args(["status", "-k", &key, "--json"]).run();
    let holder = &json.expect(0).json()["holder"];
    assert_eq!((&holder["pid"], &holder["caller"]), (&shell_pid.into(), &true.into()), "{holder}");
    let out = Redlock::new(&server.url()).args(["status", "-k", &key]).run();
    out.expect(0);
    assert!(
        out.stdout.contains(&format!("pid {shell_pid} (the caller of redlock acquire, since ")),
        "{}",
        out.stdout
    );
    // The shell has exited too: said, on this host.
    assert!(out.stdout.contains("; that process has ended)"), "{}", out.stdout);
}

/// A subcommand's `-h` shows what it adds and points to `redlock -h` for
/// the global options; `--help` and the man page stay complete.
#[test]
fn short_help_shows_what_the_subcommand_adds() {
    let help = |args: &[&str]| {
        let out = Redlock::new("").args(args).run();
        out.expect(0);
        out.stdout.clone()
    };
    let short = help(&["run", "-h"]);
    assert!(!short.contains("--servers <") && !short.contains("--log-format <"), "{short}");
    assert!(short.contains("'redlock -h'") && short.contains("'redlock run --help'"), "{short}");
    assert!(
        short.contains("--keep <DUR>") && short.contains("redlock run --cron '30 2 * * *' -E 0"),
        "{short}"
    );
    assert!(short.lines().count() <= 50, "{} lines", short.lines().count());
    assert!(help(&["status", "-h"]).lines().count() <= 20);
    let long = help(&["run", "--help"]);
    assert!(long.contains("--servers <URL[,URL...]>") && long.contains("--keep <DUR>"), "{long}");
    assert!(!long.contains("'redlock -h'"), "{long}");
    assert!(help(&["-h"]).contains("--servers <URL[,URL...]>"));
    let man = std::fs::read_to_string(root().join("man/redlock-run.1"));
    let man = man.unwrap();
    assert!(man.contains("\\-\\-servers") && man.contains("Redis servers, comma"), "{man}");
}

#[test]
fn the_holder_says_where_it_runs_its_note_and_ci_job_and_nothing_else() {
    let server = RedisServer::start();
    let url = server.url();
    let key = unique_key("whereabouts");
    let github = |r: Redlock| {
        r.env("GITHUB_SERVER_URL", "https://bot:hunter2@github.example")
            .env("GITHUB_REPOSITORY", "acme/deploy-tools")
            .env("GITHUB_RUN_ID", "5759")
            .env("AWS_SECRET_ACCESS_KEY", "never-shown")
    };
    let job = "https://github.example/acme/deploy-tools/actions/runs/5759";
    github(Redlock::new(&url))
        .args(["acquire", "-k", &key, "--ttl", "1m", "--note", "release 2.4 by ana"])
        .run()
        .expect(0);
    let secrets = |out: &Output| {
        out.stderr_lacks("hunter2").stderr_lacks("never-shown");
        assert!(!out.stdout.contains("hunter2") && !out.stdout.contains("never-shown"));
    };
    // The busy message, the waiter's line and the end of its wait.
    let busy = Redlock::new(&url).args(["run", "-n", "-k", &key, "--", "true"]).run();
    busy.expect(75).stderr_has(&format!("CI job {job}")).stderr_has("note \"release 2.4 by ana\"");
    secrets(&busy);
    let waited = Redlock::new(&url).args(["run", "-w", "1", "-k", &key, "--", "true"]).run();
    waited.expect(75);
    let first = waited.stderr.lines().next().unwrap_or_default();
    if !first.contains(job) || !first.contains("release 2.4 by ana") {
        waited.fail("the waiter's first line should say where the holder runs");
    }
    // status, as text and as JSON.
    let status = Redlock::new(&url).args(["status", "-k", &key]).run();
    status.expect(0);
    assert!(
        status.stdout.contains(job) && status.stdout.contains("release 2.4 by ana"),
        "{}",
        status.stdout
    );
    secrets(&status);
    let json = Redlock::new(&url).args(["status", "-k", &key, "--json"]).run();
    let holder = &json.json()["holder"];
    assert_eq!(holder["note"], "release 2.4 by ana", "{}", json.stdout);
    assert_eq!(holder["job"], job, "{}", json.stdout);
    secrets(&json);
    // history: a run in GitLab CI.
    let ran = unique_key("whereabouts-history");
    Redlock::new(&url)
        .env("CI_JOB_URL", "https://gitlab.example/acme/app/-/jobs/77")
        .args(["run", "-k", &ran, "--note", "nightly", "--", "true"])
        .run()
        .expect(0);
    let history = Redlock::new(&url).args(["history", "-k", &ran, "--json"]).run();
    let entry = &history.json()["entries"][0];
    assert_eq!(entry["note"], "nightly", "{}", history.stdout);
    assert_eq!(entry["job"], "https://gitlab.example/acme/app/-/jobs/77", "{}", history.stdout);
    let table = Redlock::new(&url).args(["history", "-k", &ran]).run();
    assert!(
        table.stdout.contains("https://gitlab.example/acme/app/-/jobs/77 \"nightly\""),
        "{}",
        table.stdout
    );
    // A note is bounded and printable: refused before any server is asked.
    let long = "x".repeat(201);
    usage(&["acquire", "-k", "a", "--note", &long], &["--note", "201 bytes", "200"]);
    usage(
        &["run", "-k", "a", "--note", "a\u{1b}[2J", "--", "true"],
        &["--note", "control character"],
    );
}

/// A wait that runs out says so before what the last attempt saw, so the
/// line is not read as the holder's fault alone; `-n` did not wait.
#[test]
fn a_wait_that_runs_out_says_it_gave_up() {
    let server = RedisServer::start();
    let key = unique_key("gave-up");
    Redlock::new(&server.url()).args(["acquire", "-k", &key, "--ttl", "1m"]).run().expect(0);
    let out = Redlock::new(&server.url()).args(["run", "-w", "1", "-k", &key, "--", "true"]).run();
    out.expect(75);
    let last = out.stderr.lines().last().unwrap_or_default();
    // The time it waited (about the bound), and the bound.
    if !last.contains("gave up after 1.")
        || !last.contains(&format!("s (--wait 1.0s): {key} is held by "))
    {
        out.fail("the last line should say the wait gave up");
    }
    let out = Redlock::new(&server.url()).args(["run", "-n", "-k", &key, "--", "true"]).run();
    out.expect(75).stderr_lacks("gave up");
    let out = Redlock::new("redis://127.0.0.1:1")
        .args(["run", "-w", "1", "-k", &key, "--", "true"])
        .run();
    out.expect(69);
    let last = out.stderr.lines().last().unwrap_or_default();
    if !last.contains("gave up after 1.")
        || !last.contains(&format!("s (--wait 1.0s): acquire {key}: "))
    {
        out.fail("the last line should say the wait gave up");
    }
}

/// The JSON events of a run that waits, and of a round one server was not
/// waited for: no line per attempt without `-v` (a CI wait of 15 minutes
/// would write a thousand), milliseconds to the microsecond, and a server
/// not needed for the quorum is no fault in a message without `-v`.
#[test]
fn json_logs_say_the_phases_not_every_attempt_and_round_their_numbers() {
    use crate::harness::proxy::{Mode, Proxy};
    let fleet = crate::harness::Fleet::start(3);
    let slow = Proxy::start(fleet.servers[2].port);
    slow.set(Mode::Delay(Duration::from_millis(300)));
    let servers = format!("{},{},{}", fleet.servers[0].url(), fleet.servers[1].url(), slow.url());
    let key = unique_key("json-attempts");
    let (token, _) = Redlock::new(&fleet.urls()).acquire(&key, "1500ms");
    assert!(!token.is_empty());
    let events = |verbose: bool| {
        let mut r = Redlock::new(&servers).args(["--log-format", "json", "--node-timeout", "2s"]);
        if verbose {
            r = r.args(["-v"]);
        }
        let out = r.args(["run", "-w", "10s", "-k", &key, "--", "true"]).run();
        out.expect(0);
        let lines: Vec<serde_json::Value> = out
            .stderr
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| out.fail("not JSON")))
            .collect();
        (out, lines)
    };
    let (out, lines) = events(false);
    let attempts = lines.iter().filter(|l| l["event"] == "acquire_attempt").count();
    if attempts > 0 {
        out.fail("attempts are debug events without -v");
    }
    for l in &lines {
        let msg = l["msg"].as_str().unwrap_or_default();
        if msg.contains("not awaited") {
            out.fail("a server not needed for the quorum is shown only with -v");
        }
    }
    let mut numbers = Vec::new();
    fn floats(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Number(n) if n.is_f64() => out.push(n.to_string()),
            serde_json::Value::Array(a) => a.iter().for_each(|v| floats(v, out)),
            serde_json::Value::Object(o) => o.values().for_each(|v| floats(v, out)),
            _ => {}
        }
    }
    let (out, lines) = events(true);
    assert!(lines.iter().any(|l| l["event"] == "acquire_attempt"), "{}", out.stderr);
    lines.iter().for_each(|l| floats(l, &mut numbers));
    assert!(!numbers.is_empty(), "{}", out.stderr);
    for n in &numbers {
        let decimals = n.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(decimals <= 3, "{n} in {}", out.stderr);
    }
}
