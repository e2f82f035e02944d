//! The supervisor's decisions, as one state and one pure step: what
//! happened while the command ran goes in ([`Event`]: it exited, a signal
//! came, the watchdog reported, the guard reported, a timer ran out), and
//! what to do comes out ([`Action`]: forward a signal, move the guard's
//! deadline, stop the job, say something). Time comes in with each event;
//! the command, the guard, the timers and the messages stay with the
//! driver ([`super::supervise`]), so that every decision is tested here
//! without processes or sleeps.
//!
//! The rules, each with its reason at the place it is applied:
//! - a lost lock (or renewals failing until `grace + margin` before the
//!   deadline) stops the job with the `--on-lost` signal, then SIGKILL
//!   `grace` later but never later than `margin` before the deadline
//!   ([`watchdog::plan_stop`]); `--max-hold` stops it the same way; the
//!   first of the two to come decides, and a stop is made once;
//! - the guard kills the job at half the margin before the deadline, after
//!   redlock's own SIGKILL, so it is the backstop of a frozen redlock; each
//!   renewal moves it, a lost lock does not;
//! - back from a freeze, whatever the guard killed is a lost lock, whichever
//!   of its report and the command's death comes first; a command that had
//!   ended by itself before any stop reached it keeps its own status;
//! - a lost lock prints at most two lines: the first warning (a failing
//!   renewal, or the stop) and the final error; the rest are `-v`.

use std::time::{Duration, SystemTime};

use crate::clock::BootInstant;
use crate::config::OnLost;
use crate::output::Level;
use crate::watchdog::{self, Health};

/// Why redlock stopped the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The lock was lost (or was about to be, with renewals failing).
    Lost {
        /// What the watchdog said.
        reason: String,
        /// When redlock began stopping the command.
        at: SystemTime,
        /// The signal sent first.
        signal: i32,
        /// Whether SIGKILL followed it (the command outlived the grace).
        killed: bool,
    },
    /// `--max-hold` ran out.
    MaxHold {
        /// The signal sent first.
        signal: i32,
        /// Whether SIGKILL followed it.
        killed: bool,
    },
}

impl Stop {
    /// Records that SIGKILL followed the first signal.
    fn killed(&mut self) {
        match self {
            Stop::Lost { killed, .. } | Stop::MaxHold { killed, .. } => *killed = true,
        }
    }
}

/// What the run asked of its supervisor.
#[derive(Clone, Debug)]
pub struct Terms {
    /// `--on-lost`.
    pub on_lost: OnLost,
    /// Time between the stop signal and SIGKILL (`--kill-after`).
    pub grace: Duration,
    /// How long before the end of validity SIGKILL goes out at the latest.
    pub margin: Duration,
    /// When `--max-hold` runs out.
    pub max_hold_at: Option<BootInstant>,
    /// The key as messages show it.
    pub shown: String,
}

/// The moment of an event on both clocks: the boot clock decides, the
/// wall clock only labels the final message.
#[derive(Clone, Copy, Debug)]
pub struct Now {
    /// On `CLOCK_BOOTTIME`.
    pub boot: BootInstant,
    /// On the wall clock.
    pub wall: SystemTime,
}

/// What happened since the last step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The command exited; `sigkill`: SIGKILL ended it.
    Exited {
        /// Whether it died of SIGKILL.
        sigkill: bool,
    },
    /// A signal came for the command.
    Signal(i32),
    /// The watchdog reported the lock's health.
    Health(Health),
    /// The guard killed the job at its deadline (redlock was frozen or
    /// stopped past it).
    GuardFired {
        /// Whether the command had already ended with a code of its own.
        ended_by_itself: bool,
    },
    /// The stop timer ([`Timers::stop`]) ran out.
    StopDue {
        /// Whether the command had already ended with a code of its own.
        ended_by_itself: bool,
    },
    /// The SIGKILL timer ([`Timers::kill`]) ran out.
    KillDue,
}

