//! The run history of a lock: one entry per finished `run`, and a skip
//! counter, kept on the servers beside the lock and read back by
//! `history` and `check`.
//!
//! # Storage
//! Per lock `KEY`, in its Cluster hash slot ([`KeyLayout`]):
//! - `redlock:{KEY}:history`, a list of JSON entries, newest first, trimmed
//!   to [`MAX_ENTRIES`] on every write (`scripts/record.lua`: LPUSH, LTRIM,
//!   PEXPIRE);
//! - `redlock:{KEY}:skips`, a hash: how many runs found the lock busy, since
//!   when, and the last one's host, time and holder (`scripts/skip.lua`).
//!   A counter, not an entry per skip: a thousand hosts skipping one tick
//!   cost one HINCRBY each and leave the entries of the real runs alone.
//!   Under a tick (`--once-per`), the same hash counts each tick's skips
//!   by what they saw ([`SkipKind`]), for the newest [`TICKS_KEPT`] ticks:
//!   what [`missed_among`] gives as the reason a tick did not run.
//!
//! Both expire [`RETENTION`] after their last write, like every key redlock
//! writes. An entry is written to every server after the lock is released,
//! so recording never delays the release; a failure to record is a warning.
//!
//! # Reading: the merge rule
//! Entries are immutable facts with a unique token, so the servers' lists
//! never conflict: `history` shows the union of the entries of every server
//! that answered, without duplicates, newest start first. An entry that any
//! answering server has is shown, so one server down, behind or restarted
//! empty changes nothing. The absence of an entry means something only when
//! a quorum answered: an entry recorded on a quorum is then certainly seen
//! (two quorums intersect). With fewer, `history` prints what it found and
//! exits 69, and `check` says unknown.
//!
//! [`KeyLayout`]: crate::lock::KeyLayout

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::failure::Failures;
use crate::lock::{Answers, Call, Fleet, Lua, Operation};
use crate::server::Op;

/// How many entries each server keeps per lock (the newest).
pub const MAX_ENTRIES: usize = 100;

/// How long a lock's history and skip counter outlive their last write.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The history's scripts.
struct Scripts {
    record: Lua,
    skip: Lua,
    read: Lua,
}

static SCRIPTS: Scripts = Scripts {
    record: Lua::new(crate::lock::bodies::RECORD),
    skip: Lua::new(crate::lock::bodies::SKIP),
    read: Lua::new(crate::lock::bodies::HISTORY),
};

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The command exited by itself (its code is the entry's `exit_code`).
    Exited,
    /// The command was ended by a signal not sent by redlock (exit 128+N).
    Signaled,
    /// redlock stopped the command because the lock was lost (exit 70).
    Lost,
    /// redlock stopped the command because `--max-hold` ran out (exit 124).
    MaxHold,
    /// The command could not be executed (126) or was not found (127).
    CannotExecute,
    /// No run: a freeze (`redlock hold`) lost the lock at the entry's
    /// start and took it back `duration_ms` later; the entry's
    /// `meanwhile` names whoever held the key in between.
    Gap,
}

impl Outcome {
    /// The outcome of a `run` that held the lock, from its result; `signaled`
    /// says whether the command's own status was a signal. `None` for the
    /// errors that are no outcome of the command.
    pub fn of(result: &Result<u8, Error>, signaled: bool) -> Option<(Outcome, u8)> {
        let outcome = match result {
            Ok(code) if signaled => return Some((Outcome::Signaled, *code)),
            Ok(code) => return Some((Outcome::Exited, *code)),
            Err(Error::Lost(_)) => Outcome::Lost,
            Err(Error::MaxHold(_)) => Outcome::MaxHold,
            Err(Error::CannotRun { .. }) => Outcome::CannotExecute,
            Err(_) => return None,
        };
        result.as_ref().err().map(|e| (outcome, e.exit_code()))
    }
}

/// One finished run, as stored (JSON) and shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The run's lock token: unique, so copies on several servers merge.
    pub token: String,
    /// The host redlock ran on.
    pub host: String,
    /// redlock's process id.
    pub pid: u32,
    /// When the lock was acquired, in ms since the epoch.
    pub start_ms: u64,
    /// How long the lock was held, in ms.
    pub duration_ms: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// The exit code redlock ended with.
    pub exit_code: u8,
    /// The run's fencing number, when fencing was on.
    pub fence: Option<u64>,
    /// The tick the run belonged to (`--once-per`): its start, ms since
    /// the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_start_ms: Option<u64>,
    /// The length of that tick, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_ms: Option<u64>,
    /// The offset of the tick's zone at its start, seconds (shown so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_offset_s: Option<i32>,
    /// The tick's schedule (`crate::schedule::Schedule::identity`): what
    /// `check` lists the expected ticks by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Where the run ran, as its `--note` said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The CI job the run ran in (its URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// A freeze's gap ([`Outcome::Gap`]): who held the key while the
    /// freeze did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meanwhile: Vec<Meanwhile>,
}

