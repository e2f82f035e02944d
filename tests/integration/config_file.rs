//! The configuration file: found where the docs say, layered under the
//! environment and the flags, shown by `redlock config` with passwords
//! redacted, and a bad file is a usage error naming file, line and key.

use std::path::Path;

use crate::harness::{Fleet, RedisServer, Redlock, unique_key};

/// `redlock` with HOME pointed at `home`, no XDG_CONFIG_HOME and no REDLOCK_CONFIG.
fn redlock_at_home(servers_env: Option<&str>, home: &Path) -> Redlock {
    Redlock::new(servers_env.unwrap_or(""))
        .env("HOME", &home.display().to_string())
        .env("XDG_CONFIG_HOME", "")
        .env("REDLOCK_CONFIG", "")
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_users_file_gives_the_servers_and_config_shows_where_from() {
    let server = RedisServer::start_with(&["--requirepass", "file-secret-7"]);
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join(".config/redlock/config.toml");
    write(
        &file,
        &format!("# the fleet\nservers = [\"{}\"]\nnode-timeout = \"500ms\"\n", server.url()),
    );
    // A password in the file: private, as the docs say (a warning line then).
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&file, private).unwrap();
    let key = unique_key("config-file");
    // No REDLOCK_SERVERS: an empty one counts as unset.
    redlock_at_home(None, home.path()).args(["run", "-k", &key, "--", "true"]).run().expect(0);

    let out = redlock_at_home(None, home.path()).args(["config"]).run();
    out.expect(0);
    let row = |name: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| out.fail(name))
            .to_owned()
    };
    assert!(row("servers").ends_with(&format!("{}:2", file.display())), "{}", out.stdout);
    assert!(row("node-timeout").contains("500ms"), "{}", out.stdout);
    assert!(row("drift-factor").ends_with("default"), "{}", out.stdout);
    assert!(row("config-file").contains(&file.display().to_string()), "{}", out.stdout);
    assert!(!out.stdout.contains("file-secret-7"), "password shown: {}", out.stdout);
    assert!(row("servers").contains("***"), "{}", out.stdout);
}

#[test]
fn flags_win_over_the_environment_which_wins_over_the_file() {
    let home = tempfile::tempdir().unwrap();
    let xdg = home.path().join("xdg");
    // XDG_CONFIG_HOME is preferred to ~/.config.
    write(&home.path().join(".config/redlock/config.toml"), "quorum = 1\n");
    write(
        &xdg.join("redlock/config.toml"),
        "servers = \"redis://from-file:1\"\ndrift-factor = 0.02\n",
    );
    let out = redlock_at_home(Some("redis://from-env:1"), home.path())
        .env("XDG_CONFIG_HOME", &xdg.display().to_string())
        .args(["--drift-factor", "0.03", "config"])
        .run();
    out.expect(0);
    let row = |name: &str| out.stdout.lines().find(|l| l.starts_with(name)).unwrap().to_owned();
    assert!(
        row("servers").contains("redis://from-env:1")
            && row("servers").ends_with("env REDLOCK_SERVERS")
    );
    assert!(row("drift-factor").contains("0.03") && row("drift-factor").ends_with("flag"));
    assert!(row("quorum").ends_with("default (more than half of the servers)"), "{}", out.stdout);
}

#[test]
fn a_bad_file_is_a_usage_error_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redlock.toml");
    let shown = file.display().to_string();
    for (text, expect) in [
        (
            "servers = \"redis://a\"\nnode-timout = \"1s\"\n",
            format!(
                "{shown}:2: node-timout: unknown key `node-timout`; did you mean `node-timeout`?"
            ),
        ),
        (
            "servers = \"redis://a\"\n\nquorum = 3\n",
            format!("{shown}:3: quorum 3: must be more than half"),
        ),
        ("node-timeout = \"soon\"\n", format!("{shown}:1: node-timeout \"soon\": not a duration")),
        ("servers = \"127.0.0.1:6379\"\n", format!("{shown}:1: servers: ")),
    ] {
        write(&file, text);
        let out = Redlock::new("").env("REDLOCK_CONFIG", &shown).args(["status", "-k", "k"]).run();
        out.expect(64).stderr_has(&expect);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    let missing = dir.path().join("absent.toml").display().to_string();
    Redlock::new("")
        .env("REDLOCK_CONFIG", &missing)
        .args(["config"])
        .run()
        .expect(64)
        .stderr_has("REDLOCK_CONFIG=");
}

