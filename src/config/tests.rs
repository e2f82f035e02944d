//! The whole assembly tested through [`Config::from_parsed`]: the command
//! line and the file's text in, the configuration or the usage error out.

use super::*;
use crate::lock::Wait;

/// The configuration of `args`, with one server unless they name some.
fn config(args: &[&str]) -> Result<Config, Error> {
    let servers = if args.contains(&"--servers") { None } else { Some("--servers=redis://h") };
    bare_config(&servers.into_iter().chain(args.iter().copied()).collect::<Vec<_>>())
}

#[test]
fn a_note_is_bounded_and_the_ci_job_carries_no_credentials() {
    let run = |note: &str| config(&["run", "-k", "k", "--note", note, "--", "true"]);
    let Command::Run(r) = run("deploy").unwrap().command else { panic!("not run") };
    assert_eq!((r.request.note.as_deref(), r.request.job), (Some("deploy"), None));
    let Command::Run(r) = run("").unwrap().command else { panic!("not run") };
    assert_eq!(r.request.note, None, "an empty note is none");
    assert!(run(&"é".repeat(100)).is_ok(), "200 bytes");
    assert!(matches!(run(&"é".repeat(101)), Err(Error::Usage(m)) if m.contains("202 bytes")));
    assert!(matches!(run("a\tb"), Err(Error::Usage(m)) if m.contains("control character")));
    assert_eq!(
        ci_job("https://ci:s3cret@git.example/o/r/-/jobs/1").as_deref(),
        Some("https://ci:***@git.example/o/r/-/jobs/1")
    );
    assert_eq!(ci_job(&format!("https://x/{}", "a".repeat(200))), None, "too long: left out");
    assert_eq!(ci_job("https://x/\u{7}y"), None);
}

/// The configuration of exactly `args`, in an empty environment.
fn bare_config(args: &[&str]) -> Result<Config, Error> {
    let parsed =
        cli::parse_with_env(std::iter::once("redlock").chain(args.iter().copied()), |_| None)
            .map_err(|e| Error::Usage(e.to_string()))?;
    Config::from_parsed(parsed, None)
}

/// The configuration of `args` (one server) with `text` as the file.
/// `config` runs every check a command would on the file's values
/// and keeps going after the first; `doctor` refuses with the same.
#[test]
fn config_and_doctor_find_every_problem_a_command_would() {
    let text = "ttl = \"5m\"\nwait = \"15mn\"\nquorum = 2\nnode-timeout = \"10m\"\n";
    let Command::ShowConfig { rows, problems, check, .. } =
        file_config(&["config", "--check"], text).unwrap().command
    else {
        panic!("not config")
    };
    assert!(check && !rows.is_empty());
    let expected = [
        "/etc/r.toml:3: quorum 2: must be more than half of the 1 server(s)",
        "/etc/r.toml:1: ttl 5m: above --max-ttl 1m",
        "/etc/r.toml:2: wait \"15mn\": not a duration",
        "/etc/r.toml:4: node-timeout 10m: must be shorter than the TTL (5m)",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:?}");
    for (problem, expected) in problems.iter().zip(expected) {
        assert!(problem.starts_with(expected), "{problem}");
    }
    match file_config(&["doctor"], text) {
        Err(Error::Problems(found)) => assert_eq!(found, problems),
        other => panic!("{other:?}"),
    }
    // A command stops at its first problem, as before.
    let m = usage_of(file_config(&["run", "-k", "k", "--", "true"], text));
    assert!(m.contains("quorum 2"), "{m}");
}

fn usage_of(result: Result<Config, Error>) -> String {
    match result {
        Err(Error::Usage(m)) => m,
        other => panic!("expected a usage error, got {other:?}"),
    }
}

fn file_config(args: &[&str], text: &str) -> Result<Config, Error> {
    let args = ["redlock", "--servers=redis://h"].into_iter().chain(args.iter().copied());
    let parsed = cli::parse_with_env(args, |_| None).map_err(|e| Error::Usage(e.to_string()))?;
    let file = config_file::File::parse(std::path::Path::new("/etc/r.toml"), text.to_owned());
    Config::from_parsed(parsed, Some(&file))
}

