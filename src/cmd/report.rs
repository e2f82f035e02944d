//! What `run` leaves behind when it ends: the history entry or the skip on
//! the servers ([`crate::history`]) and the `--metrics-file`
//! ([`crate::metrics`]). Both come after the lock is released, and a
//! failure of either is a warning that never changes the exit code.

use std::time::{Duration, SystemTime};

use crate::clock::BootInstant;
use crate::config::Run;
use crate::error::Error;
use crate::history::{self, Entry, Outcome};
use crate::lock::{Fleet, Lock};
use crate::metrics::{self, Ran, Sample};
use crate::output::Log;

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
        duration_ms: crate::millis(held),
        outcome,
        exit_code,
        fence: lock.fence,
    };
    let written = history::record(fleet, &cfg.key, &entry).await;
    warn_if_short(fleet, "the run", written, log);
    let wait = lock.since.saturating_duration_since(asked);
    let ran = Some(Ran { start, duration: held, exit_code });
    write_metrics(cfg, ran, wait, log);
}

/// Counts a run that found the lock busy (`message` says who held it).
pub async fn skipped(fleet: &Fleet, cfg: &Run, message: &str, asked: BootInstant, log: &Log) {
    let host = crate::token::hostname();
    let written = history::record_skip(fleet, &cfg.key, &host, SystemTime::now(), message).await;
    warn_if_short(fleet, "the skip", written, log);
    write_metrics(cfg, None, asked.elapsed(), log);
}

/// A warning when fewer than a quorum of the servers recorded `what`:
/// `history` may then miss it once those servers are gone.
fn warn_if_short(
    fleet: &Fleet,
    what: &str,
    written: Result<usize, crate::quorum::Failures>,
    log: &Log,
) {
    let total = fleet.servers().len();
    match written {
        Ok(n) if n >= fleet.quorum() => {}
        Ok(n) => log.warn(&format!(
            "history: recorded {what} on only {n} of {total} servers (quorum {})",
            fleet.quorum()
        )),
        Err(failures) => log.warn(&format!("history: could not record {what}: {failures}")),
    }
}

fn write_metrics(cfg: &Run, ran: Option<Ran>, wait: Duration, log: &Log) {
    let Some(path) = &cfg.metrics_file else { return };
    let sample = Sample { key: cfg.key.clone(), ran, wait, at: SystemTime::now() };
    if let Err(e) = metrics::write(path, &sample) {
        log.warn(&format!("--metrics-file {}: {e}", path.display()));
    }
}
