//! `redlock hold`: a freeze. Takes the key for `--for`, keeps it by
//! renewal within `--max-ttl`, takes it back after a loss, and ends at its
//! deadline, on a signal, or when someone else deletes it with `release
//! --force`.
//!
//! # Theory of operation
//! The freeze is an ordinary exclusive lock whose token says when the
//! freeze ends (`~until=`, [`crate::token`]), so every waiter's busy line
//! and `status` show its note and end, and a `--cron`/`--once-per` run of
//! the key skips its tick as paused ([`crate::lock::Tick::paused_by`]).
//! Its TTL is at most `--max-ttl`: a restarted server waits that long
//! before it votes again, whatever the freeze's length. The watchdog
//! ([`crate::watchdog`]) renews it every third of the TTL and reports its
//! health; this loop only decides what a report means ([`judge`]):
//! - **lost**: renewals failed until the validity ended (servers down or
//!   in their restart window), or a quorum found the token gone after it
//!   ended (redlock frozen past it), or its end or a signal came after the
//!   validity ended with no renewal and a quorum no longer holds the token
//!   ([`Freeze::lapsed`]: it ends there, the gap recorded). Between the
//!   validity's end and the retake the key is not frozen: anyone may take
//!   it. The freeze says so, waits in the queue as soon as the wait can
//!   (jittered backoff, a release heard), and records the gap in the
//!   history with whoever held the key meanwhile
//!   ([`history::Outcome::Gap`]).
//! - **released by force**: a quorum found the token gone while its
//!   validity had not ended. Only a compare-and-delete of that token does
//!   that on a quorum of servers that kept their data: `release --force`.
//!   The freeze ends (exit 70) and is not taken back: a person ended it.
//!
//! The freeze's end is measured on the boot clock from its start
//! (suspended time counts), and shown as the wall-clock instant it was
//! then. Signals only enqueue ([`Signals`]); SIGTERM, SIGINT, SIGHUP and
//! SIGQUIT end the freeze (release at once, exit 0: it is how systemd
//! stops a unit and how a person ends a freeze early); SIGUSR1 and SIGUSR2
//! are ignored.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::sync::watch;

use crate::clock::{BootInstant, Clock};
use crate::config::Hold;
use crate::error::Error;
use crate::exit;
use crate::history::{self, Entry, Meanwhile, Outcome};
use crate::lock::{Fleet, Lock, ServerView, Wait};
use crate::output::{Level, Log};
use crate::signals::{self, Signals};
use crate::token::Token;
use crate::watchdog::{self, Health};

/// How often a freeze that lost its key looks at who holds it, for the
/// gap's record: a holder shorter than this between two looks is named
/// only if its run left a history entry.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// One freeze: what every step of it needs.
struct Freeze<'a> {
    /// The servers.
    fleet: Arc<Fleet>,
    /// Its settings.
    cfg: &'a Hold,
    /// The boot clock its end and the lock's validity are measured on.
    clock: Arc<Clock>,
    /// Its end, on the boot clock.
    end: BootInstant,
    /// Its end, as the wall-clock time it was at the start.
    until: SystemTime,
    /// The key for messages.
    shown: String,
    /// Where messages go.
    log: &'a Log,
}

/// How a loss ended ([`Freeze::take_back`]).
enum Back {
    /// Taken back: keep it.
    Taken(Lock),
    /// The freeze is over, with this result.
    Over(Result<u8, Error>),
}

