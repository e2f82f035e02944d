//! `redlock run`: take the lock, run the command under it, renew the lock
//! while the command runs, stop the command before anyone else could hold
//! the lock, and give the lock back (or keep it, `--keep`) when it ends.
//!
//! One `select!` loop decides everything while the command runs: its exit,
//! signals to forward, the watchdog's reports, and the stop and kill
//! deadlines derived from them ([`watchdog::plan_stop`]).

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::sync::watch;

use crate::child::{self, Child};
use crate::clock::{BootInstant, Clock};
use crate::config::{OnLost, Run};
use crate::error::Error;
use crate::exit;
use crate::lock::{Fleet, Lock};
use crate::output::{Level, Log};
use crate::signals::{self, Signals};
use crate::watchdog::{self, Health};

/// Why redlock stopped the command.
enum Stop {
    /// The lock was lost (or was about to be, with renewals failing).
    Lost {
        /// What the watchdog said.
        reason: String,
        /// When redlock began stopping the command.
        at: SystemTime,
        /// The signal sent first.
        signal: i32,
    },
    /// `--max-hold` ran out.
    MaxHold {
        /// The signal sent first.
        signal: i32,
    },
}

/// Runs the command under the lock; `Ok` is the command's own exit code.
pub async fn run(fleet: Arc<Fleet>, cfg: Run, log: &Log) -> Result<u8, Error> {
    let mut signals = Signals::install().map_err(|e| Error::CannotRun {
        code: exit::CANNOT_EXECUTE,
        message: format!("cannot catch signals: {e}"),
    })?;
    if let Some(jitter) = cfg.jitter {
        let pause = jitter.mul_f64(fastrand::f64());
        log.info(&format!("--jitter: sleeping {}", crate::fmt_duration(pause)));
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            signal = signals.recv() => {
                return Err(Error::Interrupted(signal, "during --jitter".to_owned()));
            }
        }
    }
    if reentry(&fleet, &cfg.key).await {
        log.info(&format!(
            "{} is already held by this job (REDLOCK_TOKEN); running the command directly",
            crate::display_key(cfg.key.as_bytes())
        ));
        let mut child = child::spawn(&cfg.argv, &[])?;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                signal = signals.recv() => forward(&child, signal, log),
            }
        };
        return exit_status(status, &cfg.argv);
    }

    let lock = match crate::wait::acquire(&fleet, &cfg.request(), log, Some(&mut signals)).await {
        Ok(lock) => lock,
        Err(Error::Busy { message, .. }) => {
            return Err(Error::Busy { message, code: cfg.conflict_exit_code });
        }
        Err(e) => return Err(e),
    };
    if let Some(signal) = signals.try_recv() {
        release(&fleet, &lock, log).await;
        return Err(Error::Interrupted(signal, "before the command started".to_owned()));
    }
    let fence = lock.fence.map(|f| f.to_string());
    let mut env = vec![("REDLOCK_KEY", cfg.key.as_str()), ("REDLOCK_TOKEN", lock.token.as_str())];
    if let Some(fence) = &fence {
        env.push(("REDLOCK_FENCE", fence));
    }
    let mut child = match child::spawn(&cfg.argv, &env) {
        Ok(child) => child,
        Err(e) => {
            release(&fleet, &lock, log).await;
            return Err(e);
        }
    };
    log.event(
        Level::Info,
        "child_started",
        &format!("started {:?} as pid {}", cfg.argv[0], child.pid()),
        json!({ "pid": child.pid(), "program": cfg.argv[0] }),
    );
    let clock = Arc::new(Clock::new());
    let (health, watchdog) =
        watchdog::start(Arc::clone(&fleet), lock.clone(), cfg.renew_every, Arc::clone(&clock));
    let (status, stop) =
        supervise(&mut child, &mut signals, health, &cfg, &lock, log, &clock).await;
    // Renewal never outlives the command.
    watchdog.abort();
    if let Ok(status) = &status {
        let (code, signal) = (status.code(), status.signal());
        log.event(
            Level::Info,
            "child_exited",
            &format!(
                "the command exited with {} after holding the lock for {}",
                child::exit_code(*status),
                crate::fmt_duration(lock.since.elapsed())
            ),
            json!({
                "pid": child.pid(),
                "code": code,
                "signal": signal,
                "exit_code": child::exit_code(*status),
                "held_ms": crate::millis(lock.since.elapsed()),
            }),
        );
    }
    // After a lost lock the validity is nearly over: no grace for leftovers.
    let grace = match stop {
        Some(Stop::Lost { .. }) => Duration::ZERO,
        _ => cfg.grace().min(Duration::from_secs(1)),
    };
    if child.stop_leftovers(grace).await {
        log.warn(
            "the command left processes running; stopped them, as they would run without the lock",
        );
    }
    finish(&fleet, &cfg, &lock, log).await;
    let shown = crate::display_key(cfg.key.as_bytes());
    match stop {
        Some(Stop::Lost { reason, at, signal }) => Err(Error::Lost(format!(
            "lost the lock on {shown} at {}: {reason}; stopped the command with {}",
            humantime::format_rfc3339_seconds(at),
            signals::name(signal)
        ))),
        Some(Stop::MaxHold { signal }) => Err(Error::MaxHold(format!(
            "--max-hold {} ran out; stopped the command with {}",
            crate::fmt_duration(cfg.max_hold.unwrap_or_default()),
            signals::name(signal)
        ))),
        None => exit_status(status, &cfg.argv),
    }
}

