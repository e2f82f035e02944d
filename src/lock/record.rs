//! The grant record: what each server remembers of the last grant of a
//! lock after its key is gone, for the two promises that outlive a hold.
//!
//! Each server keeps, beside the lock key (`redlock:{KEY}:last`, in its
//! Cluster hash slot), a hash written by the acquire script in the same
//! step as the grant: when the key was last granted there (server ms) and
//! to which token, the last tick that ran (`--once-per`: its start, end
//! and token, carried over by grants that run no tick), and the record it
//! replaced. A withdrawal of that grant puts the replaced record back
//! (`scripts/withdraw.lua`), so a round that did not win leaves nothing
//! behind, and so does the release of a vote that landed after its round
//! was won (`Call::on`: the round's quorum keeps its records, and the late
//! vote's would date the grant to when it landed). The acquire script reads
//! it only where the key is free.
//!
//! **`-n` runs only if nobody took the lock since it began.** It began
//! when its process did (as `main` noted it first thing, for a command
//! line; at most [`STARTUP`] before its wait): a take while it started up,
//! read its configuration or connected counts. Every attempt carries
//! [`Since`]: a server refuses a free key that another token was granted
//! at or after the contender's start by that server's clock, which the
//! contender bounds from below:
//! - A server that answered an earlier attempt said its clock `C` then,
//!   and the answer came `T` after the start by this host's clock; the
//!   call ran at most `T` after the start, so the start was no later than
//!   `C - T` there (rounded down to the records' whole milliseconds). The
//!   bound is early by the answer's way back (and the host's delay in
//!   reading it): a grant that little before the start counts too, which
//!   is the safe side (busy).
//! - Otherwise, on the first attempt: its clock when the call runs less
//!   the time from the start to the request's making on its connection
//!   (after the connection is made; rounded up): late by the request's way
//!   there, behind what the connection sends first (a new connection's
//!   script bodies, about 20 KiB). A take granted in that moment and
//!   released before the call lands is missed; one still held then shows
//!   as held, and that answer judges it on the next attempt.
//! - Otherwise (a server that never answered): the same less one node
//!   timeout, the longest a call may run after it was sent (a later
//!   answer is a timeout), so no later than the start; a grant shortly
//!   before it may count too.
//!
//! A holder that took the key in between held a quorum, which shares a
//! server with any quorum this contender could win; that server refuses,
//! so the contender cannot win, and the refusal names the holder. Breaks
//! when that server lost its data since (a server restarted since the
//! contender began has no vote for it, as for a tick), when its clock was
//! stepped back between the take and the attempt, or when the record
//! expired: it lives [`RECORD_LIFE`], above the longest `-n`.
//!
//! **`--cron` and `--once-per` run once per tick.** The tick is computed
//! by `crate::schedule` from the host's clock at its start; a grant for it
//! writes the tick into the record, with the schedule's identity, and a
//! server refuses a free key whose record holds a tick that ends after
//! this one starts, or another schedule (hosts that read two schedules
//! compute two ticks). By the same
//! quorum intersection, once a tick's holder won, no contender for the same
//! tick can win while the winner's quorum keeps its records: each record
//! lives until [`TICK_MARGIN`] past the tick's end, and a server that
//! restarted after the tick began (and does not keep every write) gets no
//! vote for that tick (the restart window, from the tick's start:
//! `vote::restart_window`). A host whose clock is off by more than
//! [`super::CLOCK_ALLOWANCE`] from the servers gets no vote from them at
//! all, so it cannot run a tick its clock misplaced. What breaks it: a
//! majority of servers losing their data at once (no quorum is left to
//! remember), or hosts whose clocks disagree by more than the allowance
//! near a tick's boundary (each computes its own tick).
//!
//! A refusal the record gives is a verdict of its own: the tick ran
//! ([`TickRan`]), is over ([`TickOver`]), or ran under another schedule
//! ([`Schedules`]); [`ran_by`] names the holder a record names.