/// Holds the freeze; `Ok` is the exit code.
pub async fn hold(fleet: Arc<Fleet>, cfg: Hold, log: &Log) -> Result<u8, Error> {
    let mut signals = Signals::install().map_err(|e| Error::CannotRun {
        code: exit::CANNOT_EXECUTE,
        message: format!("cannot catch signals: {e}"),
    })?;
    let clock = Arc::new(Clock::new());
    let end = clock.now() + cfg.length;
    let until = SystemTime::now() + cfg.length;
    let shown = crate::text::display_key(cfg.key.as_bytes());
    let freeze = Freeze { fleet, cfg: &cfg, clock, end, until, shown, log };
    let mut lock = freeze.take(cfg.wait, &mut signals).await?;
    freeze.started();
    loop {
        let (health, renewing) = watchdog::start(
            Arc::clone(&freeze.fleet),
            lock.clone(),
            cfg.renew_every,
            Arc::clone(&freeze.clock),
        );
        let kept = keep(health, &mut signals, &freeze.clock, end, &cfg.key, log).await;
        renewing.abort();
        lock = match kept {
            Kept::Ended { signal, deadline } => return freeze.ended(&lock, signal, deadline).await,
            Kept::Lost { deadline, reason } => {
                match freeze.take_back(&lock, deadline, &reason, &mut signals).await {
                    Back::Taken(lock) => lock,
                    Back::Over(result) => return result,
                }
            }
        };
    }
}