/// A holder of a key during a freeze's gap, from its token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meanwhile {
    /// Its token (another client's value, for one that is no redlock token).
    pub token: String,
    /// Its host, when the token says.
    pub host: Option<String>,
    /// Its process, when the token says.
    pub pid: Option<u32>,
    /// Its `--note`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its CI job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

impl Meanwhile {
    /// The holder that `value` (a lock's value) names.
    pub fn of(value: &str) -> Meanwhile {
        let token = value.parse::<crate::token::Token>().ok();
        Meanwhile {
            token: value.to_owned(),
            host: token.as_ref().map(|t| t.host.clone()),
            pid: token.as_ref().map(|t| t.pid),
            note: token.as_ref().and_then(|t| t.note.clone()),
            job: token.and_then(|t| t.job),
        }
    }

    /// For people: `web-2 pid 4242 (note "hotfix")`, or another client's.
    pub fn describe(&self) -> String {
        let printable = |t: &str| crate::text::printable(t).into_owned();
        let mut out = match (&self.host, self.pid) {
            (Some(host), Some(pid)) => format!("{} pid {pid}", printable(host)),
            _ => format!(
                "another client (value {:?})",
                crate::text::display_key(self.token.as_bytes())
            ),
        };
        let mut more = Vec::new();
        if let Some(job) = &self.job {
            more.push(format!("CI job {}", printable(job)));
        }
        if let Some(note) = &self.note {
            more.push(format!("note \"{}\"", printable(note)));
        }
        if !more.is_empty() {
            out += &format!(" ({})", more.join(", "));
        }
        out
    }
}

impl Entry {
    /// True for a run's entry; false for a freeze's gap ([`Outcome::Gap`]),
    /// which `check` does not judge as a run.
    pub fn is_run(&self) -> bool {
        self.outcome != Outcome::Gap
    }

    /// The tick the run belonged to (`--once-per`).
    pub fn tick(&self) -> Option<crate::lock::Tick> {
        let (start_ms, len) = (self.tick_start_ms?, self.tick_ms?);
        let offset_s = self.tick_offset_s.unwrap_or(0);
        Some(crate::lock::Tick { start_ms, end_ms: start_ms.checked_add(len)?, offset_s })
    }

    /// The identity of the schedule the run's tick came from
    /// ([`crate::schedule::Schedule::identity`], canonical). An older redlock's entry
    /// names none, only its `--once-per` length: epoch-aligned slots, the
    /// same as `--once-per` of that length in UTC below a day or in whole
    /// days (days count from 1970-01-01 too); its weeks began on a
    /// Thursday, not a Monday, so those (and other lengths) name none.
    pub fn schedule_identity(&self) -> Option<String> {
        // Written in the canonical form of its version, and read in this
        // one's: `cron @daily in Etc/UTC` is `cron 0 0 * * * in UTC`.
        if let Some(identity) = &self.schedule {
            let schedule = crate::schedule::Schedule::from_identity(identity);
            return Some(schedule.map_or_else(|_| identity.clone(), |s| s.identity()));
        }
        let len = self.tick_ms.filter(|ms| *ms < DAY_MS || ms % (7 * DAY_MS) != 0)?;
        let utc = crate::schedule::Zone::utc();
        crate::schedule::Schedule::once_per(Duration::from_millis(len), utc)
            .ok()
            .map(|s| s.identity())
    }

    /// When the run started.
    pub fn start(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.start_ms)
    }

    /// True when the command exited by itself with 0.
    pub fn succeeded(&self) -> bool {
        self.outcome == Outcome::Exited && self.exit_code == 0
    }

    /// How it ended, for people: `exit 0`, `killed by SIGTERM`, `lost the
    /// lock`, `--max-hold ran out`, `could not execute (127)`.
    pub fn describe_outcome(&self) -> String {
        match self.outcome {
            Outcome::Exited => format!("exit {}", self.exit_code),
            Outcome::Signaled => format!(
                "killed by {}",
                crate::signals::name(i32::from(self.exit_code.saturating_sub(128)))
            ),
            Outcome::Lost => "lost the lock".to_owned(),
            Outcome::MaxHold => "--max-hold ran out".to_owned(),
            Outcome::CannotExecute => format!("could not execute ({})", self.exit_code),
            Outcome::Gap => {
                let end = self.start_ms.saturating_add(self.duration_ms);
                let who = match self.meanwhile.as_slice() {
                    [] => "nobody held it meanwhile".to_owned(),
                    held => format!(
                        "held meanwhile by {}",
                        held.iter().map(Meanwhile::describe).collect::<Vec<_>>().join(" and by ")
                    ),
                };
                format!("a freeze's gap, taken back at {}: {who}", crate::lock::freeze_instant(end))
            }
        }
    }
}

