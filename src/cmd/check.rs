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
//! of the servers answered. The entry's texts were written by whoever can
//! write to the servers: they are shown through [`crate::text::printable`]
//! and [`crate::text::json`].

use std::io::Write;
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::exit;
use crate::history::{self, Entry, History, Missed};
use crate::lock::{Fleet, Tick};
use crate::text::printable;
use crate::token::Token;

/// What `check` holds a lock's runs to.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// How recently the newest run must have started.
    pub max_age: Duration,
    /// Whether every run in the window must have succeeded.
    pub require_success: bool,
    /// How many ticks the window may miss (`None`: 0).
    pub max_missed: Option<u64>,
    /// How far back the window reaches (`None`: the oldest entry).
    pub since: Option<Duration>,
    /// How long a run may hold the lock before it counts as hung.
    pub max_runtime: Option<Duration>,
}

/// Something wrong with a lock's runs: each makes the verdict WARNING.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Problem {
    /// The newest run started this long ago, over `--max-age`.
    Stale(Duration),
    /// Runs in the window that did not succeed, newest first.
    Failed(Vec<Entry>),
    /// More missed ticks than `--max-missed` allows (how many).
    Missed(usize),
    /// The running holder has held the lock this long, over `--max-runtime`.
    Hung(Duration),
}

impl Problem {
    /// Its word in the JSON's `status` and `problems`.
    fn kind(&self) -> &'static str {
        match self {
            Problem::Stale(_) => "stale",
            Problem::Failed(_) => "failed",
            Problem::Missed(_) => "missed",
            Problem::Hung(_) => "hung",
        }
    }

    /// For people, after the run's description.
    fn describe(&self, limits: &Limits) -> String {
        let dur = crate::text::fmt_duration;
        match self {
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
                format!(
                    "{n} missed ticks, more than --max-missed {}",
                    limits.max_missed.unwrap_or(0)
                )
            }
            Problem::Hung(held) => format!(
                "the running holder has held the lock {}, longer than --max-runtime {}",
                dur(*held),
                dur(limits.max_runtime.unwrap_or_default())
            ),
        }
    }
}

/// The run holding the lock now, with no entry yet.
struct Running {
    /// Its token (host, pid, when it took the lock).
    token: Token,
}

/// What `check` found: the verdict's parts before they are printed.
struct Assessment {
    /// False when the runs cannot be judged (no quorum, no run known).
    known: bool,
    /// The first sentence: the newest run, or why nothing can be said.
    headline: String,
    /// The missed ticks of the window, newest first.
    missed: Vec<Missed>,
    /// The ticks of the window a freeze paused, newest first, with its line.
    paused: Vec<(u64, String)>,
    /// Where the window begins (ms since the epoch), when it has ticks.
    window_from: Option<u64>,
    /// The zone the key's schedule is read in, where its entries name one:
    /// ticks are shown at its offset, as `REDLOCK_TICK` shows them.
    zone: Option<crate::schedule::Zone>,
    /// What is wrong.
    problems: Vec<Problem>,
}

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
    let a = assess(key, &found, (running.as_ref(), frozen.as_ref()), limits, now);
    let code = match (a.known, a.problems.is_empty()) {
        (false, _) => exit::CHECK_UNKNOWN,
        (true, true) => exit::OK,
        (true, false) => exit::CHECK_STALE,
    };
    let status = match (a.known, a.problems.first()) {
        (false, _) => "unknown",
        (true, None) => "ok",
        (true, Some(p)) => p.kind(),
    };
    let text = message(&a, limits);
    let line = if json {
        let age =
            last.map(|e| crate::text::millis(now.duration_since(e.start()).unwrap_or_default()));
        let problems: Vec<_> = a
            .problems
            .iter()
            .map(|p| json!({ "kind": p.kind(), "message": p.describe(limits) }))
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
            "status": status,
            "code": code,
            "message": text,
            "age_ms": age,
            "last": last,
            "last_tick": last.and_then(Entry::tick).map(|t| t.describe()),
            "running": running.as_ref().map(|r| json!({
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
            "frozen": frozen.as_ref().map(crate::lock::describe_freeze),
        }))
    } else {
        let label = match status {
            "ok" => "OK",
            "unknown" => "UNKNOWN",
            _ => "WARNING",
        };
        format!("{label} - {text}")
    };
    // A closed stdout loses only the line; the verdict is the exit code.
    let _ = writeln!(std::io::stdout().lock(), "{}", crate::text::guarded(&line));
    code
}