/// A zone given by `--tz` or the file is looked up whatever the
/// schedule, and `config` shows the zone and where it came from.
#[test]
fn a_given_zone_is_checked_and_shown() {
    let run = |extra: &[&str], text: &str| {
        let args = [&["run", "-k", "k"], extra, &["--", "true"]].concat();
        file_config(&args, text)
    };
    assert_eq!(
        usage_of(run(&["--once-per", "5m", "--tz", "Mars/Olympus"], "")),
        "--tz Mars/Olympus: no such time zone"
    );
    assert_eq!(
        usage_of(run(&[], "tz = \"Europe/Lndon\"\n")),
        "/etc/r.toml:1: tz Europe/Lndon: no such time zone"
    );
    assert!(usage_of(run(&["--tz", "localtime"], "")).contains("each host's own zone"));
    assert!(run(&["--once-per", "5m", "--tz", "Etc/UTC"], "").is_ok());
    let config = |text: &str| match file_config(&["config"], text).unwrap().command {
        Command::ShowConfig { rows, problems, .. } => {
            (rows.into_iter().find(|r| r[0] == "tz").unwrap(), problems)
        }
        other => panic!("{other:?}"),
    };
    let (row, problems) = config("tz = \"Etc/UTC\"\n");
    assert_eq!(row, ["tz", "UTC", "/etc/r.toml:1: tz"]);
    assert!(problems.is_empty(), "{problems:?}");
    let (row, problems) = config("tz = \"Europe/Lndon\"\n");
    assert_eq!(row[1], "-");
    assert_eq!(problems, ["/etc/r.toml:1: tz Europe/Lndon: no such time zone"]);
}

/// A `--cron` line and its `--jitter` are judged by the schedule, the
/// same at every start; the jitter is then cut to the tick's end.
#[test]
fn cron_and_jitter_are_judged_by_the_schedule() {
    let run = |extra: &[&str]| {
        let args = [&["run", "-k", "k"], extra, &["--", "true"]].concat();
        file_config(&args, "")
    };
    assert_eq!(
        usage_of(run(&["--cron", "0 0 29 2 *", "--tz", "UTC"])),
        "--cron '0 0 29 2 *': 2921 days between two of its instants; a tick is at most a \
         year (366 days)"
    );
    assert!(run(&["--cron", "@yearly"]).is_ok());
    assert_eq!(
        usage_of(run(&["--cron", "* * * * *", "--limit", "2"])),
        "--cron '* * * * *': one run per tick, so it takes neither --limit nor --shared"
    );
    assert_eq!(
        usage_of(run(&["--cron", "0,1 * * * *", "--jitter", "59m"])),
        "--jitter 59m: must be shorter than the tick (--cron's longest: 59m)"
    );
    let Command::Run(r) = run(&["--cron", "0,1 * * * *", "--jitter", "58m"]).unwrap().command
    else {
        panic!("not run")
    };
    let (jitter, tick) = (r.jitter.unwrap(), r.request.tick.unwrap());
    assert!(jitter <= Duration::from_secs(58 * 60), "{jitter:?}");
    assert!(jitter <= Duration::from_millis(tick.end_ms - tick.start_ms), "{jitter:?}");
    assert!(usage_of(run(&["--once-per", "5s", "--jitter", "5s"])).contains("shorter than"));
}

