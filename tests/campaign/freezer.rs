//! The freezer: a client that freezes the campaign's exclusive key
//! ([`KEY`]) with `redlock hold` now and then, for a few seconds, under
//! the same faults as the other clients (the freeze nemesis stops it as it
//! stops a `run`, [`crate::nemesis`]).
//!
//! What the freeze said on stderr (`--log-format json`: `hold_started`,
//! `hold_lost`, `hold_retaken`, `hold_ended`, `history_not_recorded`) goes
//! into the campaign's history as it arrives, a moment after the freeze
//! wrote it, and so does the moment the freezer sends it SIGTERM (just
//! before the signal). After it ended, the gaps it recorded in the key's
//! history (`redlock history --json`: entries of outcome `gap` whose host
//! is the freeze's own `--host`) are read and recorded too. The checker's
//! `freeze-taken` invariant reads them.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::clients::{Ctx, command};
use crate::harness;
use crate::history::{Event, Mode, now, outcome, wall_ms};

/// The key it freezes: the one the random clients run and script on.
pub const KEY: &str = "x";

/// The freeze's TTL: `--max-ttl 2s`, which `hold` takes as its TTL.
const TTL: Duration = Duration::from_secs(2);

/// The pause between two freezes, in ms: the key is free for the others
/// in between.
const PAUSE_MS: (u64, u64) = (500, 2_000);

/// A freeze's `--for`, in ms: long enough that, once it has waited for the
/// key behind the other clients' waiters (a second or two, often), a stop
/// of 1.2 to 2.2 TTLs (the freeze nemesis) may begin in it and end
/// [`SETTLE`] before its end, so that the freeze loses the key, sees it,
/// and takes it back.
const LENGTH_MS: (u64, u64) = (4_000, 8_000);

/// How long a freeze continued after a stop needs to see that its lock
/// was lost (its overdue renewal finds the token gone) before its end or a
/// SIGTERM comes: the freeze nemesis continues it at least this long
/// before either. A freeze whose end or SIGTERM comes first, while it is
/// stopped, ends without recording the gap (the hole
/// `hole_freeze_stopped_past_its_end_records_no_gap` replays).
pub const SETTLE: Duration = Duration::from_secs(1);

/// How many times the freezer asks for the key's history after a freeze
/// ended, [`READ_AGAIN`] apart, before it calls the gaps unknown.
const READS: usize = 6;

/// The pause between two reads of the history.
const READ_AGAIN: Duration = Duration::from_millis(500);

/// A freeze that holds its key now: what the freeze nemesis needs.
#[derive(Clone, Copy, Debug)]
pub struct Freezing {
    /// Its process.
    pub pid: u32,
    /// Its lock's TTL.
    pub ttl: Duration,
    /// When it ends at the latest: its `--for` from its invocation, or
    /// the SIGTERM the freezer plans before that.
    pub ends: Instant,
}

/// Freezes [`KEY`] now and then as `client` until `ctx.stop`, each
/// freeze ended by its `--for` or, one in three, by SIGTERM before it. A
/// freeze under way when the run stops is sent SIGTERM once the faults
/// are over (`ctx.faults_over`: no stop of it is under way then), so that
/// the clients after the faults need not wait for it.
pub fn freezer(ctx: &Arc<Ctx>, client: usize, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xF4E2);
    loop {
        let pause = Duration::from_millis(rng.u64(PAUSE_MS.0..PAUSE_MS.1));
        let since = Instant::now();
        while since.elapsed() < pause && !ctx.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        let length = rng.u64(LENGTH_MS.0..LENGTH_MS.1);
        let term = (rng.u8(0..3) == 0).then(|| Duration::from_millis(rng.u64(1_000..length)));
        freeze(ctx, client, Duration::from_millis(length), term);
    }
}