/// The file gives the fleet's default `ttl` and `wait`; flags win; `config`
/// shows them; a misspelt key gets the key it meant.
#[test]
fn the_file_gives_a_default_ttl_and_wait_and_names_a_misspelt_key() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.toml");
    write(&file, "ttl = \"45s\"\nwait = \"1s\"\n");
    let with_file =
        || Redlock::new(&server.url()).env("REDLOCK_CONFIG", &file.display().to_string());
    let key = unique_key("file-defaults");
    let held = with_file().args(["acquire", "-k", &key]).run();
    held.expect(0);
    let pttl = server.pttl(&crate::harness::lock_key(&key));
    assert!((40_000..=45_000).contains(&pttl), "the file's ttl: {pttl}");
    // The file's wait: 1s, not for ever.
    let out = with_file().args(["run", "-k", &key, "--", "true"]).run();
    out.expect(75).within(std::time::Duration::from_secs(10));
    // Flags win: -n tries once, --ttl is the flag's.
    with_file().args(["run", "-n", "-k", &key, "--", "true"]).run().expect(75);
    let other = unique_key("file-defaults-flag");
    with_file().args(["acquire", "-k", &other, "--ttl", "10s"]).run().expect(0);
    assert!(server.pttl(&crate::harness::lock_key(&other)) <= 10_000);
    let out = with_file().args(["config"]).run();
    out.expect(0);
    let row = |name: &str| {
        let found = out.stdout.lines().find(|l| l.split_whitespace().next() == Some(name));
        found.unwrap_or_else(|| out.fail(name)).to_owned()
    };
    assert!(row("ttl").contains("45s") && row("ttl").ends_with(":1"), "{}", out.stdout);
    assert!(row("wait").contains("1s") && row("wait").ends_with(":2"), "{}", out.stdout);
    // A bad value names the file's line.
    write(&file, "ttl = \"soon\"\n");
    with_file().args(["acquire", "-k", &key]).run().expect(64).stderr_has(":1: ttl \"soon\"");
    // A misspelt key: the key meant.
    write(&file, "node-timout = \"1s\"\n");
    with_file()
        .args(["status", "-k", &key])
        .run()
        .expect(64)
        .stderr_has("unknown key `node-timout`; did you mean `node-timeout`?");
}

/// `redlock config` is a gate for configuration management: it finds every
/// problem a command would find (a bad duration, a ttl above max-ttl, a
/// quorum the servers cannot give, each unknown key), each on a line of its
/// own with `file:line`, exits 64, and still shows what it could read;
/// `doctor` refuses the same file with the same lines.
#[test]
fn config_reports_every_problem_a_command_would_and_still_shows_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.toml");
    let shown = file.display().to_string();
    write(
        &file,
        "servers = [\"redis://a:1\", \"redis://b:1\"]\n\
         wait = \"15mn\"\n\
         ttl = \"5m\"\n\
         colour = true\n\
         quorum = 3\n\
         node-timout = \"1s\"\n",
    );
    let expected = [
        format!("{shown}:2: wait \"15mn\": not a duration"),
        format!("{shown}:3: ttl 5m: above --max-ttl 1m"),
        format!("{shown}:4: colour: unknown key `colour`"),
        format!("{shown}:5: quorum 3: must be more than half of the 2 server(s)"),
        format!("{shown}:6: node-timout: unknown key `node-timout`; did you mean `node-timeout`?"),
    ];
    let with_file = || Redlock::new("").env("REDLOCK_CONFIG", &shown);
    let out = with_file().args(["config"]).run();
    out.expect(64);
    for line in &expected {
        out.stderr_has(line);
    }
    assert_eq!(out.stderr.lines().count(), expected.len(), "{}", out.stderr);
    let row = |name: &str| {
        let found = out.stdout.lines().find(|l| l.split_whitespace().next() == Some(name));
        found.unwrap_or_else(|| out.fail(name)).to_owned()
    };
    assert!(row("servers").contains("redis://a:1") && row("servers").ends_with(":1"));
    assert!(row("config-file").contains(&shown), "{}", out.stdout);
    // `--check` says the same without the table.
    let out = with_file().args(["config", "--check"]).run();
    out.expect(64);
    assert_eq!(out.stdout, "", "--check prints only the problems");
    assert_eq!(out.stderr.lines().count(), expected.len(), "{}", out.stderr);
    let out = with_file().args(["doctor"]).run();
    out.expect(64);
    for line in &expected {
        out.stderr_has(line);
    }
    // A good file passes the gate.
    write(&file, "servers = [\"redis://a:1\"]\nttl = \"45s\"\nwait = \"15m\"\n");
    with_file().args(["config", "--check"]).run().expect(0);
}