impl Freeze<'_> {
    /// Takes the key for the freeze, waiting at most `wait` (a signal ends
    /// the wait: [`Error::Interrupted`]).
    async fn take(&self, wait: Wait, signals: &mut Signals) -> Result<Lock, Error> {
        let request = self.cfg.request(wait, history::epoch_ms(self.until));
        crate::wait::acquire(&self.fleet, &request, self.log, Some(signals)).await
    }

    /// The line of a freeze taken.
    fn started(&self) {
        let cfg = self.cfg;
        let note = cfg.note.as_ref().map_or_else(String::new, |n| format!(": {n:?}"));
        let until = instant(self.until);
        self.log.event(
            Level::Notice,
            "hold_started",
            &format!(
                "hold: froze {} until {until}{note} (renewed every {}; ends early on SIGTERM, \
                 SIGINT or SIGHUP)",
                self.shown,
                crate::text::fmt_duration(cfg.renew_every)
            ),
            json!({ "key": cfg.key, "until": until, "note": cfg.note }),
        );
    }

    /// Ends a held freeze at its end (`signal` `None`) or on `signal`,
    /// its lock valid until `deadline` as the watchdog last said: releases
    /// it, says so; exit 0. A freeze whose validity had ended first
    /// ([`Freeze::lapsed`]) did not hold to this moment.
    async fn ended(
        &self,
        lock: &Lock,
        signal: Option<i32>,
        deadline: BootInstant,
    ) -> Result<u8, Error> {
        let released = self.fleet.release(&lock.key, lock.held()).await;
        // Past its validity, only a quorum still holding the token (the
        // release's yes) shows that nobody else held the key meanwhile: a
        // holder in between needed a majority, which meets one of those
        // servers, and a server never gets a deleted key back. What breaks
        // it: a server restarted from a snapshot that holds the token, as
        // it breaks any renewal (votes are its bound: src/lock/vote.rs).
        if self.clock.now() >= deadline && released.is_err() {
            return self.lapsed(lock, deadline, signal).await;
        }
        let then = match released {
            Ok(_) => "released".to_owned(),
            Err(Error::Lost(_)) => "it was no longer held".to_owned(),
            Err(e) => format!("could not release it ({e}); it lapses within its TTL"),
        };
        let (shown, until) = (&self.shown, instant(self.until));
        let line = match signal {
            None => format!("hold: the freeze of {shown} ended at {until}; {then}"),
            Some(signal) => format!(
                "hold: {}: ended the freeze of {shown} early (it was to last until {until}); \
                 {then}",
                signals::name(signal)
            ),
        };
        say(self.log, "hold_ended", &line, self.cfg);
        Ok(exit::OK)
    }

    /// A freeze whose end (or `signal`) came after its lock's validity
    /// ended at `deadline` without a renewal: redlock was stopped past it
    /// (SIGSTOP, a suspended VM), the watchdog never got to report the
    /// loss, and the key was anyone's from `deadline` on. Records that gap
    /// up to now, with whoever held the key meanwhile, and ends: 70 at its
    /// end (it did not hold to it), 0 on a signal (a person ended it), as
    /// a freeze that ends while lost after a reported loss does.
    async fn lapsed(
        &self,
        lock: &Lock,
        deadline: BootInstant,
        signal: Option<i32>,
    ) -> Result<u8, Error> {
        let lost_at = wall_at(deadline, &self.clock);
        let holder = self.fleet.status(&self.cfg.key).await.holder.map(|(value, _)| value);
        let back_at = SystemTime::now();
        let gap = self.record_gap(&lock.token, (lost_at, back_at), holder.into_iter().collect());
        let length = crate::text::fmt_duration(Duration::from_millis(gap.await.duration_ms));
        let (shown, since) = (&self.shown, instant(lost_at));
        let Some(signal) = signal else {
            return Err(Error::Lost(format!(
                "hold: {shown}: the freeze ended while lost since {since} (a gap of {length}, \
                 recorded): redlock was stopped past the lock's validity"
            )));
        };
        let line = format!(
            "hold: {}: ended the freeze of {shown}, lost since {since} (a gap of {length}, \
             recorded); nothing to release",
            signals::name(signal),
        );
        say(self.log, "hold_ended", &line, self.cfg);
        Ok(exit::OK)
    }

    /// After the watchdog reported `lock` lost (its validity ends at
    /// `deadline`, for `reason`): ends the freeze if it was released by
    /// force ([`judge`]), else says so and takes it back, recording the gap.
    async fn take_back(
        &self,
        lock: &Lock,
        deadline: BootInstant,
        reason: &str,
        signals: &mut Signals,
    ) -> Back {
        let (cfg, shown, log) = (self.cfg, &self.shown, self.log);
        let probe = probe(&self.fleet, &cfg.key).await;
        if judge(self.clock.now() < deadline, probe.no_vote) == Verdict::Forced {
            // Nothing to release: the token is gone on a quorum.
            return Back::Over(Err(Error::Lost(format!(
                "hold: {shown} was released by force (release --force) at {}, before the \
                 freeze's end at {}; not taken back: {reason}",
                instant(SystemTime::now()),
                instant(self.until)
            ))));
        }
        let lost_at = wall_at(deadline, &self.clock);
        log.event(
            Level::Warn,
            "hold_lost",
            &format!(
                "hold: lost {shown} at {} ({} of {} servers can vote); taking it back",
                instant(lost_at),
                probe.voting,
                probe.total
            ),
            json!({
                "key": cfg.key,
                "lost_at": instant(lost_at),
                "can_vote": probe.voting,
                "servers": probe.total,
                "reason": reason,
            }),
        );
        let (taken, seen) = self.retake(signals).await;
        let back_at = SystemTime::now();
        let gap = self.record_gap(&lock.token, (lost_at, back_at), seen).await;
        let length = crate::text::fmt_duration(back_at.duration_since(lost_at).unwrap_or_default());
        match taken {
            Ok(new) => {
                log.event(
                    Level::Warn,
                    "hold_retaken",
                    &format!(
                        "hold: took {shown} back after a gap of {length} ({})",
                        gap.describe_outcome()
                    ),
                    json!({ "key": cfg.key, "gap_ms": gap.duration_ms, "meanwhile": gap.meanwhile }),
                );
                Back::Taken(new)
            }
            Err(Error::Interrupted(signal, _)) => {
                let line = format!(
                    "hold: {}: ended the freeze of {shown}, lost since {}; nothing to release",
                    signals::name(signal),
                    instant(lost_at)
                );
                say(log, "hold_ended", &line, cfg);
                Back::Over(Ok(exit::OK))
            }
            // The freeze ran out (or hit what waiting cannot cure) while
            // lost: it did not hold to its end, and says so.
            Err(e) => Back::Over(Err(Error::Lost(format!(
                "hold: {shown}: the freeze ended while lost since {} (a gap of {length}, \
                 recorded): {e}",
                instant(lost_at)
            )))),
        }
    }

    /// Waits in the queue for the key until the freeze's end, while a
    /// task looks at who holds it every [`LOOK_EVERY`]. The lock (or the
    /// wait's error) and the other holders seen.
    async fn retake(&self, signals: &mut Signals) -> (Result<Lock, Error>, Vec<String>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let looking =
            tokio::spawn(look(Arc::clone(&self.fleet), self.cfg.key.clone(), Arc::clone(&seen)));
        let left = self.end.saturating_duration_since(self.clock.now());
        let taken = if left.is_zero() {
            Err(Error::Lost("its end came".to_owned()))
        } else {
            self.take(Wait::For(left), signals).await
        };
        looking.abort();
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        (taken, seen)
    }

    /// Records the gap from `lost` to `back` of the lock `token` in the
    /// history, with the holders `seen` meanwhile and the runs that
    /// overlap it ([`meanwhile`]); a failure is a warning.
    async fn record_gap(
        &self,
        token: &str,
        (lost, back): (SystemTime, SystemTime),
        seen: Vec<String>,
    ) -> Entry {
        let meanwhile = meanwhile(&self.fleet, &self.cfg.key, (lost, back), seen).await;
        let gap = gap_entry(self.cfg, token, (lost, back), meanwhile);
        if history::record(&self.fleet, &self.cfg.key, &gap).await.is_err() {
            self.log.event(
                Level::Warn,
                "history_not_recorded",
                &format!("history {}: could not record the freeze's gap", self.shown),
                json!({ "key": self.cfg.key }),
            );
        }
        gap
    }
}

