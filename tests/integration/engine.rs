//! The engine end to end: acquire, extend, release, status, force-release,
//! over 1, 3 and 5 servers, with servers down, hung, password-protected or
//! holding the wrong type, and every bad input.

use std::time::Duration;

use crate::harness::{Fleet, RedisServer, Redlock, lock_key, send_signal, unique_key};

/// Generous bound for "promptly": far above the work, far below a hang.
const PROMPT: Duration = Duration::from_secs(5);

#[test]
fn acquire_extend_release_on_1_3_and_5_servers() {
    for n in [1, 3, 5] {
        let fleet = Fleet::start(n);
        let key = unique_key("cycle");
        let token = Redlock::on(&fleet).args(["acquire", "--key", &key, "--ttl", "10s"]).run();
        token.expect(0);
        let token = token.line().to_owned();
        assert!(token.len() >= 32 && !token.contains(char::is_whitespace), "{token:?}");
        assert_eq!(fleet.values(&lock_key(&key)), vec![Some(token.clone()); n], "{n} servers");
        for s in &fleet.servers {
            let pttl = s.pttl(&lock_key(&key));
            assert!(pttl > 0 && pttl <= 10_000, "pttl {pttl}");
        }

        Redlock::on(&fleet)
            .args(["acquire", "-n", "--key", &key])
            .run()
            .expect(75)
            .stderr_has("is held by")
            .stderr_has("after its holder stops renewing");

        Redlock::on(&fleet)
            .args(["extend", "--key", &key, "--token", &token, "--ttl", "60s"])
            .run()
            .expect(0);
        for s in &fleet.servers {
            assert!(
                s.pttl(&lock_key(&key)) > 10_000,
                "extend should raise the TTL on {}",
                s.name()
            );
        }

        Redlock::on(&fleet).args(["release", "--key", &key, "--token", &token]).run().expect(0);
        assert_eq!(fleet.values(&lock_key(&key)), vec![None; n]);
        Redlock::on(&fleet).args(["status", "--key", &key]).run().expect(1);
    }
}

#[test]
fn a_minority_down_still_locks() {
    let mut fleet = Fleet::start(5);
    fleet.servers[1].stop();
    fleet.servers[3].stop();
    let key = unique_key("minority");
    let out = Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run();
    out.expect(0);
    for i in [0, 2, 4] {
        assert_eq!(fleet.servers[i].get(&lock_key(&key)).as_deref(), Some(out.line()));
    }
    Redlock::on(&fleet).args(["release", "--key", &key, "--token", out.line()]).run().expect(0);

    // Back on their ports (empty), the restarted servers take part again.
    fleet.servers[1].restart();
    fleet.servers[3].restart();
    let out = Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run();
    out.expect(0);
    assert_eq!(fleet.values(&lock_key(&key)), vec![Some(out.line().to_owned()); 5]);
}

#[test]
fn a_majority_down_is_unavailable_promptly_and_leaves_nothing() {
    let mut fleet = Fleet::start(5);
    for i in [0, 2, 4] {
        fleet.servers[i].stop();
    }
    let key = unique_key("majority");
    let down = fleet.servers[0].name();
    Redlock::on(&fleet)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .within(PROMPT)
        .stderr_has(&format!("acquire {key}: 3 of 5 servers failed (quorum 3)"))
        .stderr_has(&format!("{down}: connection refused"));
    assert_eq!(
        fleet.servers[1].get(&lock_key(&key)),
        None,
        "a failed acquire releases what it set"
    );
    assert_eq!(fleet.servers[3].get(&lock_key(&key)), None);
    // Status cannot tell held from free either.
    Redlock::on(&fleet).args(["status", "--key", &key]).run().expect(69);
}