/// A `ttl` that every `run` refuses (the renewal, node timeout and stop do
/// not fit in it) fails the gate too, and `doctor` refuses it: the gate
/// runs the same checks as the commands. (`config --check` passed it, and
/// every run then exited 64.)
#[test]
fn the_gate_refuses_a_ttl_every_run_refuses() {
    let fleet = Fleet::start(1);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.toml");
    let shown = file.display().to_string();
    write(&file, "ttl = \"50ms\"\n");
    let with_file = || Redlock::on(&fleet).env("REDLOCK_CONFIG", &shown);
    let run = with_file().args(["run", "-k", "k", "--", "true"]).run();
    run.expect(64).stderr_has("do not fit");
    let gate = with_file().args(["config", "--check"]).run();
    gate.expect(64).stderr_has("do not fit");
    with_file().args(["doctor"]).run().expect(64).stderr_has("do not fit");
    write(&file, "ttl = \"2s\"\n");
    with_file().args(["config", "--check"]).run().expect(0);
    with_file().args(["run", "-k", "k", "--", "true"]).run().expect(0);
}

/// `--config FILE` names the file on the command line, above
/// `REDLOCK_CONFIG` (as every flag is above its variable); a missing one
/// is a usage error naming the flag and the path.
#[test]
fn config_flag_names_the_file_above_the_environment() {
    let fleet = Fleet::start(1);
    let dir = tempfile::tempdir().unwrap();
    let flag_file = dir.path().join("flag.toml");
    let env_file = dir.path().join("env.toml");
    write(&flag_file, &format!("servers = \"{}\"\nquorum = 1\n", fleet.urls()));
    write(&env_file, "servers = \"redis://from-env-file:1\"\n");
    let flag_shown = flag_file.display().to_string();
    let key = unique_key("config-flag");
    Redlock::new("")
        .env("REDLOCK_CONFIG", &env_file.display().to_string())
        .args(["--config", &flag_shown, "run", "-k", &key, "--", "true"])
        .run()
        .expect(0);
    // After the subcommand too, as every global option.
    let out = Redlock::new("")
        .env("REDLOCK_CONFIG", &env_file.display().to_string())
        .args(["config", "--config", &flag_shown])
        .run();
    out.expect(0);
    let row = |name: &str| out.stdout.lines().find(|l| l.starts_with(name)).unwrap().to_owned();
    assert!(row("config-file").contains(&flag_shown), "{}", out.stdout);
    assert!(row("servers").ends_with(&format!("{flag_shown}:1")), "{}", out.stdout);
    let missing = dir.path().join("absent.toml").display().to_string();
    let out = Redlock::new("").args(["--config", &missing, "status", "-k", "k"]).run();
    out.expect(64).stderr_has(&format!("config file --config {missing}: cannot read"));
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}
