//! The smallest ACL the README documents is enough for every lock
//! operation, and no password ever shows in any output.

use crate::harness::{Output, RedisServer, Redlock, root, unique_key};

/// The README's `ACL SETUSER` line, split into arguments.
fn readme_acl() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let line = readme.lines().find(|l| l.starts_with("ACL SETUSER ")).expect("an ACL line");
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_documented_acl_is_enough_for_every_lock_operation() {
    let server = RedisServer::start();
    let acl = readme_acl();
    let args: Vec<&str> = acl.iter().map(String::as_str).collect();
    let ok: String = server.cmd(&args);
    assert_eq!(ok, "OK");
    let url = format!("redis://locker:CHANGE-ME@127.0.0.1:{}", server.port);
    let key = format!("lock-{}", unique_key("acl"));

    let token = Redlock::new(&url).args(["acquire", "--key", &key, "--ttl", "20s"]).run();
    token.expect(0);
    let token = token.line().to_owned();
    Redlock::new(&url).args(["extend", "--key", &key, "--token", &token]).run().expect(0);
    Redlock::new(&url).args(["status", "--key", &key]).run().expect(0);
    // A waiter subscribes to the release channel and wakes on release.
    let waiter = Redlock::new(&url)
        .args(["run", "--key", &key, "--wait", "20s", "--ttl", "1s", "--", "sh", "-c", "sleep 0.5"])
        .spawn();
    // Its subscription goes through under the ACL (the channel pattern).
    server.await_waiters(&key, 1);
    Redlock::new(&url).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    waiter.wait().expect(0);
    Redlock::new(&url).args(["acquire", "--key", &key]).run().expect(0);
    // The run history: a busy run counts a skip, a run records its entry,
    // history and check read them; none of it warns of a denied command.
    Redlock::new(&url)
        .args(["run", "-n", "-E", "0", "--key", &key, "--", "true"])
        .run()
        .expect(0)
        .stderr_lacks("history:");
    Redlock::new(&url).args(["release", "--key", &key, "--force"]).run().expect(0);
    Redlock::new(&url)
        .args(["run", "--key", &key, "--", "true"])
        .run()
        .expect(0)
        .stderr_lacks("history:");
    let history = Redlock::new(&url).args(["history", "--key", &key, "--json"]).run();
    history.expect(0);
    // The waiter's run and this one.
    assert_eq!(history.json()["entries"].as_array().map(Vec::len), Some(2));
    assert_eq!(history.json()["skips"]["count"], 1);
    Redlock::new(&url).args(["check", "--key", &key, "--max-age", "1h"]).run().expect(0);

    // Outside the granted keys: a clear permission error, at once.
    Redlock::new(&url)
        .args(["acquire", "--wait", "10s", "--key", "not-a-lock-key"])
        .run()
        .expect(69)
        .within(std::time::Duration::from_secs(5))
        .stderr_has("permission denied");
}

fn assert_no_secret(outputs: &[Output], secret: &str) {
    for out in outputs {
        if out.stdout.contains(secret) || out.stderr.contains(secret) {
            out.fail("leaked the password");
        }
    }
}

