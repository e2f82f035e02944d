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
//! # Layout
//! This file keeps the storage: the scripts' calls, what they write and
//! how their replies read (the skips hash's field names are spelled here
//! and in `scripts/skip.lua`, and a test in `src/lock/scripts_tests.rs`
//! holds them together), and the merge. By job:
//! - `history::entry`: an [`Entry`], how it ended ([`Outcome`]), and the
//!   tick and schedule it belonged to;
//! - `history::skips`: the skip counter ([`Skips`]) and what each tick's
//!   skips saw ([`TickRecords`]), merged across servers;
//! - `history::missed`: the ticks that ended with no run, and why
//!   ([`missed_among`]).
//!
//! [`KeyLayout`]: crate::lock::KeyLayout

mod entry;
mod missed;
mod skips;

pub use entry::{Entry, Meanwhile, Outcome};
pub use missed::{Missed, MissedReason, missed_among};
pub use skips::{SkipKind, Skips, TickRecords, TickSkips, merge_skips};

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;

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

/// How many ticks keep their per-tick skip fields on each server (the
/// newest): more than the [`MAX_ENTRIES`] runs kept, so every tick between
/// the oldest entry and now has them unless most ticks were missed.
pub const TICKS_KEPT: usize = 128;

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
                kind_field(kind).into(),
                tick.map(|t| t.to_string()).unwrap_or_default().into_bytes(),
                TICKS_KEPT.to_string().into_bytes(),
            ],
        },
    };
    written(fleet.ask_all(call, int).await)
}

/// A [`SkipKind`]'s name in the skips hash's per-tick fields
/// (`t<start>:<kind>`, `scripts/skip.lua`).
fn kind_field(kind: SkipKind) -> &'static str {
    match kind {
        SkipKind::Ran => "ran",
        SkipKind::Busy => "busy",
        SkipKind::Unavailable => "unavailable",
        SkipKind::Paused => "paused",
        SkipKind::Elsewhere => "elsewhere",
    }
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

/// The union of the servers' entries without duplicates (same token),
/// newest start first, at most `n`.
pub fn merge(lists: Vec<Vec<Entry>>, n: usize) -> Vec<Entry> {
    let mut all: Vec<Entry> = lists.into_iter().flatten().collect();
    all.sort_by(|a, b| b.start_ms.cmp(&a.start_ms).then_with(|| a.token.cmp(&b.token)));
    all.dedup_by(|a, b| a.token == b.token);
    all.truncate(n);
    all
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
    use super::entry::tests::entry;
    use super::*;

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
    fn merge_is_a_union_newest_first_without_duplicates() {
        let a = vec![entry("c", 30), entry("b", 20), entry("a", 10)];
        let b = vec![entry("c", 30), entry("a", 10)];
        let empty = vec![];
        let merged = merge(vec![a, b, empty], 20);
        let tokens: Vec<&str> = merged.iter().map(|e| e.token.as_str()).collect();
        assert_eq!(tokens, ["c", "b", "a"]);
        assert_eq!(merge(vec![vec![entry("x", 1), entry("y", 2)]], 1)[0].token, "y");
    }
}
