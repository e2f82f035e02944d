//! The wait's decisions, as one state and one pure step: what an attempt
//! showed, a pause that ended or a release heard goes in
//! ([`Event`]), and what to do next comes out ([`Action`]): attempt, pause
//! until a moment, give up, or hold the lock. Time comes in with each
//! event; the attempts, the listeners, the sleeps and the messages stay
//! with the caller ([`super::acquire`]), so that every decision is tested
//! here without servers or sleeps.
//!
//! The rules, each with its reason at the place it is applied:
//! - a busy answer waits for the holder: a pause from a jittered
//!   exponential backoff ([`Backoff`]), never past the holder's remaining
//!   TTL, never past the wait's deadline;
//! - nobody holds the lock but the votes are split, or the queue's turn is
//!   another waiter's: `-n` retries for [`SETTLE_BOUND`] or
//!   [`queue::HELD_UP`], since "busy" must mean a holder; a `--wait`
//!   keeps its bound, whatever it meets;
//! - too few answered because servers were slow ([`Seen::Late`]): `-n`
//!   retries for [`SETTLE_BOUND`] too, since "unavailable" must mean
//!   servers that are down or cut off, not busy;
//! - right after a release heard, what still shows the old holder (its
//!   token, a split, too few answers) is that release on its way: chased
//!   [`CHASES`] times, [`CHASE_PAUSE`] apart;
//! - far back in the queue, the end of a pause is an attempt only to
//!   refresh the waiter's entry, once [`queue::REFRESH`] has passed;
//! - an error that waiting cannot cure ends the wait at once.

use std::time::{Duration, Instant};

use crate::lock::Holders;
use crate::queue;
use crate::token::Mode;

use super::{Backoff, MAX_PAUSE, Release, SETTLE_BOUND};

/// How many attempts a waiter makes, [`CHASE_PAUSE`] apart, when it finds
/// the lock still held by the token whose release it just heard (the
/// release reached some servers before others). Bounded per release heard,
/// so that a release that failed on a quorum costs a few attempts, never a
/// storm.
pub const CHASES: u32 = 3;
/// The pause before a chasing attempt: about one turn of the servers.
pub const CHASE_PAUSE: Duration = Duration::from_millis(1);

/// What an attempt showed, as far as the wait's decisions go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The lock is ours.
    Acquired,
    /// No waiter is first on a quorum of the queue.
    Disordered,
    /// Held by `holder` on a quorum, for `remaining` more (`None`: never
    /// expires, or not said).
    Busy {
        /// The holder's value.
        holder: String,
        /// Its shortest remaining TTL.
        remaining: Option<Duration>,
    },
    /// Free on a quorum, but another waiter's turn.
    Queued,
    /// Nobody holds a quorum; the soonest split vote expires in `expires`.
    Split {
        /// When the first of the other values' votes expires.
        expires: Option<Duration>,
    },
    /// The run's tick already ran (`--once-per`): nothing to wait for.
    Ran,
    /// Too few servers answered, and some of the rest did not answer in
    /// time (none refused, none said what waiting cannot cure): servers
    /// slow to answer, as in a burst of a thousand hosts on a busy machine.
    Late,
    /// Too few servers answered; `config`: retrying cannot help.
    Unavailable {
        /// An error that waiting cannot cure (auth, TLS, WRONGTYPE...).
        config: bool,
    },
}

/// What happened since the last action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An attempt ended: what it showed, and how many waiters it saw
    /// ahead (`None`: no place in the queue).
    Attempted {
        /// The verdict.
        seen: Seen,
        /// Waiters ahead, as a quorum of the servers saw it.
        ahead: Option<usize>,
    },
    /// The pause ended.
    PauseEnded,
    /// A release was heard.
    Released(Release),
}

