//! The missed ticks: the ticks of a schedule that ended with no run
//! recorded, and why each did not run, from what its skips saw
//! ([`MissedReason`]; a tick a freeze paused is no missed tick).

use serde::Serialize;

use super::{Entry, History};

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
    /// redlock, or dropped past [`TICKS_KEPT`](super::TICKS_KEPT)).
    Unknown,
    /// Not missed: a freeze (`redlock hold`) paused the job for the whole
    /// tick, on purpose ([`SkipKind::Paused`](super::SkipKind::Paused)).
    Paused,
    /// Hosts fired, but the key's record named another schedule
    /// ([`SkipKind::Elsewhere`](super::SkipKind::Elsewhere)): the line changed, or hosts disagree.
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::failure::Failures;
    use crate::history::entry::tests::entry;
    use crate::history::{Skips, TickRecords, TickSkips, tick_field};

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
}
