//! The history of a campaign: one JSON line per event, from every client
//! process and the nemesis, stamped on `CLOCK_MONOTONIC` (one clock for
//! every process of the machine; the campaign never steps it: the clock
//! faults are on the servers only, through libfaketime).
//!
//! Events:
//! - `invoke`: a client starts an operation (`run`, `acquire`, `extend`,
//!   `release`), with what it asked for and the wall clock beside the
//!   monotonic one (a cron host's tick is read off the wall clock);
//! - `complete`: the operation's process ended: `ok` (exit 0), `failed`
//!   (another documented code), `unknown` (killed, or no exit code), with
//!   its process id;
//! - `enter` / `exit`: the critical section of a `run` (its command),
//!   with `REDLOCK_FENCE`, `REDLOCK_SLOT` and `REDLOCK_TICK`; `exit` says how it ended
//!   (`normal` with the command's code, `term` when it was sent SIGTERM,
//!   `killed` when it vanished without a word: SIGKILL);
//! - `nemesis`: a fault starts or stops (a freeze names the processes it
//!   stopped);
//! - `freeze`: what a freeze (`hold`) said on stderr, stamped as each line
//!   arrived (`hold_started`, `hold_lost`, ...), or that the campaign sent
//!   it SIGTERM (stamped before the signal);
//! - `gaps`: the gaps a freeze recorded in its key's history, as `redlock
//!   history --json` showed them after it ended.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn now() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap() * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap()
}

/// A process's outcome as the history writes it: `ok` for exit 0,
/// `failed` for another code, `unknown` when it has none (a signal).
pub fn outcome(code: Option<i32>) -> String {
    match code {
        Some(0) => "ok",
        Some(_) => "failed",
        None => "unknown",
    }
    .to_owned()
}

/// Milliseconds since the Unix epoch on the wall clock.
pub fn wall_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    u64::try_from(since.as_millis()).unwrap()
}

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One holder (`run`, `acquire`).
    Exclusive,
    /// Many shared holders or one exclusive (`--shared`).
    Shared,
    /// At most `limit` holders (`--limit N`).
    Limit,
}