/// The skips of a lock: runs that found it busy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Skips {
    /// How many, since `since_ms` (at least: see [`merge_skips`]).
    pub count: u64,
    /// The first skip this count includes, in ms since the epoch.
    pub since_ms: u64,
    /// The last skip, in ms since the epoch.
    pub last_ms: u64,
    /// The host of the last skip.
    pub last_host: String,
    /// Who held the lock at the last skip, one line.
    pub last_holder: String,
}

/// What the servers know of a lock's runs.
#[derive(Debug)]
pub struct History {
    /// The entries, newest start first, without duplicates.
    pub entries: Vec<Entry>,
    /// The skips, when any were counted.
    pub skips: Option<Skips>,
    /// What each tick's skips saw (`--once-per`).
    pub ticks: TickRecords,
    /// How many servers answered.
    pub answered: usize,
    /// How many servers there are.
    pub total: usize,
    /// The quorum: with fewer answers, a missing entry may just be elsewhere.
    pub quorum: usize,
    /// The errors of the servers that did not answer.
    pub failures: Failures,
}

impl History {
    /// True when a quorum answered, so what is not shown was not recorded
    /// on a quorum.
    pub fn known(&self) -> bool {
        self.answered >= self.quorum
    }

    /// The error for a history read by fewer than a quorum of the servers.
    pub fn unavailable(&self, key: &str) -> Error {
        Error::Unavailable {
            what: format!(
                "history {}: {} of {} servers answered, quorum {}",
                crate::text::display_key(key.as_bytes()),
                self.answered,
                self.total,
                self.quorum
            ),
            config: self.failures.any_config(),
            failures: self.failures.clone(),
        }
    }
}

/// Milliseconds since the epoch.
pub fn epoch_ms(t: SystemTime) -> u64 {
    crate::text::millis(t.duration_since(UNIX_EPOCH).unwrap_or_default())
}

/// Appends `entry` to the history of `key` on every server; `Ok` is how
/// many servers recorded it, `Err` the failures when none did.
pub async fn record(fleet: &Fleet, key: &str, entry: &Entry) -> Result<usize, Failures> {
    let json = serde_json::to_vec(entry).expect("an Entry of strings and numbers serializes");
    let layout = fleet.key_layout();
    let call = Call {
        op: Op::Record,
        key: key.to_owned(),
        operation: Operation::Scripted {
            script: &SCRIPTS.record,
            keys: vec![layout.history_key(key)],
            args: vec![
                json,
                MAX_ENTRIES.to_string().into_bytes(),
                crate::text::millis(RETENTION).to_string().into_bytes(),
            ],
        },
    };
    written(fleet.ask_all(call, int).await)
}

/// What a run that did not run its command saw, as its skip records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipKind {
    /// Its tick ran, or is running, elsewhere (a quiet skip).
    Ran,
    /// Another holder kept the lock until the wait ended (for a tick: an
    /// earlier run still held it when the tick ended).
    Busy,
    /// Too few servers answered to take the lock (exit 69): not counted
    /// as a skip, recorded only for its tick.
    Unavailable,
    /// A freeze (`redlock hold`) held the key past the tick's end: the
    /// job is paused fleet-wide, deliberately. Its tick keeps the
    /// freeze's line (the skip's holder), which `check` shows.
    Paused,
    /// The key's record names another schedule (exit 64): a crontab line
    /// changed, or hosts that disagree. Not counted as a skip; recorded
    /// for its tick, so that `check` lists the ticks of the new line from
    /// the first one refused.
    Elsewhere,
}

impl SkipKind {
    /// Its name in the skips hash's per-tick fields (`scripts/skip.lua`).
    fn name(self) -> &'static str {
        match self {
            SkipKind::Ran => "ran",
            SkipKind::Busy => "busy",
            SkipKind::Unavailable => "unavailable",
            SkipKind::Paused => "paused",
            SkipKind::Elsewhere => "elsewhere",
        }
    }
}

