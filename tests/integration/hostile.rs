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
