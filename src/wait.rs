//! Taking a lock with retries: one attempt per round, jittered exponential
//! backoff between rounds, never sleeping past the holder's remaining TTL,
//! and never past the `--wait` deadline. A waiter subscribes to the key's
//! release channel after its first busy answer, so that a release wakes it
//! at once; a missed message costs one backoff step, and a lost
//! subscription is made again on a backoff of its own. With ordering on
//! (the default; `--unordered` turns it off) its attempts also keep its
//! place in the lock's queue ([`crate::queue`]): it attempts when a release
//! names it first, and otherwise only to refresh its place; `-n` is busy
//! while a quorum has a queue.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use serde_json::json;

use crate::error::Error;
use crate::exit;
use crate::lock::{Attempt, Fleet, Lock, Place, is_shared};
use crate::lock::{Request, Wait};
use crate::output::{Level, Log};
use crate::queue;
use crate::server::{Failure, Server};
use crate::signals::Signals;

/// How many attempts a waiter makes, [`CHASE_PAUSE`] apart, when it finds
/// the lock still held by the token whose release it just heard (the
/// release reached some servers before others). Bounded per release heard,
/// so that a release that failed on a quorum costs a few attempts, never a
/// storm.
const CHASES: u32 = 3;
/// The pause before a chasing attempt: about one turn of the servers.
const CHASE_PAUSE: Duration = Duration::from_millis(1);

/// The first pause between attempts.
pub const FIRST_PAUSE: Duration = Duration::from_millis(25);
/// The longest pause between attempts.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);

/// How long `-n` (and `--wait` shorter than this) keeps resolving split
/// votes before it gives up with [`Error::Split`] (exit 69). The decision
/// of `-n` comes within this bound plus one attempt (at most a node
/// timeout, and a fence round when fencing); the process exits at most a
/// node timeout later, once the calls it left in flight are done.
///
/// `-n` means "do not wait for a holder", not "give up on a tie". A round
/// in which another token holds a quorum is busy, at once. A round in
/// which no token holds a quorum (contenders that started together each
/// got a minority, possibly with a minority of servers silent) means that
/// nobody holds the lock: every contender in it withdraws its votes and
/// retries after a [`Backoff`] pause, and the first one whose attempt
/// meets no other in flight takes every free server and wins; from then
/// on every other contender finds it on a quorum and is busy. Mutual
/// exclusion is the plain majority rule throughout; only liveness depends
/// on the pauses.
///
/// Why a burst of N settles: two attempts collide only when they overlap,
/// i.e. start within about one attempt's duration `d` of each other (a
/// round trip to the servers plus the withdrawal: ~1 ms on a LAN, tens of
/// ms on a CPU-starved machine). Look at the attempts as a stream of rate
/// `r`: an attempt that overlaps no other takes every free server and
/// wins, which happens with probability about `exp(-2 r d)`. After a
/// collision only the few contenders involved pause, each over the upper
/// half of a window that doubles from 25 ms to 1 s, so the rate they add
/// keeps falling while the first attempts of the rest arrive once; and
/// contenders that attempt after the winner are busy at once and leave.
/// With N hosts firing within a few ms, the first round splits among a
/// handful, the next rounds spread them over 12-25 ms, 25-50 ms, ...:
/// expected rounds for those hosts about `log2(k * d / 12 ms) + 2` for `k`
/// colliders, typically 1 to 3, and a few hundred ms in all. Measured
/// (benches/burst.rs, 1,000 processes on 2 CPUs, `d` inflated by CPU
/// starvation): every tick settled, at most 7 rounds for one process, no
/// process reached this bound. Cost to the servers: per contender and
/// round, one acquire script on every server, plus one withdrawal
/// (SCRIPT LOAD + EVALSHA of a tiny script, one write) where it may have
/// set its token.
///
/// What breaks it: votes that do not go away. A crashed contender's
/// minority votes last until their TTL, another client's value without
/// expiry forever; retrying cannot beat them, so after this bound the
/// split is reported (naming how the votes are spread) rather than waited
/// out. A pause never runs past the soonest expiry of the split votes, so
/// short-lived leftovers are retried the moment they vanish.
pub const SETTLE_BOUND: Duration = Duration::from_secs(5);

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

