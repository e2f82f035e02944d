//! Hostile input: odd keys, keys of the wrong type, TTLs near the 64-bit
//! limit, and servers that speak nonsense. Each gets a clear error and the
//! documented exit code; never a panic, never a hang.

use std::io::{Read, Write};
use std::time::Duration;

use crate::harness::{Fleet, Output, Redlock, lock_key};

fn no_panic(out: &Output) {
    if out.stderr.contains("panicked") || out.stderr.contains("RUST_BACKTRACE") {
        out.fail("panicked");
    }
}

#[test]
fn keys_with_spaces_unicode_and_64_kib_work_as_given() {
    let fleet = Fleet::start(3);
    let long = "k".repeat(64 * 1024);
    for key in ["with spaces", "ünïcødé 🔒 ключ", "-starts-with-dash", long.as_str()] {
        let out = Redlock::on(&fleet).args(["acquire", "--key", key]).run();
        out.expect(0);
        no_panic(&out);
        assert_eq!(
            fleet.servers[0].get(&lock_key(key)).as_deref(),
            Some(out.line()),
            "key {:?}",
            &key[..key.len().min(20)]
        );
        let status = Redlock::on(&fleet).args(["status", "--json", "--key", key]).run();
        status.expect(0);
        assert_eq!(status.json()["key"], key);
        Redlock::on(&fleet).args(["release", "--key", key, "--token", out.line()]).run().expect(0);
        Redlock::on(&fleet).args(["run", "--key", key, "--", "true"]).run().expect(0);
        assert_eq!(fleet.values(&lock_key(key)), vec![None, None, None]);
    }
}

/// A key with a control character is refused before any server is
/// contacted: a newline in a key would make its release channel another
/// key's per-waiter channel (`release channel + "\n" + tag`).
#[test]
fn keys_with_control_characters_are_usage_errors() {
    let fleet = Fleet::start(1);
    for key in ["new\nline", "a\rb", "tab\there", "esc\x1b[31m", "del\x7f"] {
        for args in [
            vec!["acquire", "-n", "--key", key],
            vec!["run", "-n", "--key", key, "--", "true"],
            vec!["release", "--force", "--key", key],
            vec!["status", "--key", key],
        ] {
            let out = Redlock::on(&fleet).args(&args).run();
            out.expect(64).stderr_has("control character");
            no_panic(&out);
            assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        }
    }
    assert_eq!(fleet.dbsizes(), vec![0]);
}

