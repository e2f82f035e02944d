//! The skips of a lock: the runs that did not run their command, as the
//! skips hash counts them (`scripts/skip.lua`): a counter with the last
//! skip's facts ([`Skips`]), and per tick what each tick's skips saw
//! ([`TickSkips`], [`TickRecords`]); each merged across servers.

use serde::Serialize;

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
    /// The newest tick whose fields were dropped ([`TICKS_KEPT`](super::TICKS_KEPT)).
    pub pruned_ms: Option<u64>,
    /// The freeze that paused each paused tick, one line, by the tick's start.
    pub freezes: std::collections::BTreeMap<u64, String>,
}

impl TickRecords {
    /// The servers' records as one: each count the largest any server
    /// has (every skip goes to every server), tracking from the earliest
    /// start, pruned up to the latest.
    pub(super) fn merge(servers: Vec<TickRecords>) -> TickRecords {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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
}
