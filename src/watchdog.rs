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
        match fleet.extend(&lock.key, &lock.token, lock.ttl).await {
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
}