/// Judges `found` and the holder now, a `running` run or a freeze
/// (`frozen`), against `limits` at `now`.
fn assess(
    key: &str,
    found: &History,
    (running, frozen): (Option<&Running>, Option<&Token>),
    limits: &Limits,
    now: SystemTime,
) -> Assessment {
    let shown = crate::text::display_key(key.as_bytes());
    let last = found.entries.first();
    let unknown = |headline| Assessment {
        known: false,
        headline,
        missed: Vec::new(),
        paused: Vec::new(),
        window_from: None,
        zone: None,
        problems: Vec::new(),
    };
    if !found.known() {
        return unknown(format!(
            "{shown}: only {} of {} servers answered (quorum {}): {}",
            found.answered, found.total, found.quorum, found.failures
        ));
    }
    let headline = match (running, last) {
        (Some(r), _) => format!(
            "{shown} is running on {} (pid {}), started {} ago",
            crate::text::printable(&r.token.host),
            r.token.pid,
            ago(r.token.held_for())
        ),
        (None, Some(e)) => {
            describe(&shown, e, now.duration_since(e.start()).unwrap_or_default()) + &ticks(e)
        }
        (None, None) => {
            return unknown(format!(
                "{shown} has no recorded run (a history is kept {} days after the last run)",
                history::RETENTION.as_secs() / 86_400
            ));
        }
    };
    let headline = match frozen {
        Some(t) => format!("{headline}; paused now by {}", crate::lock::describe_freeze(t)),
        None => headline,
    };
    let now_ms = history::epoch_ms(now);
    let mut problems = Vec::new();
    // The newest start: the running holder's, or the last entry's.
    let age = running
        .map(|r| r.token.held_for())
        .or_else(|| last.map(|e| now.duration_since(e.start()).unwrap_or_default()))
        .unwrap_or_default();
    // A freeze holds the job back on purpose: no run is due while it lasts.
    if age > limits.max_age && frozen.is_none() {
        problems.push(Problem::Stale(age));
    }
    let since_ms = limits.since.map(|d| now_ms.saturating_sub(crate::text::millis(d)));
    if limits.require_success {
        let failed: Vec<Entry> = found
            .entries
            .iter()
            .filter(|e| since_ms.is_none_or(|s| e.start_ms >= s) && !e.succeeded())
            .cloned()
            .collect();
        if !failed.is_empty() {
            problems.push(Problem::Failed(failed));
        }
    }
    let schedule = found.entries.iter().find_map(Entry::schedule_identity);
    let (missed, window_from) = match &schedule {
        Some(schedule) => scheduled_missed(found, schedule, since_ms, now_ms, running),
        None => (Vec::new(), None),
    };
    // A paused tick did not run on purpose: shown, never counted as missed.
    let (paused, missed): (Vec<Missed>, Vec<Missed>) =
        missed.into_iter().partition(|m| m.reason == history::MissedReason::Paused);
    let paused: Vec<(u64, String)> = paused
        .iter()
        .map(|m| {
            let freeze = found.ticks.freezes.get(&m.start_ms).cloned();
            (m.start_ms, freeze.unwrap_or_else(|| "a freeze".to_owned()))
        })
        .collect();
    let allowed = usize::try_from(limits.max_missed.unwrap_or(0)).unwrap_or(usize::MAX);
    if missed.len() > allowed {
        problems.push(Problem::Missed(missed.len()));
    }
    let held = running.map(|r| r.token.held_for());
    if let Some(held) = held.filter(|&h| limits.max_runtime.is_some_and(|limit| h > limit)) {
        problems.push(Problem::Hung(held));
    }
    let zone = schedule
        .and_then(|s| crate::schedule::Schedule::from_identity(&s).ok())
        .map(|s| s.zone().clone());
    Assessment { known: true, headline, missed, paused, window_from, zone, problems }
}