/// What to do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Forward the signal to the command.
    Forward(i32),
    /// Move the guard's deadline (`None`: it never kills).
    Guard(Option<BootInstant>),
    /// Send the signal to the whole job.
    Stop(i32),
    /// Say it, at this level.
    Say(Level, Note),
}

/// A message of the supervisor's, with what it shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A renewal won; `recovered` after failing ones.
    Renewed {
        /// Validity left.
        left: Duration,
        /// Renewals had been failing.
        recovered: bool,
    },
    /// A renewal failed; it is retried.
    RenewalFailed {
        /// Validity left.
        left: Duration,
        /// The renewal's error.
        error: String,
    },
    /// The watchdog says the lock is lost.
    Lost {
        /// Why.
        reason: String,
        /// `--on-lost ignore`: the command keeps running.
        ignored: bool,
    },
    /// Redlock began stopping the job.
    Stopping {
        /// Why (a lost lock, `--max-hold`).
        why: String,
        /// The signal sent.
        signal: i32,
        /// Time until SIGKILL.
        kill_in: Duration,
    },
    /// The job outlived the grace: SIGKILL.
    Killed,
}

/// The timers the driver arms until the next event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// When to begin stopping the job ([`Event::StopDue`]).
    pub stop: Option<BootInstant>,
    /// When to follow with SIGKILL ([`Event::KillDue`]).
    pub kill: Option<BootInstant>,
}

/// The plan the armed stop timer follows.
#[derive(Clone, Copy, Debug)]
struct Armed {
    /// Whether the stop is for `--max-hold` (else for the lock).
    max_hold: bool,
    /// The latest SIGKILL for the lock's sake, as planned when armed.
    lost_kill_at: BootInstant,
}

/// The state of one supervision.
#[derive(Debug)]
pub struct Supervision {
    terms: Terms,
    /// The watchdog's last report.
    health: Health,
    /// Whether the last renewal failed (its warning was said).
    failing: bool,
    /// When the guard kills the job (`None`: never).
    guard_at: Option<BootInstant>,
    /// Why redlock stopped the job, once it began.
    stop: Option<Stop>,
    /// When SIGKILL follows the stop signal.
    kill_at: Option<BootInstant>,
    /// The stop timer's plan, as [`Supervision::timers`] armed it.
    armed: Option<Armed>,
}

/// The guard's deadline for a lock valid until `deadline`: half the kill
/// margin before the validity ends, after redlock's own SIGKILL (`margin`
/// before), so the guard is the backstop of a frozen redlock and never
/// races a running one. None with `--on-lost ignore`.
pub fn guard_kill_at(
    on_lost: OnLost,
    margin: Duration,
    deadline: BootInstant,
) -> Option<BootInstant> {
    match on_lost {
        OnLost::Signal(_) => Some(deadline - margin / 2),
        OnLost::Ignore => None,
    }
}

/// Why a command was stopped by the guard; with `-q` the final line is
/// the only one, so it names the key.
fn guard_killed(shown: &str) -> String {
    format!(
        "redlock was stopped or frozen until the lock on {shown} ran out of validity, and its guard killed the command"
    )
}

impl Supervision {
    /// A supervision of a lock valid until `deadline`.
    pub fn new(terms: Terms, deadline: BootInstant) -> Supervision {
        Supervision {
            guard_at: guard_kill_at(terms.on_lost, terms.margin, deadline),
            terms,
            health: Health::Held { deadline },
            failing: false,
            stop: None,
            kill_at: None,
            armed: None,
        }
    }

    /// When the guard kills the job, as the command starts with it.
    pub fn guard_at(&self) -> Option<BootInstant> {
        self.guard_at
    }

    /// Whether redlock has begun stopping the job (then the guard's report
    /// changes nothing).
    pub fn stopping(&self) -> bool {
        self.stop.is_some()
    }

    /// Why redlock stopped the job, if it did: the run's verdict.
    pub fn finish(self) -> Option<Stop> {
        self.stop
    }