use std::time::{Duration, SystemTime};

use crate::clock::BootInstant;
use crate::token::Token;

/// How long a grant record lives after its grant when it holds no tick
/// (`scripts/acquire.lua`, the same number): longer than any `-n` looks
/// back: [`STARTUP`], 5 s, before its wait, plus the wait
/// (`wait::SETTLE_BOUND`, 5 s, or the queue's hold-up and a pause, 6 s),
/// plus its last attempt, one node timeout, at most
/// [`LOOK_BACK_NODE_TIMEOUT`].
pub const RECORD_LIFE: Duration = Duration::from_secs(20);

/// The longest node timeout of a `-n` (the configuration refuses a longer
/// one, exit 64): its last call may be answered that long after it was
/// sent, and the records it reads there must still hold every take since
/// it began, [`RECORD_LIFE`] less [`STARTUP`] and the wait's 6 s. With a
/// longer one, a take made early in the `-n` could be forgotten by the
/// time a stalled server runs its call, and the `-n` would run.
pub const LOOK_BACK_NODE_TIMEOUT: Duration =
    RECORD_LIFE.saturating_sub(STARTUP).saturating_sub(Duration::from_secs(6));

/// How long a tick's record lives past the tick's end
/// (`scripts/acquire.lua`, the same number): a host whose clock is behind
/// the servers' by up to [`super::CLOCK_ALLOWANCE`] still finds it.
pub const TICK_MARGIN: Duration = Duration::from_secs(60);

/// How long before its first attempt a `-n` may have begun: its process's
/// start counts, unless that is longer ago (`--jitter` sleeps in between;
/// so may a configuration file on a hung mount), when it counts from this
/// long before the wait instead. The bound keeps the look-back inside
/// [`RECORD_LIFE`] (a start the records forgot would promise what they
/// cannot keep: [`RECORD_LIFE`] covers this plus the longest `-n`), and
/// the restart window, which widens to the time since the start, near its
/// usual size. A process that took longer than this to start up (a host
/// starved for seconds) may miss a take made in its first moments.
pub const STARTUP: Duration = Duration::from_secs(5);

/// The longest tick: a year. A tick's record lives as long as the tick.
pub const MAX_TICK: Duration = Duration::from_secs(366 * 24 * 3600);

/// A tick of `--once-per` or `--cron`: the slot `[start, end)` of
/// wall-clock time (ms since the Unix epoch) a run belongs to, computed
/// by `crate::schedule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    /// Its start.
    pub start_ms: u64,
    /// Its end (the next tick's start).
    pub end_ms: u64,
    /// The offset from UTC of its schedule's zone at its start (seconds),
    /// for [`Tick::describe`].
    pub offset_s: i32,
}

impl Tick {
    /// The latest server time (ms since the epoch) at which a server may
    /// still grant this tick: its end plus [`super::CLOCK_ALLOWANCE`].
    /// Later, the tick is over and nobody runs it (`scripts/acquire.lua`).
    ///
    /// Why: the record that says a tick ran lives [`TICK_MARGIN`] past the
    /// tick's end. A host held up after it computed its tick (a frozen VM,
    /// a suspended laptop, a hung `--jitter` sleep) for longer than that
    /// would find the record gone and run the tick a second time. Each
    /// server refuses by its own clock, the same clock that expires its
    /// record, so while the allowance is below the margin no server grants
    /// a tick whose record it has already forgotten. A host whose clock is
    /// behind the servers' by up to the allowance still runs a tick that
    /// nobody ran. Breaks when a server's clock is stepped back by more
    /// than the margin less the allowance between the run and the attempt.
    pub fn last_grant_ms(&self) -> u64 {
        self.end_ms + crate::text::millis(super::CLOCK_ALLOWANCE)
    }