#[test]
fn a_busy_attempt_takes_back_what_it_set_and_nothing_else() {
    let fleet = Fleet::start(5);
    let key = unique_key("split");
    // Someone else holds 3 of 5: the other 2 grant, or are still answering
    // when the verdict is known.
    for s in &fleet.servers[..3] {
        let _: String = s.cmd(&["SET", &lock_key(&key), "someone-else", "PX", "60000"]);
    }
    Redlock::on(&fleet).args(["acquire", "-n", "--key", &key]).run().expect(75).within(PROMPT);
    let other = Some("someone-else".to_owned());
    assert_eq!(
        fleet.values(&lock_key(&key)),
        vec![other.clone(), other.clone(), other, None, None]
    );
}

#[test]
fn a_hung_server_costs_at_most_about_the_node_timeout() {
    let fleet = Fleet::start(3);
    fleet.servers[2].hang();
    let key = unique_key("hung");
    let out =
        Redlock::on(&fleet).args(["--node-timeout", "300ms", "acquire", "-n", "--key", &key]).run();
    fleet.servers[2].resume();
    out.expect(0).within(Duration::from_secs(3));
    let token = out.line().to_owned();
    assert_eq!(fleet.servers[0].get(&lock_key(&key)).as_deref(), Some(token.as_str()));

    fleet.servers[2].hang();
    let status = Redlock::on(&fleet)
        .args(["--node-timeout", "300ms", "status", "--key", &key, "--json"])
        .run();
    fleet.servers[2].resume();
    status.expect(0).within(Duration::from_secs(3));
    let json = status.json();
    assert_eq!(json["servers"][2]["state"], "error");
    assert!(json["servers"][2]["error"].as_str().unwrap_or("").contains("timed out after 300ms"));
}

/// Servers too slow to answer in time (a crontab line firing on a
/// thousand hosts at once) are asked again: `-n` says "unavailable" only
/// of servers that are down or cut off past its settle bound, and a run
/// whose servers were only late still runs its command.
#[test]
fn dash_n_asks_late_servers_again_instead_of_calling_them_unavailable() {
    let fleet = Fleet::start(3);
    let key = unique_key("late");
    fleet.servers[1].hang();
    fleet.servers[2].hang();
    let running = Redlock::on(&fleet)
        .args(["--node-timeout", "300ms", "run", "-n", "--key", &key, "--", "true"])
        .spawn();
    std::thread::sleep(Duration::from_millis(1200));
    fleet.servers[1].resume();
    fleet.servers[2].resume();
    let out = running.wait();
    out.expect(0).within(Duration::from_secs(6));
    // Cut off for good: unavailable, within the settle bound and a round.
    fleet.servers[1].hang();
    fleet.servers[2].hang();
    let out = Redlock::on(&fleet)
        .args(["--node-timeout", "300ms", "run", "-n", "--key", &key, "--", "true"])
        .run();
    fleet.servers[1].resume();
    fleet.servers[2].resume();
    out.expect(69).within(Duration::from_secs(7));
    assert!(out.stderr.contains("timed out after 300ms"), "{}", out.stderr);
}

/// `-n`'s "since it began" counts from the process's start, not from its
/// first call: here the process starts, then blocks reading its
/// configuration (a FIFO) while another client takes the key on C, and
/// only then sends its first round. B hangs (a timeout, so `-n` asks
/// again); A is free. Held: C shows the taker, which lets go before the
/// `-n` asks again, and C's clock at that first answer came after the
/// take. Released: C shows no holder at all, only the record of the take.
/// Both failed when the servers judged from the first call (exit 0, the
/// command ran).
#[test]
fn dash_n_counts_a_take_between_its_start_and_its_first_call() {
    let fleet = Fleet::start(3);
    for held in [true, false] {
        let key = unique_key("taken-before-first-call");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.toml");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        fleet.servers[1].hang();
        let running = Redlock::on(&fleet)
            .env("REDLOCK_CONFIG", &fifo.display().to_string())
            .args(["-v", "--node-timeout", "300ms", "run", "-n", "--key", &key, "--", "true"])
            .spawn();
        std::thread::sleep(Duration::from_millis(300));
        let record = lock_key(&key) + ":last";
        let time: Vec<String> = fleet.servers[2].cmd(&["TIME"]);
        let at = (time[0].parse::<u64>().unwrap() * 1000 + time[1].parse::<u64>().unwrap() / 1000)
            .to_string();
        let _: i64 = fleet.servers[2].cmd(&["HSET", &record, "at", &at, "tok", "taker"]);
        if held {
            let _: String = fleet.servers[2].cmd(&["SET", &lock_key(&key), "taker", "PX", "800"]);
        }
        std::fs::write(&fifo, "# read once the take is made\n").unwrap();
        let out = running.wait();
        fleet.servers[1].resume();
        out.expect(75).stderr_has("taken by another client");
    }
}

