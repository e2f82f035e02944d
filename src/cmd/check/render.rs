//! `check`'s verdict written: the monitoring-plugin line
//! (`WARNING - nightly-report ran 3h ago on web-3, exit 2; ...`) or one
//! JSON object, from an [`Assessment`]. The entries' texts were written by
//! whoever can write to the servers: they go through
//! [`crate::text::printable`] and [`crate::text::json`].

use std::time::{Duration, SystemTime};

use serde_json::json;

use super::assess::{Assessment, Limits, Problem, Running, Subject};
use crate::history::{self, Entry};
use crate::lock::Tick;
use crate::text::printable;
use crate::token::Token;

/// How many missed ticks `check` names at most (the newest).
const MISSED_SHOWN: usize = 10;

/// The line for people: the label (`OK`, `WARNING`, `UNKNOWN`), then
/// [`message`].
pub fn line(key: &str, a: &Assessment, limits: &Limits) -> String {
    let label = match a.status() {
        "ok" => "OK",
        "unknown" => "UNKNOWN",
        _ => "WARNING",
    };
    format!("{label} - {}", message(key, a, limits))
}

/// The JSON object: the verdict, the newest entry `last` (its age at
/// `now`), the holder now (a `running` run or a freeze, `frozen`), the
/// problems and the window's missed and paused ticks.
pub fn json(
    key: &str,
    a: &Assessment,
    limits: &Limits,
    last: Option<&Entry>,
    now: SystemTime,
    (running, frozen): (Option<&Running>, Option<&Token>),
) -> String {
    let age = last.map(|e| crate::text::millis(now.duration_since(e.start()).unwrap_or_default()));
    let problems: Vec<_> = a
        .problems
        .iter()
        .map(|p| json!({ "kind": p.kind(), "message": describe_problem(p, limits) }))
        .collect();
    let missed: Vec<_> = a
        .missed
        .iter()
        .map(|m| {
            json!({
                "tick": tick_at(m.start_ms, a.zone.as_ref()),
                "reason": m.reason,
                "why": m.reason.describe(),
            })
        })
        .collect();
    crate::text::json(&json!({
        "key": key,
        "status": a.status(),
        "code": a.code(),
        "message": message(key, a, limits),
        "age_ms": age,
        "last": last,
        "last_tick": last.and_then(Entry::tick).map(|t| t.describe()),
        "running": running.map(|r| json!({
            "host": r.token.host,
            "pid": r.token.pid,
            "held_ms": crate::text::millis(r.token.held_for()),
        })),
        "problems": problems,
        "window_from": a.window_from.map(|f| tick_at(f, a.zone.as_ref())),
        "missed_count": a.missed.len(),
        "missed": missed,
        "missed_ticks": a.missed.iter().take(MISSED_SHOWN).map(|m| tick_at(m.start_ms, a.zone.as_ref())).collect::<Vec<_>>(),
        "paused_count": a.paused.len(),
        "paused": a.paused.iter().map(|(start, freeze)| json!({
            "tick": tick_at(*start, a.zone.as_ref()),
            "freeze": freeze,
        })).collect::<Vec<_>>(),
        "frozen": frozen.map(crate::lock::describe_freeze),
    }))
}

/// The first sentence: the newest run (and the freeze holding the key
/// now), or why nothing can be said.
pub fn headline(key: &str, a: &Assessment) -> String {
    let shown = crate::text::display_key(key.as_bytes());
    let headline = match &a.subject {
        Subject::NoQuorum { answered, total, quorum, failures } => {
            return format!(
                "{shown}: only {answered} of {total} servers answered (quorum {quorum}): {failures}"
            );
        }
        Subject::NoRun => {
            return format!(
                "{shown} has no recorded run (a history is kept {} days after the last run)",
                history::RETENTION.as_secs() / 86_400
            );
        }
        Subject::Running(token) => format!(
            "{shown} is running on {} (pid {}), started {} ago",
            printable(&token.host),
            token.pid,
            ago(token.held_for())
        ),
        Subject::Ran(e, age) => describe(&shown, e, *age) + &ticks(e),
    };
    match &a.frozen {
        Some(t) => format!("{headline}; paused now by {}", crate::lock::describe_freeze(t)),
        None => headline,
    }
}

/// The whole line after the label: the headline, the missed ticks (named
/// even when tolerated), then every problem.
pub fn message(key: &str, a: &Assessment, limits: &Limits) -> String {
    let mut text = headline(key, a);
    if !a.missed.is_empty() {
        let shown: Vec<String> = a
            .missed
            .iter()
            .take(MISSED_SHOWN)
            .map(|m| format!("{} ({})", tick_at(m.start_ms, a.zone.as_ref()), m.reason.describe()))
            .collect();
        let more = if a.missed.len() > MISSED_SHOWN { ", ..." } else { "" };
        let since = a
            .window_from
            .map(|f| format!(" since {}", tick_at(f, a.zone.as_ref())))
            .unwrap_or_default();
        text += &format!(
            "; {} earlier ticks did not run{since}: {}{more}",
            a.missed.len(),
            shown.join(", ")
        );
    }
    if !a.paused.is_empty() {
        let shown: Vec<String> = a
            .paused
            .iter()
            .take(MISSED_SHOWN)
            .map(|(start, freeze)| {
                format!("{} (held by {})", tick_at(*start, a.zone.as_ref()), printable(freeze))
            })
            .collect();
        let more = if a.paused.len() > MISSED_SHOWN { ", ..." } else { "" };
        text += &format!(
            "; {} earlier ticks paused by a freeze (not missed): {}{more}",
            a.paused.len(),
            shown.join(", ")
        );
    }
    for p in &a.problems {
        text += "; ";
        text += &describe_problem(p, limits);
    }
    text
}

/// A problem for people, after the run's description.
fn describe_problem(problem: &Problem, limits: &Limits) -> String {
    let dur = crate::text::fmt_duration;
    match problem {
        Problem::Stale(_) => format!("older than --max-age {}", dur(limits.max_age)),
        Problem::Failed(runs) => {
            let last = runs.first().map(|e| {
                format!("at {} did not succeed ({})", time(e.start_ms), e.describe_outcome())
            });
            let last = last.unwrap_or_default();
            match runs.len() {
                1 => format!("the run {last}"),
                n => format!("{n} runs of the window failed; the last {last}"),
            }
        }
        Problem::Missed(n) => {
            format!("{n} missed ticks, more than --max-missed {}", limits.max_missed.unwrap_or(0))
        }
        Problem::Hung(held) => format!(
            "the running holder has held the lock {}, longer than --max-runtime {}",
            dur(*held),
            dur(limits.max_runtime.unwrap_or_default())
        ),
    }
}

/// The tick that starts at `ms`, for people: at its offset in `zone`,
/// the key's schedule's (UTC for entries that name none).
fn tick_at(ms: u64, zone: Option<&crate::schedule::Zone>) -> String {
    let at = i64::try_from(ms).ok().and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok());
    match (at, zone) {
        (Some(at), Some(zone)) => crate::schedule::format_instant(at, zone),
        _ => Tick { start_ms: ms, end_ms: ms, offset_s: 0 }.describe(),
    }
}

/// A time for people and JSON: RFC 3339, seconds.
fn time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// `, for the tick of 2026-11-27T11:05Z`, or nothing for a run without
/// `--once-per`.
fn ticks(e: &Entry) -> String {
    e.tick().map(|t| format!(", for the tick of {}", t.describe())).unwrap_or_default()
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