    /// Whether the holder of `value` (a lock's value, as a waiter sees
    /// it) runs this tick: its token was made no earlier than the tick's
    /// start, give or take [`super::CLOCK_ALLOWANCE`]. A holder of an
    /// earlier tick that runs on past its end began before it; a value
    /// that is no token (another client's) runs no tick. Breaks for a
    /// holder whose clock was off by more than the allowance, which no
    /// server lets hold a tick ([`super::CLOCK_ALLOWANCE`]).
    pub fn held_by(&self, value: &str) -> bool {
        let allowance = crate::text::millis(super::CLOCK_ALLOWANCE);
        value
            .parse::<crate::token::Token>()
            .is_ok_and(|t| t.created_ms + allowance >= self.start_ms)
    }

    /// The freeze (`redlock hold`) that pauses this tick, if `value` (a
    /// lock's value, as a waiter sees it) is one that ends at or after
    /// the tick's end: waiting would only wait the tick out, so the run
    /// skips at once. A freeze that ends within the tick is waited for
    /// like any holder, and the run goes on after it, if the tick has not
    /// ended by then. What breaks it: a freeze released early (a signal,
    /// `release --force`) after hosts skipped; those hosts do not come
    /// back for the rest of the tick, and `check` reports it paused.
    pub fn paused_by(&self, value: &str) -> Option<crate::token::Token> {
        value
            .parse::<crate::token::Token>()
            .ok()
            .filter(|t| t.until.is_some_and(|until| until >= self.end_ms))
    }

    /// When the tick ended (the next tick's start).
    pub fn end(&self) -> SystemTime {
        std::time::UNIX_EPOCH + Duration::from_millis(self.end_ms)
    }

    /// When the tick began.
    pub fn start(&self) -> SystemTime {
        std::time::UNIX_EPOCH + Duration::from_millis(self.start_ms)
    }

    /// The tick for people, the one format everywhere (`REDLOCK_TICK`,
    /// messages): its start with its offset, `2027-03-29T00:30:00+01:00`.
    pub fn describe(&self) -> String {
        crate::schedule::format_at_offset(self.start_ms, self.offset_s)
    }
}

/// `-n`'s rule for one attempt ([`Terms::untaken`]).
#[derive(Clone, Copy, Debug)]
pub enum Since<'a> {
    /// The contender's first attempt: a server refuses a free key taken
    /// since `began`, as far as its clock now less the time since then
    /// tells, and each server that answers says its clock.
    First {
        /// When the contender began (the process's start for a command
        /// line: [`crate::clock::BootInstant::process_start`]).
        began: BootInstant,
    },
    /// A later attempt: `starts` says, for each server that answered an
    /// earlier one, when the contender began by that server's clock (ms);
    /// the others are judged from `began` plus one node timeout.
    Later {
        /// When the contender began.
        began: BootInstant,
        /// When it began by each server's clock, by name.
        starts: &'a [(String, u64)],
    },
}

impl Since<'_> {
    /// When the contender began.
    pub fn began(&self) -> BootInstant {
        match *self {
            Since::First { began } | Since::Later { began, .. } => began,
        }
    }
}

/// What a grant needs besides a free key: the queue's turn, and the
/// grant record's terms.
#[derive(Clone, Copy, Debug, Default)]
pub struct Terms<'a> {
    /// The waiter's place in the queue (`None`: the queue is ignored).
    pub place: Option<super::Place<'a>>,
    /// `-n`'s rule: refuse a free key that another token was granted
    /// since the contender began.
    pub untaken: Option<Since<'a>>,
    /// The tick the run belongs to (`--once-per`, `--cron`).
    pub tick: Option<Tick>,
    /// The tick's schedule (`crate::schedule::Schedule::identity`): a
    /// server whose record says another schedule ran the key's ticks
    /// refuses, as hosts that read two schedules compute two ticks.
    pub schedule: Option<&'a str>,
}