/// Why a held freeze stopped being kept.
#[derive(Debug)]
enum Kept {
    /// Its end came (`signal` `None`), or a signal asked it to end; the
    /// lock was valid until `deadline`, as the watchdog last said (a
    /// deadline already past: redlock was stopped past it).
    Ended {
        /// The signal, if one ended it.
        signal: Option<i32>,
        /// The end of the lock's last known validity.
        deadline: BootInstant,
    },
    /// The watchdog reported the lock lost: at `deadline` its validity
    /// ended (or ends), and why.
    Lost {
        /// The end of its last known validity.
        deadline: BootInstant,
        /// The watchdog's reason.
        reason: String,
    },
}

/// Keeps the freeze until its `end`, a signal, or a lost lock; says a
/// failing renewal with `-v`.
async fn keep(
    mut health: watch::Receiver<Health>,
    signals: &mut Signals,
    clock: &Clock,
    end: BootInstant,
    key: &str,
    log: &Log,
) -> Kept {
    let mut watching = true;
    let ended = |signal, health: &watch::Receiver<Health>| Kept::Ended {
        signal,
        deadline: health.borrow().deadline(),
    };
    loop {
        tokio::select! {
            // A signal first: one that came while redlock was stopped past
            // the end came before the end is seen, and a person sent it.
            biased;
            signal = signals.recv() => {
                // USR1/USR2 ask nothing of a freeze.
                if signal != libc::SIGUSR1 && signal != libc::SIGUSR2 {
                    return ended(Some(signal), &health);
                }
            }
            () = clock.sleep_until(end) => return ended(None, &health),
            changed = health.changed(), if watching => {
                if changed.is_err() {
                    watching = false;
                    continue;
                }
                match health.borrow().clone() {
                    Health::Lost { deadline, reason } => return Kept::Lost { deadline, reason },
                    Health::Failing { deadline, error } => log.event(
                        Level::Info,
                        "renewal_failed",
                        &format!(
                            "hold: renewal failed, retrying with {} of validity left: {error}",
                            crate::text::fmt_duration(deadline.saturating_duration_since(clock.now()))
                        ),
                        json!({ "key": key, "error": error }),
                    ),
                    Health::Held { .. } => {}
                }
            }
        }
    }
}