/// A shell script's `redlock run -n` twice in a row: the second began
/// after the first's take, so it runs. (With the start read from
/// `/proc/self/stat`, in 10 ms clock ticks rounded down, the second often
/// counted the first's take as one meanwhile and skipped.)
#[test]
fn dash_n_runs_right_after_another_dash_n_on_the_key() {
    let fleet = Fleet::start(3);
    let key = unique_key("in-a-row");
    for _ in 0..20 {
        Redlock::on(&fleet).args(["run", "-n", "--key", &key, "--", "true"]).run().expect(0);
    }
}

/// A take between a `-n`'s start and its first call on a server shows
/// there as held. Shown by too few servers to be "busy" (here one of
/// three; the others are split), the `-n` asks again, and must then still
/// see that take once its holder released: a server that showed a holder
/// is judged from the round's start there, not from its clock when it
/// answered (which came after the take). Every server answers 400 ms
/// late each way, and C's record says the taker was granted 200 ms after
/// the `-n` was started.
#[test]
fn dash_n_asking_again_still_sees_a_take_it_first_saw_held() {
    use crate::harness::proxy::{Mode, Proxy};
    let fleet = Fleet::start(3);
    let key = unique_key("held-then-taken");
    let record = lock_key(&key) + ":last";
    // Every server as slow, so that the round waits for C's answer.
    let slow: Vec<Proxy> = fleet.servers.iter().map(|s| Proxy::start(s.port)).collect();
    for proxy in &slow {
        proxy.set(Mode::Delay(Duration::from_millis(400)));
    }
    let servers: Vec<String> = slow.iter().map(Proxy::url).collect();
    let _: String = fleet.servers[0].cmd(&["SET", &lock_key(&key), "other", "PX", "20000"]);
    let _: String = fleet.servers[2].cmd(&["SET", &lock_key(&key), "taker", "PX", "1000"]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let at = (now.as_millis() + 200).to_string();
    let _: i64 = fleet.servers[2].cmd(&["HSET", &record, "at", &at, "tok", "taker"]);
    let out = Redlock::new(&servers.join(","))
        .args(["-v", "--node-timeout", "3s", "run", "-n", "--key", &key, "--", "true"])
        .run();
    out.expect(75).stderr_has("taken by another client");
}

#[test]
fn a_password_the_url_lacks_is_an_auth_error_and_never_printed() {
    let secret = "s3cret-pw-4711";
    let server = RedisServer::start_with(&["--requirepass", secret]);
    let key = unique_key("auth");
    Redlock::new(&server.url_without_password())
        .args(["acquire", "--wait", "5s", "--key", &key])
        .run()
        .expect(69)
        .within(PROMPT) // configuration errors end the wait at once
        .stderr_has(&format!("acquire {key}: 1 of 1 server failed (quorum 1): "))
        .stderr_has(&format!("{}: authentication failed", server.name()));

    let wrong = format!("redis://:wrong-{secret}@127.0.0.1:{}", server.port);
    let out = Redlock::new(&wrong).args(["-v", "acquire", "-n", "--key", &key]).run();
    out.expect(69).stderr_has("authentication failed");
    assert!(!out.stderr.contains(secret), "password leaked: {}", out.stderr);

    let mut outputs = Vec::new();
    let acquired = Redlock::new(&server.url()).args(["-vv", "acquire", "--key", &key]).run();
    acquired.expect(0);
    let token = acquired.line().to_owned();
    outputs.push(acquired);
    for args in [
        vec!["-vv", "status", "--key", &key],
        vec!["-vv", "--log-format", "json", "status", "--key", &key, "--json"],
        vec!["-vv", "extend", "--key", &key, "--token", &token],
        vec!["-vv", "release", "--key", &key, "--token", &token],
        vec!["-vv", "--servers", "redis://:pw@127.0.0.1:1,bogus://u:pw@x", "status", "--key", &key],
    ] {
        outputs.push(Redlock::new(&server.url()).args(&args).run());
    }
    for out in &outputs {
        if out.stdout.contains(secret) || out.stderr.contains(secret) {
            out.fail("leaked the password");
        }
    }
}

#[test]
fn a_wrong_token_is_lost_and_leaves_the_key_untouched() {
    let fleet = Fleet::start(3);
    let key = unique_key("wrongtoken");
    let out = Redlock::on(&fleet).args(["acquire", "--key", &key, "--ttl", "20s"]).run();
    out.expect(0);
    let token = out.line();
    Redlock::on(&fleet)
        .args(["extend", "--key", &key, "--token", "not-the-token", "--ttl", "60s"])
        .run()
        .expect(70)
        .stderr_has("not held by this token");
    Redlock::on(&fleet)
        .args(["release", "--key", &key, "--token", "not-the-token"])
        .run()
        .expect(70);
    for s in &fleet.servers {
        assert_eq!(s.get(&lock_key(&key)).as_deref(), Some(token));
        let pttl = s.pttl(&lock_key(&key));
        assert!(pttl > 0 && pttl <= 20_000, "the wrong token must not extend: {pttl}");
    }
    // A lock that expired is not ours to release either.
    let short = unique_key("expired");
    let out = Redlock::on(&fleet).args(["acquire", "--key", &short, "--ttl", "50ms"]).run();
    out.expect(0);
    std::thread::sleep(Duration::from_millis(120));
    Redlock::on(&fleet).args(["release", "--key", &short, "--token", out.line()]).run().expect(70);
}

#[test]
fn status_before_and_after_names_the_holder() {
    let fleet = Fleet::start(3);
    let key = unique_key("status");
    let before = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
    before.expect(1);
    let json = before.json();
    assert_eq!(json["held"], false);
    assert_eq!(json["quorum"], 2);
    assert_eq!(json["servers"].as_array().map(Vec::len), Some(3));
    assert!(json["servers"].as_array().unwrap().iter().all(|s| s["state"] == "free"));

    let out = Redlock::on(&fleet).args(["acquire", "--key", &key, "--ttl", "30s"]).run();
    out.expect(0);
    let token = out.line();
    let after = Redlock::on(&fleet).args(["status", "--key", &key, "--json"]).run();
    after.expect(0);
    let json = after.json();
    assert_eq!(json["key"], key.as_str());
    assert_eq!(json["held"], true);
    assert_eq!(json["holder"]["token"], token);
    assert!(json["holder"]["pid"].as_u64().is_some_and(|p| p > 0));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_eq!(json["holder"]["host"], host.trim());
    let ttl = json["ttl_ms"].as_u64().expect("ttl_ms");
    assert!(ttl > 25_000 && ttl <= 30_000, "{ttl}");
    for s in json["servers"].as_array().unwrap() {
        assert_eq!(s["state"], "held");
        assert!(s["server"].as_str().unwrap().starts_with("127.0.0.1:"));
    }

    let table = Redlock::on(&fleet).args(["status", "--key", &key]).run();
    table.expect(0);
    assert!(table.stdout.lines().last().unwrap_or("").starts_with("held: "), "{}", table.stdout);
    let held_rows =
        table.stdout.lines().filter(|l| l.starts_with("127.0.0.1:") && l.contains("  held  "));
    assert_eq!(held_rows.count(), 3, "{}", table.stdout);
}

#[test]
fn force_release_deletes_whoever_holds_it() {
    let fleet = Fleet::start(3);
    let key = unique_key("force");
    Redlock::on(&fleet).args(["acquire", "--key", &key]).run().expect(0);
    Redlock::on(&fleet).args(["release", "--key", &key, "--force"]).run().expect(0);
    assert_eq!(fleet.values(&lock_key(&key)), vec![None, None, None]);
}

/// `release --force` with a hung server costs one node timeout (every
/// read and delete of the shared holders and of each place goes at once),
/// says how many servers answered, and names the holder it deleted.
#[test]
fn force_release_with_a_hung_server_takes_one_node_timeout_and_names_the_holder() {
    let fleet = Fleet::start(3);
    let key = unique_key("force-hung");
    let (token, _) = Redlock::on(&fleet).acquire(&key, "30s");
    let pid = token.split('.').nth(1).unwrap_or_default();
    fleet.servers[2].hang();
    let out = Redlock::on(&fleet)
        .args(["-v", "--node-timeout", "1s", "release", "--key", &key, "--force"])
        .run();
    fleet.servers[2].resume();
    out.expect(0)
        .stderr_has("deleted on 2 of 3 servers")
        .stderr_has("2 of 3 answered")
        .stderr_has(&fleet.servers[2].name())
        .stderr_has(&format!("pid {pid}"))
        .within(Duration::from_millis(1_900));
    assert_eq!(fleet.values(&lock_key(&key))[..2], [None, None]);
}

/// The same for shared holders and for the places of `--limit 2` given on
/// the command line: the marker the shared round deletes meanwhile is not
/// taken for another client's value, and every place goes at once.
#[test]
fn force_release_of_shared_holders_and_places_with_a_hung_server_takes_one_node_timeout() {
    let fleet = Fleet::start(3);
    let shared = unique_key("force-hung-shared");
    for _ in 0..2 {
        Redlock::on(&fleet).args(["acquire", "--shared", "--key", &shared]).run().expect(0);
    }
    let places = unique_key("force-hung-places");
    for _ in 0..2 {
        Redlock::on(&fleet).args(["acquire", "--limit", "2", "--key", &places]).run().expect(0);
    }
    fleet.servers[0].hang();
    let force = |args: &[&str]| {
        Redlock::on(&fleet)
            .args(["-v", "--node-timeout", "1s", "release", "--force"])
            .args(args)
            .run()
    };
    let shared_out = force(&["--key", &shared]);
    let places_out = force(&["--key", &places, "--limit", "2"]);
    fleet.servers[0].resume();
    shared_out
        .expect(0)
        .stderr_has("2 of 3 answered")
        .stderr_has("shared holders")
        .within(Duration::from_millis(1_900));
    places_out
        .expect(0)
        .stderr_has("deleted place 1 on 2 of 3, place 2 on 2 of 3 servers")
        .stderr_has("2 of 3 answered")
        .within(Duration::from_millis(1_900));
}

#[test]
fn a_key_of_the_wrong_type_is_reported_and_never_overwritten() {
    let fleet = Fleet::start(3);
    let key = unique_key("hash");
    for s in &fleet.servers {
        let _: i64 = s.cmd(&["HSET", &lock_key(&key), "field", "data"]);
    }
    Redlock::on(&fleet)
        .args(["acquire", "--wait", "10s", "--key", &key])
        .run()
        .expect(69)
        .within(PROMPT)
        .stderr_has("WRONGTYPE");
    Redlock::on(&fleet).args(["release", "--key", &key, "--force"]).run().expect(69);
    Redlock::on(&fleet).args(["status", "--key", &key]).run().expect(69).stderr_has("WRONGTYPE");
    for s in &fleet.servers {
        let field: Option<String> = s.cmd(&["HGET", &lock_key(&key), "field"]);
        assert_eq!(field.as_deref(), Some("data"));
    }
}

#[test]
fn waiting_retries_until_the_holder_expires_or_the_wait_ends() {
    let fleet = Fleet::start(3);
    let key = unique_key("wait");
    Redlock::on(&fleet).args(["acquire", "--key", &key, "--ttl", "10s"]).run().expect(0);
    Redlock::on(&fleet)
        .args(["acquire", "--key", &key, "--wait", "300ms"])
        .run()
        .expect(75)
        .within(PROMPT);

    let short = unique_key("wait-short");
    Redlock::on(&fleet).args(["acquire", "--key", &short, "--ttl", "700ms"]).run().expect(0);
    let second = Redlock::on(&fleet).args(["acquire", "--key", &short, "--wait", "20s"]).run();
    second.expect(0).within(PROMPT);
    // A quorum holds it (a server where the first lock outlived the others
    // by a few milliseconds may have said "held").
    let holding = fleet
        .values(&lock_key(&short))
        .iter()
        .filter(|v| v.as_deref() == Some(second.line()))
        .count();
    assert!(holding >= 2, "held on {holding} of 3 servers");
}

#[test]
fn a_signal_ends_a_waiting_acquire_and_leaves_the_holder_alone() {
    let fleet = Fleet::start(3);
    let key = unique_key("wait-signal");
    let holder = Redlock::on(&fleet).args(["acquire", "--key", &key, "--ttl", "60s"]).run();
    holder.expect(0);
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let waiter = Redlock::on(&fleet).args(["acquire", "--key", &key, "--wait", "50s"]).spawn();
        fleet.servers[0].await_waiters(&key, 1);
        send_signal(waiter.pid(), signal);
        waiter.wait().expect(code).within(PROMPT).stderr_has("interrupted by SIG");
        assert_eq!(fleet.values(&lock_key(&key)), vec![Some(holder.line().to_owned()); 3]);
    }
}