/// A release as announced (`scripts/release.lua`): `FIRST\nTOKEN`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Release {
    /// The waiter first in the queue where it was announced (empty: none);
    /// `None` from a publisher that does not say (an older redlock).
    first: Option<String>,
    /// The released token.
    token: Vec<u8>,
}

impl Release {
    /// Reads an announcement.
    fn parse(payload: &[u8]) -> Release {
        match payload.iter().position(|&b| b == b'\n') {
            Some(at) => Release {
                first: Some(String::from_utf8_lossy(&payload[..at]).into_owned()),
                token: payload[at + 1..].to_vec(),
            },
            None => Release { first: None, token: payload.to_vec() },
        }
    }
}

/// Wakes a waiter when a release of the key is announced on any server.
/// Every server announces the same release (its token), so the waiter
/// wakes once per release, not once per server: a second wake would cost
/// an attempt doomed to meet the next holder. The announcement names the
/// waiter first in the queue, so that only it attempts.
///
/// Never a storm (issue 11): a wake is only a shortcut through the
/// waiter's pause, never its only clock. When notifications are lost (the
/// pub/sub connection dropped or killed, the server down or restarted),
/// the waiter keeps its jittered backoff, capped by the holder's TTL, and
/// the listener subscribes again on a backoff of its own; when they are
/// refused for good (an ACL user without channel permissions, a password
/// the server refuses) the listener ends, and a waiter left with no
/// listener at all waits on its pause alone, never on a channel that
/// reports "closed" at once forever (the busy-poll of 31,479 attempts in
/// 3 s that issue 11 measured).
struct Wake {
    /// The last release heard.
    released: watch::Receiver<Release>,
}

/// The release listeners of one channel on one fleet: one pub/sub
/// connection per server listened to, shared by every wait of the process
/// on that key (issue 11: each `wait::acquire` used to open its own).
struct Ears {
    /// Where the listeners put the last release heard.
    tx: Arc<watch::Sender<Release>>,
    /// The listener of each server listened to, by index in the fleet.
    listeners: Vec<Option<JoinHandle<()>>>,
}

/// Every channel this process listens to, keyed by channel and servers.
/// Listeners stay subscribed after the wait that started them, so a
/// process that waits again (the library in a loop) reuses them; they end
/// with the process or its runtime. One entry per key waited on: a process
/// that waits on unboundedly many keys keeps that many subscriptions.
static EARS: LazyLock<Mutex<HashMap<String, Ears>>> = LazyLock::new(Mutex::default);

/// How long a subscription must have lasted for the next re-subscription to
/// start again from the first backoff step: a connection that a server or a
/// proxy kills as soon as it subscribes is retried ever more slowly.
const STEADY_SUBSCRIPTION: Duration = MAX_PAUSE;

