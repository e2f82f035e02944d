//! `redlock check`: one verdict for a monitoring system, in the
//! monitoring-plugin form (`OK - nightly-report ran 3h ago on web-3,
//! exit 0`), from the history and the lock's holder.
//!
//! The rules, each a [`Problem`]; any one makes the verdict WARNING
//! (exit 1), and the line (and the JSON's `problems`) names every one:
//! - **stale**: the newest run (recorded, or still holding the lock)
//!   started longer ago than `--max-age`;
//! - **failed** (`--require-success`): a run in the window did not succeed;
//! - **missed** (a key run with `--once-per`): more ticks of the window
//!   ended with no run than `--max-missed` (default 0), each with its
//!   reason from the tick's skips ([`history::MissedReason`]); the tick
//!   whose run still holds the lock is not missed;
//! - **hung** (`--max-runtime`): the run still holding the lock has held
//!   it longer than that.
//!
//! A tick paused by a freeze (`redlock hold` held the key past the tick's
//! end, [`history::SkipKind::Paused`]) is no missed tick: it is listed as
//! paused with the freeze's line and never counts towards `--max-missed`.
//! While a freeze holds the key, the job cannot run, on purpose: the line
//! says so and the age is not stale. A freeze's gap in the history
//! ([`history::Outcome::Gap`]) is no run.
//!
//! The window is the last `--since` (default: since the oldest entry
//! kept, [`history::MAX_ENTRIES`] per key), and never reaches before the
//! oldest entry: nothing says the job was scheduled before its first
//! recorded run. UNKNOWN (exit 2): no run is known, or fewer than a quorum
//! of the servers answered.
//!
//! By job: [`assess`] judges (the rules above, the window, the exit code),
//! [`render`] writes the verdict as the line or the JSON object.

use std::io::Write;
use std::time::SystemTime;

use crate::history::{self, Entry};
use crate::lock::Fleet;
use crate::token::Token;

mod assess;
mod render;

pub use assess::Limits;
use assess::Running;

/// Checks the runs of `key` and prints one line (or JSON); returns the exit code.
pub async fn check(fleet: &Fleet, key: &str, limits: &Limits, json: bool) -> u8 {
    let (mut found, status) =
        tokio::join!(history::read(fleet, key, history::MAX_ENTRIES), fleet.status(key));
    // A freeze's gaps are no runs.
    found.entries.retain(Entry::is_run);
    let last = found.entries.first();
    // A run still going has no entry yet: the lock's holder, unless it is
    // the newest entry's own lock kept on (`--keep`), or a freeze.
    let holder = status
        .holder
        .as_ref()
        .filter(|(value, _)| found.entries.iter().all(|e| e.token != *value))
        .and_then(|(value, _)| value.parse::<Token>().ok());
    let (frozen, running) = match holder {
        Some(token) if token.until.is_some() => (Some(token), None),
        token => (None, token.map(|token| Running { token })),
    };
    let now = SystemTime::now();
    let holder = (running.as_ref(), frozen.as_ref());
    let a = assess::assess(&found, holder, limits, now);
    let line = if json {
        render::json(key, &a, limits, last, now, holder)
    } else {
        render::line(key, &a, limits)
    };
    // A closed stdout loses only the line; the verdict is the exit code.
    let _ = writeln!(std::io::stdout().lock(), "{}", crate::text::guarded(&line));
    a.code()
}