#[test]
fn no_output_of_any_subcommand_shows_the_password() {
    let secret = "pw-7f3a91-never-print";
    let server = RedisServer::start_with(&["--requirepass", secret]);
    let bare = server.url_without_password();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    // As the docs say: others cannot read it (the gate refuses a file they can).
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&file, private).unwrap();
    let file = file.display().to_string();
    let key = unique_key("secret");
    let mut outputs = Vec::new();
    for format in ["text", "json"] {
        for source in ["url", "env", "file"] {
            let base = || {
                let r = match source {
                    "url" => Redlock::new(&server.url()),
                    "env" => Redlock::new(&bare).env("REDLOCK_PASSWORD", secret),
                    _ => Redlock::new(&bare).args(["--password-file", &file]),
                };
                r.args(["-vv", "--log-format", format])
            };
            let acquired = base().args(["acquire", "--json", "--key", &key]).run();
            acquired.expect(0);
            let token = acquired.json()["token"].as_str().unwrap().to_owned();
            outputs.push(acquired);
            for args in [
                vec!["extend", "--key", &key, "--token", &token],
                vec!["status", "--key", &key],
                vec!["status", "--key", &key, "--json"],
                vec!["release", "--key", &key, "--token", &token],
                vec!["run", "--key", &key, "--ttl", "2s", "--", "sh", "-c", "sleep 0.2"],
                vec!["doctor"],
                vec!["doctor", "--json"],
                vec!["release", "--key", &key, "--force"],
            ] {
                let out = base().args(&args).run();
                if !matches!(out.status.code(), Some(0 | 1)) {
                    out.fail("should succeed");
                }
                outputs.push(out);
            }
        }
        // Failures name the server, never the password.
        let wrong = format!("redis://:{secret}-wrong@127.0.0.1:{}", server.port);
        outputs.push(
            Redlock::new(&wrong)
                .args(["--log-format", format, "-vv", "acquire", "-n", "--key", &key])
                .run(),
        );
        outputs.push(Redlock::new(&wrong).args(["--log-format", format, "-vv", "doctor"]).run());
        let down = format!("redis://:{secret}@127.0.0.1:1");
        outputs.push(
            Redlock::new(&down)
                .args(["--log-format", format, "-vv", "status", "--key", &key])
                .run(),
        );
    }
    assert_eq!(outputs.len(), 2 * (3 * 9 + 3));
    assert_no_secret(&outputs, secret);
    // The password file's content is the password, not the path's.
    assert!(outputs.iter().any(|o| o.stderr.contains("authentication failed")));
}

/// The passwords of a list, each with characters that end a URL's
/// authority or query when written raw: none may reach a message, `config`
/// or the command's environment, however the list is spelled.
const RAW_SECRETS: [&str; 3] = ["Sec7x/Ret9y", "Hid3q#Den4w?Pw5", "Key1k@Lock2j,Pass3&Word4=Z"];

#[test]
fn the_command_sees_no_password_of_any_server_in_a_list() {
    let servers: Vec<RedisServer> = ["pwA-71c2", "pwB-83d4", "pwC-95e6"]
        .iter()
        .map(|pw| RedisServer::start_with(&["--requirepass", pw]))
        .collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let key = unique_key("child-env");
    let list = urls.join(",");
    let out = Redlock::new(&list)
        .args(["run", "--key", &key, "--", "sh", "-c", "printf '%s\\n' \"$REDLOCK_SERVERS\""])
        .run();
    out.expect(0);
    for pw in ["pwA-71c2", "pwB-83d4", "pwC-95e6"] {
        assert!(!out.stdout.contains(pw), "the command saw {pw}: {}", out.stdout);
    }
    for s in &servers {
        assert!(
            out.stdout.contains(&format!(":{}", s.port)),
            "member {} lost: {}",
            s.port,
            out.stdout
        );
    }

    // A Sentinel URL first (unreachable: the two plain servers are a
    // quorum): the command's copy keeps every member after it.
    let group = "redis+sentinel://:mpw-1a2b@127.0.0.1:1/svc?sentinel_password=spw-3c4d";
    let list = format!("{group},{},{}", urls[1], urls[2]);
    let out = Redlock::new(&list)
        .args(["run", "--key", &key, "--", "sh", "-c", "printf '%s\\n' \"$REDLOCK_SERVERS\""])
        .run();
    out.expect(0);
    for pw in ["mpw-1a2b", "spw-3c4d", "pwB-83d4", "pwC-95e6"] {
        assert!(!out.stdout.contains(pw), "the command saw {pw}: {}", out.stdout);
    }
    for s in &servers[1..] {
        assert!(
            out.stdout.contains(&format!(":{}", s.port)),
            "member {} lost: {}",
            s.port,
            out.stdout
        );
    }
}