/// What to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Attempt now; `order` false for the one attempt after the queue
    /// proved disordered.
    Attempt {
        /// Only the first waiter(s) may take a free key.
        order: bool,
    },
    /// Attempt again after [`CHASE_PAUSE`]: a release heard is on its way.
    Chase,
    /// Wait for a release until `until`, then [`Event::PauseEnded`].
    Pause {
        /// When the pause ends.
        until: Instant,
        /// How long the whole wait has left (`Duration::MAX`: no bound).
        left: Duration,
        /// Say that the wait goes on (after an attempt; not when only
        /// settling a split or a queue's turn for `-n`).
        report: bool,
        /// Listen for releases from now on (not for a split: nobody
        /// holds the lock, so no release will come).
        listen: bool,
    },
    /// The lock is ours.
    Acquired,
    /// The wait is over: give up with what the last attempt saw.
    GiveUp,
}

/// How a wait was asked for.
#[derive(Clone, Debug)]
pub struct Asked {
    /// When the wait began.
    pub start: Instant,
    /// When it must end (`None`: never; `start` for `-n`).
    pub deadline: Option<Instant>,
    /// Ordered (the queue's order, not `--unordered`).
    pub ordered: bool,
    /// The waiter's entry in the queue.
    pub member: String,
    /// Who may hold the key at once (`--limit N`, `--shared`).
    pub holders: Holders,
}

/// The state of one wait.
#[derive(Debug)]
pub struct WaitState {
    asked: Asked,
    /// `-n`: no wait, no place in the queue.
    once: bool,
    backoff: Backoff,
    /// Attempts made so far.
    pub attempts: u32,
    /// Split rounds in a row: each makes the next attempt more patient
    /// with slow servers (`lock::tally::patience`).
    pub splits: u32,
    /// False for the one attempt after the queue proved disordered.
    order: bool,
    /// Waiters ahead as the last attempt saw it, and when. A release heard
    /// that names another waiter moves us up one place without asking the
    /// servers; the turn to take a free key always comes from the servers.
    ahead: Option<(usize, Instant)>,
    /// The token of the last release heard, and the attempts since that
    /// met it still holding.
    heard: Option<Vec<u8>>,
    chases: u32,
    /// Whether the next attempt comes of a release heard.
    woken: bool,
    /// The bound of the wait as the last attempt left it: the deadline,
    /// stretched while nobody holds the lock.
    until: Option<Instant>,
    /// When the holder the last attempt met loses its lock.
    holder_expiry: Option<Instant>,
}

impl WaitState {
    /// A wait as `asked`, with its own `backoff`.
    pub fn new(asked: Asked, backoff: Backoff) -> WaitState {
        WaitState {
            once: asked.deadline == Some(asked.start),
            until: asked.deadline,
            asked,
            backoff,
            attempts: 0,
            splits: 0,
            order: true,
            ahead: None,
            heard: None,
            chases: 0,
            woken: false,
            holder_expiry: None,
        }
    }

    /// The first action: attempt at once.
    pub fn first(&self) -> Action {
        Action::Attempt { order: true }
    }

    /// Whether attempts should keep or take a place in the queue (all but
    /// `-n`'s).
    pub fn joins(&self) -> bool {
        !self.once
    }

    /// The next action after `event`, at `now`.
    pub fn step(&mut self, now: Instant, event: Event) -> Action {
        match event {
            Event::Attempted { seen, ahead } => self.attempted(now, seen, ahead),
            Event::PauseEnded => {
                self.woken = false;
                // Behind the first `places` waiters, a pause ends in an
                // attempt only to refresh our entry, once REFRESH passed.
                match self.ahead {
                    Some((n, at))
                        if self.joins()
                            && usize::try_from(self.asked.holders.places())
                                .is_ok_and(|p| n >= p)
                            && now.saturating_duration_since(at) < queue::REFRESH =>
                    {
                        self.pause(now, false, false)
                    }
                    _ => Action::Attempt { order: self.order },
                }
            }
            Event::Released(release) => {
                self.heard = Some(release.token);
                self.chases = 0;
                self.woken = true;
                match release.first.as_deref().filter(|f| !f.is_empty()) {
                    // Another waiter's turn: we move up one place. A
                    // shared waiter named first lets every shared waiter
                    // with no exclusive one ahead go in with it
                    // (`scripts/acquire.lua`): a shared waiter tries.
                    // (The first waiter's entry, as the server said it.)
                    Some(first)
                        if self.asked.ordered
                            && first != self.asked.member
                            && !(self.asked.holders == Holders::Shared
                                && Mode::of(first) == Mode::Shared) =>
                    {
                        if let Some((n, _)) = self.ahead.as_mut() {
                            *n = n.saturating_sub(1).max(1);
                        }
                        self.pause(now, false, false)
                    }
                    _ => Action::Attempt { order: self.order },
                }
            }
        }
    }

