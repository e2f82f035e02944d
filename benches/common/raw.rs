//! The raw floor every benchmark row is measured against, in the same run:
//! a Redlock client with nothing but the commands it needs, as the peers'
//! `raw-floor` (`../shared/peers-bench/rust/raw-floor`) builds it. One
//! blocking socket per server, hand-written RESP, no runtime: an acquire is
//! `SET key token NX PX ttl` written to every server before the first reply
//! is read, a release the compare-and-delete script the same way. No
//! fencing, queue, record, clock check or history: what redlock adds
//! over this is what the ratios measure.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The compare-and-delete every Redlock client releases with.
const RELEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// One RESP reply, as much of it as the floor reads.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    Ok,
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Error(String),
}

/// Connections to every server of a `--servers` list.
pub struct Raw {
    nodes: Vec<(TcpStream, BufReader<TcpStream>)>,
    sha: String,
    buf: Vec<u8>,
}

impl Raw {
    /// Connects to each of `urls` (`redis://host:port`, comma-separated)
    /// and loads the release script (outside any timed part).
    pub fn connect(urls: &str) -> Raw {
        let nodes = urls
            .split(',')
            .map(|u| {
                let addr = u.trim_start_matches("redis://").trim_end_matches('/');
                let w = TcpStream::connect(addr).unwrap();
                w.set_nodelay(true).unwrap();
                w.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let r = BufReader::new(w.try_clone().unwrap());
                (w, r)
            })
            .collect();
        let mut raw = Raw { nodes, sha: String::new(), buf: Vec::with_capacity(256) };
        let replies = raw.round(&[b"SCRIPT", b"LOAD", RELEASE.as_bytes()]);
        let Reply::Bulk(Some(sha)) = &replies[0] else { panic!("SCRIPT LOAD: {replies:?}") };
        raw.sha = String::from_utf8(sha.clone()).unwrap();
        raw
    }

    /// `args` on every server at once; the replies in server order.
    fn round(&mut self, args: &[&[u8]]) -> Vec<Reply> {
        self.buf.clear();
        self.buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            self.buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.buf.extend_from_slice(a);
            self.buf.extend_from_slice(b"\r\n");
        }
        for (w, _) in &mut self.nodes {
            w.write_all(&self.buf).unwrap();
        }
        self.nodes.iter_mut().map(|(_, r)| read(r)).collect()
    }

    /// One acquire round; how many servers granted it.
    pub fn acquire(&mut self, key: &str, token: &str, ttl: Duration) -> usize {
        let ttl = ttl.as_millis().to_string();
        let args: [&[u8]; 6] =
            [b"SET", key.as_bytes(), token.as_bytes(), b"NX", b"PX", ttl.as_bytes()];
        self.round(&args).iter().filter(|r| **r == Reply::Ok).count()
    }

    /// One release round; how many servers deleted the key.
    pub fn release(&mut self, key: &str, token: &str) -> usize {
        let sha = self.sha.clone();
        let args: [&[u8]; 5] = [b"EVALSHA", sha.as_bytes(), b"1", key.as_bytes(), token.as_bytes()];
        self.round(&args).iter().filter(|r| **r == Reply::Int(1)).count()
    }

    /// The quorum of this many servers.
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// Acquires `key`, retrying after a random pause below 1 ms (the
    /// peers' floor's retry delay) until a quorum grants it; a failed round
    /// releases what it got first.
    pub fn acquire_retrying(&mut self, key: &str, token: &str, ttl: Duration) {
        let mut seed = u64::from(std::process::id()) ^ 0x9e37_79b9_7f4a_7c15;
        loop {
            if self.acquire(key, token, ttl) >= self.quorum() {
                return;
            }
            self.release(key, token);
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            std::thread::sleep(Duration::from_micros(seed % 1000));
        }
    }
}

/// Reads one reply (arrays are not expected).
fn read(r: &mut BufReader<TcpStream>) -> Reply {
    let mut line = Vec::with_capacity(64);
    r.read_until(b'\n', &mut line).unwrap();
    let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    match line[0] {
        b'+' => Reply::Ok,
        b'-' => Reply::Error(body),
        b':' => Reply::Int(body.parse().unwrap()),
        b'$' => match body.parse::<i64>().unwrap() {
            n if n < 0 => Reply::Bulk(None),
            n => {
                let mut data = vec![0u8; n as usize + 2];
                r.read_exact(&mut data).unwrap();
                data.truncate(n as usize);
                Reply::Bulk(Some(data))
            }
        },
        other => panic!("unexpected reply {:?}", other as char),
    }
}

/// `RAW_ONCE=URLS|KEY` in the environment makes a benchmark binary the
/// floor's whole process: acquire (retrying), run `true`, release, exit.
/// Call first thing in `main`; returns only when the variable is unset.
pub fn once_if_asked() {
    let Ok(spec) = std::env::var(RAW_ONCE) else { return };
    let (urls, key) = spec.split_once('|').unwrap();
    let mut raw = Raw::connect(urls);
    let token = format!("raw-{}-{:?}", std::process::id(), std::time::SystemTime::now());
    raw.acquire_retrying(key, &token, Duration::from_secs(10));
    let status = std::process::Command::new("true").status().unwrap();
    raw.release(key, &token);
    std::process::exit(status.code().unwrap_or(1));
}

/// See [`once_if_asked`].
pub const RAW_ONCE: &str = "REDLOCK_BENCH_RAW_ONCE";

/// The ratios a benchmark checks, each against a bound: a ratio past its
/// bound is a regression, and the benchmark exits with 1 once all are
/// printed. The bounds are loose (this machine is noisy) and sit above
/// the figures measured when they were set, not at the goals, which each
/// line states beside them (docs/performance.md has both).
#[derive(Default)]
pub struct Guards(Vec<String>);

impl Guards {
    /// `ratio` (redlock over the raw floor, unless the row says otherwise:
    /// lower is better when `lower`) against `bound`; `goal` is the target,
    /// for the line.
    pub fn check(&mut self, row: &str, ratio: f64, bound: f64, goal: &str, lower: bool) {
        let (ok, sign) = if lower { (ratio <= bound, "<=") } else { (ratio >= bound, ">=") };
        println!(
            "guard {row}: {ratio:.2} (guard {sign} {bound:.2}; goal {goal}): {}",
            if ok { "ok" } else { "REGRESSION" }
        );
        if !ok {
            self.0.push(row.to_owned());
        }
    }

    /// Exits with 1 when a guard failed.
    pub fn finish(self) {
        if !self.0.is_empty() {
            println!("guards past their bounds: {}", self.0.join(", "));
            std::process::exit(1);
        }
    }
}