/// The missed ticks of the entries of the schedule `identity`
/// ([`Entry::schedule_identity`]) and where their window begins: the
/// schedule's instants in its zone from `since_ms` (or the oldest such
/// entry's tick or refused tick, never before it) to the start of the tick
/// in progress,
/// newest first; the running holder's tick is not missed. A schedule that
/// does not parse (a later version's) shows no missed tick.
fn scheduled_missed(
    found: &History,
    identity: &str,
    since_ms: Option<u64>,
    now_ms: u64,
    running: Option<&Running>,
) -> (Vec<Missed>, Option<u64>) {
    let at = |ms: u64| jiff::Timestamp::from_millisecond(i64::try_from(ms).unwrap_or(i64::MAX));
    let Ok(schedule) = crate::schedule::Schedule::from_identity(identity) else {
        return (Vec::new(), None);
    };
    // From its oldest run, or the first tick refused for another schedule
    // (a line changed: the ticks the old line's record refused are the
    // new line's too, and missed).
    let refused = found.ticks.ticks.iter().filter(|(_, s)| s.elsewhere > 0).map(|(t, _)| *t);
    let oldest = found
        .entries
        .iter()
        .filter(|e| e.schedule_identity().as_deref() == Some(identity))
        .filter_map(|e| e.tick_start_ms)
        .chain(refused)
        .min();
    let Some(oldest) = oldest else { return (Vec::new(), None) };
    let from = since_ms.map_or(oldest, |s| s.max(oldest));
    let (Ok(from_at), Ok(now)) = (at(from), at(now_ms)) else { return (Vec::new(), None) };
    let (Ok(current), Ok(instants)) =
        (schedule.tick_at(now), schedule.instants_between(from_at, now))
    else {
        return (Vec::new(), None);
    };
    let millis = |t: jiff::Timestamp| u64::try_from(t.as_millisecond()).unwrap_or(0);
    // Each instant's tick runs to the next instant; the one in progress
    // is not over.
    let ends = instants.iter().skip(1).copied().chain([current.start]);
    let mut ticks: Vec<(u64, u64)> = instants
        .iter()
        .zip(ends)
        .filter(|(start, _)| **start < current.start)
        .map(|(start, end)| (millis(*start), millis(end).saturating_sub(millis(*start))))
        .collect();
    ticks.reverse();
    let running = running
        .and_then(|r| schedule.tick_at(at(r.token.created_ms).ok()?).ok().map(|t| t.start_ms()));
    let ran = found.entries.iter().filter(|e| e.schedule_identity().as_deref() == Some(identity));
    (history::missed_among(found, ran, ticks.into_iter(), running), Some(from))
}

/// The whole line after the label: the headline, the missed ticks (named
/// even when tolerated), then every problem.
fn message(a: &Assessment, limits: &Limits) -> String {
    let mut text = a.headline.clone();
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
        text += &p.describe(limits);
    }
    text
}