#[test]
fn no_message_shows_a_password_with_url_delimiters_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("raw-secret");
    let mut outputs = Vec::new();
    for secret in RAW_SECRETS {
        // Port 1: parsed, then refused; port 99999: a usage error.
        for port in ["1", "99999"] {
            let plain = format!("redis://u:{secret}@127.0.0.1:{port}");
            let list = format!("redis://127.0.0.1:1,{plain},redis://:{secret}@127.0.0.1:{port}/0");
            let sentinel = format!(
                "redis+sentinel://u:{secret}@127.0.0.1:{port},127.0.0.1:2/svc?sentinel_password={secret}"
            );
            let cluster = format!("redis+cluster://u:{secret}@127.0.0.1:{port},127.0.0.1:2");
            let unix = format!("unix:///tmp/no-such.sock?db=1&pass={secret}");
            for servers in [plain, list, sentinel, cluster, unix] {
                let file = dir.path().join("config.toml");
                std::fs::write(&file, format!("servers = [{:?}]\n", servers)).unwrap();
                let file = file.display().to_string();
                for args in [
                    vec!["--servers", &servers, "acquire", "-n", "--key", &key],
                    vec!["acquire", "-n", "--key", &key],
                    vec!["config"],
                ] {
                    outputs.push(Redlock::new(&servers).args(&args).run());
                }
                // From the configuration file.
                outputs.push(
                    Redlock::new("")
                        .env("REDLOCK_CONFIG", &file)
                        .args(["acquire", "-n", "--key", &key])
                        .run(),
                );
                outputs.push(Redlock::new("").env("REDLOCK_CONFIG", &file).args(["config"]).run());
            }
        }
    }
    for secret in RAW_SECRETS {
        // Each part between the delimiters is a secret too.
        for part in secret.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| p.len() > 1) {
            assert_no_secret(&outputs, part);
        }
    }
}

#[test]
fn a_sentinel_password_with_an_ampersand_is_not_shown_as_a_parameter() {
    let url = "redis+sentinel://127.0.0.1:1/svc?sentinel_password=ab&cdSECRET9";
    let out = Redlock::new(url).args(["acquire", "-n", "--key", &unique_key("amp")]).run();
    assert_no_secret(std::slice::from_ref(&out), "cdSECRET9");
    out.stderr_lacks("unknown parameter");
}

#[test]
fn a_password_written_raw_in_a_url_reaches_the_server_as_written() {
    let secret = "Ba5e/64+pw?x#y@z";
    let server = RedisServer::start_with(&["--requirepass", secret]);
    let key = unique_key("raw-pw");
    let url = format!("redis://default:{secret}@127.0.0.1:{}", server.port);
    let out = Redlock::new(&url).args(["acquire", "-n", "--key", &key]).run();
    out.expect(0);
    assert_no_secret(std::slice::from_ref(&out), "Ba5e");
}

/// A CI job's URL keeps its scheme, host and path: a query or fragment
/// (`?private_token=`, `#access_token=`) and user info may hold a secret,
/// and none of it reaches the token, the servers or any output; nor does
/// a bidi override (`status` would print the job as written).
#[test]
fn a_ci_job_url_carries_only_scheme_host_and_path() {
    let fleet = crate::harness::Fleet::start(1);
    let key = unique_key("ci-job");
    let secrets = ["SECRET-U", "SECRET-Q1", "SECRET-Q2", "SECRET-Q3", "SECRET-F"];
    let gitlab = "https://ci:SECRET-U@gitlab.example/o/r/-/jobs/1?private_token=SECRET-Q1&\
                  token=SECRET-Q2&PASSWORD=SECRET-Q3#access_token=SECRET-F";
    let github = [
        ("GITHUB_SERVER_URL", "https://ci:SECRET-U@github.example"),
        ("GITHUB_REPOSITORY", "o/r?token=SECRET-Q1"),
        ("GITHUB_RUN_ID", "7#access_token=SECRET-F"),
    ];
    let on = |env: &[(&str, &str)]| env.iter().fold(Redlock::on(&fleet), |r, (k, v)| r.env(k, v));
    for (env, job) in [
        (vec![("CI_JOB_URL", gitlab)], "https://gitlab.example/o/r/-/jobs/1"),
        (github.to_vec(), "https://github.example/o/r"),
        (vec![("CI_JOB_URL", "https://gitlab.example/o/\u{202e}r/-/jobs/1")], ""),
    ] {
        let mut outputs = Vec::new();
        let acquired = on(&env).args(["acquire", "--key", &key, "--ttl", "20s"]).run();
        acquired.expect(0);
        let token = acquired.line().to_owned();
        let stored = fleet.servers[0].get(&crate::harness::lock_key(&key)).unwrap_or_default();
        outputs.push(on(&[]).args(["status", "--key", &key]).run());
        let status = on(&[]).args(["status", "--json", "--key", &key]).run();
        let shown = status.json()["holder"]["job"].as_str().unwrap_or_default().to_owned();
        outputs.push(status);
        outputs.push(on(&[]).args(["run", "-n", "--key", &key, "--", "true"]).run());
        on(&[]).args(["release", "--key", &key, "--token", &token]).run().expect(0);
        on(&env).args(["run", "--key", &key, "--", "true"]).run().expect(0);
        outputs.push(on(&[]).args(["history", "--key", &key]).run());
        outputs.push(on(&[]).args(["history", "--json", "--key", &key]).run());
        let history: Vec<String> = fleet.servers[0].cmd(&[
            "LRANGE",
            &format!("{}:history", crate::harness::lock_key(&key)),
            "0",
            "-1",
        ]);
        for secret in secrets {
            assert_no_secret(&outputs, secret);
            assert_no_secret(std::slice::from_ref(&acquired), secret);
            for text in history.iter().chain([&stored, &token]) {
                assert!(!text.contains(secret), "{secret} on the server: {text}");
            }
        }
        for out in &outputs {
            if let Some(c) = crate::hostile::raw_unsafe(&out.stdout)
                .or_else(|| crate::hostile::raw_unsafe(&out.stderr))
            {
                out.fail(&format!("printed U+{:04X} raw", u32::from(c)));
            }
        }
        if job.is_empty() {
            assert!(!shown.contains('\u{202e}'), "{shown}");
        } else {
            assert_eq!(shown, job, "{env:?}");
        }
    }
}

