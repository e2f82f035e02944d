//! `run --ping URL`: the pings against a real HTTP server the test starts
//! on a free loopback port ([`Monitor`]), which records every request's
//! path and query. The module's own calls first; then the fleet, once
//! `run` takes `--ping`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redlock::lock::Tick;
use redlock::ping::{Outcome, Ping, Rid, Signal, Source, TRIES};

use crate::harness::{Fleet, Redlock, Running, unique_key};

/// The secret part of every ping URL here: no message may show it.
const SECRET: &str = "5e1c0b7a-2f44-4e0b-9d3a-7c1f00d5ec07";

/// How the monitor answers.
#[derive(Clone, Copy)]
enum Answer {
    /// `HTTP/1.1 <status>`, then closes.
    Status(u16),
    /// Reads the request and never answers (the connection stays open).
    Never,
}

/// A cron monitor on `127.0.0.1:<free port>`: one thread accepts, one
/// thread per connection reads the request line and headers, records the
/// request target, and answers. The port is the kernel's (bound to 0), so
/// no other test can hold it.
struct Monitor {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Monitor {
    fn start(answer: Answer) -> Monitor {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let record = Arc::clone(&record);
                std::thread::spawn(move || serve(stream, answer, &record));
            }
        });
        Monitor { port, seen }
    }

    /// The ping URL of this monitor's check.
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/{SECRET}", self.port)
    }

    /// The request targets seen so far (`/path?query`), in arrival order.
    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// One connection: the request recorded as soon as its head is read.
fn serve(stream: TcpStream, answer: Answer, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let target = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
    }
    seen.lock().unwrap().push(target);
    let mut stream = stream;
    match answer {
        Answer::Status(status) => {
            let reply =
                format!("HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK");
            let _ = stream.write_all(reply.as_bytes());
        }
        // Held open until the client gives up and closes it.
        Answer::Never => {
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        }
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(future)
}

/// The path and query a ping of `signal` for `rid` reaches the monitor with.
fn target(signal: Signal, rid: Rid) -> String {
    match signal {
        Signal::Start => format!("/{SECRET}/start?rid={rid}"),
        Signal::Exit(0) => format!("/{SECRET}?rid={rid}"),
        Signal::Exit(code) => format!("/{SECRET}/{code}?rid={rid}"),
    }
}

fn assert_secret_free(outcome: &Outcome) {
    let text = format!("{outcome:?}");
    assert!(!text.contains(SECRET), "the outcome shows the secret: {text}");
}

/// A start and the ends for 0 and for 3 reach the monitor, once each, at
/// healthchecks.io's paths with the run id.
#[test]
fn a_start_and_each_end_reach_the_monitor_once_with_the_run_id() {
    let monitor = Monitor::start(Answer::Status(200));
    let ping = Ping::parse(&monitor.url(), Source::Flag).unwrap();
    let rid = Rid::of_tick(
        "nightly",
        Tick { start_ms: 1_700_000_000_000, end_ms: 1_700_000_300_000, offset_s: 0 },
    );
    let (start, ok, failed) =
        block_on(async { (ping.start(rid).await, ping.end(rid, 0).await, ping.end(rid, 3).await) });
    for (outcome, signal) in
        [(&start, Signal::Start), (&ok, Signal::Exit(0)), (&failed, Signal::Exit(3))]
    {
        assert!(outcome.ok(), "{outcome:?}");
        assert_eq!((outcome.signal, outcome.tries), (signal, 1));
    }
    let expected: Vec<String> = [Signal::Start, Signal::Exit(0), Signal::Exit(3)]
        .into_iter()
        .map(|s| target(s, rid))
        .collect();
    assert_eq!(monitor.seen(), expected);
}

/// A monitor that takes the connection and never answers costs two tries
/// of the timeout each, no more, and the failure names the timeout, not
/// the URL.
#[test]
fn a_silent_monitor_costs_two_bounded_tries_and_no_secret() {
    let monitor = Monitor::start(Answer::Never);
    let timeout = Duration::from_millis(300);
    let ping = Ping::parse(&monitor.url(), Source::Flag).unwrap().with_timeout(timeout);
    let began = Instant::now();
    let outcome = block_on(ping.start(Rid::random()));
    let took = began.elapsed();
    assert_eq!(outcome.tries, TRIES, "{outcome:?}");
    assert!(outcome.error.as_deref().unwrap().contains("timed out after 300ms"), "{outcome:?}");
    assert!(took >= timeout * TRIES, "{took:?}");
    assert!(took <= ping.bound() + Duration::from_millis(500), "{took:?} past {:?}", ping.bound());
    assert_eq!(monitor.seen().len(), 2, "{:?}", monitor.seen());
    assert_secret_free(&outcome);
    assert!(!ping.to_string().contains(SECRET));
}