    fn attempted(&mut self, now: Instant, seen: Seen, ahead: Option<usize>) -> Action {
        self.attempts += 1;
        self.order = true;
        let in_time = self.asked.deadline.is_none_or(|d| now < d);
        // An ordered waiter that a release woke: a split, or a round with
        // too few answers (it stops once nobody can win it, and the servers
        // not awaited count as silent), is most often that release still
        // on its way to some servers, the old token holding them. Chased
        // like a busy answer naming the token heard (below), within the
        // deadline: a whole pause would let a waiter behind, refreshing its
        // place while this one's grant is withdrawn from a server, find no
        // first waiter on a quorum and take the lock out of turn. Only
        // right after a wake: what a refresh meets at the end of a pause is
        // left to the backoff.
        let lagging =
            matches!(seen, Seen::Split { .. } | Seen::Late | Seen::Unavailable { config: false });
        if lagging && self.asked.ordered && self.woken && self.chases < CHASES && in_time {
            self.chases += 1;
            return Action::Chase;
        }
        // Servers that answered too late: `-n` asks again (below).
        let late = seen == Seen::Late;
        let (holder_left, split, nobody) = match seen {
            Seen::Acquired => return Action::Acquired,
            // No waiter is first on a quorum: once more, without order.
            Seen::Disordered => {
                self.order = false;
                return Action::Attempt { order: false };
            }
            Seen::Busy { holder, remaining } => {
                // Still held by the token we heard released: its release is
                // on its way to the other servers. The marker of shared
                // holders counts as the token heard: the last of them
                // announced it as it went.
                let chase = self.heard.as_deref() == Some(holder.as_bytes())
                    || (self.heard.is_some() && crate::shared::is_marker(&holder));
                if chase && self.chases < CHASES {
                    self.chases += 1;
                    return Action::Chase;
                }
                (remaining, false, false)
            }
            Seen::Queued => (None, false, true),
            Seen::Split { expires } => (expires, true, true),
            Seen::Unavailable { config: true } | Seen::Ran => return Action::GiveUp,
            Seen::Late | Seen::Unavailable { config: false } => (None, false, false),
        };
        self.ahead = ahead.map(|n| (n, now));
        self.splits = if split { self.splits + 1 } else { 0 };
        // Nobody holds the lock: `-n` settles the split, or lets the waiter
        // whose turn it is take it or lapse: busy means a holder has a
        // quorum, never only a queue. A `--wait` bounds the whole wait.
        // Servers that answered late: `-n` asks them again within the same
        // bound. The assumption: a server that times out under a burst (a
        // crontab line firing on a thousand hosts at once) answers a moment
        // later, once the burst has passed; the attempts after the first
        // keep `-n`'s rule (nobody took the lock since this run began), so
        // asking again never runs a job that a quicker host already ran.
        // What it costs: a server that is cut off (its calls time out
        // rather than fail) makes `-n` report "unavailable" after the
        // bound, not after one node timeout.
        if self.once {
            let start = self.asked.start;
            self.until = self.asked.deadline.map(|d| match (split || late, nobody) {
                (true, _) => d.max(start + SETTLE_BOUND),
                (false, true) => d.max(start + queue::HELD_UP + MAX_PAUSE),
                (false, false) => d,
            });
        }
        self.holder_expiry = holder_left.map(|d| now + d.max(Duration::from_millis(1)));
        // Settling a split or a queue's turn, or asking slow servers again,
        // is not waiting for a holder: `-n` says nothing. A split has no
        // holder to announce a release, and withdrawals are not announced;
        // a late round says nothing of a holder either.
        self.pause(now, !((nobody || late) && self.once), !(split || late))
    }

