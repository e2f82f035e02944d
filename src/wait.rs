//! Taking a lock with retries: one attempt per round, jittered exponential
//! backoff between rounds, never sleeping past the holder's remaining TTL,
//! and never past the `--wait` deadline. A waiter subscribes to the key's
//! release channel on every server after its first busy answer, so that a
//! release wakes it at once; a missed message costs one backoff step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use serde_json::json;

use crate::config::{Request, Wait};
use crate::error::Error;
use crate::exit;
use crate::lock::{Attempt, Fleet, Lock};
use crate::output::{Level, Log};
use crate::signals::Signals;
use crate::token::Token;

/// The first pause between attempts.
pub const FIRST_PAUSE: Duration = Duration::from_millis(25);
/// The longest pause between attempts.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Jittered exponential backoff: each pause is drawn from the upper half of
/// a window that doubles from [`FIRST_PAUSE`] up to [`MAX_PAUSE`], so a fleet
/// of waiters spreads out instead of retrying in step.
#[derive(Debug)]
pub struct Backoff {
    window: Duration,
}

impl Backoff {
    /// A backoff at its first step.
    pub fn new() -> Backoff {
        Backoff { window: FIRST_PAUSE }
    }

    /// The next pause.
    pub fn next_pause(&mut self) -> Duration {
        let window = self.window;
        self.window = (self.window * 2).min(MAX_PAUSE);
        window / 2 + window.mul_f64(fastrand::f64() / 2.0)
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new()
    }
}

/// Wakes a waiter when a release of the key is announced on any server.
/// Every server announces the same release (its token), so the waiter
/// wakes once per release, not once per server: a second wake would cost
/// an attempt doomed to meet the next holder.
struct Wake {
    /// The last release heard: its token.
    released: watch::Receiver<Vec<u8>>,
    listeners: Vec<JoinHandle<()>>,
}

impl Wake {
    /// Subscribes to `key`'s release channel, in the background, on the
    /// first `servers - quorum + 1` servers: a release that succeeds is
    /// announced by a quorum, and every quorum includes one of them.
    /// Listening to more only multiplies the messages (contention bench: 8
    /// waiters on 5 servers, 555-613 -> 693-722 sections/s). A server that
    /// cannot subscribe just never wakes us; backoff covers what we miss.
    fn subscribe(fleet: &Fleet, key: &str, log: &Log) -> Wake {
        let (tx, released) = watch::channel(Vec::new());
        let tx = Arc::new(tx);
        let channel = crate::lock::release_channel(key);
        let n = fleet.servers().len();
        let ears = (n + 1).saturating_sub(fleet.quorum()).min(n);
        let listeners = fleet.servers()[..ears]
            .iter()
            .map(|server| {
                let (server, tx, channel, log) =
                    (Arc::clone(server), Arc::clone(&tx), channel.clone(), *log);
                tokio::spawn(async move {
                    match server.subscribe(&channel).await {
                        Ok(pubsub) => {
                            let mut messages = pubsub.into_on_message();
                            while let Some(message) = messages.next().await {
                                let token = message.get_payload_bytes().to_vec();
                                tx.send_if_modified(|last| {
                                    let new = *last != token;
                                    *last = token;
                                    new
                                });
                            }
                        }
                        Err(e) => log.debug(&format!("no release notifications: {e}")),
                    }
                })
            })
            .collect();
        Wake { released, listeners }
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        for listener in &self.listeners {
            listener.abort();
        }
    }
}

/// The next signal, or never when signals are not being caught.
async fn next_signal(signals: &mut Option<&mut Signals>) -> i32 {
    match signals {
        Some(signals) => signals.recv().await,
        None => std::future::pending().await,
    }
}