/// True when this process runs inside a `redlock run` that holds `key`
/// (its `REDLOCK_KEY` and `REDLOCK_TOKEN`) and the lock is still held by
/// that token on a quorum: waiting would be waiting on ourselves.
async fn reentry(fleet: &Fleet, key: &str) -> bool {
    let (Ok(held_key), Ok(token)) = (std::env::var("REDLOCK_KEY"), std::env::var("REDLOCK_TOKEN"))
    else {
        return false;
    };
    if held_key != key || token.is_empty() {
        return false;
    }
    let status = fleet.status(key).await;
    status.holder.is_some_and(|(value, _)| value == token)
}

fn forward(child: &Child, signal: i32, log: &Log) {
    log.event(
        Level::Info,
        "signal_forwarded",
        &format!("forwarding {} to the command", signals::name(signal)),
        json!({ "signal": signals::name(signal), "pid": child.pid() }),
    );
    child.signal(signal);
}

fn exit_status(status: io::Result<ExitStatus>, argv: &[String]) -> Result<u8, Error> {
    status.map(child::exit_code).map_err(|e| Error::CannotRun {
        code: exit::CANNOT_EXECUTE,
        message: format!("lost track of {:?}: {e}", argv[0]),
    })
}

/// Watches the command until it exits; returns its status and whether
/// redlock stopped it.
async fn supervise(
    child: &mut Child,
    signals: &mut Signals,
    mut health: watch::Receiver<Health>,
    cfg: &Run,
    lock: &Lock,
    log: &Log,
    clock: &Clock,
) -> (io::Result<ExitStatus>, Option<Stop>) {
    let (grace, margin) = (cfg.grace(), cfg.kill_margin());
    let max_hold_at = cfg.max_hold.map(|d| lock.since + d);
    let shown = crate::display_key(cfg.key.as_bytes());
    let mut stop: Option<Stop> = None;
    let mut kill_at: Option<BootInstant> = None;
    let mut watching = true;
    let mut was_failing = false;
    loop {
        let now = clock.now();
        let current = health.borrow().clone();
        let (lost_stop_at, lost_kill_at) = watchdog::plan_stop(&current, now, grace, margin);
        // The next moment to begin stopping, and whether it is for max-hold.
        let begin: Option<(BootInstant, bool)> = if stop.is_some() {
            None
        } else {
            let lost = match cfg.on_lost {
                OnLost::Signal(_) => Some((lost_stop_at, false)),
                OnLost::Ignore => None,
            };
            let max_hold = max_hold_at.map(|at| (at, true));
            [lost, max_hold].into_iter().flatten().min_by_key(|(at, _)| *at)
        };
        // A timer that never fires stands in for "no deadline".
        let never = now + Duration::from_secs(365 * 24 * 3600);
        tokio::select! {
            status = child.wait() => return (status, stop),
            signal = signals.recv() => forward(child, signal, log),
            changed = health.changed(), if watching => {
                if changed.is_err() {
                    watching = false;
                    continue;
                }
                let now_health = health.borrow().clone();
                match now_health {
                    Health::Held { deadline } => {
                        let left = deadline.saturating_duration_since(clock.now());
                        let recovered = if was_failing { " (recovered)" } else { "" };
                        log.event(
                            if was_failing { Level::Warn } else { Level::Info },
                            "renewed",
                            &format!("renewed {shown}, valid for {}{recovered}", crate::fmt_duration(left)),
                            json!({ "key": cfg.key, "validity_ms": crate::millis(left) }),
                        );
                        was_failing = false;
                    }
                    Health::Failing { deadline, error } => {
                        let left = deadline.saturating_duration_since(clock.now());
                        log.event(
                            if was_failing { Level::Debug } else { Level::Warn },
                            "renewal_failed",
                            &format!(
                                "renewing {shown} failed ({error}); retrying, {} of validity left",
                                crate::fmt_duration(left)
                            ),
                            json!({ "key": cfg.key, "error": error, "validity_left_ms": crate::millis(left) }),
                        );
                        was_failing = true;
                    }
                    Health::Lost { reason, .. } => {
                        let ignored = cfg.on_lost == OnLost::Ignore;
                        let then = if ignored {
                            "; --on-lost ignore keeps the command running"
                        } else {
                            "; stopping the command"
                        };
                        log.event(
                            Level::Warn,
                            "lost",
                            &format!("lost the lock on {shown}: {reason}{then}"),
                            json!({ "key": cfg.key, "reason": reason, "ignored": ignored }),
                        );
                    }
                }
            }
            () = clock.sleep_until(begin.map_or(never, |(at, _)| at)), if begin.is_some() => {
                let for_max_hold = begin.is_some_and(|(_, m)| m);
                let signal = match cfg.on_lost {
                    OnLost::Signal(signal) => signal,
                    OnLost::Ignore => libc::SIGTERM,
                };
                let now = clock.now();
                let kill = match cfg.on_lost {
                    OnLost::Signal(_) => (now + grace).min(lost_kill_at),
                    OnLost::Ignore => now + grace,
                };
                child.signal(signal);
                if signal != libc::SIGKILL {
                    kill_at = Some(kill);
                }
                let why = if for_max_hold {
                    stop = Some(Stop::MaxHold { signal });
                    "--max-hold ran out".to_owned()
                } else {
                    let reason = match &current {
                        Health::Lost { reason, .. } => reason.clone(),
                        Health::Failing { error, .. } => format!("could not renew in time ({error})"),
                        Health::Held { .. } => "its validity ran out".to_owned(),
                    };
                    stop = Some(Stop::Lost { reason: reason.clone(), at: SystemTime::now(), signal });
                    format!("losing the lock on {shown} ({reason})")
                };
                let kill_in = kill.saturating_duration_since(now);
                log.event(
                    Level::Warn,
                    "stopping",
                    &format!(
                        "{why}; sent {} to the command, SIGKILL in {}",
                        signals::name(signal),
                        crate::fmt_duration(kill_in)
                    ),
                    json!({
                        "pid": child.pid(),
                        "reason": why,
                        "signal": signals::name(signal),
                        "kill_in_ms": crate::millis(kill_in),
                    }),
                );
            }
            () = clock.sleep_until(kill_at.unwrap_or(never)), if kill_at.is_some() => {
                log.event(
                    Level::Warn,
                    "killed",
                    "the command is still running; sent SIGKILL",
                    json!({ "pid": child.pid() }),
                );
                child.signal(libc::SIGKILL);
                kill_at = None;
            }
        }
    }
}