impl Wake {
    /// Listens to `key`'s releases, in the background, on the first
    /// `servers - quorum + 1` servers: a release that succeeds is announced
    /// by a quorum, and every quorum includes one of them. Listening to
    /// more only multiplies the messages (contention bench: 8 waiters on 5
    /// servers, 555-613 -> 693-722 sections/s). An ordered waiter (`member`,
    /// its queue entry) listens only to the releases that name it first
    /// ([`crate::lock::wake_channel`]), except on a server that refused
    /// scripts, whose releases name nobody (`lock::noscript`); a shared or
    /// unordered one hears every release. A listener already running in
    /// this process is reused; one that ended (its runtime gone, or refused
    /// by the server's ACL) is started again.
    fn subscribe(fleet: &Fleet, key: &str, member: Option<&str>, log: &Log) -> Wake {
        let channel = crate::lock::release_channel(key);
        let own = member.map(|m| crate::lock::wake_channel(key, m));
        let n = fleet.servers().len();
        let ears = (n + 1).saturating_sub(fleet.quorum()).min(n);
        let servers = &fleet.servers()[..ears];
        let id = own.as_deref().unwrap_or(&channel);
        let id = servers.iter().fold(id.to_owned(), |id, s| format!("{id}\n{}", s.name()));
        // A panic elsewhere while holding the lock leaves the map usable.
        let mut all = EARS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = all.entry(id).or_insert_with(|| Ears {
            tx: Arc::new(watch::channel(Release::default()).0),
            listeners: Vec::new(),
        });
        entry.listeners.resize_with(ears, || None);
        for (slot, server) in entry.listeners.iter_mut().zip(servers) {
            if slot.as_ref().is_none_or(JoinHandle::is_finished) {
                let channel = match &own {
                    Some(own) if !server.scripts_refused() => own.clone(),
                    _ => channel.clone(),
                };
                let (server, tx, log) = (Arc::clone(server), Arc::clone(&entry.tx), *log);
                *slot =
                    Some(tokio::spawn(async move { listen(&server, &channel, &tx, &log).await }));
            }
        }
        Wake { released: entry.tx.subscribe() }
    }
}