    /// The timers to arm at `now`, until the next event. The stop timer's
    /// plan is kept for its [`Event::StopDue`].
    pub fn timers(&mut self, now: BootInstant) -> Timers {
        let (lost_stop_at, lost_kill_at) =
            watchdog::plan_stop(&self.health, now, self.terms.grace, self.terms.margin);
        // The next moment to begin stopping, and whether it is for
        // --max-hold; the lock's comes first on a tie.
        let begin = if self.stop.is_some() {
            None
        } else {
            let lost = match self.terms.on_lost {
                OnLost::Signal(_) => Some((lost_stop_at, false)),
                OnLost::Ignore => None,
            };
            let max_hold = self.terms.max_hold_at.map(|at| (at, true));
            [lost, max_hold].into_iter().flatten().min_by_key(|(at, _)| *at)
        };
        self.armed = begin.map(|(_, max_hold)| Armed { max_hold, lost_kill_at });
        Timers { stop: begin.map(|(at, _)| at), kill: self.kill_at }
    }

    /// What to do after `event`, at `now`.
    pub fn step(&mut self, now: Now, event: Event) -> Vec<Action> {
        match event {
            Event::Exited { sigkill } => {
                // The guard's SIGKILL at its deadline can reach redlock
                // before the guard's own report of it (both resume together
                // after a freeze): a command killed by SIGKILL once that
                // deadline has passed was killed for the lock's validity.
                let past_guard = self.guard_at.is_some_and(|at| now.boot >= at);
                if self.stop.is_none() && sigkill && past_guard {
                    self.stop = Some(self.guard_stop(now));
                }
                Vec::new()
            }
            Event::Signal(signal) => vec![Action::Forward(signal)],
            Event::Health(health) => self.health(now, health),
            Event::GuardFired { ended_by_itself } => {
                // The guard fired and redlock had not begun stopping the
                // job: redlock did not run (frozen, or stopped by job
                // control) until after the validity ended. A command that
                // had ended by itself before keeps its own status.
                if self.stop.is_some() || ended_by_itself {
                    return Vec::new();
                }
                self.stop = Some(self.guard_stop(now));
                // Whatever outlived the guard's kill (a command started
                // after it fired, a process forked past its scan) is
                // killed now.
                vec![Action::Stop(libc::SIGKILL)]
            }
            Event::StopDue { ended_by_itself } => self.stop_due(now, ended_by_itself),
            Event::KillDue => {
                if self.kill_at.take().is_none() {
                    return Vec::new();
                }
                if let Some(stop) = self.stop.as_mut() {
                    stop.killed();
                }
                // The final line says it ("then SIGKILL").
                vec![Action::Say(Level::Info, Note::Killed), Action::Stop(libc::SIGKILL)]
            }
        }
    }

    /// The guard's kill, as the stop.
    fn guard_stop(&self, now: Now) -> Stop {
        let reason = guard_killed(&self.terms.shown);
        Stop::Lost { reason, at: now.wall, signal: libc::SIGKILL, killed: false }
    }

    /// A report of the watchdog's: the guard follows each renewal; what it
    /// says is a warning the first time only.
    fn health(&mut self, now: Now, health: Health) -> Vec<Action> {
        let mut out = Vec::new();
        if !matches!(health, Health::Lost { .. }) {
            self.guard_at = guard_kill_at(self.terms.on_lost, self.terms.margin, health.deadline());
            out.push(Action::Guard(self.guard_at));
        }
        let left = health.deadline().saturating_duration_since(now.boot);
        out.push(match &health {
            Health::Held { .. } => {
                let level = if self.failing { Level::Warn } else { Level::Info };
                let recovered = std::mem::replace(&mut self.failing, false);
                Action::Say(level, Note::Renewed { left, recovered })
            }
            Health::Failing { error, .. } => {
                let level = if self.failing { Level::Debug } else { Level::Warn };
                self.failing = true;
                Action::Say(level, Note::RenewalFailed { left, error: error.clone() })
            }
            Health::Lost { reason, .. } => {
                // Stopping the command says it (the `stopping` line, at
                // once); with `ignore` this is the line.
                let ignored = self.terms.on_lost == OnLost::Ignore;
                let level = if ignored { Level::Warn } else { Level::Info };
                Action::Say(level, Note::Lost { reason: reason.clone(), ignored })
            }
        });
        self.health = health;
        out
    }

