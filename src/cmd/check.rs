//! `redlock check`: one verdict for a monitoring system, in the
//! monitoring-plugin form (`OK - nightly-report ran 3h ago on web-3,
//! exit 0`): exit 0 when the last run started within `--max-age` (and
//! succeeded, with `--require-success`), 1 when it is older or failed, 2
//! when no run is known or fewer than a quorum of the servers answered.
//! A run still going (the lock is held by a token newer than the last
//! entry) that started within `--max-age` is OK: it has not failed yet.
//! For a key run with `--once-per`, the line also names the last tick that
//! ran and the ticks missed (none ran) since the oldest entry kept
//! ([`history::MAX_ENTRIES`] per key); they inform, the verdict is the age.
//! The entry's texts were written by whoever can write to the servers:
//! they are shown through [`crate::text::printable`] and [`crate::text::json`].

use std::io::Write;
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::exit;
use crate::history::{self, Entry};
use crate::lock::Fleet;
use crate::token::Token;

/// The verdict of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Ok,
    Stale,
    Failed,
    Unknown,
}

/// Checks the last run of `key` and prints one line (or JSON); returns the exit code.
pub async fn check(
    fleet: &Fleet,
    key: &str,
    max_age: Duration,
    require_success: bool,
    json: bool,
) -> u8 {
    let (found, status) =
        tokio::join!(history::read(fleet, key, history::MAX_ENTRIES), fleet.status(key));
    let shown = crate::text::display_key(key.as_bytes());
    let last = found.entries.first();
    let now = SystemTime::now();
    let missed = match last.and_then(|e| e.tick_ms) {
        Some(len) => {
            history::missed_ticks(&found.entries, len, history::epoch_ms(now), MISSED_SHOWN)
        }
        None => Vec::new(),
    };
    // A run still going has no entry yet: the lock's holder, unless it is
    // the newest entry's own lock kept on (`--keep`).
    let running = status
        .holder
        .as_ref()
        .filter(|(value, _)| last.is_none_or(|e| e.token != *value))
        .and_then(|(value, _)| value.parse::<Token>().ok());
    let (verdict, text) = match last {
        _ if !found.known() => (
            Verdict::Unknown,
            format!(
                "{shown}: only {} of {} servers answered (quorum {}): {}",
                found.answered, found.total, found.quorum, found.failures
            ),
        ),
        _ if running.as_ref().is_some_and(|t| t.held_for() <= max_age) => {
            let t = running.as_ref().map(|t| (t.held_for(), t.host.as_str(), t.pid));
            let (age, host, pid) = t.unwrap_or_default();
            (
                Verdict::Ok,
                format!("{shown} is running on {host} (pid {pid}), started {} ago", ago(age)),
            )
        }
        None => (
            Verdict::Unknown,
            format!(
                "{shown} has no recorded run (a history is kept {} days after the last run)",
                history::RETENTION.as_secs() / 86_400
            ),
        ),
        Some(e) => {
            let age = now.duration_since(e.start()).unwrap_or_default();
            let ran = describe(&shown, e, age) + &ticks(e, &missed);
            if age > max_age {
                let limit = crate::text::fmt_duration(max_age);
                (Verdict::Stale, format!("{ran}; older than --max-age {limit}"))
            } else if require_success && !e.succeeded() {
                (Verdict::Failed, format!("{ran}; it did not succeed"))
            } else {
                (Verdict::Ok, ran)
            }
        }
    };
    let (label, code) = match verdict {
        Verdict::Ok => ("OK", exit::OK),
        Verdict::Stale | Verdict::Failed => ("WARNING", exit::CHECK_STALE),
        Verdict::Unknown => ("UNKNOWN", exit::CHECK_UNKNOWN),
    };
    let line = if json {
        let line = json!({
            "key": key,
            "status": match verdict {
                Verdict::Ok => "ok",
                Verdict::Stale => "stale",
                Verdict::Failed => "failed",
                Verdict::Unknown => "unknown",
            },
            "code": code,
            "message": text,
            "age_ms": last.map(|e| crate::text::millis(now.duration_since(e.start()).unwrap_or_default())),
            "last": last,
            "last_tick": last.and_then(Entry::tick).map(|t| t.describe()),
            "missed_ticks": missed.iter().map(|&ms| tick_at(ms)).collect::<Vec<_>>(),
        });
        crate::text::json(&line)
    } else {
        format!("{label} - {text}")
    };
    // A closed stdout loses only the line; the verdict is the exit code.
    let _ = writeln!(std::io::stdout().lock(), "{}", crate::text::guarded(&line));
    code
}

/// How many missed ticks `check` names at most (the newest).
const MISSED_SHOWN: usize = 10;

/// The tick that starts at `ms`, for people.
fn tick_at(ms: u64) -> String {
    crate::lock::Tick { start_ms: ms, end_ms: ms, offset_s: 0 }.describe()
}

/// `, for the tick of 2026-11-27T11:05Z; 2 ticks missed: ...`, or nothing
/// for a run without `--once-per`.
fn ticks(e: &Entry, missed: &[u64]) -> String {
    let Some(tick) = e.tick() else { return String::new() };
    let mut text = format!(", for the tick of {}", tick.describe());
    if !missed.is_empty() {
        let shown: Vec<String> = missed.iter().map(|&ms| tick_at(ms)).collect();
        let more = if missed.len() == MISSED_SHOWN { " or more" } else { "" };
        text +=
            &format!("; {}{more} earlier ticks did not run: {}", missed.len(), shown.join(", "));
    }
    text
}

/// `nightly-report ran 3h ago on web-3, exit 0`.
fn describe(shown: &str, e: &Entry, age: Duration) -> String {
    let host = crate::text::printable(&e.host);
    format!("{shown} ran {} ago on {host}, {}", ago(age), e.describe_outcome())
}

/// A coarse age: `42s`, `17m`, `3h`, `2d`.
fn ago(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_coarse() {
        assert_eq!(ago(Duration::from_secs(59)), "59s");
        assert_eq!(ago(Duration::from_secs(3 * 3600 + 59 * 60)), "3h");
        assert_eq!(ago(Duration::from_secs(3 * 86_400)), "3d");
    }
}