/// One line of the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Event {
    /// An operation begins.
    Invoke {
        /// When.
        t: u64,
        /// Which client.
        client: usize,
        /// The operation's number (unique in the history).
        op: u64,
        /// `run`, `acquire`, `extend` or `release`.
        f: String,
        /// The lock key.
        key: String,
        /// How it is held.
        mode: Mode,
        /// The places (`--limit`; 1 otherwise).
        limit: u32,
        /// The TTL asked for, in ms.
        ttl_ms: u64,
        /// The cron burst it belongs to (`run -n -E 0` fired at once).
        burst: Option<u64>,
        /// The command's own exit code (`run`).
        child_code: Option<i32>,
        /// The exit code asked for when busy (`-E`).
        busy_code: Option<i32>,
        /// A later phase with no faults, where a wait must succeed.
        after_faults: bool,
        /// The token it extends or releases.
        token: Option<String>,
        /// `-n`: it must not run if another holder took the key since it
        /// began.
        #[serde(default)]
        no_wait: bool,
        /// `--wait`, in ms (`run` and `acquire` without `-n`).
        #[serde(default)]
        wait_ms: Option<u64>,
        /// A cron host of the fleet: the tick's length in ms (the host's
        /// tick is `wall_ms / every_ms`, with or without `--once-per`).
        #[serde(default)]
        every_ms: Option<u64>,
        /// It passed `--once-per` (`every_ms`).
        #[serde(default)]
        once_per: bool,
        /// The wall clock (ms since the Unix epoch) when `t` was taken.
        #[serde(default)]
        wall_ms: u64,
        /// `--node-timeout`, in ms (`None`: a tenth of the TTL, at most 1 s).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_timeout_ms: Option<u64>,
        /// `hold --for`, in ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        for_ms: Option<u64>,
        /// A `run` of another schedule than the one its key's record names
        /// (a quorum of the servers named it when it was fired): it must be
        /// refused (64).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        other_schedule: bool,
    },
    /// An operation's process ended.
    Complete {
        /// When.
        t: u64,
        /// Which client.
        client: usize,
        /// The operation.
        op: u64,
        /// `ok`, `failed` or `unknown`.
        outcome: String,
        /// The exit code, when there is one.
        code: Option<i32>,
        /// What `acquire` printed: the token.
        token: Option<String>,
        /// What `acquire --json` printed: the fence.
        fence: Option<u64>,
        /// What `acquire --json` printed as `validity_ms`: the TTL less the
        /// round's time and the drift allowance, left when the round was
        /// decided.
        #[serde(default)]
        validity_ms: Option<u64>,
        /// The process's id (a freeze names the processes it stopped).
        #[serde(default)]
        pid: Option<u32>,
    },
    /// A critical section begins (its command runs).
    Enter {
        /// When.
        t: u64,
        /// Which client.
        client: usize,
        /// The operation.
        op: u64,
        /// `REDLOCK_FENCE`.
        fence: Option<u64>,
        /// `REDLOCK_SLOT`.
        slot: Option<u32>,
        /// `REDLOCK_TICK` (`--once-per`).
        #[serde(default)]
        tick: Option<String>,
    },
    /// A critical section ends.
    Exit {
        /// When.
        t: u64,
        /// Which client.
        client: usize,
        /// The operation.
        op: u64,
        /// `normal`, `term` or `killed`.
        how: String,
        /// The command's exit code (`normal`).
        code: Option<i32>,
    },
    /// What an operation's process printed on stderr, after its end, and
    /// whether it was to say nothing when it skipped: a cron host of the
    /// fleet (`--once-per -E 0`, no `-v`).
    Said {
        /// When.
        t: u64,
        /// The operation.
        op: u64,
        /// A cron host that must skip without a word.
        quiet: bool,
        /// Its stderr (at most 2,000 bytes).
        stderr: String,
    },
    /// A fault starts or stops.
    Nemesis {
        /// When.
        t: u64,
        /// What.
        what: String,
        /// `start` or `stop`.
        phase: String,
        /// A lock held by someone else than redlock for a while (a
        /// foreign write): its key and how long, in ms.
        foreign: Option<(String, u64)>,
        /// The servers a foreign write wrote, by index (empty: not said;
        /// the value then counts as held on a majority until it expires).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        servers: Vec<usize>,
        /// How many servers the run has (with `servers`).
        #[serde(default, skip_serializing_if = "is_zero")]
        fleet: usize,
        /// The processes a freeze stopped (SIGSTOP), at its start.
        #[serde(default)]
        frozen: Vec<u32>,
    },
    /// A line of a freeze (`hold --log-format json`), stamped when it
    /// arrived, a moment after it was written: `hold_started` (it holds its
    /// key), `hold_lost`, `hold_retaken`, `hold_ended`,
    /// `history_not_recorded`; or `signalled`, stamped just before the
    /// campaign sent it SIGTERM.
    Freeze {
        /// When.
        t: u64,
        /// The operation.
        op: u64,
        /// The line's `event`, or `signalled`.
        said: String,
    },
    /// The gaps a freeze recorded in its key's history: the entries of
    /// outcome `gap` with the freeze's `--host`, read (`history --json`)
    /// after it ended.
    Gaps {
        /// When they were read.
        t: u64,
        /// The freeze's operation.
        op: u64,
        /// The history answered from a quorum of the servers (else the
        /// freeze's gaps are not known).
        read: bool,
        /// Each gap's start and end, in ms since the Unix epoch.
        gaps: Vec<(u64, u64)>,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Event {
    /// When it happened.
    pub fn t(&self) -> u64 {
        match self {
            Event::Invoke { t, .. }
            | Event::Complete { t, .. }
            | Event::Enter { t, .. }
            | Event::Exit { t, .. }
            | Event::Said { t, .. }
            | Event::Nemesis { t, .. }
            | Event::Freeze { t, .. }
            | Event::Gaps { t, .. } => *t,
        }
    }
}

/// Appends events to a file, one JSON line each, from any thread.
pub struct Recorder {
    file: Mutex<std::fs::File>,
}

impl Recorder {
    /// A recorder writing to `path` (created, or appended to).
    pub fn create(path: &Path) -> Recorder {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        Recorder { file: Mutex::new(file) }
    }

    /// Writes one event.
    pub fn record(&self, event: &Event) {
        let mut line = serde_json::to_string(event).unwrap();
        line.push('\n');
        self.file.lock().unwrap().write_all(line.as_bytes()).unwrap();
    }
}

/// Reads a history: the events with their line numbers (from 1), in time
/// order.
pub fn read(path: &Path) -> Vec<(usize, Event)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut events: Vec<(usize, Event)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            (i + 1, serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}: {l}", i + 1)))
        })
        .collect();
    events.sort_by_key(|(i, e)| (e.t(), *i));
    events
}
