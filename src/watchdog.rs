//! Renewal of a held lock and its validity deadline.
//!
//! The watchdog renews every `renew_every` (default a third of the TTL) on
//! every server, and publishes the lock's [`Health`] on a watch channel:
//! the deadline until which the lock is certainly held, measured on the
//! boot clock ([`crate::clock`], suspended time counts) from the start of
//! the last successful renewal round minus the drift allowance. A failed round is retried promptly with
//! jittered backoff, not at the next tick. The watchdog only reports; the
//! supervisor decides what to do with the child ([`plan_stop`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::{BootInstant, Clock};
use crate::error::Error;
use crate::lock::{Fleet, Lock};
use crate::wait::Backoff;

/// What the watchdog knows about the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// The last renewal won a quorum; held until `deadline`.
    Held {
        /// End of validity.
        deadline: BootInstant,
    },
    /// Renewals are failing (servers unreachable); still held until
    /// `deadline`, the end of the last good round's validity.
    Failing {
        /// End of validity.
        deadline: BootInstant,
        /// The last renewal error.
        error: String,
    },
    /// The lock is gone: a quorum says this token no longer holds it, or
    /// the validity ran out before a renewal succeeded.
    Lost {
        /// End of the last known validity.
        deadline: BootInstant,
        /// Why.
        reason: String,
    },
}

impl Health {
    /// The end of the last known validity.
    pub fn deadline(&self) -> BootInstant {
        match self {
            Health::Held { deadline }
            | Health::Failing { deadline, .. }
            | Health::Lost { deadline, .. } => *deadline,
        }
    }
}

/// Starts renewing `lock`; the task ends when the lock is lost, or is
/// aborted by the caller when the child exits.
pub fn start(
    fleet: Arc<Fleet>,
    lock: Lock,
    renew_every: Duration,
    clock: Arc<Clock>,
) -> (watch::Receiver<Health>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(Health::Held { deadline: lock.deadline() });
    let task = tokio::spawn(renew(fleet, lock, renew_every, tx, clock));
    (rx, task)
}

async fn renew(
    fleet: Arc<Fleet>,
    lock: Lock,
    every: Duration,
    tx: watch::Sender<Health>,
    clock: Arc<Clock>,
) {
    let mut deadline = lock.deadline();
    let mut next = lock.since + every;
    let mut backoff = Backoff::new();
    loop {
        clock.sleep_until(next).await;
        match fleet.extend(&lock.key, lock.held(), lock.ttl).await {
            Ok(renewed) => {
                deadline = deadline.max(renewed.deadline());
                next = renewed.since + every;
                backoff = Backoff::new();
                tx.send_replace(Health::Held { deadline });
            }
            Err(Error::Lost(reason)) => {
                tx.send_replace(Health::Lost { deadline, reason });
                return;
            }
            Err(e) => {
                let now = clock.now();
                if now >= deadline {
                    let reason = format!("validity ran out while renewals failed: {e}");
                    tx.send_replace(Health::Lost { deadline, reason });
                    return;
                }
                tx.send_replace(Health::Failing { deadline, error: e.to_string() });
                next = now + backoff.next_pause();
            }
        }
    }
}

/// When the supervisor must begin stopping the child for a lost lock, and
/// when to follow with SIGKILL: the stop signal goes out `grace + margin`
/// before the deadline (at once when the lock is already lost), SIGKILL
/// `grace` later but never later than `margin` before the deadline, so the
/// child is dead before anyone else can hold the lock.
pub fn plan_stop(
    health: &Health,
    now: BootInstant,
    grace: Duration,
    margin: Duration,
) -> (BootInstant, BootInstant) {
    let deadline = health.deadline();
    let last_kill = deadline.checked_sub(margin).unwrap_or(now).max(now);
    let stop_at = match health {
        Health::Lost { .. } => now,
        _ => deadline.checked_sub(grace + margin).unwrap_or(now).max(now),
    };
    (stop_at, (stop_at + grace).min(last_kill))
}

/// How late the host may run redlock (a timer that fires late, answers
/// that wait for a CPU) without a healthy job being stopped: `run`'s
/// timing leaves this much room ([`Timing::check`]), a few times the
/// delays of a loaded small machine.
pub const SCHEDULING: Duration = Duration::from_millis(50);

/// The durations that decide whether a healthy job could be stopped.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// The lock's TTL.
    pub ttl: Duration,
    /// Time between renewals.
    pub renew_every: Duration,
    /// Time limit of one server call.
    pub node_timeout: Duration,
    /// Time between the `--on-lost` signal and SIGKILL.
    pub grace: Duration,
    /// How long before the deadline SIGKILL goes out at the latest.
    pub margin: Duration,
    /// The clock-drift allowance, `ttl * drift_factor + 2ms`.
    pub drift: Duration,
}