/// What a lost lock means for the freeze.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Lost to the servers or to time: take it back.
    Lost,
    /// Deleted by `release --force`: end.
    Forced,
}

/// Judges a lost lock: `refused_while_valid` when a quorum said the
/// token no longer holds it before its validity ended, `no_vote` how
/// many servers have no vote now (restarted within their window, or a
/// clock too far off).
///
/// Assumption: a live token leaves a quorum of servers that kept their
/// data only by a compare-and-delete of that very token, which only
/// `release --force` (or a holder that was given it) sends. Bound: a
/// server that restarted without its data within the restart window
/// answers "not held" and has no vote; while any has none, a refusal is
/// taken for that loss, never for a person's act. What breaks it: a
/// server clock stepped forward that expired the key early (taken for a
/// forced release: the freeze ends, exit 70, and says so), and a `release
/// --force` while a server is in its restart window (taken for a loss:
/// the freeze comes back; release it again once the server votes).
fn judge(refused_while_valid: bool, no_vote: usize) -> Verdict {
    if refused_while_valid && no_vote == 0 { Verdict::Forced } else { Verdict::Lost }
}

/// What the servers can do now, for a lost freeze's line.
struct Probe {
    /// Servers that answered and have a vote.
    voting: usize,
    /// Servers that answered and have none (restarted, clock off).
    no_vote: usize,
    /// All the servers.
    total: usize,
}

/// Asks every server whether it answers and has a vote (a status round
/// and a `TIME` each, at once).
async fn probe(fleet: &Fleet, key: &str) -> Probe {
    let (status, votes) = tokio::join!(fleet.status(key), fleet.votes());
    let answered: Vec<bool> =
        status.servers.iter().map(|(_, view)| !matches!(view, ServerView::Error(_))).collect();
    let count = |has_vote: bool| {
        answered.iter().zip(&votes).filter(|(up, vote)| **up && vote.is_none() == has_vote).count()
    };
    Probe { voting: count(true), no_vote: count(false), total: status.servers.len() }
}