/// Two schedules for one key's ticks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedules {
    /// The token of the run whose record names the other schedule.
    pub token: String,
    /// Its schedule.
    pub theirs: String,
    /// This host's.
    pub ours: String,
    /// The end of the tick the record's schedule ran (ms since the epoch),
    /// where it holds one: its record, and the refusal, last until
    /// [`TICK_MARGIN`] after it.
    pub ends_ms: Option<u64>,
}

impl Schedules {
    /// One line: this host's schedule for `key`, the one its ticks ran
    /// under, and until when that one's record refuses this host (a line
    /// changed on purpose takes over then).
    pub fn describe(&self, key: &str) -> String {
        let until = self.ends_ms.map(|end| {
            let until = end.saturating_add(crate::text::millis(TICK_MARGIN));
            format!(
                "; its record refuses other schedules until {} (its tick's end plus {}), when a \
                 line changed on purpose takes over",
                crate::schedule::format_at_offset(until, 0),
                crate::text::fmt_duration(TICK_MARGIN),
            )
        });
        format!(
            "{}: this host reads its ticks as `{}`; {} ran them as `{}`{}: every host of a key \
             must give the same --cron or --once-per and --tz",
            crate::text::display_key(key.as_bytes()),
            self.ours,
            ran_by(&self.token),
            crate::text::printable(&self.theirs),
            until.unwrap_or_default(),
        )
    }
}

/// A tick that already ran, as the servers recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TickRan {
    /// The token that ran it.
    pub token: String,
    /// The tick it ran.
    pub tick: Tick,
}

impl TickRan {
    /// One line: the tick of `key` already ran, where.
    pub fn describe(&self, key: &str) -> String {
        format!(
            "{}: the tick of {} already ran on {}",
            crate::text::display_key(key.as_bytes()),
            self.tick.describe(),
            ran_by(&self.token)
        )
    }
}

/// A tick that is over by a server's clock ([`Tick::last_grant_ms`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TickOver {
    /// The tick.
    pub tick: Tick,
    /// How long ago it ended by that server's clock.
    pub ended: Duration,
}

impl TickOver {
    /// One line: the tick of `key` is over, by how much.
    pub fn describe(&self, key: &str) -> String {
        format!(
            "{}: the tick of {} ended {} ago by the servers' clocks (this host was held up \
             since it began); skipped",
            crate::text::display_key(key.as_bytes()),
            self.tick.describe(),
            crate::text::fmt_duration(self.ended),
        )
    }
}

/// Who a token's holder was, for "ran on" and "taken by": host and pid.
pub fn ran_by(token: &str) -> String {
    match token.parse::<Token>() {
        Ok(t) => format!("{} (pid {})", t.host, t.pid),
        Err(_) => format!("another client (value {})", crate::text::display_key(token.as_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_is_shown_at_its_zone_s_offset() {
        let tick =
            |offset_s| Tick { start_ms: 1_795_621_500_000, end_ms: 1_795_621_800_000, offset_s };
        assert_eq!(tick(0).describe(), "2026-11-25T15:45:00+00:00");
        assert_eq!(tick(3600).describe(), "2026-11-25T16:45:00+01:00");
        assert_eq!(tick(-5 * 3600).describe(), "2026-11-25T10:45:00-05:00");
        assert_eq!(tick(0).end(), tick(0).start() + Duration::from_secs(300));
    }

    #[test]
    fn a_freeze_that_outlasts_the_tick_pauses_it() {
        let tick = Tick { start_ms: 60_000, end_ms: 120_000, offset_s: 0 };
        let freeze = |until| crate::token::Token::new().with_until(until).to_string();
        assert!(tick.paused_by(&freeze(Some(120_000))).is_some());
        assert!(tick.paused_by(&freeze(Some(119_999))).is_none(), "ends within the tick");
        assert!(tick.paused_by(&freeze(None)).is_none(), "no freeze");
        assert!(tick.paused_by("another client").is_none());
    }
}