/// Ends the hold: with `--keep`, shortens the lock's TTL to what is left of
/// the keep time instead of deleting it; otherwise releases it everywhere.
/// Failures are warnings: the exit code stays the command's.
async fn finish(fleet: &Fleet, cfg: &Run, lock: &Lock, log: &Log) {
    if let Some(keep) = cfg.keep {
        // A renewal the aborted watchdog left in flight must land before
        // the shortening, or it would stretch the lock back to a full TTL.
        fleet.drain().await;
        let left = (lock.since + keep).saturating_duration_since(BootInstant::now());
        if left >= Duration::from_millis(1) {
            match fleet.extend(&lock.key, &lock.token, left).await {
                Ok(_) => {
                    log.event(
                        Level::Info,
                        "kept",
                        &format!(
                            "--keep: the lock stays for another {}",
                            crate::fmt_duration(left)
                        ),
                        json!({ "key": lock.key, "kept_ms": crate::millis(left) }),
                    );
                    return;
                }
                Err(e) => log.warn(&format!("--keep: {e}; releasing instead")),
            }
        }
    }
    release(fleet, lock, log).await;
}

async fn release(fleet: &Fleet, lock: &Lock, log: &Log) {
    match fleet.release(&lock.key, &lock.token).await {
        Ok(servers) => super::released(log, &lock.key, &servers),
        Err(e) => log.warn(&format!("release: {e}")),
    }
}