/// Forwards the releases announced on `channel` of `server` to `tx`,
/// subscribing again (with jittered backoff) whenever the subscription
/// fails or ends. Ends only when the server refuses for good (auth, ACL),
/// or with its runtime. It has no deadline of its own: it sends nothing but
/// a SUBSCRIBE per backoff step (at most about one a second once grown),
/// and it is what keeps later waits of the process woken promptly.
async fn listen(server: &Server, channel: &str, tx: &watch::Sender<Release>, log: &Log) {
    let mut backoff = Backoff::new();
    loop {
        match server.subscribe(channel).await {
            Ok(pubsub) => {
                let since = Instant::now();
                let mut messages = pubsub.into_on_message();
                while let Some(message) = messages.next().await {
                    let release = Release::parse(message.get_payload_bytes());
                    tx.send_if_modified(|last| {
                        let new = last.token != release.token;
                        *last = release;
                        new
                    });
                }
                if since.elapsed() >= STEADY_SUBSCRIPTION {
                    backoff = Backoff::new();
                }
                log.debug(&format!(
                    "{}: release notifications ended; subscribing again",
                    server.name()
                ));
            }
            Err(e) if matches!(e.failure, Failure::Auth(_) | Failure::NoPerm(_)) => {
                log.debug(&format!("no release notifications (waiting on backoff alone): {e}"));
                return;
            }
            Err(e) => log.debug(&format!("no release notifications for now: {e}")),
        }
        tokio::time::sleep(backoff.next_pause()).await;
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
/// (busy, unavailable, or split); configuration errors (auth, TLS,
/// WRONGTYPE) end it at once. Split votes are retried until the wait runs
/// out and at least for [`SETTLE_BOUND`], even with `-n`. A signal from `signals` ends the wait between attempts
/// ([`Error::Interrupted`]); an attempt itself is never cut short, so it
/// never leaves a half-taken lock behind.
pub async fn acquire(
    fleet: &Fleet,
    request: &Request,
    log: &Log,
    mut signals: Option<&mut Signals>,
) -> Result<Lock, Error> {
    let Request { key, wait, ordered, .. } = request;
    let key = key.as_str();
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
    // Split rounds in a row: each one makes the next attempt more patient
    // with slow servers (`lock::patience`).
    let mut splits = 0u32;
    let mut wake: Option<Wake> = None;
    // This wait's entry in the queue ([`crate::queue`]), kept by the
    // attempts themselves; `joined` once one of them may have written it.
    // A shared wait's member says so, for the queue's turn of shared
    // waiters (`scripts/acquire.lua`).
    let member = queue::entry(request.shared).to_string();
    let since_ms = crate::millis(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default(),
    );
    let mut joined = false;
    // False for the one attempt after the queue proved disordered.
    let mut order = true;
    // Waiters ahead of us as the last attempt saw it, and when. A release
    // heard that names another waiter (heard only on a server without
    // scripts, or by a shared waiter, or through a second wait of this
    // process: an ordered waiter hears only the releases that name it)
    // moves us up one place without asking the servers; the turn to take a
    // free key always comes from the servers.
    let mut ahead: Option<(usize, Instant)>;
    // The token of the last release heard, and how many attempts since
    // met it still holding (see `CHASES`).
    let mut heard: Option<Vec<u8>> = None;
    let mut chases = 0;
    // Whether the last attempt came of a release heard (and its chases),
    // rather than of the end of a pause.
    let mut woken = false;
    let queue_keys = fleet.key_layout().queue_keys(key);
    // Leaving the queue needs no answer: in the background, so that a
    // server that hangs does not hold the end of the wait.
    let leave = async |joined: bool| {
        if joined {
            let servers = fleet.servers().to_vec();
            let (key, keys, member) = (key.to_owned(), queue_keys.clone(), member.clone());
            fleet.background(queue::leave(servers, key, keys, member));
        }
    };
    let join = *wait != Wait::Once;
    let places = request.limit.max(1);
    loop {
        attempts += 1;
        // Whether the last attempt found the lock free but another
        // waiter's turn ([`Attempt::Queued`]).
        let mut held_up = false;
        let place = ordered.then_some(Place { member: &member, join, order, since_ms, places });
        let report = crate::slots::attempt(fleet, request, splits, place).await;
        joined |= place.is_some() && join;
        order = true;
        let outcome = match &report.attempt {
            Attempt::Acquired(_) => "acquired",
            Attempt::Busy(_) => "busy",
            Attempt::Split(_) => "split",
            Attempt::Unavailable(_) => "unavailable",
            Attempt::Queued { .. } => "queued",
            Attempt::Disordered => "disordered",
        };
        log.event(
            Level::Info,
            "acquire_attempt",
            &format!("attempt {attempts} on {shown}: {outcome}"),
            json!({ "key": key, "attempt": attempts, "outcome": outcome, "servers": report.servers }),
        );
        crate::metrics::observe(&report.servers);
        // An ordered waiter that a release woke: a split, or a round with
        // too few answers (it stops once nobody can win it, and the servers
        // not awaited then count as silent), is most often that release
        // still on its way to some servers, the old token holding them
        // (seen: "2 of 5 servers answered" with 2 of 5 down, one holding
        // the old token, one not awaited). Chased as a busy answer naming
        // the token heard is (below), within the wait's deadline. Waiting a
        // whole pause instead let a waiter behind it, refreshing its place
        // while this one's grant was being withdrawn from a server, find no
        // first waiter on a quorum and take the lock out of turn
        // (waiting_scale's FIFO test with 2 of 5 servers down: 1 run in 15).
        // Only right after a wake: what a refresh meets at the end of a
        // pause is left to the backoff.
        let in_time = deadline.is_none_or(|d| Instant::now() < d);
        let lagging = match &report.attempt {
            Attempt::Split(_) => true,
            Attempt::Unavailable(e) => !config_error(e),
            _ => false,
        };
        if lagging && *ordered && woken && chases < CHASES && in_time {
            chases += 1;
            log.debug(&format!(
                "attempt {attempts}: not taken just after a release; again at once"
            ));
            tokio::time::sleep(CHASE_PAUSE).await;
            continue;
        }
        let (last, holder_left) = match report.attempt {
            Attempt::Acquired(lock) => {
                unreachable_servers(log, key, &report.servers);
                let waited = start.elapsed();
                wait_report.acquired(log, key, waited, attempts);
                log.event(
                    Level::Info,
                    "acquired",
                    &format!(
                        "acquired {shown} after {attempts} attempt(s) in {}: {}; valid for {}{}",
                        crate::fmt_duration(waited),
                        crate::lock::took_part(
                            format!(
                                "granted by {} of {} (quorum {})",
                                lock.granted.0,
                                lock.granted.1,
                                fleet.quorum()
                            ),
                            &report.servers,
                            "granted",
                        ),
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
            Attempt::Disordered => {
                // No waiter is first on a quorum: once more, without order.
                order = false;
                continue;
            }
            Attempt::Busy(holder) => {
                let message = holder.describe(key);
                // Still held by the token we heard released: its release
                // is on its way to the other servers. Attempt again soon,
                // a few times per release heard, rather than wait a whole
                // pause for a release already announced.
                // The marker of shared holders counts as the token heard:
                // the last of them announced it as it went.
                let chase = heard.as_deref() == Some(holder.value.as_bytes())
                    || (heard.is_some() && crate::shared::is_marker(&holder.value));
                if chase && chases < CHASES {
                    chases += 1;
                    tokio::time::sleep(CHASE_PAUSE).await;
                    continue;
                }
                (Error::Busy { message, code: exit::BUSY }, holder.remaining)
            }
            Attempt::Queued { ahead } => {
                held_up = true;
                let message = format!("{shown} has {ahead} waiter(s) queued ahead");
                (Error::Busy { message, code: exit::BUSY }, None)
            }
            Attempt::Split(split) => {
                let message = format!("acquire {}", split.describe(key, fleet.quorum()));
                (Error::Split(message), split.expires)
            }
            Attempt::Unavailable(e) => {
                if config_error(&e) {
                    leave(joined).await;
                    return Err(e);
                }
                (e, None)
            }
        };
        ahead = report.ahead.map(|n| (n, Instant::now()));
        let split = matches!(last, Error::Split(_));
        splits = if split { splits + 1 } else { 0 };
        // Nobody holds the lock: settle the split, or let the waiter whose
        // turn it is take it or lapse ([`queue::HELD_UP`]), even when not
        // waiting: busy means a holder has a quorum, never only a queue.
        let until = match deadline {
            Some(d) if split => Some(d.max(start + SETTLE_BOUND)),
            Some(d) if held_up => Some(d.max(start + queue::HELD_UP + MAX_PAUSE)),
            other => other,
        };
        let left = until.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
        if left.is_zero() {
            leave(joined).await;
            return Err(last);
        }
        // Settling a split, or a queue's turn, is not waiting for a
        // holder: `-n` says nothing.
        if !((split || held_up) && *wait == Wait::Once) {
            wait_report.waiting(log, key, &last, start.elapsed(), left);
        }
        // A split has no holder to announce a release; and withdrawals are
        // not announced (they would wake every waiter into the same split).
        if !split {
            let own = (*ordered && !request.shared).then_some(member.as_str());
            wake.get_or_insert_with(|| Wake::subscribe(fleet, key, own, log));
        }
        let holder_expiry = holder_left.map(|d| Instant::now() + d.max(Duration::from_millis(1)));
        // Until the next attempt: at the end of a pause, or at a release
        // that names us (or nobody). Far back in the queue a pause ends in
        // an attempt only to refresh our place once REFRESH has passed.
        loop {
            let left = match until {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                leave(joined).await;
                return Err(last);
            }
            let mut pause = backoff.next_pause().min(left);
            if let Some(expiry) = holder_expiry {
                // Never sleep past the moment the holder's lock expires
                // (once it has, the pauses are the backoff's alone).
                let until = expiry.saturating_duration_since(Instant::now());
                if !until.is_zero() {
                    pause = pause.min(until);
                }
            }
            log.debug(&format!(
                "attempt {attempts}: {last}; next in at most {}",
                crate::fmt_duration(pause)
            ));
            tokio::select! {
                () = tokio::time::sleep(pause) => {
                    woken = false;
                    // Behind the first `places` waiters, a pause ends in
                    // an attempt only to refresh our entry.
                    match ahead {
                        Some((n, at)) if join && n >= places as usize && at.elapsed() < queue::REFRESH => {
                            continue;
                        }
                        _ => break,
                    }
                }
                release = released(&mut wake) => {
                    log.debug(&format!(
                        "woken by a release; first in line: {}",
                        release.first.as_deref().unwrap_or("(not said)")
                    ));
                    let first = release.first.as_deref().filter(|f| !f.is_empty());
                    heard = Some(release.token.clone());
                    chases = 0;
                    woken = true;
                    match first {
                        // Another waiter's turn: we move up one place. A
                        // shared waiter named first lets every shared
                        // waiter with no exclusive one ahead go in with it
                        // (`scripts/acquire.lua`): a shared waiter tries.
                        Some(f) if *ordered && f != member && !(is_shared(f) && is_shared(&member)) => {
                            if let Some((n, _)) = ahead.as_mut() {
                                *n = n.saturating_sub(1).max(1);
                            }
                        }
                        _ => break,
                    }
                }
                signal = next_signal(&mut signals) => {
                    leave(joined).await;
                    return Err(interrupted(signal, key));
                }
            }
        }
    }
}

/// The next release heard. With no listener (yet), or none left, never:
/// only the pause is left, never a wake that fires at once forever.
async fn released(wake: &mut Option<Wake>) -> Release {
    if let Some(wake) = wake.as_mut()
        && wake.released.changed().await.is_ok()
    {
        return wake.released.borrow_and_update().clone();
    }
    std::future::pending().await
}

/// An error that waiting cannot cure (a password, a permission, a usage
/// mistake): the wait ends with it at once.
fn config_error(e: &Error) -> bool {
    matches!(e, Error::Unavailable { config: true, .. } | Error::Usage(_))
}

/// The error of a wait that `signal` ended.
fn interrupted(signal: i32, key: &str) -> Error {
    Error::Interrupted(signal, format!("while waiting for {}", crate::display_key(key.as_bytes())))
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
        let forever = left == Duration::MAX;
        let more = || format!("at most {} more", crate::fmt_duration(left));
        // Servers that fail are an outage, not contention: the line says
        // so, rather than that the lock is busy (`last` names the servers).
        let cause = match last {
            Error::Unavailable { .. } => "unavailable",
            Error::Split(_) => "split",
            _ => "busy",
        };
        let (bound, what) = match cause {
            "unavailable" => (
                if forever { "no time limit".to_owned() } else { more() },
                "the servers are unavailable, retrying".to_owned(),
            ),
            _ => (
                if forever { "until it is free".to_owned() } else { more() },
                format!("waiting for {shown}"),
            ),
        };
        let (event, message) = match self.next {
            None => {
                self.next = Some(FIRST_PROGRESS);
                ("waiting", format!("{what} ({bound}): {last}"))
            }
            Some(due) if elapsed >= due => {
                self.next = Some(elapsed + PROGRESS_EVERY);
                let still = match cause {
                    "unavailable" => "the servers are still unavailable, retrying".to_owned(),
                    _ => format!("still waiting for {shown}"),
                };
                (
                    "still_waiting",
                    format!("{still} after {} ({bound}): {last}", crate::fmt_duration(elapsed)),
                )
            }
            Some(_) => return,
        };
        let left_ms = (!forever).then(|| crate::millis(left));
        log.event(
            Level::Notice,
            event,
            &message,
            json!({
                "key": key,
                "cause": cause,
                "waited_ms": crate::millis(elapsed),
                "left_ms": left_ms,
                "reason": last.to_string(),
            }),
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