/// How many ticks keep their per-tick skip fields on each server (the
/// newest): more than the [`MAX_ENTRIES`] runs kept, so every tick between
/// the oldest entry and now has them unless most ticks were missed.
pub const TICKS_KEPT: usize = 128;

/// What the skips of one tick saw: how many of each [`SkipKind`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TickSkips {
    /// Skips that found the tick run, or running, elsewhere.
    pub ran: u64,
    /// Skips that found the lock held by another until their wait ended.
    pub busy: u64,
    /// Runs that could not reach a quorum.
    pub unavailable: u64,
    /// Runs that found a freeze holding the key past the tick's end.
    pub paused: u64,
    /// Runs refused because the key's record names another schedule.
    pub elsewhere: u64,
}

/// The per-tick skip fields of a lock, merged across servers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickRecords {
    /// Each tick's skips, by the tick's start (ms since the epoch).
    pub ticks: std::collections::BTreeMap<u64, TickSkips>,
    /// When a skip first wrote a per-tick field: a tick that starts
    /// later and has none saw no skip at all.
    pub tracked_ms: Option<u64>,
    /// The newest tick whose fields were dropped ([`TICKS_KEPT`]).
    pub pruned_ms: Option<u64>,
    /// The freeze that paused each paused tick, one line, by the tick's start.
    pub freezes: std::collections::BTreeMap<u64, String>,
}

impl TickRecords {
    /// The servers' records as one: each count the largest any server
    /// has (every skip goes to every server), tracking from the earliest
    /// start, pruned up to the latest.
    fn merge(servers: Vec<TickRecords>) -> TickRecords {
        let mut all = TickRecords::default();
        for s in servers {
            for (tick, n) in s.ticks {
                let m = all.ticks.entry(tick).or_default();
                m.ran = m.ran.max(n.ran);
                m.busy = m.busy.max(n.busy);
                m.unavailable = m.unavailable.max(n.unavailable);
                m.paused = m.paused.max(n.paused);
                m.elsewhere = m.elsewhere.max(n.elsewhere);
            }
            for (tick, freeze) in s.freezes {
                all.freezes.entry(tick).or_insert(freeze);
            }
            all.tracked_ms = all.tracked_ms.into_iter().chain(s.tracked_ms).min();
            all.pruned_ms = all.pruned_ms.max(s.pruned_ms);
        }
        all
    }
}

/// Counts one skip of `key` by `host` at `at`, while `holder` held it: a
/// counter, the time of the first skip it counts, and the last skip's
/// facts, in O(1) and with no entry per skip, so a thousand hosts per tick
/// cost a thousand HINCRBYs. A script, not four plain commands in a
/// pipeline, though a burst's losers each send it to every server: in a
/// pipeline (or a MULTI/EXEC, which runs on past a failed command), a key
/// of another type fails the hash commands with WRONGTYPE and then has
/// its expiry set by PEXPIRE, and that key is someone else's. The script
/// stops at the first failure and leaves it as it was. The hash expires
/// [`RETENTION`] after the last skip. Under `tick` (its start, ms), the
/// tick's count of `kind` goes up too; a [`SkipKind::Unavailable`] counts
/// only there. Returns how many servers counted it.
pub async fn record_skip(
    fleet: &Fleet,
    key: &str,
    skip: (&str, SystemTime, &str),
    kind: SkipKind,
    tick: Option<u64>,
) -> Result<usize, Failures> {
    let (host, at, holder) = skip;
    let call = Call {
        op: Op::Record,
        key: key.to_owned(),
        operation: Operation::Scripted {
            script: &SCRIPTS.skip,
            keys: vec![fleet.key_layout().skips_key(key)],
            args: vec![
                host.into(),
                epoch_ms(at).to_string().into_bytes(),
                holder.into(),
                crate::text::millis(RETENTION).to_string().into_bytes(),
                kind.name().into(),
                tick.map(|t| t.to_string()).unwrap_or_default().into_bytes(),
                TICKS_KEPT.to_string().into_bytes(),
            ],
        },
    };
    written(fleet.ask_all(call, int).await)
}

/// How many servers a write reached, or why none did.
fn written(answers: Answers<i64>) -> Result<usize, Failures> {
    if answers.values.is_empty() { Err(answers.failures) } else { Ok(answers.values.len()) }
}