/// How many missed ticks `check` names at most (the newest).
const MISSED_SHOWN: usize = 10;

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

    fn entry(tick: u64, exit_code: u8) -> Entry {
        Entry {
            token: format!("t{tick}"),
            host: "web-3".into(),
            pid: 1,
            start_ms: tick * 60_000 + 100,
            duration_ms: 5,
            outcome: history::Outcome::Exited,
            exit_code,
            fence: None,
            tick_start_ms: Some(tick * 60_000),
            tick_ms: Some(60_000),
            tick_offset_s: None,
            schedule: None,
            note: None,
            job: None,
            meanwhile: Vec::new(),
        }
    }

    fn found(entries: Vec<Entry>) -> History {
        History {
            entries,
            skips: None,
            ticks: history::TickRecords::default(),
            answered: 3,
            total: 3,
            quorum: 2,
            failures: crate::failure::Failures::default(),
        }
    }

    #[test]
    fn every_rule_broken_is_named_and_the_window_bounds_them() {
        // Ticks 10 and 12 ran (10 failed); 11 and 13 did not; now in 14.
        let h = found(vec![entry(12, 0), entry(10, 2)]);
        let now = std::time::UNIX_EPOCH + Duration::from_millis(14 * 60_000 + 1_000);
        let limits = Limits {
            max_age: Duration::from_secs(3600),
            require_success: true,
            ..Limits::default()
        };
        let a = assess("k", &h, (None, None), &limits, now);
        let kinds: Vec<&str> = a.problems.iter().map(Problem::kind).collect();
        assert_eq!(kinds, ["failed", "missed"]);
        assert_eq!(a.missed.len(), 2);
        let text = message(&a, &limits);
        assert!(text.contains("did not succeed (exit 2)"), "{text}");
        assert!(text.contains("2 missed ticks, more than --max-missed 0"), "{text}");
        // The last 2.5 minutes: tick 12 (ran) and 13 (missed), and no failure.
        let since = Limits { since: Some(Duration::from_secs(150)), max_missed: Some(1), ..limits };
        let a = assess("k", &h, (None, None), &since, now);
        assert!(a.problems.is_empty(), "{:?}", a.problems);
        assert_eq!(a.missed.len(), 1);
        // A window never reaches before the oldest entry.
        let long = Limits { since: Some(Duration::from_secs(86_400)), ..since };
        assert_eq!(assess("k", &h, (None, None), &long, now).missed.len(), 2);
        let stale = Limits { max_age: Duration::from_secs(60), ..since };
        assert_eq!(
            assess("k", &h, (None, None), &stale, now).problems,
            [Problem::Stale(Duration::from_millis(2 * 60_000 + 900))]
        );
    }

    /// A key with a schedule names its missed ticks in the schedule's zone,
    /// as `REDLOCK_TICK` and `history` do: the 2nd of June's 00:30 in
    /// London is `+01:00`, not the UTC instant at `+00:00`.
    #[test]
    fn missed_ticks_are_named_at_their_zones_offset() {
        let zone = crate::schedule::Zone::named("Europe/London", "test").unwrap();
        let schedule = crate::schedule::Schedule::cron("30 0 * * *", zone).unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let ran = |day: &str| {
            let tick = schedule.tick_at(at(day)).unwrap();
            Entry {
                start_ms: tick.start_ms() + 100,
                tick_start_ms: Some(tick.start_ms()),
                tick_ms: Some(tick.end_ms() - tick.start_ms()),
                tick_offset_s: Some(tick.offset_s),
                schedule: Some(schedule.identity()),
                ..entry(0, 0)
            }
        };
        let h = found(vec![ran("2027-06-03T00:00:00Z"), ran("2027-06-01T00:00:00Z")]);
        let now = std::time::UNIX_EPOCH
            + Duration::from_secs(at("2027-06-03T12:00:00Z").as_second() as u64);
        let limits = Limits { max_age: Duration::from_secs(86_400), ..Limits::default() };
        let a = assess("k", &h, (None, None), &limits, now);
        let text = message(&a, &limits);
        assert!(
            text.contains("1 earlier ticks did not run since 2027-06-01T00:30:00+01:00"),
            "{text}"
        );
        assert!(text.contains(": 2027-06-02T00:30:00+01:00 ("), "{text}");
    }

    #[test]
    fn a_paused_tick_is_named_and_not_missed_and_a_freeze_is_not_stale() {
        // Tick 10 ran; 11 was paused by a freeze, 12 missed; now in 13.
        let mut h = found(vec![entry(10, 0)]);
        h.ticks.tracked_ms = Some(0);
        h.ticks.ticks.insert(11 * 60_000, history::TickSkips { paused: 3, ..Default::default() });
        h.ticks.freezes.insert(11 * 60_000, "a freeze until x: \"Black Friday\"".into());
        let now = std::time::UNIX_EPOCH + Duration::from_millis(13 * 60_000 + 1_000);
        let limits = Limits { max_age: Duration::from_secs(60), ..Limits::default() };
        let a = assess("k", &h, (None, None), &limits, now);
        assert_eq!(a.missed.len(), 1);
        assert_eq!(a.paused, [(11 * 60_000, "a freeze until x: \"Black Friday\"".to_owned())]);
        let text = message(&a, &limits);
        assert!(text.contains("1 earlier ticks paused by a freeze (not missed): 1970-01-01T00:11:00+00:00 (held by a freeze until x: \"Black Friday\")"), "{text}");
        let kinds: Vec<&str> = a.problems.iter().map(Problem::kind).collect();
        assert_eq!(kinds, ["stale", "missed"]);
        let tolerant = Limits { max_missed: Some(1), ..limits };
        let freeze = Token::new().with_until(Some(99 * 60_000));
        let a = assess("k", &h, (None, Some(&freeze)), &tolerant, now);
        assert!(a.problems.is_empty(), "{:?}", a.problems);
        assert!(a.headline.contains("; paused now by a freeze until"), "{}", a.headline);
    }

    #[test]
    fn ages_are_coarse() {
        assert_eq!(ago(Duration::from_secs(59)), "59s");
        assert_eq!(ago(Duration::from_secs(3 * 3600 + 59 * 60)), "3h");
        assert_eq!(ago(Duration::from_secs(3 * 86_400)), "3d");
    }
}