#[test]
fn unix_socket_urls_work() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sock = dir.path().join("redis.sock");
    let sock = sock.to_str().expect("utf-8 path");
    let server = RedisServer::start_with(&["--unixsocket", sock, "--unixsocketperm", "700"]);
    let key = unique_key("unix");
    let url = format!("unix://{sock}");
    let out = Redlock::new(&url).args(["acquire", "--key", &key]).run();
    out.expect(0);
    assert_eq!(server.get(&lock_key(&key)).as_deref(), Some(out.line()));
}

#[test]
fn bad_inputs_exit_64_with_one_line_and_touch_no_server() {
    let server = RedisServer::start();
    let url = server.url();
    let before = server.connections_received();
    let three = format!("{url},{url},{url}");
    let cases: Vec<Vec<&str>> = vec![
        vec!["acquire", "--key", ""],
        vec!["acquire", "--key", "k", "--ttl", "0s"],
        vec!["acquire", "--key", "k", "--ttl", "-5s"],
        vec!["acquire", "--key", "k", "--ttl", "banana"],
        vec!["acquire", "--key", "k", "--wait", "1x"],
        vec!["acquire", "--key", "k", "-n", "--wait", "1s"],
        vec!["--quorum", "4", "--servers", &three, "acquire", "--key", "k"],
        vec!["--quorum", "0", "acquire", "--key", "k"],
        vec!["--servers", "http://127.0.0.1:1", "acquire", "--key", "k"],
        vec!["--servers", "", "acquire", "--key", "k"],
        vec!["--servers", "redis://", "acquire", "--key", "k"],
        vec!["--node-timeout", "40s", "acquire", "--key", "k"],
        vec!["--drift-factor", "-1", "acquire", "--key", "k"],
        vec!["extend", "--key", "k", "--token", ""],
        vec!["release", "--key", "k"],
        vec!["release", "--key", "k", "--token", "t", "--force"],
        vec!["status"],
        vec!["acquire", "--key", "k", "--bogus"],
        vec!["run", "--key", "k"],
        vec!["run", "--key", "k", "--on-lost", "SIGBOGUS", "--", "true"],
        vec!["frobnicate"],
    ];
    for args in cases {
        // `--servers` in the arguments overrides the environment's.
        let out = Redlock::new(&url).args(&args).run();
        out.expect(64);
        if out.stderr.lines().count() != 1 || !out.stderr.starts_with("redlock: ") {
            out.fail("should print exactly one `redlock: ...` line on stderr");
        }
    }
    assert_eq!(server.connections_received(), before + 1, "only our own INFO connection");
}