/// A start ping waited for within a limit (the lock's validity) gives up
/// at the limit, not at its own bound.
#[test]
fn a_start_ping_within_a_limit_gives_up_at_the_limit() {
    let monitor = Monitor::start(Answer::Never);
    let ping = Ping::parse(&monitor.url(), Source::Flag).unwrap();
    // Timed inside the runtime: dropping it waits for the abandoned try.
    let (outcome, took) = block_on(async {
        let began = Instant::now();
        (ping.start_within(Rid::random(), Duration::from_millis(200)).await, began.elapsed())
    });
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(outcome.error.as_deref().unwrap().contains("given up after 200ms"), "{outcome:?}");
    assert_eq!(outcome.signal, Signal::Start);
}

/// A 503 is tried again; a 404 (a wrong URL, another try gets it again)
/// is not. Both failures name the status, not the URL.
#[test]
fn a_server_error_is_tried_again_and_a_client_error_is_not() {
    for (status, tries) in [(503, 2), (404, 1)] {
        let monitor = Monitor::start(Answer::Status(status));
        let ping = Ping::parse(&monitor.url(), Source::Flag).unwrap();
        let outcome = block_on(ping.end(Rid::random(), 1));
        assert_eq!(outcome.tries, tries, "{outcome:?}");
        assert_eq!(monitor.seen().len(), tries as usize);
        assert!(
            outcome.error.as_deref().unwrap().contains(&format!("HTTP {status}")),
            "{outcome:?}"
        );
        assert_secret_free(&outcome);
    }
}

/// Nobody listening: the connection is refused on both tries, at once,
/// and the failure shows no part of the URL's path.
#[test]
fn a_refused_connection_fails_fast_without_the_secret() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ping = Ping::parse(&format!("http://127.0.0.1:{port}/{SECRET}?k=v"), Source::Flag).unwrap();
    let began = Instant::now();
    let outcome = block_on(ping.start(Rid::random()));
    assert!(!outcome.ok() && outcome.tries == TRIES, "{outcome:?}");
    assert!(began.elapsed() < Duration::from_secs(2), "{:?}", began.elapsed());
    assert_secret_free(&outcome);
}

/// The tick of length `every` (ms) that starts at `start_ms`.
fn tick_at(start_ms: u64, every: u64) -> Tick {
    Tick { start_ms, end_ms: start_ms + every, offset_s: 0 }
}

/// The exit code the fleet's job picks for the tick starting at
/// `start_ms` (its `$REDLOCK_TICK`, in whole seconds): the tick's number
/// mod 4, so ends of 0 and of 1-3 both occur.
fn code_of(start_ms: u64, every_ms: u64) -> u8 {
    u8::try_from(start_ms / every_ms % 4).unwrap()
}

/// The issue's fleet: 50 hosts fire each of 20 ticks (half at its start,
/// half 0.6 s in; a 2 s tick stands for 5 minutes) with `--ping`: the
/// monitor gets exactly one start and one end per tick, the end carrying
/// the job's status, both with the tick's run id, and nothing else: a host
/// that skips never pings. No host's stderr shows the URL's secret.
#[test]
fn fifty_hosts_ping_once_per_tick_with_its_status_and_run_id() {
    let fleet = Fleet::start(3);
    let monitor = Monitor::start(Answer::Status(200));
    let key = unique_key("ping-fleet");
    let every_ms = 2_000u64;
    let job = format!(r#"exit $(( $(date -d "$REDLOCK_TICK" +%s) * 1000 / {every_ms} % 4 ))"#);
    let url = monitor.url();
    let fire = |n: usize| -> Vec<Running> {
        (0..n)
            .map(|_| {
                Redlock::on(&fleet)
                    .args(["run", "--once-per", "2s", "-n", "-E", "0", "-k", &key])
                    .args(["--ping", &url, "--", "sh", "-c", &job])
                    .spawn()
            })
            .collect()
    };
    let now_ms =
        u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
    let first_ms = (now_ms / every_ms + 1) * every_ms;
    let mut running = Vec::new();
    for tick in 0..20u64 {
        let start_ms = first_ms + tick * every_ms;
        for (offset, n) in [(0, 25), (600, 25)] {
            let at = UNIX_EPOCH + Duration::from_millis(start_ms + offset);
            std::thread::sleep(at.duration_since(SystemTime::now()).unwrap_or_default());
            running.extend(fire(n));
        }
    }
    for r in running {
        let out = r.wait();
        assert!((0..=3).contains(&out.code()), "{}", out.stderr);
        assert!(!out.stderr.contains(SECRET), "stderr shows the secret:\n{}", out.stderr);
    }
    let seen = monitor.seen();
    let mut expected = Vec::new();
    for tick in 0..20u64 {
        let start_ms = first_ms + tick * every_ms;
        let rid = Rid::of_tick(&key, tick_at(start_ms, every_ms));
        let code = code_of(start_ms, every_ms);
        for signal in [Signal::Start, Signal::Exit(code)] {
            let want = target(signal, rid);
            let n = seen.iter().filter(|t| **t == want).count();
            assert_eq!(n, 1, "tick {tick}: {want} seen {n} times; all: {seen:#?}");
            expected.push(want);
        }
    }
    let stray: Vec<_> = seen.iter().filter(|t| !expected.contains(t)).collect();
    assert!(stray.is_empty(), "pings of no tick, or from a host that skipped: {stray:#?}");
}