impl Timing {
    /// Checks that on healthy servers the planned stop can never come
    /// before the next renewal had its chance; `Err` says by how much.
    ///
    /// A renewal round starts `renew_every` after the start (`since`) of
    /// the last round that won, and on healthy servers ends within the node
    /// timeout. That last round's deadline is `since + ttl - elapsed -
    /// drift` with `elapsed` up to a node timeout, and the stop begins
    /// `grace + margin` before the deadline. So the next renewal is in
    /// before the stop when
    /// `renew_every + 2 * node_timeout + drift + grace + margin < ttl`,
    /// with [`SCHEDULING`] more for the host's own delays: a timer that
    /// fires late, a round whose answers wait for a CPU. With the defaults
    /// (renewal every ttl/3, node timeout ttl/10 at most 1 s, grace ttl/3
    /// at most 10 s, margin ttl/20 from 5 ms to 1 s, drift 1% + 2 ms) that
    /// holds for every TTL from about 720 ms up; below, `run` refuses the
    /// TTL rather than stop a healthy job on a busy host. What breaks it: a
    /// host that delays redlock by more than [`SCHEDULING`] on top of a
    /// slow server; the guard then stops the job in time, as for a lost
    /// lock.
    pub fn check(&self) -> Result<(), String> {
        let needed =
            self.renew_every + self.node_timeout * 2 + self.drift + self.grace + self.margin;
        if needed + SCHEDULING < self.ttl {
            return Ok(());
        }
        let f = crate::text::fmt_duration;
        Err(format!(
            "renewal every {} + 2 x node timeout {} + drift allowance {} + kill grace {} + kill margin {} \
             + {} for the host's scheduling = {} is not below the TTL {}: a healthy job would be stopped \
             before its next renewal (a longer --ttl fits)",
            f(self.renew_every),
            f(self.node_timeout),
            f(self.drift),
            f(self.grace),
            f(self.margin),
            f(SCHEDULING),
            f(needed + SCHEDULING),
            f(self.ttl),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_leaves_grace_and_kill_precedes_the_deadline() {
        let now = BootInstant::now();
        let deadline = now + Duration::from_secs(10);
        let (grace, margin) = (Duration::from_secs(3), Duration::from_millis(500));
        let held = Health::Held { deadline };
        let (stop, kill) = plan_stop(&held, now, grace, margin);
        assert_eq!(stop, deadline - grace - margin);
        assert_eq!(kill, deadline - margin);

        let lost = Health::Lost { deadline, reason: String::new() };
        let (stop, kill) = plan_stop(&lost, now, grace, margin);
        assert_eq!(stop, now);
        assert_eq!(kill, now + grace);

        // Too late for the full grace: stop now, kill before the deadline.
        let soon = Health::Failing { deadline: now + Duration::from_secs(1), error: String::new() };
        let (stop, kill) = plan_stop(&soon, now, grace, margin);
        assert_eq!(stop, now);
        assert_eq!(kill, now + Duration::from_millis(500));
    }

    #[test]
    fn default_timings_hold_from_about_a_second_and_bad_flags_do_not() {
        let defaults = |ms: u64| {
            let ttl = Duration::from_millis(ms);
            Timing {
                ttl,
                renew_every: ttl / 3,
                node_timeout: (ttl / 10).clamp(Duration::from_millis(1), Duration::from_secs(1)),
                grace: (ttl / 3).min(Duration::from_secs(10)),
                margin: (ttl / 20).clamp(Duration::from_millis(5), Duration::from_secs(1)),
                drift: ttl.mul_f64(0.01) + Duration::from_millis(2),
            }
        };
        for ms in [720, 1_000, 3_000, 30_000, 3_600_000, 365 * 86_400_000] {
            assert!(defaults(ms).check().is_ok(), "{ms} ms");
        }
        // Below 720 ms too little is left for the host's own delays: a
        // loaded machine would stop a healthy job as lost.
        for ms in [15, 60, 600, 700] {
            assert!(defaults(ms).check().is_err(), "{ms} ms");
        }
        let kill_after = Timing { grace: Duration::from_secs(2), ..defaults(3_000) };
        assert!(kill_after.check().is_err());
        let renew = Timing { renew_every: Duration::from_millis(2_500), ..defaults(3_000) };
        assert!(renew.check().is_err());
        let long_grace = Timing { grace: Duration::from_secs(20), ..defaults(30_000) };
        assert!(long_grace.check().is_err());
    }
}
