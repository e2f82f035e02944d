//! `check`'s judgement: the history and the holder now held to the
//! [`Limits`], giving an [`Assessment`] (what the verdict is about, the
//! window's missed and paused ticks, the problems), and from it the exit
//! code and the status word. No text: [`super::render`] writes it.

use std::time::{Duration, SystemTime};

use crate::exit;
use crate::history::{self, Entry, History, Missed};
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
pub enum Problem {
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
    pub fn kind(&self) -> &'static str {
        match self {
            Problem::Stale(_) => "stale",
            Problem::Failed(_) => "failed",
            Problem::Missed(_) => "missed",
            Problem::Hung(_) => "hung",
        }
    }
}

/// The run holding the lock now, with no entry yet.
pub struct Running {
    /// Its token (host, pid, when it took the lock).
    pub token: Token,
}

/// What the verdict's first sentence is about.
#[derive(Debug)]
pub enum Subject {
    /// Fewer than a quorum of the servers answered: the runs cannot be judged.
    NoQuorum {
        /// How many answered.
        answered: usize,
        /// How many there are.
        total: usize,
        /// The quorum.
        quorum: usize,
        /// Why the others did not answer.
        failures: crate::failure::Failures,
    },
    /// No run is recorded (nor running): nothing can be judged.
    NoRun,
    /// The run holding the lock now (its token), which has no entry yet.
    Running(Token),
    /// The newest recorded run, and how long ago it started.
    Ran(Entry, Duration),
}

/// What `check` found: the verdict's parts before they are written.
#[derive(Debug)]
pub struct Assessment {
    /// What the verdict is about: the newest run, or why nothing can be said.
    pub subject: Subject,
    /// The freeze holding the key now, when the runs could be judged.
    pub frozen: Option<Token>,
    /// The missed ticks of the window, newest first.
    pub missed: Vec<Missed>,
    /// The ticks of the window a freeze paused, newest first, with its line.
    pub paused: Vec<(u64, String)>,
    /// Where the window begins (ms since the epoch), when it has ticks.
    pub window_from: Option<u64>,
    /// The zone the key's schedule is read in, where its entries name one:
    /// ticks are shown at its offset, as `REDLOCK_TICK` shows them.
    pub zone: Option<crate::schedule::Zone>,
    /// What is wrong.
    pub problems: Vec<Problem>,
}

impl Assessment {
    /// False when the runs cannot be judged (no quorum, no run known).
    pub fn known(&self) -> bool {
        matches!(self.subject, Subject::Running(_) | Subject::Ran(..))
    }

    /// The exit code: OK, WARNING (stale, failed, missed, hung) or UNKNOWN.
    pub fn code(&self) -> u8 {
        match (self.known(), self.problems.is_empty()) {
            (false, _) => exit::CHECK_UNKNOWN,
            (true, true) => exit::OK,
            (true, false) => exit::CHECK_STALE,
        }
    }

    /// The JSON's `status`: `ok`, `unknown`, or the first problem's kind.
    pub fn status(&self) -> &'static str {
        match (self.known(), self.problems.first()) {
            (false, _) => "unknown",
            (true, None) => "ok",
            (true, Some(p)) => p.kind(),
        }
    }
}

/// Judges `found` and the holder now, a `running` run or a freeze
/// (`frozen`), against `limits` at `now`.
pub fn assess(
    found: &History,
    (running, frozen): (Option<&Running>, Option<&Token>),
    limits: &Limits,
    now: SystemTime,
) -> Assessment {
    let last = found.entries.first();
    let unknown = |subject| Assessment {
        subject,
        frozen: None,
        missed: Vec::new(),
        paused: Vec::new(),
        window_from: None,
        zone: None,
        problems: Vec::new(),
    };
    if !found.known() {
        return unknown(Subject::NoQuorum {
            answered: found.answered,
            total: found.total,
            quorum: found.quorum,
            failures: found.failures.clone(),
        });
    }
    let subject = match (running, last) {
        (Some(r), _) => Subject::Running(r.token.clone()),
        (None, Some(e)) => {
            Subject::Ran(e.clone(), now.duration_since(e.start()).unwrap_or_default())
        }
        (None, None) => return unknown(Subject::NoRun),
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
            .filter(|e| since_ms.is_none_or(|s| e.start_ms >= s) && e.succeeded() == Some(false))
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
    let frozen = frozen.cloned();
    Assessment { subject, frozen, missed, paused, window_from, zone, problems }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::check::render::{headline, message};

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
        let a = assess(&h, (None, None), &limits, now);
        let kinds: Vec<&str> = a.problems.iter().map(Problem::kind).collect();
        assert_eq!(kinds, ["failed", "missed"]);
        assert_eq!(a.missed.len(), 2);
        let text = message("k", &a, &limits);
        assert!(text.contains("did not succeed (exit 2)"), "{text}");
        assert!(text.contains("2 missed ticks, more than --max-missed 0"), "{text}");
        // The last 2.5 minutes: tick 12 (ran) and 13 (missed), and no failure.
        let since = Limits { since: Some(Duration::from_secs(150)), max_missed: Some(1), ..limits };
        let a = assess(&h, (None, None), &since, now);
        assert!(a.problems.is_empty(), "{:?}", a.problems);
        assert_eq!(a.missed.len(), 1);
        // A window never reaches before the oldest entry.
        let long = Limits { since: Some(Duration::from_secs(86_400)), ..since };
        assert_eq!(assess(&h, (None, None), &long, now).missed.len(), 2);
        let stale = Limits { max_age: Duration::from_secs(60), ..since };
        assert_eq!(
            assess(&h, (None, None), &stale, now).problems,
            [Problem::Stale(Duration::from_millis(2 * 60_000 + 900))]
        );
    }

    /// A freeze's gap in the window is no run, so no failed run either:
    /// the judgement says so itself, whatever its caller left in `found`.
    #[test]
    fn a_freeze_s_gap_is_no_failed_run() {
        let gap = Entry {
            outcome: history::Outcome::Gap,
            tick_start_ms: None,
            tick_ms: None,
            ..entry(11, 0)
        };
        let h = found(vec![gap, entry(10, 0)]);
        let now = std::time::UNIX_EPOCH + Duration::from_millis(11 * 60_000 + 1_000);
        let limits = Limits {
            max_age: Duration::from_secs(3600),
            require_success: true,
            ..Limits::default()
        };
        let a = assess(&h, (None, None), &limits, now);
        assert!(a.problems.is_empty(), "{:?}", a.problems);
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
        let a = assess(&h, (None, None), &limits, now);
        let text = message("k", &a, &limits);
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
        let a = assess(&h, (None, None), &limits, now);
        assert_eq!(a.missed.len(), 1);
        assert_eq!(a.paused, [(11 * 60_000, "a freeze until x: \"Black Friday\"".to_owned())]);
        let text = message("k", &a, &limits);
        assert!(text.contains("1 earlier ticks paused by a freeze (not missed): 1970-01-01T00:11:00+00:00 (held by a freeze until x: \"Black Friday\")"), "{text}");
        let kinds: Vec<&str> = a.problems.iter().map(Problem::kind).collect();
        assert_eq!(kinds, ["stale", "missed"]);
        let tolerant = Limits { max_missed: Some(1), ..limits };
        let freeze = Token::new().with_until(Some(99 * 60_000));
        let a = assess(&h, (None, Some(&freeze)), &tolerant, now);
        assert!(a.problems.is_empty(), "{:?}", a.problems);
        let headline = headline("k", &a);
        assert!(headline.contains("; paused now by a freeze until"), "{headline}");
    }
}