/// Reads the newest `n` entries of `key` (at most [`MAX_ENTRIES`]) and its
/// skips from every server, and merges them ([`merge`], [`merge_skips`]).
pub async fn read(fleet: &Fleet, key: &str, n: usize) -> History {
    let layout = fleet.key_layout();
    let n = n.clamp(1, MAX_ENTRIES);
    let call = Call {
        op: Op::History,
        key: key.to_owned(),
        operation: Operation::Scripted {
            script: &SCRIPTS.read,
            keys: vec![layout.history_key(key), layout.skips_key(key)],
            args: vec![n.to_string().into_bytes()],
        },
    };
    let Answers { values, failures } = fleet.ask_all(call, parse_read).await;
    let answered = values.len();
    let mut lists = Vec::new();
    let mut skips = Vec::new();
    let mut ticks = Vec::new();
    for (entries, s, t) in values {
        lists.push(entries);
        skips.extend(s);
        ticks.push(t);
    }
    History {
        entries: merge(lists, n),
        skips: merge_skips(&skips),
        ticks: TickRecords::merge(ticks),
        answered,
        total: fleet.servers().len(),
        quorum: fleet.quorum(),
        failures,
    }
}

/// Why a tick that ended has no run recorded, from its skips.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissedReason {
    /// No skip was recorded in it: no host fired (cron did not start
    /// redlock anywhere, or every host was down).
    NoHost,
    /// Hosts fired, but none reached a quorum of the servers (exit 69).
    NoQuorum,
    /// Hosts fired, but another holder (most often the run of an earlier
    /// tick, still going) kept the lock until the tick ended.
    Held,
    /// A host took the tick (others skipped as it ran), but no run was
    /// recorded: its holder died, or lost the lock, before recording.
    Lost,
    /// The skips of its time say nothing per tick (written by an older
    /// redlock, or dropped past [`TICKS_KEPT`]).
    Unknown,
    /// Not missed: a freeze (`redlock hold`) paused the job for the whole
    /// tick, on purpose ([`SkipKind::Paused`]).
    Paused,
    /// Hosts fired, but the key's record named another schedule
    /// ([`SkipKind::Elsewhere`]): the line changed, or hosts disagree.
    Elsewhere,
}

impl MissedReason {
    /// For people: `no host fired`.
    pub fn describe(self) -> &'static str {
        match self {
            MissedReason::NoHost => "no host fired",
            MissedReason::NoQuorum => "hosts fired but could not reach a quorum of the servers",
            MissedReason::Held => "hosts fired but the lock was held by an earlier run",
            MissedReason::Lost => {
                "taken, but no run was recorded (the holder died or lost the lock)"
            }
            MissedReason::Unknown => "unknown reason",
            MissedReason::Paused => "paused by a freeze",
            MissedReason::Elsewhere => {
                "hosts fired but were refused: the key's record names another schedule"
            }
        }
    }
}

/// A day in milliseconds.
const DAY_MS: u64 = 86_400_000;

/// A tick that ended with no run recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Missed {
    /// The tick's start, ms since the epoch.
    pub start_ms: u64,
    /// Why, as far as its skips tell.
    pub reason: MissedReason,
}

/// The ticks of `ticks` (start and length, ms) that none of the entries
/// `ran` ran, each with its reason from `found`'s skips; `running`, the
/// start of a tick whose run still holds the lock, is not missed.
pub fn missed_among<'a>(
    found: &History,
    ran: impl Iterator<Item = &'a Entry>,
    ticks: impl Iterator<Item = (u64, u64)>,
    running: Option<u64>,
) -> Vec<Missed> {
    let ran: std::collections::BTreeSet<u64> = ran.filter_map(|e| e.tick_start_ms).collect();
    ticks
        .filter(|(t, _)| !ran.contains(t) && Some(*t) != running)
        .map(|(start_ms, len)| Missed { start_ms, reason: reason(found, start_ms, len) })
        .collect()
}

/// Why the tick of length `len` at `start` did not run: what its skips
/// saw, the most telling first (a take, a holder, an outage); with none,
/// no host fired if skips were tracked per tick by then, or if no skip
/// counted (by any version) fell within the tick.
fn reason(found: &History, start: u64, len: u64) -> MissedReason {
    let records = &found.ticks;
    match records.ticks.get(&start) {
        // A freeze outlasted the tick: the hosts that fired skipped on
        // purpose, and no other run could take the key meanwhile.
        Some(s) if s.paused > 0 => return MissedReason::Paused,
        Some(s) if s.ran > 0 => return MissedReason::Lost,
        Some(s) if s.busy > 0 => return MissedReason::Held,
        Some(s) if s.unavailable > 0 => return MissedReason::NoQuorum,
        Some(s) if s.elsewhere > 0 => return MissedReason::Elsewhere,
        _ => {}
    }
    let tracked = records.tracked_ms.is_some_and(|t| t <= start)
        && records.pruned_ms.is_none_or(|p| p < start);
    let end = start.saturating_add(len);
    let untracked_skip =
        found.skips.as_ref().is_some_and(|s| s.since_ms < end && s.last_ms >= start);
    if tracked || !untracked_skip { MissedReason::NoHost } else { MissedReason::Unknown }
}