/// One freeze of [`KEY`] for `length`, sent SIGTERM after `term`, and its
/// record (see the module doc).
fn freeze(ctx: &Arc<Ctx>, client: usize, length: Duration, term: Option<Duration>) {
    let op = ctx.op();
    let host = format!("freeze-o{op}");
    let invoked = Instant::now();
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap();
    ctx.rec.record(&Event::Invoke {
        t: now(),
        client,
        op,
        f: "hold".to_owned(),
        key: KEY.to_owned(),
        mode: Mode::Exclusive,
        limit: 1,
        ttl_ms: ms(TTL),
        burst: None,
        child_code: None,
        busy_code: None,
        after_faults: false,
        token: None,
        no_wait: false,
        wait_ms: None,
        every_ms: None,
        once_per: false,
        wall_ms: wall_ms(),
        node_timeout_ms: None,
        for_ms: Some(ms(length)),
        other_schedule: false,
    });
    let mut cmd = command(ctx, client);
    cmd.args(["--log-format", "json", "--host", &host, "hold", "--key", KEY])
        .args(["--for", &format!("{}ms", length.as_millis()), "--note", "campaign freeze"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let ends = invoked + term.unwrap_or(length).min(length);
    let stderr = child.stderr.take().unwrap();
    let reader = {
        let ctx = Arc::clone(ctx);
        let seen = Freezing { pid, ttl: TTL, ends };
        std::thread::spawn(move || said(&ctx, op, seen, stderr))
    };
    let mut signalled = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        let over = ctx.faults_over.load(Ordering::Relaxed);
        if !signalled && (over || term.is_some_and(|t| invoked.elapsed() >= t)) {
            signalled = true;
            ctx.rec.record(&Event::Freeze { t: now(), op, said: "signalled".to_owned() });
            harness::send_signal(i32::try_from(pid).unwrap(), libc::SIGTERM);
        }
        if invoked.elapsed() > harness::HANG + length {
            ctx.hangs.lock().unwrap().push(format!("op {op}: hold --for {length:?}"));
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let t = now();
    let text = reader.join().unwrap();
    // After the reader: it registers the freeze when it reads its start.
    ctx.freezes.lock().unwrap().retain(|f| f.pid != pid);
    std::fs::write(ctx.dir.join(format!("op{op}.err")), &text).unwrap();
    let code = status.and_then(|s| s.code());
    ctx.rec.record(&Event::Complete {
        t,
        client,
        op,
        outcome: outcome(code),
        code,
        token: None,
        fence: None,
        validity_ms: None,
        pid: Some(pid),
    });
    let (read, gaps) = recorded_gaps(ctx, client, &host);
    ctx.rec.record(&Event::Gaps { t: now(), op, read, gaps });
}

/// Reads the freeze's stderr until it closes: records each of its events
/// as it arrives, and registers the freeze (`seen`) for the freeze nemesis
/// once it holds its key. Returns the text.
fn said(ctx: &Ctx, op: u64, seen: Freezing, stderr: std::process::ChildStderr) -> String {
    let mut text = String::new();
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let t = now();
        let json: Option<serde_json::Value> = serde_json::from_str(&line).ok();
        let event = json.as_ref().and_then(|j| j["event"].as_str()).unwrap_or_default();
        if event.starts_with("hold_") || event == "history_not_recorded" {
            ctx.rec.record(&Event::Freeze { t, op, said: event.to_owned() });
        }
        if event == "hold_started" {
            ctx.freezes.lock().unwrap().push(seen);
        }
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The gaps the freeze named `host` recorded in [`KEY`]'s history, each
/// `(start, end)` in ms since the epoch, read from a quorum of the servers
/// (`complete`); `false` when no read was complete (the servers down, or
/// slow, the whole time).
fn recorded_gaps(ctx: &Ctx, client: usize, host: &str) -> (bool, Vec<(u64, u64)>) {
    for _ in 0..READS {
        let out = command(ctx, client)
            .args(["history", "--key", KEY, "--json", "-n", "100"])
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let json: Option<serde_json::Value> = serde_json::from_slice(&out.stdout).ok();
        if let Some(json) = json.filter(|j| out.status.success() && j["complete"] == true) {
            let entries = json["entries"].as_array().cloned().unwrap_or_default();
            let gaps = entries
                .iter()
                .filter(|e| e["outcome"] == "gap" && e["host"] == host)
                .filter_map(|e| {
                    let start = e["start_ms"].as_u64()?;
                    Some((start, start + e["duration_ms"].as_u64()?))
                })
                .collect();
            return (true, gaps);
        }
        std::thread::sleep(READ_AGAIN);
    }
    (false, Vec::new())
}
