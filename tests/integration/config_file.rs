//! The configuration file: found where the docs say, layered under the
//! environment and the flags, shown by `redlock config` with passwords
//! redacted, and a bad file is a usage error naming file, line and key.

use std::path::Path;

use crate::harness::{RedisServer, Redlock, unique_key};

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
            format!("{shown}:2: node-timout: unknown field"),
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