#[test]
fn the_file_defaults_ttl_and_wait_and_flags_win() {
    let request = |args: &[&str], text: &str| match file_config(args, text).unwrap().command {
        Command::Acquire { request, .. } => (request.ttl, request.wait),
        other => panic!("{other:?}"),
    };
    let secs = Duration::from_secs;
    let text = "ttl = \"45s\"\nwait = \"5m\"\n";
    assert_eq!(request(&["acquire", "-k", "k"], text), (secs(45), Wait::For(secs(300))));
    assert_eq!(request(&["acquire", "-k", "k", "--ttl", "10s"], text).0, secs(10));
    assert_eq!(request(&["acquire", "-k", "k", "-n"], text).1, Wait::Once);
    assert_eq!(request(&["acquire", "-k", "k", "-w", "0"], text).1, Wait::Once);
    assert_eq!(request(&["acquire", "-k", "k", "--wait", "forever"], text).1, Wait::Forever);
    assert_eq!(request(&["acquire", "-k", "k"], "wait = 0\n").1, Wait::Once);
    assert_eq!(request(&["acquire", "-k", "k"], "").1, Wait::Forever);
    match file_config(&["acquire", "-k", "k"], "ttl = \"2m\"\n") {
        Err(Error::Usage(m)) => {
            assert!(m.starts_with("/etc/r.toml:1: ttl 2m: above --max-ttl 1m"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    let Command::Doctor { ttl, config_file, .. } = file_config(&["doctor"], text).unwrap().command
    else {
        panic!("doctor is not doctor")
    };
    assert_eq!((ttl, config_file), (secs(45), Some("/etc/r.toml".into())));
    let Command::ShowConfig { rows, .. } = file_config(&["config"], text).unwrap().command else {
        panic!("config is not config")
    };
    let row = |name: &str| rows.iter().find(|r| r[0] == name).cloned().unwrap();
    assert_eq!(row("ttl"), ["ttl".to_owned(), "45s".into(), "/etc/r.toml:1".into()]);
    assert_eq!(row("wait")[1..], ["5m".to_owned(), "/etc/r.toml:2".into()]);
    let Command::ShowConfig { rows, .. } = file_config(&["config"], "").unwrap().command else {
        panic!("config is not config")
    };
    assert!(rows.iter().any(|r| r[0] == "wait" && r[1] == "forever"), "{rows:?}");
}

#[test]
fn a_ttl_above_max_ttl_is_refused_and_sets_the_restart_window() {
    let c = config(&["acquire", "-k", "k", "--ttl", "1m"]).unwrap();
    assert_eq!(c.restart_window, Some(Duration::from_secs(61)));
    let m = usage_message(&["run", "-k", "k", "--ttl", "90s", "--", "true"]);
    assert!(m.contains("--ttl 1m 30s: above --max-ttl 1m") && m.contains("max-ttl"), "{m}");
    let c = config(&["--max-ttl", "2h", "acquire", "-k", "k", "--ttl", "1h"]).unwrap();
    assert_eq!(c.restart_window, Some(Duration::from_secs(7201)));
    // --keep is a TTL too.
    let m = usage_message(&["run", "-k", "k", "--keep", "1h", "--", "true"]);
    assert!(m.contains("--keep 1h: above --max-ttl 1m"), "{m}");
    assert!(config(&["--max-ttl", "2h", "run", "-k", "k", "--keep", "1h", "--", "true"]).is_ok());
    let c = config(&["--trust-restarts", "extend", "-k", "k", "--token", "t"]).unwrap();
    assert_eq!(c.restart_window, None);
    // status and release take no TTL of their own.
    assert!(config(&["--max-ttl", "1s", "status", "-k", "k"]).is_ok());
    assert!(usage_message(&["--max-ttl", "0", "status", "-k", "k"]).contains("longer than zero"));
}

#[test]
fn no_server_named_anywhere_is_a_usage_error_but_for_config() {
    for args in [&["run", "-k", "k", "--", "true"][..], &["status", "-k", "k"], &["doctor"]] {
        match bare_config(args) {
            Err(Error::Usage(m)) => assert_eq!(m, NO_SERVERS, "{args:?}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
    let Command::ShowConfig { rows, .. } = bare_config(&["config"]).unwrap().command else {
        panic!("config is not config")
    };
    let servers = rows.iter().find(|r| r[0] == "servers").unwrap();
    assert!(servers[2].contains("none configured"), "{servers:?}");
    // Named, but empty: the list is wrong, not missing.
    match bare_config(&["--servers", "", "status", "-k", "k"]) {
        Err(Error::Usage(m)) => assert!(m.contains("no server given"), "{m}"),
        other => panic!("{other:?}"),
    }
}

fn usage_message(args: &[&str]) -> String {
    match config(args) {
        Err(Error::Usage(m)) => m,
        other => panic!("expected a usage error for {args:?}, got {other:?}"),
    }
}

#[test]
fn defaults() {
    let c =
        config(&["--servers", "redis://a,redis://b,redis://c", "acquire", "--key", "k"]).unwrap();
    assert_eq!(c.quorum, 2);
    assert_eq!(c.node_timeout, Duration::from_secs(1));
    let c = config(&["acquire", "--key", "k", "--ttl", "2s"]).unwrap();
    assert_eq!(c.node_timeout, Duration::from_millis(200));
    assert!(matches!(
        &c.command,
        Command::Acquire { request, .. } if request.wait == Wait::Forever && request.fence
    ));
}

#[test]
fn flock_habits_bare_seconds_and_wait_zero() {
    let waits = |args: &[&str]| match config(args).unwrap().command {
        Command::Acquire { request, .. } => (request.wait, request.ttl),
        other => panic!("{other:?}"),
    };
    let secs = Duration::from_secs;
    assert_eq!(waits(&["acquire", "-k", "k", "--wait", "5"]).0, Wait::For(secs(5)));
    assert_eq!(waits(&["acquire", "-k", "k", "-w", "5"]).0, Wait::For(secs(5)));
    assert_eq!(waits(&["acquire", "-k", "k", "-w", "0.5"]).0, Wait::For(secs(1) / 2));
    assert_eq!(waits(&["acquire", "-k", "k", "--ttl", "30"]).1, secs(30));
    for zero in ["0", "0s", "0.0"] {
        assert_eq!(waits(&["acquire", "-k", "k", "--wait", zero]).0, Wait::Once, "{zero}");
    }
    assert_eq!(waits(&["acquire", "-k", "k", "-n"]).0, Wait::Once);
    let m = usage_message(&["acquire", "-k", "k", "-n", "-w", "5"]);
    assert!(m.contains("--no-wait") && m.contains("--wait"), "{m}");
}

#[test]
fn a_cluster_url_is_one_member() {
    let c = config(&[
        "--servers",
        "redis+cluster://:pw@h1:7000,h2:7001,h3:7002,redis://b,redis://c",
        "--quorum",
        "2",
        "status",
        "-k",
        "k",
    ])
    .unwrap();
    assert_eq!((c.servers.len(), c.quorum), (3, 2));
    assert!(c.servers[0].is_cluster() && !c.servers[1].is_cluster());
    assert_eq!(c.servers[0].name(), "cluster:h1:7000,h2:7001,h3:7002");
    for (url, expect) in [
        ("redis+cluster://", "no node"),
        ("redis+cluster://h1:x", "bad node address"),
        ("redis+cluster://h1,,h2", "bad node address"),
        ("redis+cluster://h1/2", "database 0 only"),
        ("redis+cluster://h1?db=1", "no parameters"),
        ("redis+clusters://h1", "scheme"),
    ] {
        let m = usage_message(&["--servers", url, "status", "-k", "k"]);
        assert!(m.contains(expect), "{url}: {m}");
    }
    let m = usage_message(&["--servers", "redis+cluster://:secret@h1:0", "status", "-k", "k"]);
    assert!(!m.contains("secret"), "{m}");
    // --raw-key through a cluster: refused only where the companions
    // cannot share the key's slot.
    let raw =
        |key: &str| config(&["--servers", "redis+cluster://h1", "--raw-key", "status", "-k", key]);
    assert!(raw("job").is_ok() && raw("{user1}.job").is_ok());
    let m = usage_message(&["--servers", "redis+cluster://h1", "--raw-key", "status", "-k", "a}b"]);
    assert!(m.contains("--raw-key \"a}b\"") && m.contains("another slot"), "{m}");
    assert!(config(&["--servers", "redis://h1", "--raw-key", "status", "-k", "a}b"]).is_ok());
}

#[test]
fn sentinel_urls_keep_their_commas() {
    assert_eq!(
        split_servers("redis://a,redis+sentinel://u:p@h1:1,h2:2/svc/1,redis://b"),
        ["redis://a", "redis+sentinel://u:p@h1:1,h2:2/svc/1", "redis://b"]
    );
    assert_eq!(split_servers("redis+sentinel://h1,h2"), ["redis+sentinel://h1,h2"]);
    assert_eq!(
        split_servers("redis+cluster://u:p@h1:1,h2:2,redis://a,rediss+cluster://h3,h4/0,redis://b"),
        ["redis+cluster://u:p@h1:1,h2:2", "redis://a", "rediss+cluster://h3,h4/0", "redis://b"]
    );
    assert_eq!(
        split_servers("redis://a,redis+cluster://h1,h2"),
        ["redis://a", "redis+cluster://h1,h2"]
    );
    assert_eq!(split_servers("redis://a,,redis://b"), ["redis://a", "", "redis://b"]);
    let c = config(&[
        "--servers",
        "redis+sentinel://h1:26379,h2:26379,h3/mymaster,redis://b,redis://c",
        "status",
        "-k",
        "k",
    ])
    .unwrap();
    assert_eq!(c.servers.len(), 3);
    assert_eq!(c.quorum, 2);
    assert_eq!(c.servers[0].name(), "sentinel:mymaster@h1:26379,h2:26379,h3:26379");
    for (url, expect) in [
        ("redis+sentinel://h1:26379", "no service name"),
        ("redis+sentinel://h1:x/svc", "bad Sentinel address"),
        ("redis+sentinel://h1/svc/x", "database"),
        ("redis+sentinel://h1/svc?password=x", "unknown parameter"),
    ] {
        let m = usage_message(&["--servers", url, "status", "-k", "k"]);
        assert!(m.contains(expect), "{url}: {m}");
    }
    let m = usage_message(&[
        "--servers",
        "redis+sentinel://:secret1@h1/svc?sentinel_password=secret2&db=1",
        "status",
        "-k",
        "k",
    ]);
    assert!(!m.contains("secret1") && !m.contains("secret2"), "{m}");
}

#[test]
fn bad_inputs_name_the_flag() {
    let servers3 = "redis://a,redis://b,redis://c";
    for (args, expect) in [
        (vec!["acquire", "--key", ""], "--key"),
        (vec!["acquire", "--key", "k", "--ttl", "0s"], "--ttl"),
        (vec!["acquire", "--key", "k", "--ttl", "-1s"], "--ttl"),
        (vec!["acquire", "--key", "k", "--ttl", "soon"], "--ttl"),
        (vec!["acquire", "--key", "k", "--ttl", "1000y"], "--ttl"),
        (vec!["acquire", "--key", "k", "--wait", "-10s"], "--wait \"-10s\": must not be negative"),
        (vec!["acquire", "--key", "k", "--wait", "-1"], "--wait \"-1\": must not be negative"),
        (vec!["run", "-k", "k", "--keep", "-1m", "--", "true"], "--keep \"-1m\""),
        (vec!["--node-timeout", "-5s", "status", "-k", "k"], "--node-timeout \"-5s\""),
        (vec!["acquire", "--key", "k", "--wait", "1.2.3"], "--wait \"1.2.3\""),
        (vec!["--servers", servers3, "--quorum", "4", "status", "-k", "k"], "--quorum"),
        (vec!["--servers", servers3, "--quorum", "1", "status", "-k", "k"], "--quorum"),
        (vec!["--servers", "http://x", "status", "-k", "k"], "scheme"),
        (vec!["--servers", "", "status", "-k", "k"], "--servers"),
        (vec!["--servers", "redis://a,,redis://b", "status", "-k", "k"], "--servers"),
        (vec!["--node-timeout", "5s", "acquire", "-k", "k", "--ttl", "5s"], "--node-timeout"),
        (vec!["--drift-factor", "2", "status", "-k", "k"], "--drift-factor"),
        (vec!["run", "-k", "k"], "no command"),
        (vec!["run", "-k", "k", "--on-lost", "SIGNOPE", "--", "true"], "--on-lost"),
    ] {
        let m = usage_message(&args);
        assert!(m.contains(expect), "{args:?}: {m}");
    }
}
