//! What `run` leaves behind when it ends: the history entry or the skip on
//! the servers ([`crate::history`]) and the `--metrics-file`
//! ([`crate::metrics`]). Both come after the lock is released, and a
//! failure of either is a warning that never changes the exit code.

use std::time::{Duration, SystemTime};

use crate::clock::BootInstant;
use crate::config::Run;
use crate::error::Error;
use crate::history::{self, Entry, Outcome, SkipKind};
use crate::lock::{FLUSH, Fleet, Lock};
use crate::metrics::{self, Invocation, Ran, Sample, TickSeen};
use crate::output::{Level, Log};
use serde_json::json;

/// Records a run that held `lock` (asked for at `asked`) and ended with
/// `result`; `signaled` says whether the command's status was a signal.
pub async fn finished(
    fleet: &Fleet,
    cfg: &Run,
    lock: &Lock,
    asked: BootInstant,
    result: &Result<u8, Error>,
    signaled: bool,
    log: &Log,
) {
    let Some((outcome, exit_code)) = Outcome::of(result, signaled) else { return };
    let held = lock.since.elapsed();
    let start = SystemTime::now().checked_sub(held).unwrap_or_else(SystemTime::now);
    let entry = Entry {
        token: lock.token.clone(),
        host: crate::token::hostname(),
        pid: std::process::id(),
        start_ms: history::epoch_ms(start),
        duration_ms: crate::text::millis(held),
        outcome,
        exit_code,
        fence: lock.fence,
        tick_start_ms: cfg.request.tick.map(|t| t.start_ms),
        tick_ms: cfg.request.tick.map(|t| t.end_ms - t.start_ms),
        tick_offset_s: cfg.request.tick.map(|t| t.offset_s),
        schedule: cfg.request.schedule.clone(),
        note: cfg.request.note.clone(),
        job: cfg.request.job.clone(),
        meanwhile: Vec::new(),
    };
    let written = history::record(fleet, &cfg.request.key, &entry).await;
    // After a lost lock the final error already says what failed (most
    // often the same servers): a lost lock prints at most two lines.
    let level = if matches!(result, Err(Error::Lost(_))) { Level::Info } else { Level::Warn };
    warn_if_short(fleet, &cfg.request.key, "the run", written, level, log);
    let wait = lock.since.saturating_duration_since(asked);
    let ran = Ran { start, duration: held, exit_code, tick: cfg.request.tick.map(|t| t.start()) };
    write_metrics(cfg, Invocation::Ran(ran), true, wait, log);
}

/// Counts a run that did not run its command: found the lock busy, or its
/// tick run (`kind`), or reached no quorum, or was refused for another
/// schedule; `message` says why. An outage or a refusal is recorded only
/// for its tick (`check` names it as the reason the tick was missed), and
/// a failure to record it is said only with `-v`: the run's own error
/// already says what failed.
///
/// The count waits for its servers' answers at most [`FLUSH`]: a busy
/// `--wait DUR` ends within DUR plus a small constant, and a skip that
/// waited for a quorum of slow servers added up to a node timeout to it
/// (so did each of a burst's losers). What is given up is only the
/// warning: the commands went to every server's connection when the round
/// began, and [`Fleet::settle`] gives those still unwritten one more
/// [`FLUSH`]; a server that answers later has counted it all the same.
pub async fn skipped(
    fleet: &Fleet,
    cfg: &Run,
    message: &str,
    kind: SkipKind,
    asked: BootInstant,
    log: &Log,
) {
    let host = crate::token::hostname();
    let outage = matches!(kind, SkipKind::Unavailable | SkipKind::Elsewhere);
    let tick = cfg.request.tick.map(|t| t.start_ms);
    // An outage of a run with no tick has nothing for `check` to read.
    if !outage || tick.is_some() {
        let skip = (host.as_str(), SystemTime::now(), message);
        let count = history::record_skip(fleet, &cfg.request.key, skip, kind, tick);
        record_within_flush(fleet, cfg, count, outage, log).await;
    }
    let invocation = Invocation::of_skip(kind);
    write_metrics(cfg, invocation, kind == SkipKind::Ran, asked.elapsed(), log);
}

/// Waits for a skip's count at most [`FLUSH`] (see [`skipped`]), and warns
/// when fewer than a quorum counted it (said only with `-v` for an
/// `outage`).
async fn record_within_flush(
    fleet: &Fleet,
    cfg: &Run,
    count: impl std::future::Future<Output = Result<usize, crate::quorum::Failures>>,
    outage: bool,
    log: &Log,
) {
    let level = if outage { Level::Info } else { Level::Warn };
    match tokio::time::timeout(FLUSH, count).await {
        Ok(written) => warn_if_short(fleet, &cfg.request.key, "the skip", written, level, log),
        Err(_) => log.event(
            Level::Debug,
            "skip_unconfirmed",
            &format!(
                "history {}: the skip was sent; no quorum confirmed it within {}",
                crate::text::display_key(cfg.request.key.as_bytes()),
                crate::text::fmt_duration(FLUSH)
            ),
            json!({ "key": cfg.request.key }),
        ),
    }
}

/// A warning (at `level`) when fewer than a quorum of the servers recorded
/// `what` in the history of `key`: `history` may then miss it once those
/// servers are gone.
fn warn_if_short(
    fleet: &Fleet,
    key: &str,
    what: &str,
    written: Result<usize, crate::quorum::Failures>,
    level: Level,
    log: &Log,
) {
    let total = fleet.servers().len();
    let shown = crate::text::display_key(key.as_bytes());
    let message = match written {
        Ok(n) if n >= fleet.quorum() => return,
        Ok(n) => format!(
            "history {shown}: recorded {what} on only {n} of {total} servers (quorum {})",
            fleet.quorum()
        ),
        Err(failures) => format!("history {shown}: could not record {what}: {failures}"),
    };
    log.event(level, "history_not_recorded", &message, json!({ "key": key }));
}

/// Updates `--metrics-file` with what this invocation did; `tick_ran`:
/// whether its tick (if any) ran, as it saw it (run here or elsewhere).
fn write_metrics(cfg: &Run, invocation: Invocation, tick_ran: bool, wait: Duration, log: &Log) {
    let Some(path) = &cfg.metrics_file else { return };
    let servers = metrics::observed();
    let tick = cfg.request.tick.map(|t| TickSeen { start: t.start(), ran: tick_ran });
    let sample = Sample {
        key: cfg.request.key.clone(),
        invocation,
        tick,
        wait,
        at: SystemTime::now(),
        servers,
    };
    if let Err(e) = metrics::write(path, &sample) {
        log.event(
            Level::Warn,
            "metrics_not_written",
            &format!("--metrics-file {}: {e}", path.display()),
            json!({ "path": path, "error": e.to_string() }),
        );
    }
}