/// Adds to `seen` every holder of `key` a quorum shows, but this
/// process's own tokens, until aborted.
async fn look(fleet: Arc<Fleet>, key: String, seen: Arc<Mutex<Vec<String>>>) {
    let ours = |value: &str| {
        value.parse::<Token>().is_ok_and(|t| {
            t.pid == std::process::id() && t.host == crate::token::hostname() && !t.caller
        })
    };
    loop {
        if let Some((value, _)) = fleet.status(&key).await.holder
            && !ours(&value)
            && let Ok(mut seen) = seen.lock()
            && !seen.contains(&value)
        {
            seen.push(value);
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// Who held `key` during the gap `(from, to)`: the holders `seen`, and
/// the runs the history shows overlapping it (a run shorter than
/// [`LOOK_EVERY`] is seen only there), each once.
async fn meanwhile(
    fleet: &Fleet,
    key: &str,
    (from, to): (SystemTime, SystemTime),
    seen: Vec<String>,
) -> Vec<Meanwhile> {
    let (from, to) = (history::epoch_ms(from), history::epoch_ms(to));
    let found = history::read(fleet, key, 20).await;
    let ran = found
        .entries
        .iter()
        .filter(|e| e.is_run() && e.start_ms <= to && e.start_ms + e.duration_ms >= from)
        .map(|e| e.token.clone());
    let mut tokens: Vec<String> = Vec::new();
    for token in seen.into_iter().chain(ran) {
        if !tokens.contains(&token) {
            tokens.push(token);
        }
    }
    tokens.iter().map(|t| Meanwhile::of(t)).collect()
}

/// The history entry of a freeze's gap: from `lost` (when the validity of
/// the `token` it lost ended) to `back` (when it was taken back, or the
/// freeze ended), with whoever held the key `meanwhile`. Keyed by the
/// lost token: unique, and no longer the holder's, so `status` never
/// takes the gap for the current holder's run.
fn gap_entry(
    cfg: &Hold,
    token: &str,
    (lost, back): (SystemTime, SystemTime),
    meanwhile: Vec<Meanwhile>,
) -> Entry {
    Entry {
        token: token.to_owned(),
        host: crate::token::hostname(),
        pid: std::process::id(),
        start_ms: history::epoch_ms(lost),
        duration_ms: crate::text::millis(back.duration_since(lost).unwrap_or_default()),
        outcome: Outcome::Gap,
        exit_code: 0,
        fence: None,
        tick_start_ms: None,
        tick_ms: None,
        tick_offset_s: None,
        schedule: None,
        note: cfg.note.clone(),
        job: cfg.job.clone(),
        meanwhile,
    }
}

/// The freeze's last line, unless `-q`.
fn say(log: &Log, event: &str, message: &str, cfg: &Hold) {
    log.event(Level::Notice, event, message, json!({ "key": cfg.key }));
}

/// The wall-clock time the boot-clock instant `at` was (or will be).
fn wall_at(at: BootInstant, clock: &Clock) -> SystemTime {
    let (now, wall) = (clock.now(), SystemTime::now());
    if at <= now {
        wall.checked_sub(now.saturating_duration_since(at)).unwrap_or(wall)
    } else {
        wall + at.saturating_duration_since(now)
    }
}

/// An instant for people, as every freeze's line shows it
/// ([`crate::lock::freeze_instant`]).
fn instant(t: SystemTime) -> String {
    crate::lock::freeze_instant(history::epoch_ms(t))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_token_gone_while_valid_is_a_forced_release_unless_a_server_restarted() {
        assert_eq!(judge(true, 0), Verdict::Forced);
        assert_eq!(judge(true, 1), Verdict::Lost, "a restarted server forgot it");
        assert_eq!(judge(false, 0), Verdict::Lost, "the validity ended first");
        assert_eq!(judge(false, 2), Verdict::Lost);
    }

    #[test]
    fn a_gap_is_keyed_by_the_lost_token_and_names_its_span() {
        let cfg = Hold {
            key: "k".into(),
            ttl: Duration::from_secs(2),
            length: Duration::from_secs(60),
            wait: Wait::For(Duration::from_secs(60)),
            renew_every: Duration::from_millis(666),
            note: Some("freeze".into()),
            job: None,
        };
        let lost = std::time::UNIX_EPOCH + Duration::from_millis(1_795_975_200_000);
        let back = lost + Duration::from_millis(4_250);
        let gap = gap_entry(&cfg, "old-token", (lost, back), Vec::new());
        assert_eq!(
            (gap.token.as_str(), gap.start_ms, gap.duration_ms),
            ("old-token", 1_795_975_200_000, 4_250)
        );
        assert_eq!(gap.outcome, Outcome::Gap);
        assert_eq!(gap.note.as_deref(), Some("freeze"));
        assert!(!gap.is_run());
        assert_eq!(
            gap.describe_outcome(),
            "a freeze's gap, taken back at 2026-11-29T18:00:04+00:00: nobody held it meanwhile"
        );
    }

    #[test]
    fn a_boot_instant_is_shown_as_the_wall_clock_time_it_was() {
        let clock = Clock::new();
        let now = clock.now();
        let ago = wall_at(now.checked_sub(Duration::from_secs(5)).unwrap(), &clock);
        let later = wall_at(now + Duration::from_secs(5), &clock);
        let wall = SystemTime::now();
        let off = |t: SystemTime, want: Duration, past: bool| {
            let d = if past { wall.duration_since(t) } else { t.duration_since(wall) };
            d.unwrap().abs_diff(want) < Duration::from_millis(500)
        };
        assert!(off(ago, Duration::from_secs(5), true));
        assert!(off(later, Duration::from_secs(5), false));
    }
}