/// The gate (`config --check`, and `doctor` before it asks a server)
/// refuses what the docs say never to do, each a line naming the file and
/// line, never the password: a password in a URL in a file others can
/// read (a warning line when the file is private), a `password-file`
/// others can read, and one URL listed twice (which every command then
/// refuses with 64, `status` too).
#[test]
fn the_gate_refuses_exposed_passwords_and_a_server_listed_twice() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redlock.toml");
    let shown = file.display().to_string();
    let secret = "gate-secret-5150";
    let chmod = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let gate = |args: &[&str]| {
        Redlock::new("").env("REDLOCK_CONFIG", &shown).args(args.iter().copied()).run()
    };
    // A password in a URL of a file others can read: a problem.
    std::fs::write(&file, format!("quorum = 1\nservers = \"redis://:{secret}@127.0.0.1:1\"\n"))
        .unwrap();
    chmod(&file, 0o644);
    for args in [&["config", "--check"][..], &["--log-format", "json", "config", "--check"]] {
        let out = gate(args);
        out.expect(64).stderr_has(&format!("{shown}:2: servers: a password in a URL"));
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert_no_secret(std::slice::from_ref(&out), secret);
    }
    let out = gate(&["doctor"]);
    out.expect(64).stderr_has(&format!("{shown}:2: servers: a password in a URL"));
    assert_no_secret(std::slice::from_ref(&out), secret);
    // The same file private: a warning line, exit 0.
    chmod(&file, 0o600);
    let out = gate(&["config", "--check"]);
    out.expect(0).stderr_has(&format!("{shown}:2: servers: a password in a URL of a private file"));
    assert_no_secret(std::slice::from_ref(&out), secret);

    // A password file others can read.
    let password = dir.path().join("password");
    std::fs::write(&password, format!("{secret}\n")).unwrap();
    chmod(&password, 0o644);
    std::fs::write(
        &file,
        format!("servers = \"redis://127.0.0.1:1\"\npassword-file = \"{}\"\n", password.display()),
    )
    .unwrap();
    let out = gate(&["config", "--check"]);
    out.expect(64).stderr_has(&format!(
        "{shown}:2: password-file {}: others can read it",
        password.display()
    ));
    assert_no_secret(std::slice::from_ref(&out), secret);
    chmod(&password, 0o600);
    gate(&["config", "--check"]).expect(0);

    // One URL listed twice, verbatim: the gate and every command refuse it.
    std::fs::write(&file, "servers = [\"redis://127.0.0.1:1\",\n  \"redis://127.0.0.1:1\"]\n")
        .unwrap();
    let out = gate(&["config", "--check"]);
    out.expect(64).stderr_has(&format!("{shown}:1: servers: redis://127.0.0.1:1 is listed twice"));
    gate(&["status", "-k", "k"]).expect(64).stderr_has("listed twice");
}