/// The union of the servers' entries without duplicates (same token),
/// newest start first, at most `n`.
pub fn merge(lists: Vec<Vec<Entry>>, n: usize) -> Vec<Entry> {
    let mut all: Vec<Entry> = lists.into_iter().flatten().collect();
    all.sort_by(|a, b| b.start_ms.cmp(&a.start_ms).then_with(|| a.token.cmp(&b.token)));
    all.dedup_by(|a, b| a.token == b.token);
    all.truncate(n);
    all
}

/// The servers' skip counters as one: the count (and its start) of the
/// server that counted most, the last skip seen by any. Every skip is
/// counted on every server that answered it, so the largest count is the
/// best lower bound of the true one; a server that was down or restarted
/// empty counts less and is outvoted.
pub fn merge_skips(servers: &[Skips]) -> Option<Skips> {
    let most = servers.iter().max_by_key(|s| s.count)?;
    let last = servers.iter().max_by_key(|s| s.last_ms)?;
    Some(Skips {
        count: most.count,
        since_ms: most.since_ms,
        last_ms: last.last_ms,
        last_host: last.last_host.clone(),
        last_holder: last.last_holder.clone(),
    })
}

/// Reads a per-tick field `t<start>:<kind>` into `ticks`; any other
/// name (a field of a later version) is left alone.
fn tick_field(ticks: &mut TickRecords, name: &str, value: &str) {
    let Some((start, kind)) = name.strip_prefix('t').and_then(|n| n.split_once(':')) else {
        return;
    };
    if kind == "freeze"
        && let Ok(start) = start.parse::<u64>()
    {
        ticks.freezes.insert(start, value.to_owned());
        return;
    }
    let (Ok(start), Ok(n)) = (start.parse::<u64>(), value.parse::<u64>()) else { return };
    let counts = ticks.ticks.entry(start).or_default();
    match kind {
        "ran" => counts.ran = n,
        "busy" => counts.busy = n,
        "unavailable" => counts.unavailable = n,
        "paused" => counts.paused = n,
        "elsewhere" => counts.elsewhere = n,
        _ => {}
    }
}