    /// The stop timer ran out: the `--on-lost` signal (SIGTERM for
    /// `--max-hold` under `ignore`) to the whole job, SIGKILL `grace` later
    /// but for the lock never later than its plan.
    fn stop_due(&mut self, now: Now, ended_by_itself: bool) -> Vec<Action> {
        // A command that already ended by itself (seen late: redlock was
        // frozen) is not stopped: its status is its own.
        if self.stop.is_some() || ended_by_itself {
            return Vec::new();
        }
        let Some(armed) = self.armed else {
            return Vec::new();
        };
        let grace = self.terms.grace;
        let (signal, kill) = match self.terms.on_lost {
            OnLost::Signal(signal) => (signal, (now.boot + grace).min(armed.lost_kill_at)),
            OnLost::Ignore => (libc::SIGTERM, now.boot + grace),
        };
        if signal != libc::SIGKILL {
            self.kill_at = Some(kill);
        }
        let shown = &self.terms.shown;
        let why = if armed.max_hold {
            self.stop = Some(Stop::MaxHold { signal, killed: false });
            format!("--max-hold ran out on {shown}")
        } else {
            let reason = match &self.health {
                Health::Lost { reason, .. } => reason.clone(),
                Health::Failing { error, .. } => format!("could not renew in time ({error})"),
                Health::Held { .. } => format!("the lock on {shown} ran out of validity"),
            };
            self.stop =
                Some(Stop::Lost { reason: reason.clone(), at: now.wall, signal, killed: false });
            format!("lost the lock: {reason}")
        };
        let kill_in = kill.saturating_duration_since(now.boot);
        // After a failing renewal's warning, the stop is the final line's
        // to tell.
        let level = if self.failing { Level::Info } else { Level::Warn };
        vec![Action::Stop(signal), Action::Say(level, Note::Stopping { why, signal, kill_in })]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const TTL: Duration = Duration::from_secs(30);
    // As `Run::grace` and `Run::kill_margin` make them for a 30 s TTL.
    const GRACE: Duration = Duration::from_secs(10);
    const MARGIN: Duration = Duration::from_millis(1500);

    /// A supervision of a lock taken at `t0`, valid for a TTL, under
    /// `on_lost` and `--max-hold`.
    fn supervision(on_lost: OnLost, max_hold: Option<Duration>) -> (Supervision, BootInstant) {
        let t0 = BootInstant::from_since_boot(Duration::from_secs(1000));
        let terms = Terms {
            on_lost,
            grace: GRACE,
            margin: MARGIN,
            max_hold_at: max_hold.map(|d| t0 + d),
            shown: "k".into(),
        };
        (Supervision::new(terms, t0 + TTL), t0)
    }

    fn term() -> (Supervision, BootInstant) {
        supervision(OnLost::Signal(libc::SIGTERM), None)
    }

    fn at(boot: BootInstant) -> Now {
        Now { boot, wall: SystemTime::UNIX_EPOCH }
    }

    fn lost(deadline: BootInstant) -> Event {
        Event::Health(Health::Lost { deadline, reason: "extend k: not held".into() })
    }

    fn failing(deadline: BootInstant) -> Event {
        Event::Health(Health::Failing { deadline, error: "timed out".into() })
    }

    /// Arms the timers at `now` and, if the stop timer is due by then,
    /// delivers it.
    fn stop_due(s: &mut Supervision, now: BootInstant, ended_by_itself: bool) -> Vec<Action> {
        let due = s.timers(now).stop.expect("a stop timer is armed");
        assert!(due <= now, "the stop is due only at {due:?}");
        s.step(at(now), Event::StopDue { ended_by_itself })
    }

    fn stop_kind(s: Supervision) -> Option<(&'static str, i32, bool)> {
        s.finish().map(|stop| match stop {
            Stop::Lost { signal, killed, .. } => ("lost", signal, killed),
            Stop::MaxHold { signal, killed } => ("max-hold", signal, killed),
        })
    }

    /// Scenario 4 of "Never unguarded" (`run`'s unit test with a real
    /// command): back from a suspend longer than the validity, the stop is
    /// due at once and SIGKILL follows at once, not a grace later.
    #[test]
    fn back_from_a_freeze_past_the_deadline_the_job_is_stopped_and_killed_at_once() {
        let (mut s, t0) = term();
        assert_eq!(s.timers(t0).stop, Some(t0 + TTL - GRACE - MARGIN));
        let woke = t0 + 2 * TTL;
        let actions = stop_due(&mut s, woke, false);
        assert_eq!(actions[0], Action::Stop(libc::SIGTERM));
        let Action::Say(_, Note::Stopping { kill_in, .. }) = &actions[1] else { panic!() };
        assert_eq!(*kill_in, Duration::ZERO);
        assert_eq!(s.timers(woke), Timers { stop: None, kill: Some(woke) });
        assert_eq!(
            s.step(at(woke), Event::KillDue),
            [Action::Say(Level::Info, Note::Killed), Action::Stop(libc::SIGKILL)]
        );
        assert_eq!(stop_kind(s), Some(("lost", libc::SIGTERM, true)));
    }

    /// found.rs, a command that ended while redlock was frozen: the guard
    /// fired after the command exited 3 by itself; neither its report nor
    /// the stop timer seen late stops anything, and the status stands.
    #[test]
    fn a_command_that_ended_by_itself_before_the_guard_fired_keeps_its_status() {
        let (mut s, t0) = term();
        let woke = t0 + 2 * TTL;
        assert_eq!(s.step(at(woke), Event::GuardFired { ended_by_itself: true }), []);
        assert!(!s.stopping());
        assert_eq!(stop_due(&mut s, woke, true), []);
        assert_eq!(s.step(at(woke), Event::Exited { sigkill: false }), []);
        assert_eq!(stop_kind(s), None);
    }

    /// found.rs, the guard killed the command after a freeze and its
    /// report came first: a lost lock (70), whatever outlived the kill is
    /// killed, and no stop timer follows.
    #[test]
    fn the_guard_s_report_after_a_freeze_is_a_lost_lock() {
        let (mut s, t0) = term();
        let woke = t0 + 2 * TTL;
        let actions = s.step(at(woke), Event::GuardFired { ended_by_itself: false });
        assert_eq!(actions, [Action::Stop(libc::SIGKILL)]);
        assert_eq!(s.timers(woke), Timers { stop: None, kill: None });
        s.step(at(woke), Event::Exited { sigkill: true });
        let Some(Stop::Lost { reason, .. }) = s.finish() else { panic!() };
        assert!(reason.contains("the lock on k ran out of validity, and its guard"), "{reason}");
    }

    /// found.rs (campaign freeze-all): redlock saw the command's SIGKILL
    /// before the guard's report of it. Past the guard's deadline, that
    /// SIGKILL is the guard's: lost (70), not 128+9.
    #[test]
    fn a_sigkill_seen_before_the_guard_s_report_is_the_guard_s_once_its_deadline_passed() {
        let (mut s, t0) = term();
        let guard = s.guard_at().unwrap();
        assert_eq!(guard, t0 + TTL - MARGIN / 2);
        s.step(at(guard), Event::Exited { sigkill: true });
        assert_eq!(stop_kind(s), Some(("lost", libc::SIGKILL, false)));
        // Before that deadline, a SIGKILL is someone else's: the status stands.
        let (mut s, _) = term();
        s.step(at(guard - MS), Event::Exited { sigkill: true });
        assert_eq!(stop_kind(s), None);
        // And a SIGTERM past it too: the guard sends SIGKILL only.
        let (mut s, _) = term();
        s.step(at(guard), Event::Exited { sigkill: false });
        assert_eq!(stop_kind(s), None);
    }

    /// A renewal moves the guard's deadline (so a slow but healthy run is
    /// never killed by it); it follows the last good deadline only, so a
    /// lost lock does not move it. With `--on-lost ignore` it never kills.
    #[test]
    fn each_renewal_moves_the_guard_and_a_lost_lock_does_not() {
        let (mut s, t0) = term();
        let later = t0 + TTL + TTL / 3;
        let actions = s.step(at(t0 + TTL / 3), Event::Health(Health::Held { deadline: later }));
        assert_eq!(actions[0], Action::Guard(Some(later - MARGIN / 2)));
        let actions = s.step(at(t0 + TTL / 3), failing(later));
        assert_eq!(actions[0], Action::Guard(Some(later - MARGIN / 2)));
        let actions = s.step(at(t0 + TTL / 2), lost(later));
        assert!(!actions.iter().any(|a| matches!(a, Action::Guard(_))), "{actions:?}");
        assert_eq!(s.guard_at(), Some(later - MARGIN / 2));
        let (mut s, t0) = supervision(OnLost::Ignore, None);
        assert_eq!(s.guard_at(), None);
        let actions = s.step(at(t0), Event::Health(Health::Held { deadline: t0 + TTL }));
        assert_eq!(actions[0], Action::Guard(None));
    }

    /// A lost lock stops the job with the `--on-lost` signal at once, and
    /// SIGKILL follows a grace later but never later than the margin
    /// before the deadline.
    #[test]
    fn a_lost_lock_stops_the_job_at_once_and_kills_it_margin_before_the_deadline() {
        let (mut s, t0) = supervision(OnLost::Signal(libc::SIGINT), None);
        let now = t0 + TTL / 2;
        s.step(at(now), lost(t0 + TTL));
        assert_eq!(s.timers(now).stop, Some(now));
        let actions = stop_due(&mut s, now, false);
        assert_eq!(actions[0], Action::Stop(libc::SIGINT));
        // Half the TTL left: the grace (10 s) fits, the margin bounds nothing.
        assert_eq!(s.timers(now).kill, Some(now + GRACE));
        // Renewals failing until grace + margin before the deadline.
        let (mut s, t0) = term();
        s.step(at(t0 + TTL / 3), failing(t0 + TTL));
        let due = t0 + TTL - GRACE - MARGIN;
        assert_eq!(s.timers(t0 + TTL / 3).stop, Some(due));
        let actions = stop_due(&mut s, due + 2 * GRACE / 3, false);
        let Action::Say(_, Note::Stopping { why, .. }) = &actions[1] else { panic!() };
        assert!(why.contains("could not renew in time (timed out)"), "{why}");
        // Late by two thirds of the grace: SIGKILL still comes margin
        // before the deadline, as planned when the timer was armed.
        assert_eq!(s.timers(due).kill, Some(t0 + TTL - MARGIN));
    }

    /// `--on-lost KILL`: the stop is the kill; no SIGKILL timer follows and
    /// the final line says SIGKILL once.
    #[test]
    fn on_lost_kill_sends_sigkill_once() {
        let (mut s, t0) = supervision(OnLost::Signal(libc::SIGKILL), None);
        s.step(at(t0), lost(t0 + TTL));
        assert_eq!(stop_due(&mut s, t0, false)[0], Action::Stop(libc::SIGKILL));
        assert_eq!(s.timers(t0).kill, None);
        assert_eq!(stop_kind(s), Some(("lost", libc::SIGKILL, false)));
    }

    /// run.rs, `--on-lost ignore`: a lost lock is a warning; the command
    /// runs on and keeps its status.
    #[test]
    fn on_lost_ignore_warns_and_never_stops_for_the_lock() {
        let (mut s, t0) = supervision(OnLost::Ignore, None);
        let actions = s.step(at(t0), lost(t0 + TTL));
        assert_eq!(
            actions,
            [Action::Say(
                Level::Warn,
                Note::Lost { reason: "extend k: not held".into(), ignored: true }
            )]
        );
        assert_eq!(s.timers(t0 + 2 * TTL), Timers { stop: None, kill: None });
        s.step(at(t0 + 2 * TTL), Event::Exited { sigkill: false });
        assert_eq!(stop_kind(s), None);
    }

    /// `--max-hold` before a lost lock: 124, and the loss that follows
    /// changes nothing (one stop, one verdict); under `--on-lost ignore`
    /// it still stops, with SIGTERM.
    #[test]
    fn max_hold_that_comes_first_decides_and_a_later_loss_changes_nothing() {
        let (mut s, t0) = supervision(OnLost::Signal(libc::SIGTERM), Some(Duration::from_secs(5)));
        let hold = t0 + Duration::from_secs(5);
        assert_eq!(s.timers(t0).stop, Some(hold));
        let actions = stop_due(&mut s, hold, false);
        assert_eq!(actions[0], Action::Stop(libc::SIGTERM));
        let Action::Say(Level::Warn, Note::Stopping { why, .. }) = &actions[1] else { panic!() };
        assert_eq!(why, "--max-hold ran out on k");
        let actions = s.step(at(hold + MS), lost(t0 + TTL));
        assert!(!actions.iter().any(|a| matches!(a, Action::Stop(_))), "{actions:?}");
        assert_eq!(s.timers(hold + MS).stop, None);
        s.step(at(hold + GRACE), Event::KillDue);
        assert_eq!(stop_kind(s), Some(("max-hold", libc::SIGTERM, true)));
        let (mut s, t0) = supervision(OnLost::Ignore, Some(Duration::from_secs(5)));
        let hold = t0 + Duration::from_secs(5);
        assert_eq!(stop_due(&mut s, hold, false)[0], Action::Stop(libc::SIGTERM));
        assert_eq!(s.timers(hold).kill, Some(hold + GRACE));
        assert_eq!(stop_kind(s), Some(("max-hold", libc::SIGTERM, false)));
    }

    /// A lost lock before `--max-hold` is 70, and so is a tie: the lock's
    /// stop is the one that keeps another holder safe. Its SIGKILL keeps
    /// the lock's bound, not the max-hold's.
    #[test]
    fn a_lost_lock_before_max_hold_or_with_it_is_lost() {
        let (mut s, t0) = supervision(OnLost::Signal(libc::SIGTERM), Some(Duration::from_secs(5)));
        let now = t0 + Duration::from_secs(2);
        s.step(at(now), lost(t0 + TTL));
        stop_due(&mut s, now, false);
        assert_eq!(s.timers(now + Duration::from_secs(3)).stop, None, "one stop only");
        assert_eq!(stop_kind(s), Some(("lost", libc::SIGTERM, false)));
        let (mut s, t0) = supervision(OnLost::Signal(libc::SIGTERM), Some(Duration::from_secs(5)));
        let hold = t0 + Duration::from_secs(5);
        s.step(at(hold), lost(t0 + TTL));
        stop_due(&mut s, hold, false);
        assert_eq!(stop_kind(s), Some(("lost", libc::SIGTERM, false)));
        // --max-hold seen late (redlock was frozen) with the lock about
        // to run out: SIGKILL by the lock's plan, margin before its
        // deadline, not a grace later.
        let (mut s, t0) = supervision(OnLost::Signal(libc::SIGTERM), Some(Duration::from_secs(5)));
        s.step(at(t0 + TTL / 3), failing(t0 + TTL));
        assert_eq!(s.timers(t0 + TTL / 3).stop, Some(t0 + Duration::from_secs(5)));
        let late = t0 + TTL - GRACE / 2;
        s.step(at(late), Event::StopDue { ended_by_itself: false });
        assert_eq!(s.timers(late).kill, Some(t0 + TTL - MARGIN));
        assert_eq!(stop_kind(s), Some(("max-hold", libc::SIGTERM, false)));
    }

    /// A signal while the job is being stopped for a lost lock is still
    /// forwarded, and the command dying of it is still a lost lock (70).
    #[test]
    fn a_signal_during_a_lost_lock_s_stop_is_forwarded_and_the_verdict_stays_lost() {
        let (mut s, t0) = term();
        s.step(at(t0), lost(t0 + TTL));
        stop_due(&mut s, t0, false);
        assert_eq!(s.step(at(t0), Event::Signal(libc::SIGINT)), [Action::Forward(libc::SIGINT)]);
        s.step(at(t0 + MS), Event::Exited { sigkill: false });
        assert_eq!(stop_kind(s), Some(("lost", libc::SIGTERM, false)));
    }

    /// A command that dies of a forwarded signal as the lock is lost, but
    /// before redlock's stop, keeps its status (128+N): only a stop redlock
    /// or its guard made turns an exit into 70.
    #[test]
    fn a_command_ended_by_a_forwarded_signal_before_the_stop_keeps_its_status() {
        let (mut s, t0) = term();
        assert_eq!(s.step(at(t0), Event::Signal(libc::SIGTERM)), [Action::Forward(libc::SIGTERM)]);
        s.step(at(t0), lost(t0 + TTL));
        s.timers(t0);
        s.step(at(t0), Event::Exited { sigkill: false });
        assert_eq!(stop_kind(s), None);
    }

    /// The guard firing after redlock began stopping the job changes
    /// nothing: the stop and its signal stand.
    #[test]
    fn the_guard_after_redlock_s_own_stop_changes_nothing() {
        let (mut s, t0) = term();
        s.step(at(t0), lost(t0 + TTL));
        stop_due(&mut s, t0, false);
        assert!(s.stopping());
        assert_eq!(s.step(at(t0 + TTL), Event::GuardFired { ended_by_itself: false }), []);
        s.step(at(t0 + TTL), Event::Exited { sigkill: true });
        assert_eq!(stop_kind(s), Some(("lost", libc::SIGTERM, false)));
    }

    /// run.rs, a lost lock prints two lines: with renewals failing, the
    /// first failure warns, the rest and the stop are -v; without, the stop
    /// warns and the watchdog's "lost" is -v. A recovery is a warning.
    #[test]
    fn a_lost_lock_warns_once() {
        let level = |actions: &[Action]| match actions.last() {
            Some(Action::Say(level, _)) => *level,
            other => panic!("{other:?}"),
        };
        let (mut s, t0) = term();
        assert_eq!(level(&s.step(at(t0), failing(t0 + TTL))), Level::Warn);
        assert_eq!(level(&s.step(at(t0), failing(t0 + TTL))), Level::Debug);
        let actions = s.step(at(t0), Event::Health(Health::Held { deadline: t0 + TTL }));
        assert!(matches!(
            actions[1],
            Action::Say(Level::Warn, Note::Renewed { recovered: true, .. })
        ));
        let actions = s.step(at(t0), Event::Health(Health::Held { deadline: t0 + TTL }));
        assert!(matches!(
            actions[1],
            Action::Say(Level::Info, Note::Renewed { recovered: false, .. })
        ));
        s.step(at(t0), failing(t0 + TTL));
        assert_eq!(level(&s.step(at(t0), lost(t0 + TTL))), Level::Info);
        assert_eq!(level(&stop_due(&mut s, t0, false)), Level::Info);
        let (mut s, t0) = term();
        assert_eq!(level(&s.step(at(t0), lost(t0 + TTL))), Level::Info);
        assert_eq!(level(&stop_due(&mut s, t0, false)), Level::Warn);
    }

    /// A SIGKILL timer runs out once; one not armed does nothing.
    #[test]
    fn a_kill_comes_only_after_a_stop() {
        let (mut s, t0) = term();
        assert_eq!(s.step(at(t0), Event::KillDue), []);
        s.step(at(t0), lost(t0 + TTL));
        stop_due(&mut s, t0, false);
        assert_eq!(s.step(at(t0 + GRACE), Event::KillDue).len(), 2);
        assert_eq!(s.step(at(t0 + GRACE), Event::KillDue), []);
        assert_eq!(s.timers(t0 + GRACE).kill, None);
    }
}