/// Takes the lock of `request`, retrying as its wait allows. Each attempt
/// uses a fresh token, so the holder facts say when the lock was really
/// taken. When the wait runs out, the error is what the last attempt saw
/// (busy or unavailable); configuration errors (auth, TLS, WRONGTYPE) end it
/// at once. A signal from `signals` ends the wait between attempts
/// ([`Error::Interrupted`]); an attempt itself is never cut short, so it
/// never leaves a half-taken lock behind.
pub async fn acquire(
    fleet: &Fleet,
    request: &Request,
    log: &Log,
    mut signals: Option<&mut Signals>,
) -> Result<Lock, Error> {
    let Request { key, ttl, wait, fence } = request;
    let (key, ttl) = (key.as_str(), *ttl);
    let shown = crate::display_key(key.as_bytes());
    let start = Instant::now();
    let deadline = match wait {
        Wait::Once => Some(start),
        Wait::For(d) => Some(start + *d),
        Wait::Forever => None,
    };
    let mut backoff = Backoff::new();
    let mut wait_report = WaitReport::default();
    let mut attempts = 0u32;
    let mut wake: Option<Wake> = None;
    loop {
        attempts += 1;
        let token = Token::new().to_string();
        let report = fleet.try_acquire(key, &token, ttl, *fence).await;
        let outcome = match &report.attempt {
            Attempt::Acquired(_) => "acquired",
            Attempt::Busy(_) => "busy",
            Attempt::Unavailable(_) => "unavailable",
        };
        log.event(
            Level::Info,
            "acquire_attempt",
            &format!("attempt {attempts} on {shown}: {outcome}"),
            json!({ "key": key, "attempt": attempts, "outcome": outcome, "servers": report.servers }),
        );
        let (last, holder_left) = match report.attempt {
            Attempt::Acquired(lock) => {
                unreachable_servers(log, key, &report.servers);
                let waited = start.elapsed();
                wait_report.acquired(log, key, waited, attempts);
                log.event(
                    Level::Info,
                    "acquired",
                    &format!(
                        "acquired {shown} on {}/{} servers after {attempts} attempt(s) in {}, valid for {}{}",
                        lock.granted.0,
                        lock.granted.1,
                        crate::fmt_duration(waited),
                        crate::fmt_duration(lock.validity),
                        lock.fence.map_or_else(String::new, |f| format!(", fence {f}")),
                    ),
                    json!({
                        "key": key,
                        "quorum": fleet.quorum(),
                        "granted": lock.granted.0,
                        "servers": lock.granted.1,
                        "validity_ms": crate::millis(lock.validity),
                        "fence": lock.fence,
                        "waited_ms": crate::millis(waited),
                        "attempts": attempts,
                    }),
                );
                return Ok(lock);
            }
            Attempt::Busy(holder) => {
                let message = holder.describe(key);
                (Error::Busy { message, code: exit::BUSY }, holder.remaining)
            }
            Attempt::Unavailable(e) => {
                if matches!(e, Error::Unavailable { config: true, .. }) {
                    return Err(e);
                }
                (e, None)
            }
        };
        let left = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => Duration::MAX,
        };
        if left.is_zero() {
            return Err(last);
        }
        let mut pause = backoff.next_pause().min(left);
        if let Some(holder_left) = holder_left {
            // Never sleep past the moment the holder's lock expires.
            pause = pause.min(holder_left.max(Duration::from_millis(1)));
        }
        log.debug(&format!(
            "attempt {attempts}: {last}; retrying in {}",
            crate::fmt_duration(pause)
        ));
        wait_report.waiting(log, key, &last, start.elapsed(), left);
        let wake = wake.get_or_insert_with(|| Wake::subscribe(fleet, key, log));
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = wake.released.changed() => log.debug("woken by a release"),
            signal = next_signal(&mut signals) => {
                return Err(Error::Interrupted(
                    signal,
                    format!("while waiting for {}", crate::display_key(key.as_bytes())),
                ));
            }
        }
    }
}

/// When the first progress line of a wait is written, and then how often.
pub const FIRST_PROGRESS: Duration = Duration::from_secs(10);
/// The interval between progress lines after the first.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// The lines a wait writes without `-v` (none with `-q`): one when it
/// begins (who holds the lock, or which servers fail), one now and then
/// while it lasts, one when the lock is taken. A CI log that waits 15
/// minutes says why; the per-attempt lines stay at `-vv`.
#[derive(Debug, Default)]
struct WaitReport {
    /// When the next progress line is due (from the start of the wait);
    /// `None` until the wait has begun.
    next: Option<Duration>,
}

impl WaitReport {
    /// After an attempt that did not take the lock, `elapsed` into the wait
    /// with `left` to go (`Duration::MAX`: no bound).
    fn waiting(&mut self, log: &Log, key: &str, last: &Error, elapsed: Duration, left: Duration) {
        let shown = crate::display_key(key.as_bytes());
        let bound = if left == Duration::MAX {
            "until it is free".to_owned()
        } else {
            format!("at most {} more", crate::fmt_duration(left))
        };
        let (event, message) = match self.next {
            None => {
                self.next = Some(FIRST_PROGRESS);
                ("waiting", format!("waiting for {shown} ({bound}): {last}"))
            }
            Some(due) if elapsed >= due => {
                self.next = Some(elapsed + PROGRESS_EVERY);
                (
                    "still_waiting",
                    format!(
                        "still waiting for {shown} after {} ({bound}): {last}",
                        crate::fmt_duration(elapsed)
                    ),
                )
            }
            Some(_) => return,
        };
        let left_ms = (left != Duration::MAX).then(|| crate::millis(left));
        log.event(
            Level::Notice,
            event,
            &message,
            json!({ "key": key, "waited_ms": crate::millis(elapsed), "left_ms": left_ms, "reason": last.to_string() }),
        );
    }

    /// The lock was taken after `waited`: one line, if the wait was reported.
    fn acquired(&self, log: &Log, key: &str, waited: Duration, attempts: u32) {
        if self.next.is_none() {
            return;
        }
        log.event(
            Level::Notice,
            "wait_ended",
            &format!(
                "acquired {} after waiting {} ({attempts} attempts)",
                crate::display_key(key.as_bytes()),
                crate::fmt_duration(waited)
            ),
            json!({ "key": key, "waited_ms": crate::millis(waited), "attempts": attempts }),
        );
    }
}

/// Warns (once, without `-v`) that the lock was taken with some servers
/// failing: the job runs, but one more failure would stop the next one.
fn unreachable_servers(log: &Log, key: &str, servers: &[crate::lock::ServerResult]) {
    let failed: Vec<String> = servers
        .iter()
        .filter_map(|s| s.result.strip_prefix("error: ").map(|e| format!("{}: {e}", s.server)))
        .collect();
    if failed.is_empty() {
        return;
    }
    log.event(
        Level::Warn,
        "servers_failed",
        &format!(
            "{} of {} servers failed while taking {}: {}",
            failed.len(),
            servers.len(),
            crate::display_key(key.as_bytes()),
            failed.join("; ")
        ),
        json!({ "key": key, "failed": failed }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_jittered_and_capped() {
        let mut b = Backoff::new();
        let pauses: Vec<Duration> = (0..10).map(|_| b.next_pause()).collect();
        let mut window = FIRST_PAUSE;
        for p in &pauses {
            assert!(*p >= window / 2 && *p <= window, "{p:?} outside {window:?}");
            window = (window * 2).min(MAX_PAUSE);
        }
        assert!(pauses[9] >= MAX_PAUSE / 2);
    }
}