/// `--jitter` is a sleep before the first attempt: at most a day, so that a
/// typo (`1y` for `1s`) is a usage error, not a job that never starts.
#[test]
fn a_jitter_longer_than_a_day_is_a_usage_error() {
    let fleet = Fleet::start(1);
    let mut running = Redlock::on(&fleet)
        .args(["run", "-n", "--jitter", "1y", "--key", "jitter", "--", "true"])
        .spawn();
    let started = std::time::Instant::now();
    while running.child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(5) {
            let _ = running.child.kill();
            panic!("run --jitter 1y was still sleeping after 5s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = running.wait();
    out.expect(64).stderr_has("--jitter").stderr_has("at most 1 day");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}

#[test]
fn a_key_holding_a_list_is_reported_and_kept() {
    let fleet = Fleet::start(1);
    let _: i64 = fleet.servers[0].cmd(&["RPUSH", &lock_key("a-list"), "x", "y"]);
    for args in [
        vec!["acquire", "-n", "--key", "a-list"],
        vec!["run", "-n", "--key", "a-list", "--", "true"],
        vec!["extend", "--key", "a-list", "--token", "t"],
        vec!["release", "--key", "a-list", "--token", "t"],
        vec!["release", "--key", "a-list", "--force"],
        vec!["status", "--key", "a-list"],
    ] {
        let out = Redlock::on(&fleet).args(&args).run();
        out.expect(69).stderr_has("WRONGTYPE");
        no_panic(&out);
    }
    let len: i64 = fleet.servers[0].cmd(&["LLEN", &lock_key("a-list")]);
    assert_eq!(len, 2);
}

#[test]
fn durations_near_the_64_bit_limit_are_usage_errors() {
    let fleet = Fleet::start(1);
    for args in [
        vec!["acquire", "--key", "k", "--ttl", "18446744073709551615ms"],
        vec!["acquire", "--key", "k", "--ttl", "18446744073709551616s"],
        vec!["acquire", "--key", "k", "--ttl", "584942417355y"],
        vec!["acquire", "--key", "k", "--ttl", "366d"],
        vec!["acquire", "--key", "k", "--wait", "99999999999999999999999s"],
        vec!["run", "--key", "k", "--max-hold", "18446744073709551615s", "--", "true"],
        vec!["--node-timeout", "18446744073709551615ms", "status", "--key", "k"],
    ] {
        let out = Redlock::on(&fleet).args(&args).run();
        out.expect(64);
        no_panic(&out);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    assert_eq!(fleet.values(&lock_key("k")), vec![None]);
    // The longest accepted TTL works end to end (with --max-ttl that long).
    let out = Redlock::on(&fleet)
        .args(["--max-ttl", "365d", "acquire", "--key", "k", "--ttl", "365d"])
        .run();
    out.expect(0);
    assert!(fleet.servers[0].pttl(&lock_key("k")) > 364 * 24 * 3600 * 1000);
}

/// A TCP server that answers every connection with `reply` (then, when
/// `hold` is set, keeps the connection open).
fn nonsense_server(reply: &'static [u8], hold: bool) -> u16 {
    let listener = crate::harness::redis::listen();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 || stream.write_all(reply).is_err() || !hold {
                        break;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn a_server_that_speaks_nonsense_is_an_error_not_a_hang() {
    for (reply, hold) in [
        (&b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"[..], true),
        (&b"\x00\xff\xfe garbage \x01\x02"[..], true),
        (&b"*9999999999\r\n"[..], true),
        (&b":not-a-number\r\n"[..], true),
        (&b"+OK\r\n"[..], true),
        (&b""[..], false),
    ] {
        let port = nonsense_server(reply, hold);
        let url = format!("redis://127.0.0.1:{port}");
        for args in [
            vec!["--node-timeout", "300ms", "acquire", "-n", "--key", "k"],
            vec!["--node-timeout", "300ms", "status", "--key", "k"],
            vec!["--node-timeout", "300ms", "doctor"],
        ] {
            // A reply cut short is a server too slow to answer: `-n` asks
            // again within its stated bound (6 s plus a node timeout).
            let out = Redlock::new(&url).args(&args).run();
            out.expect(69).within(Duration::from_secs(7)).stderr_has(&format!("127.0.0.1:{port}"));
            no_panic(&out);
        }
    }
}

/// The first character of `text` that a terminal acts on (a control
/// character other than the newline ending a line) or that reorders or
/// hides what follows (the bidirectional and zero-width formatting
/// characters).
pub fn raw_unsafe(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}')
            || matches!(c, '\u{2060}'..='\u{2069}' | '\u{FEFF}')
    })
}

/// Whoever can write to the servers writes what `history`, `check` and
/// `status` read back: a history entry, the skip counter and the lock's
/// value, with escape sequences and bidi overrides in every text field.
/// Text and JSON show them escaped (JSON's `\u` escapes, the same string
/// to a parser), never raw.
#[test]
fn fields_read_back_from_the_servers_reach_no_terminal_raw() {
    let fleet = Fleet::start(1);
    let server = &fleet.servers[0];
    let key = crate::harness::unique_key("hostile-fields");
    let lock = lock_key(&key);
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let host = "web\u{1b}[31m\u{202e}exe.txt\u{7f}";
    let entry = serde_json::json!({
        "token": "t\u{1b}[2J", "host": host, "pid": 1, "start_ms": now_ms as u64 - 1000,
        "duration_ms": 5, "outcome": "exited", "exit_code": 0, "fence": null,
        "tick_start_ms": now_ms as u64 - 60_000, "tick_ms": 60_000,
        "note": "\u{9b}2J\u{2066}", "job": "https://x/\u{1b}]0;pwned\u{7}\u{202e}",
    });
    let _: i64 = server.cmd(&["LPUSH", &format!("{lock}:history"), &entry.to_string()]);
    let at = now_ms.to_string();
    let _: i64 = server.cmd(&[
        "HSET",
        &format!("{lock}:skips"),
        "count",
        "1",
        "since",
        &at,
        "at",
        &at,
        "host",
        "\u{1b}[2Jbox\u{85}",
        "holder",
        "\u{202e}held\u{1b}[0m",
    ]);
    // JSON escapes are the text itself to a parser: a script reads the
    // entry as written.
    let json = Redlock::on(&fleet).args(["history", "--json", "--key", &key]).run().json();
    assert_eq!(json["entries"][0]["host"], host);
    assert_eq!(json["skips"]["last_holder"], "\u{202e}held\u{1b}[0m");
    // Another client's value, then one in a token's shape whose job
    // decodes to a bidi override (`status` printed the job as it was);
    // `run -n` finds either busy and says who holds it.
    let token_shaped = format!("{:032x}.1.1700000000000.web~job=https://x/%E2%80%AEgpj%2Eexe", 7);
    for value in ["\u{1b}[2J\u{202e}", &token_shaped] {
        let _: String = server.cmd(&["SET", &lock, value]);
        for args in [
            vec!["history", "--key", &key],
            vec!["history", "--json", "--key", &key],
            vec!["check", "--max-age", "1h", "--key", &key],
            vec!["check", "--json", "--max-age", "1h", "--key", &key],
            vec!["status", "--key", &key],
            vec!["status", "--json", "--key", &key],
            vec!["run", "-n", "--key", &key, "--", "true"],
        ] {
            let out = Redlock::on(&fleet).args(&args).run();
            no_panic(&out);
            if let Some(c) = raw_unsafe(&out.stdout).or_else(|| raw_unsafe(&out.stderr)) {
                out.fail(&format!("printed U+{:04X} raw", u32::from(c)));
            }
            if args.contains(&"--json") {
                out.json();
            }
        }
    }
}