    /// A pause from the backoff, cut to the wait's bound and to the
    /// holder's expiry; or the end of the wait when its bound has passed.
    fn pause(&mut self, now: Instant, report: bool, listen: bool) -> Action {
        let left = self.until.map_or(Duration::MAX, |d| d.saturating_duration_since(now));
        if left.is_zero() {
            return Action::GiveUp;
        }
        let mut pause = self.backoff.next_pause().min(left);
        if let Some(expiry) = self.holder_expiry {
            // Never past the moment the holder's lock expires (once it
            // has, the pauses are the backoff's alone).
            let until = expiry.saturating_duration_since(now);
            if !until.is_zero() {
                pause = pause.min(until);
            }
        }
        Action::Pause { until: now + pause, left, report, listen }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn asked(wait: Option<Duration>, ordered: bool) -> (WaitState, Instant) {
        let start = Instant::now();
        let asked = Asked {
            start,
            deadline: wait.map(|w| start + w),
            ordered,
            member: "me".into(),
            holders: Holders::One,
        };
        (WaitState::new(asked, Backoff::seeded(7)), start)
    }

    fn attempted(seen: Seen) -> Event {
        Event::Attempted { seen, ahead: None }
    }

    fn busy(holder: &str, ms: u64) -> Seen {
        Seen::Busy { holder: holder.into(), remaining: Some(MS * u32::try_from(ms).unwrap()) }
    }

    fn release(first: &str, token: &str) -> Event {
        Event::Released(Release { first: Some(first.into()), token: token.as_bytes().to_vec() })
    }

    #[test]
    fn no_wait_is_one_attempt_and_busy_gives_up() {
        let (mut w, start) = asked(Some(Duration::ZERO), true);
        assert!(!w.joins());
        assert_eq!(w.first(), Action::Attempt { order: true });
        assert_eq!(w.step(start, attempted(busy("h", 1000))), Action::GiveUp);
        let (mut w, start) = asked(Some(Duration::ZERO), true);
        assert_eq!(w.step(start, attempted(Seen::Acquired)), Action::Acquired);
    }

    #[test]
    fn a_split_is_settled_past_no_wait_for_the_settle_bound_quietly() {
        let (mut w, start) = asked(Some(Duration::ZERO), true);
        let Action::Pause { until, report, listen, left } =
            w.step(start, attempted(Seen::Split { expires: None }))
        else {
            panic!("a split is retried")
        };
        assert!(!report && !listen, "-n says nothing, and no release will come");
        assert_eq!(left, SETTLE_BOUND);
        assert!(until <= start + Duration::from_millis(25));
        assert_eq!(w.splits, 1);
        assert_eq!(w.step(until, Event::PauseEnded), Action::Attempt { order: true });
        let late = start + SETTLE_BOUND;
        assert_eq!(w.step(late, attempted(Seen::Split { expires: None })), Action::GiveUp);
    }

    #[test]
    fn slow_servers_are_asked_again_past_no_wait_for_the_settle_bound_quietly() {
        let (mut w, start) = asked(Some(Duration::ZERO), true);
        let Action::Pause { until, report, listen, left } = w.step(start, attempted(Seen::Late))
        else {
            panic!("a late round is retried")
        };
        assert!(!report && !listen, "-n says nothing, and listens for no release");
        assert_eq!(left, SETTLE_BOUND);
        assert_eq!(w.step(until, Event::PauseEnded), Action::Attempt { order: true });
        // The second round finds the holder that won meanwhile: busy.
        assert_eq!(w.step(until, attempted(busy("h", 5000))), Action::GiveUp);
        // Still late at the bound: given up.
        let (mut w, start) = asked(Some(Duration::ZERO), true);
        w.step(start, attempted(Seen::Late));
        assert_eq!(w.step(start + SETTLE_BOUND, attempted(Seen::Late)), Action::GiveUp);
        // Down or refused (not late): one attempt, as before.
        let (mut w, start) = asked(Some(Duration::ZERO), true);
        assert_eq!(w.step(start, attempted(Seen::Unavailable { config: false })), Action::GiveUp);
    }

    #[test]
    fn a_queue_whose_head_is_gone_holds_up_no_wait_for_an_entry_lifetime_only() {
        let (mut w, start) = asked(Some(Duration::ZERO), true);
        let action = w.step(start, attempted(Seen::Queued));
        assert!(matches!(action, Action::Pause { report: false, listen: true, .. }), "{action:?}");
        let bound = start + queue::HELD_UP + MAX_PAUSE;
        assert!(matches!(w.step(bound - MS, attempted(Seen::Queued)), Action::Pause { .. }));
        assert_eq!(w.step(bound, attempted(Seen::Queued)), Action::GiveUp);
        // The waiter whose turn it was took the lock: busy, at once.
        let (mut w, start) = asked(Some(Duration::ZERO), true);
        w.step(start, attempted(Seen::Queued));
        assert_eq!(w.step(start + MS * 30, attempted(busy("h", 5000))), Action::GiveUp);
    }

    #[test]
    fn a_disordered_queue_is_attempted_once_without_order() {
        let (mut w, start) = asked(Some(Duration::from_secs(10)), true);
        assert_eq!(w.step(start, attempted(Seen::Disordered)), Action::Attempt { order: false });
        let Action::Pause { until, .. } = w.step(start, attempted(busy("h", 5000))) else {
            panic!()
        };
        assert_eq!(w.step(until, Event::PauseEnded), Action::Attempt { order: true });
    }

    #[test]
    fn a_release_on_its_way_is_chased_a_few_times_then_waited_for() {
        let (mut w, start) = asked(Some(Duration::from_secs(10)), true);
        let Action::Pause { .. } = w.step(start, attempted(busy("old", 5000))) else { panic!() };
        assert_eq!(w.step(start, release("me", "old")), Action::Attempt { order: true });
        // The old token still holds some servers, or the round is a split,
        // or too few answered: chased, CHASES times in all.
        for seen in
            [busy("old", 4000), Seen::Split { expires: None }, Seen::Unavailable { config: false }]
        {
            assert_eq!(w.step(start, attempted(seen)), Action::Chase);
        }
        assert!(matches!(w.step(start, attempted(busy("old", 4000))), Action::Pause { .. }));
        // A new holder is no release on its way.
        let (mut w, start) = asked(Some(Duration::from_secs(10)), true);
        w.step(start, attempted(busy("old", 5000)));
        w.step(start, release("me", "old"));
        assert!(matches!(w.step(start, attempted(busy("new", 5000))), Action::Pause { .. }));
    }

    #[test]
    fn a_split_met_at_the_end_of_a_pause_is_not_chased() {
        let (mut w, start) = asked(Some(Duration::from_secs(10)), true);
        let Action::Pause { until, .. } = w.step(start, attempted(busy("h", 5000))) else {
            panic!()
        };
        w.step(until, Event::PauseEnded);
        assert!(matches!(
            w.step(until, attempted(Seen::Split { expires: None })),
            Action::Pause { .. }
        ));
    }

    /// A `--wait` that meets a queue's turn or a split keeps its bound.
    #[test]
    fn a_short_wait_keeps_its_bound_behind_a_queue_or_a_split() {
        for seen in [Seen::Queued, Seen::Split { expires: Some(Duration::from_secs(30)) }] {
            let (mut w, start) = asked(Some(Duration::from_secs(1)), true);
            let Action::Pause { until, .. } = w.step(start, attempted(seen.clone())) else {
                panic!()
            };
            assert!(until <= start + Duration::from_secs(1), "{seen:?}");
            let end = start + Duration::from_secs(1);
            assert_eq!(w.step(end, attempted(seen)), Action::GiveUp);
        }
    }

    #[test]
    fn no_chase_past_the_deadline() {
        let (mut w, start) = asked(Some(Duration::from_millis(100)), true);
        w.step(start, attempted(busy("old", 5000)));
        w.step(start, release("me", "old"));
        let late = start + Duration::from_millis(100);
        assert_eq!(w.step(late, attempted(Seen::Unavailable { config: false })), Action::GiveUp);
    }

    #[test]
    fn a_release_naming_another_waiter_moves_us_up_and_waits_on() {
        let (mut w, start) = asked(Some(Duration::from_secs(10)), true);
        let seen = Event::Attempted { seen: busy("h", 5000), ahead: Some(3) };
        assert!(matches!(w.step(start, seen), Action::Pause { .. }));
        assert!(matches!(w.step(start, release("other", "h")), Action::Pause { .. }));
        assert_eq!(w.ahead.map(|a| a.0), Some(2));
        // Unordered, every release is a reason to try.
        let (mut w, start) = asked(Some(Duration::from_secs(10)), false);
        w.step(start, attempted(busy("h", 5000)));
        assert_eq!(w.step(start, release("other", "h")), Action::Attempt { order: true });
    }

    #[test]
    fn far_back_in_the_queue_a_pause_refreshes_the_place_only_once_a_second() {
        let (mut w, start) = asked(None, true);
        let seen = Event::Attempted { seen: busy("h", 60_000), ahead: Some(4) };
        let Action::Pause { until, .. } = w.step(start, seen) else { panic!() };
        assert!(matches!(w.step(until, Event::PauseEnded), Action::Pause { .. }));
        let later = start + queue::REFRESH;
        assert_eq!(w.step(later, Event::PauseEnded), Action::Attempt { order: true });
        // Among the first N waiters of a --limit N key, every pause ends
        // in an attempt.
        let (mut w, start) = asked(None, true);
        w.asked.holders = Holders::Limit(5);
        let seen = Event::Attempted { seen: busy("h", 60_000), ahead: Some(4) };
        let Action::Pause { until, .. } = w.step(start, seen) else { panic!() };
        assert_eq!(w.step(until, Event::PauseEnded), Action::Attempt { order: true });
    }

    #[test]
    fn a_pause_never_outlasts_the_holder_or_the_deadline() {
        let (mut w, start) = asked(Some(Duration::from_secs(30)), true);
        for _ in 0..10 {
            w.backoff.next_pause();
        }
        let Action::Pause { until, .. } = w.step(start, attempted(busy("h", 40))) else { panic!() };
        assert_eq!(until, start + MS * 40, "the holder expires first");
        let (mut w, start) = asked(Some(Duration::from_millis(30)), true);
        for _ in 0..10 {
            w.backoff.next_pause();
        }
        let Action::Pause { until, left, .. } = w.step(start, attempted(busy("h", 5000))) else {
            panic!()
        };
        assert_eq!((until, left), (start + MS * 30, MS * 30), "the deadline first");
        // The pause that ends at the deadline ends in one last attempt.
        assert_eq!(w.step(until, Event::PauseEnded), Action::Attempt { order: true });
        assert_eq!(w.step(until, attempted(busy("h", 5000))), Action::GiveUp);
    }

    #[test]
    fn an_error_waiting_cannot_cure_ends_the_wait_at_once() {
        let (mut w, start) = asked(None, true);
        assert_eq!(w.step(start, attempted(Seen::Unavailable { config: true })), Action::GiveUp);
        let (mut w, start) = asked(None, true);
        let action = w.step(start, attempted(Seen::Unavailable { config: false }));
        assert!(matches!(action, Action::Pause { report: true, listen: true, .. }));
    }
}