fn int(reply: Value) -> Result<i64, String> {
    match reply {
        Value::Int(n) => Ok(n),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// Reads the history script's reply. Entries that do not parse (written by
/// another version) are left out rather than failing the whole read.
fn parse_read(reply: Value) -> Result<(Vec<Entry>, Option<Skips>, TickRecords), String> {
    let Value::Array(parts) = reply else {
        return Err(format!("unexpected history reply {reply:?}"));
    };
    let [Value::Array(entries), Value::Array(fields)] = parts.as_slice() else {
        return Err(format!("unexpected history reply {parts:?}"));
    };
    let entries = entries
        .iter()
        .filter_map(|v| match v {
            Value::BulkString(b) => serde_json::from_slice::<Entry>(b).ok(),
            _ => None,
        })
        .collect();
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    };
    let mut skips = Skips::default();
    let mut ticks = TickRecords::default();
    for pair in fields.chunks(2) {
        let [name, value] = pair else { continue };
        let value = text(value);
        match text(name).as_str() {
            "count" => skips.count = value.parse().unwrap_or(0),
            "since" => skips.since_ms = value.parse().unwrap_or(0),
            "at" => skips.last_ms = value.parse().unwrap_or(0),
            "host" => skips.last_host = value,
            "holder" => skips.last_holder = value,
            "tracked" => ticks.tracked_ms = value.parse().ok(),
            "pruned" => ticks.pruned_ms = value.parse().ok(),
            name => tick_field(&mut ticks, name, &value),
        }
    }
    Ok((entries, (skips.count > 0).then_some(skips), ticks))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entry(token: &str, start_ms: u64) -> Entry {
        Entry {
            token: token.into(),
            host: "h".into(),
            pid: 1,
            start_ms,
            duration_ms: 5,
            outcome: Outcome::Exited,
            exit_code: 0,
            fence: None,
            tick_start_ms: None,
            tick_ms: None,
            tick_offset_s: None,
            schedule: None,
            note: None,
            job: None,
            meanwhile: Vec::new(),
        }
    }

    fn found(entries: Vec<Entry>, ticks: TickRecords, skips: Option<Skips>) -> History {
        History {
            entries,
            skips,
            ticks,
            answered: 3,
            total: 3,
            quorum: 2,
            failures: Failures::default(),
        }
    }

    #[test]
    fn missed_ticks_are_the_ended_ticks_with_no_run_and_say_why() {
        let five = 300_000;
        let at = |tick: u64| Entry {
            tick_start_ms: Some(tick * five),
            tick_ms: Some(five),
            tick_offset_s: None,
            schedule: None,
            ..entry(&tick.to_string(), tick * five + 5)
        };
        let mut records = TickRecords { tracked_ms: Some(5 * five), ..TickRecords::default() };
        records.ticks.insert(9 * five, TickSkips { unavailable: 2, ..TickSkips::default() });
        records.ticks.insert(6 * five, TickSkips { ran: 1, busy: 3, ..TickSkips::default() });
        records.ticks.insert(5 * five, TickSkips { busy: 1, ..TickSkips::default() });
        let h = found(vec![at(10), at(8), at(4)], records, None);
        let ticks = || (4..=10).rev().map(|t| (t * five, five));
        let missed = missed_among(&h, h.entries.iter(), ticks(), None);
        let got: Vec<(u64, MissedReason)> =
            missed.iter().map(|m| (m.start_ms / five, m.reason)).collect();
        assert_eq!(
            got,
            [
                (9, MissedReason::NoQuorum),
                (7, MissedReason::NoHost),
                (6, MissedReason::Lost),
                (5, MissedReason::Held)
            ]
        );
        // The tick whose run still holds the lock is not missed.
        assert_eq!(missed_among(&h, h.entries.iter(), ticks(), Some(9 * five)).len(), 3);
    }

    #[test]
    fn a_tick_with_no_per_tick_fields_is_unknown_only_where_old_skips_fell() {
        let five = 300_000;
        let old = Skips { count: 4, since_ms: 2 * five, last_ms: 3 * five + 7, ..Skips::default() };
        let h = found(vec![], TickRecords::default(), Some(old));
        assert_eq!(reason(&h, 3 * five, five), MissedReason::Unknown);
        assert_eq!(reason(&h, 4 * five, five), MissedReason::NoHost, "after the last skip");
        let tracked = TickRecords { tracked_ms: Some(3 * five), ..TickRecords::default() };
        let h = found(vec![], tracked, h.skips.clone());
        assert_eq!(reason(&h, 3 * five, five), MissedReason::NoHost, "tracked by then");
        let pruned = TickRecords { pruned_ms: Some(3 * five), ..h.ticks.clone() };
        let h = found(vec![], pruned, h.skips.clone());
        assert_eq!(reason(&h, 3 * five, five), MissedReason::Unknown, "dropped");
    }

    #[test]
    fn per_tick_fields_parse_and_merge_by_the_largest_count() {
        let mut a = TickRecords::default();
        tick_field(&mut a, "t600:busy", "3");
        tick_field(&mut a, "t600:ran", "1");
        tick_field(&mut a, "t600:later-kind", "1");
        tick_field(&mut a, "tx:busy", "1");
        a.tracked_ms = Some(500);
        let mut b = TickRecords::default();
        tick_field(&mut b, "t600:busy", "5");
        tick_field(&mut b, "t900:unavailable", "2");
        b.tracked_ms = Some(400);
        b.pruned_ms = Some(100);
        let m = TickRecords::merge(vec![a, b]);
        assert_eq!(m.ticks[&600], TickSkips { ran: 1, busy: 5, ..TickSkips::default() });
        assert_eq!(m.ticks[&900].unavailable, 2);
        assert_eq!((m.tracked_ms, m.pruned_ms, m.ticks.len()), (Some(400), Some(100), 2));
    }

    #[test]
    fn a_paused_tick_is_no_missed_tick_and_keeps_its_freeze() {
        let five = 300_000;
        let mut records = TickRecords { tracked_ms: Some(0), ..TickRecords::default() };
        tick_field(&mut records, &format!("t{}:paused", 6 * five), "4");
        tick_field(&mut records, &format!("t{}:freeze", 6 * five), "a freeze until x");
        tick_field(&mut records, &format!("t{}:busy", 5 * five), "1");
        let merged = TickRecords::merge(vec![records, TickRecords::default()]);
        assert_eq!(merged.ticks[&(6 * five)].paused, 4);
        assert_eq!(merged.freezes[&(6 * five)], "a freeze until x");
        let h = found(vec![], merged, None);
        assert_eq!(reason(&h, 6 * five, five), MissedReason::Paused);
        assert_eq!(reason(&h, 5 * five, five), MissedReason::Held);
    }

    #[test]
    fn a_freeze_s_gap_names_who_held_the_key_and_is_no_run() {
        let other = crate::token::Token::new().with_note(Some("hotfix".into()), None);
        let gap = Entry {
            outcome: Outcome::Gap,
            duration_ms: 4_000,
            meanwhile: vec![Meanwhile::of(&other.to_string()), Meanwhile::of("raw")],
            ..entry("t", 1_795_975_200_000)
        };
        assert!(!gap.is_run() && entry("r", 1).is_run());
        let text = gap.describe_outcome();
        assert!(
            text.starts_with(
                "a freeze's gap, taken back at 2026-11-29T18:00:04+00:00: held meanwhile by "
            ),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} pid {} (note \"hotfix\")", other.host, other.pid)),
            "{text}"
        );
        assert!(text.contains("and by another client (value \"raw\")"), "{text}");
        let json = serde_json::to_string(&gap).unwrap();
        assert!(json.contains(r#""outcome":"gap""#) && json.contains(r#""meanwhile":["#), "{json}");
        assert_eq!(serde_json::from_str::<Entry>(&json).unwrap(), gap);
        // A run's entry is written as before: no `meanwhile`.
        assert!(!serde_json::to_string(&entry("r", 1)).unwrap().contains("meanwhile"));
    }

    #[test]
    fn merge_is_a_union_newest_first_without_duplicates() {
        let a = vec![entry("c", 30), entry("b", 20), entry("a", 10)];
        let b = vec![entry("c", 30), entry("a", 10)];
        let empty = vec![];
        let merged = merge(vec![a, b, empty], 20);
        let tokens: Vec<&str> = merged.iter().map(|e| e.token.as_str()).collect();
        assert_eq!(tokens, ["c", "b", "a"]);
        assert_eq!(merge(vec![vec![entry("x", 1), entry("y", 2)]], 1)[0].token, "y");
    }

    #[test]
    fn skips_take_the_largest_count_and_the_latest_skip() {
        let s = |count, last_ms, host: &str| Skips {
            count,
            since_ms: 1,
            last_ms,
            last_host: host.into(),
            last_holder: String::new(),
        };
        let merged = merge_skips(&[s(3, 50, "a"), s(7, 40, "b"), s(1, 60, "c")]).unwrap();
        assert_eq!((merged.count, merged.last_ms, merged.last_host.as_str()), (7, 60, "c"));
        assert_eq!(merge_skips(&[]), None);
    }

    #[test]
    fn outcomes_follow_the_result() {
        assert_eq!(Outcome::of(&Ok(3), false), Some((Outcome::Exited, 3)));
        assert_eq!(Outcome::of(&Ok(143), true), Some((Outcome::Signaled, 143)));
        assert_eq!(Outcome::of(&Err(Error::Lost("x".into())), false), Some((Outcome::Lost, 70)));
        assert_eq!(Outcome::of(&Err(Error::MaxHold("x".into())), false).unwrap().1, 124);
        assert_eq!(Outcome::of(&Err(Error::Usage("x".into())), false), None);
        let e = Entry { outcome: Outcome::Signaled, exit_code: 143, ..entry("t", 1) };
        assert_eq!(e.describe_outcome(), "killed by SIGTERM");
    }

    /// An entry names its schedule as its version spelled it; `check`
    /// compares them in this version's canonical form, so a line or zone
    /// spelled another way by an older redlock is the same schedule.
    #[test]
    fn an_entry_s_schedule_is_read_in_the_canonical_form() {
        use crate::schedule::{Schedule, Zone};
        let canonical = Schedule::cron("0 0 * * *", Zone::utc()).unwrap().identity();
        let old = Entry { schedule: Some("cron @daily in Etc/UTC".into()), ..entry("a", 1) };
        assert_eq!(old.schedule_identity(), Some(canonical));
        let unknown = Entry { schedule: Some("a later version's".into()), ..entry("b", 1) };
        assert_eq!(unknown.schedule_identity().as_deref(), Some("a later version's"));
    }

    #[test]
    fn entries_round_trip_as_json() {
        let e = Entry { fence: Some(9), outcome: Outcome::MaxHold, ..entry("t", 1) };
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains(r#""outcome":"max-hold""#), "{json}");
        assert_eq!(serde_json::from_str::<Entry>(&json).unwrap(), e);
    }
}
