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
use std::time::{Duration, Instant, SystemTime};

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use serde_json::json;

use crate::clock::BootInstant;
use crate::error::Error;
use crate::exit;
use crate::lock::{Attempt, Fleet, Lock, Place, Since, Tick};
use crate::lock::{Holders, Request, Wait};
use crate::output::{Level, Log};
use crate::queue;
use crate::server::{Failure, Server};
use crate::signals::Signals;

mod state;

pub(crate) use state::{Action, Asked, CHASE_PAUSE, Event, Seen, WaitState};

/// The first pause between attempts.
pub const FIRST_PAUSE: Duration = Duration::from_millis(25);
/// The longest pause between attempts.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);

/// How long `-n` keeps resolving split
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
    rng: fastrand::Rng,
}

impl Backoff {
    /// A backoff at its first step.
    pub fn new() -> Backoff {
        Backoff { window: FIRST_PAUSE, rng: fastrand::Rng::new() }
    }

    /// A backoff whose jitter comes from `seed` (tests).
    pub fn seeded(seed: u64) -> Backoff {
        Backoff { window: FIRST_PAUSE, rng: fastrand::Rng::with_seed(seed) }
    }

    /// The next pause.
    pub fn next_pause(&mut self) -> Duration {
        let window = self.window;
        self.window = (self.window * 2).min(MAX_PAUSE);
        window / 2 + window.mul_f64(self.rng.f64() / 2.0)
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new()
    }
}

/// A release as announced (`scripts/release.lua`): `FIRST\nTOKEN`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Release {
    /// The waiter first in the queue where it was announced (empty: none);
    /// `None` from a publisher that does not say (an older redlock).
    pub(crate) first: Option<String>,
    /// The released token.
    pub(crate) token: Vec<u8>,
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
/// Never a storm: a wake is only a shortcut through the
/// waiter's pause, never its only clock. When notifications are lost (the
/// pub/sub connection dropped or killed, the server down or restarted),
/// the waiter keeps its jittered backoff, capped by the holder's TTL, and
/// the listener subscribes again on a backoff of its own; when they are
/// refused for good (an ACL user without channel permissions, a password
/// the server refuses) the listener ends, and a waiter left with no
/// listener at all waits on its pause alone, never on a channel that
/// reports "closed" at once forever (a busy-poll of tens of thousands
/// of attempts a second).
struct Wake {
    /// The last release heard.
    released: watch::Receiver<Release>,
}

/// The release listeners of one channel on one fleet: one pub/sub
/// connection per server listened to, shared by every wait of the process
/// on that key, rather than one per `wait::acquire`.
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
/// out (`-n`: for [`SETTLE_BOUND`]). A signal from `signals` ends the wait between attempts
/// ([`Error::Interrupted`]); an attempt itself is never cut short, so it
/// never leaves a half-taken lock behind.
pub async fn acquire(
    fleet: &Fleet,
    request: &Request,
    log: &Log,
    mut signals: Option<&mut Signals>,
) -> Result<Lock, Error> {
    let Request { key, wait, ordered, note, job, .. } = request;
    let key = key.as_str();
    let shown = crate::text::display_key(key.as_bytes());
    let start = Instant::now();
    // When the contender began, for `-n` ([`crate::lock::record`]).
    let now = BootInstant::now();
    let began = request.began.map_or(now, |b| b.max(now - crate::lock::record::STARTUP));
    // This wait's entry in the queue ([`crate::queue`]), kept by the
    // attempts themselves. A shared wait's member says so, for the queue's
    // turn of shared waiters (`scripts/acquire.lua`).
    let member = queue::entry(request.holders.waiter(), note.clone(), job.clone()).to_string();
    let mut state = WaitState::new(asked(request, start, &member), Backoff::new());
    let since_ms = crate::text::millis(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default(),
    );
    let mut wait_report = WaitReport { patient: request.tick.is_some(), ..WaitReport::default() };
    let mut wake: Option<Wake> = None;
    // Whether an attempt may have written our queue entry.
    let mut joined = false;
    // What the last attempt saw, as the error the wait ends with.
    let mut last: Option<Error> = None;
    let leave = |joined: bool| {
        if joined {
            leave_queue(fleet, key, &member);
        }
    };
    let join = state.joins();
    let places = request.holders.places();
    let own = (*ordered && request.holders != Holders::Shared).then_some(member.as_str());
    // When `-n` began by each server's clock, as its answers bound it.
    let mut starts: Vec<(String, u64)> = Vec::new();
    // A `--wait DUR` ends at its deadline, even in the middle of an
    // attempt whose servers hang: the attempt is dropped there, and its
    // server tasks withdraw whatever it set (`lock::contend::contend`). `-n` and
    // `--wait 0` make their one attempt whole.
    let cut = match wait {
        Wait::For(d) if !d.is_zero() => Some(start + *d),
        _ => None,
    };
    let mut action = state.first();
    loop {
        let event = match action {
            Action::Attempt { .. } | Action::Chase => {
                let order = match action {
                    Action::Attempt { order } => order,
                    _ => {
                        log.debug(&format!(
                            "attempt {}: not taken just after a release; again at once",
                            state.attempts
                        ));
                        tokio::time::sleep(CHASE_PAUSE).await;
                        true
                    }
                };
                let place =
                    ordered.then_some(Place { member: &member, join, order, since_ms, places });
                let untaken = untaken(request, state.attempts, began, &starts);
                let terms = request.terms(place, untaken);
                let attempt = crate::slots::attempt(fleet, request, state.splits, terms);
                let Some(report) = within(cut, attempt).await else {
                    leave(joined);
                    return Err(match last {
                        Some(last) => wait_over(last, wait, request.tick, start.elapsed()),
                        None => cut_off(fleet, key, wait),
                    });
                };
                learn(&mut starts, &report.starts);
                joined |= place.is_some() && join;
                log_attempt(log, key, state.attempts + 1, &report);
                crate::metrics::observe(took_part(&report.servers));
                let seen = seen(&report.attempt, request.tick);
                let ahead = report.ahead;
                match report.attempt {
                    Attempt::Acquired(lock) => {
                        let attempts = state.attempts + 1;
                        unreachable_servers(log, key, &report.servers);
                        wait_report.acquired(log, key, start.elapsed(), attempts);
                        acquired(log, fleet, key, &lock, &report.servers, start, attempts);
                        return Ok(lock);
                    }
                    // A disordered queue says nothing of the lock.
                    attempt => last = refusal(attempt, key, fleet.quorum(), request.tick).or(last),
                }
                Event::Attempted { seen, ahead }
            }
            Action::Pause { until, left, report, listen } => {
                if report && let Some(last) = &last {
                    wait_report.waiting(log, key, last, start.elapsed(), left);
                }
                if listen {
                    wake.get_or_insert_with(|| Wake::subscribe(fleet, key, own, log));
                }
                let said = (state.attempts, last.as_ref());
                match pause_until(until, &mut wake, &mut signals, said, log).await {
                    Ok(event) => event,
                    Err(signal) => {
                        leave(joined);
                        return Err(interrupted(signal, key));
                    }
                }
            }
            // (`Acquired` comes of an attempt that took the lock, which
            // returned it above.)
            Action::Acquired | Action::GiveUp => {
                leave(joined);
                let last = last.unwrap_or_else(|| {
                    Error::Usage(format!("acquire {shown}: no attempt was made"))
                });
                return Err(wait_over(last, wait, request.tick, start.elapsed()));
            }
        };
        action = state.step(Instant::now(), event);
    }
}

/// `-n`'s rule, for an attempt after `attempts` others: it runs only if
/// nobody took the lock since it `began`; `starts` says when that was by
/// each server that answered so far ([`crate::lock::Since`]). `None` where
/// the rule does not apply ([`Request::looks_back`]).
fn untaken<'a>(
    request: &Request,
    attempts: u32,
    began: BootInstant,
    starts: &'a [(String, u64)],
) -> Option<Since<'a>> {
    let since = if attempts == 0 { Since::First { began } } else { Since::Later { began, starts } };
    request.looks_back().then_some(since)
}

/// Takes in an attempt's `news` of when the contender began by each
/// server's clock: each answer bounds it from below, and the latest bound
/// is the closest.
fn learn(starts: &mut Vec<(String, u64)>, news: &[(String, u64)]) {
    for (name, ms) in news {
        match starts.iter_mut().find(|(n, _)| n == name) {
            Some((_, known)) => *known = (*known).max(*ms),
            None => starts.push((name.clone(), *ms)),
        }
    }
}

/// A pause until `until` that a release heard on `wake` ends early, as the
/// event that ended it; `Err` with the signal that came meanwhile. `said`:
/// the attempts so far and what the last one saw, for `-vv`.
async fn pause_until(
    until: Instant,
    wake: &mut Option<Wake>,
    signals: &mut Option<&mut Signals>,
    said: (u32, Option<&Error>),
    log: &Log,
) -> Result<Event, i32> {
    let (attempts, last) = said;
    let last_seen = last.map_or_else(String::new, ToString::to_string);
    log.debug(&format!(
        "attempt {attempts}: {last_seen}; next in at most {}",
        crate::text::fmt_duration(until.saturating_duration_since(Instant::now()))
    ));
    tokio::select! {
        () = tokio::time::sleep_until(until.into()) => Ok(Event::PauseEnded),
        release = released(wake) => {
            log.debug(&format!(
                "woken by a release; first in line: {}",
                release.first.as_deref().unwrap_or("(not said)")
            ));
            Ok(Event::Released(release))
        }
        signal = next_signal(signals) => Err(signal),
    }
}

/// How the servers took part in an attempt, as the metrics count them:
/// answered with a vote (granted, or held by another), without one yet,
/// failed, configured.
fn took_part(results: &[crate::lock::ServerResult]) -> crate::metrics::Servers {
    use crate::lock::Part;
    let count = |f: fn(&Part) -> bool| results.iter().filter(|r| f(&r.result)).count();
    crate::metrics::Servers {
        answered: count(|r| matches!(r, Part::Answered(_))),
        no_vote: count(|r| matches!(r, Part::NoVote(_))),
        failed: count(|r| matches!(r, Part::Failed(_))),
        total: results.len(),
    }
}

/// `attempt`, dropped at `cut` if it has not ended by then (`None`).
async fn within<T>(cut: Option<Instant>, attempt: impl Future<Output = T>) -> Option<T> {
    match cut {
        Some(cut) => tokio::time::timeout_at(cut.into(), attempt).await.ok(),
        None => Some(attempt.await),
    }
}

/// Takes this wait's `member` entry out of `key`'s queue. Leaving needs no
/// answer: in the background, so that a server that hangs does not hold
/// the end of the wait.
fn leave_queue(fleet: &Fleet, key: &str, member: &str) {
    let servers = fleet.servers().to_vec();
    let keys = fleet.key_layout().queue_keys(key);
    fleet.background(queue::leave(servers, key.to_owned(), keys, member.to_owned()));
}

/// The wait of `request`, begun at `start`, with its `member` entry.
fn asked(request: &Request, start: Instant, member: &str) -> Asked {
    Asked {
        start,
        deadline: match request.wait {
            Wait::Once => Some(start),
            Wait::For(d) => Some(start + d),
            Wait::Forever => None,
        },
        ordered: request.ordered,
        member: member.to_owned(),
        holders: request.holders,
    }
}

/// What an attempt that did not take the lock saw, as the error the wait
/// ends with if it is the last; `None` for a disordered queue, which says
/// nothing of the lock. Under a `tick`, a tick that ran, or is held by the
/// host that runs it ([`Tick::held_by`]), is a quiet skip: nobody need be
/// told that another host does the job.
fn refusal(attempt: Attempt, key: &str, quorum: usize, tick: Option<Tick>) -> Option<Error> {
    let shown = crate::text::display_key(key.as_bytes());
    let busy = |message| Some(Error::Busy { message, code: exit::BUSY, quiet: false });
    let skip = |message| Some(Error::Busy { message, code: exit::BUSY, quiet: true });
    match attempt {
        // Taken: the caller holds it.
        Attempt::Acquired(_) | Attempt::Disordered => None,
        Attempt::Busy(holder) => match tick {
            Some(tick) if let Some(freeze) = tick.paused_by(&holder.value) => {
                let freeze = crate::lock::describe_freeze(&freeze);
                Some(Error::Paused {
                    message: format!(
                        "{shown}: the tick of {} is paused: held by {freeze}",
                        tick.describe()
                    ),
                    code: exit::BUSY,
                    freeze,
                })
            }
            Some(tick) if tick.held_by(&holder.value) => skip(format!(
                "{shown}: the tick of {} is running on {}",
                tick.describe(),
                crate::lock::ran_by(&holder.value)
            )),
            _ => busy(holder.describe(key)),
        },
        Attempt::Queued { ahead } => busy(format!("{shown} has {ahead} waiter(s) queued ahead")),
        Attempt::Split(split) => {
            Some(Error::Split(format!("acquire {}", split.describe(key, quorum))))
        }
        Attempt::Unavailable(e) => Some(e),
        Attempt::Ran(ran) => skip(ran.describe(key)),
        Attempt::Over(over) => busy(over.describe(key)),
        Attempt::Elsewhere(schedules) => Some(Error::Schedules(schedules.describe(key))),
        Attempt::Taken(token) => busy(format!(
            "{shown} was taken by {} after this run began (-n runs only if nobody took the lock \
             meanwhile)",
            crate::lock::ran_by(&token)
        )),
    }
}

/// The error a wait that lasted `waited` ends with when `last` is what its
/// last attempt saw: a skip of a tick that ran says how long it waited; a
/// `--wait DUR` that ran out says it gave up ([`gave_up`]), unless the
/// error is one waiting cannot cure.
fn wait_over(last: Error, wait: &Wait, tick: Option<Tick>, waited: Duration) -> Error {
    match (last, wait) {
        // Ended at its first sight of the freeze: no time waited to say.
        (paused @ Error::Paused { .. }, _) => paused,
        (Error::Busy { message, code, quiet: true }, _) => Error::Busy {
            message: format!("{message}; skipped after {}", crate::text::fmt_duration(waited)),
            code,
            quiet: true,
        },
        (last, Wait::For(bound)) if !bound.is_zero() && !config_error(&last) => {
            // A tick's wait is cut at the tick's end (`config`): by then
            // nobody ran the tick, or the last attempt would have said so.
            let missed = tick.filter(|t| SystemTime::now() + TICK_END_SLACK >= t.end());
            gave_up(last, waited, *bound, missed)
        }
        (last, _) => last,
    }
}

/// How early a wait cut at its tick's end may end by the wall clock (it
/// runs on the boot clock).
const TICK_END_SLACK: Duration = Duration::from_secs(1);

/// The error of a wait that ran out after `waited` (`bound`, its
/// `--wait`): what the last attempt saw, after `gave up after 15m
/// (--wait 15m): `, so that the line reads as the end of a wait and not as
/// the first refusal; or, when it ran out with its tick (`missed`), that
/// the tick did not run.
fn gave_up(last: Error, waited: Duration, bound: Duration, missed: Option<Tick>) -> Error {
    let waited = crate::text::fmt_duration(waited);
    let prefix = match missed {
        Some(tick) => format!(
            "gave up after {waited} at the end of the tick of {}, which nobody ran (missed): ",
            tick.describe()
        ),
        None => format!("gave up after {waited} (--wait {}): ", crate::text::fmt_duration(bound)),
    };
    match last {
        Error::Busy { message, code, quiet } => {
            Error::Busy { message: prefix + &message, code, quiet }
        }
        Error::Unavailable { what, failures, config } => {
            Error::Unavailable { what: prefix + &what, failures, config }
        }
        Error::Split(message) => Error::Split(prefix + &message),
        other => other,
    }
}

/// Whether too few answered only because servers were slow: some timed
/// out, and none refused or said what waiting cannot cure.
fn late(e: &Error) -> bool {
    let Error::Unavailable { failures, config: false, .. } = e else { return false };
    failures.0.iter().any(|f| matches!(f.failure, Failure::Timeout(_)))
        && failures.0.iter().all(|f| matches!(f.failure, Failure::Timeout(_) | Failure::NoVote(_)))
}

/// What an attempt showed, for the wait's decisions ([`WaitState`]).
/// Under a `tick`, a freeze that outlasts it ([`Tick::paused_by`]) ends
/// the wait as a tick that ran does: there is nothing to wait for.
fn seen(attempt: &Attempt, tick: Option<Tick>) -> Seen {
    match attempt {
        Attempt::Acquired(_) => Seen::Acquired,
        Attempt::Disordered => Seen::Disordered,
        Attempt::Busy(h) if tick.is_some_and(|t| t.paused_by(&h.value).is_some()) => Seen::Ran,
        Attempt::Busy(h) => Seen::Busy { holder: h.value.clone(), remaining: h.remaining },
        Attempt::Queued { .. } => Seen::Queued,
        Attempt::Split(s) => Seen::Split { expires: s.expires },
        Attempt::Unavailable(e) if late(e) => Seen::Late,
        Attempt::Unavailable(e) => Seen::Unavailable { config: config_error(e) },
        Attempt::Ran(_) | Attempt::Over(_) => Seen::Ran,
        Attempt::Elsewhere(_) => Seen::Unavailable { config: true },
        Attempt::Taken(token) => Seen::Busy { holder: token.clone(), remaining: None },
    }
}

/// The line of one attempt: at `-v`, in text and JSON alike (JSON shows
/// the info level without `-v`, and a wait of 15 minutes makes a thousand
/// attempts).
fn log_attempt(log: &Log, key: &str, n: u32, report: &crate::lock::AttemptReport) {
    let outcome = match &report.attempt {
        Attempt::Acquired(_) => "acquired",
        Attempt::Busy(_) => "busy",
        Attempt::Split(_) => "split",
        Attempt::Unavailable(_) => "unavailable",
        Attempt::Queued { .. } => "queued",
        Attempt::Disordered => "disordered",
        Attempt::Ran(_) => "ran",
        Attempt::Taken(_) => "taken",
        Attempt::Over(_) => "over",
        Attempt::Elsewhere(_) => "another schedule",
    };
    log.event(
        if log.verbose() { Level::Info } else { Level::Debug },
        "acquire_attempt",
        &format!("attempt {n} on {}: {outcome}", crate::text::display_key(key.as_bytes())),
        json!({ "key": key, "attempt": n, "outcome": outcome, "servers": report.servers }),
    );
}

/// The line of a lock taken.
fn acquired(
    log: &Log,
    fleet: &Fleet,
    key: &str,
    lock: &Lock,
    servers: &[crate::lock::ServerResult],
    start: Instant,
    attempts: u32,
) {
    let waited = start.elapsed();
    log.event(
        Level::Info,
        "acquired",
        &format!(
            "acquired {} after {attempts} attempt(s) in {}: {}; valid for {}{}",
            crate::text::display_key(key.as_bytes()),
            crate::text::fmt_duration(waited),
            crate::lock::took_part(
                format!(
                    "granted by {} of {} (quorum {})",
                    lock.granted.0,
                    lock.granted.1,
                    fleet.quorum()
                ),
                servers,
                "granted",
                log.verbose(),
            ),
            crate::text::fmt_duration(lock.validity),
            lock.fence.map_or_else(String::new, |f| format!(", fence {f}")),
        ),
        json!({
            "key": key,
            "quorum": fleet.quorum(),
            "granted": lock.granted.0,
            "servers": lock.granted.1,
            "validity_ms": crate::text::millis(lock.validity),
            "fence": lock.fence,
            "waited_ms": crate::text::millis(waited),
            "attempts": attempts,
        }),
    );
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
/// mistake, another schedule in the key's record): the wait ends with it
/// at once.
fn config_error(e: &Error) -> bool {
    matches!(e, Error::Unavailable { config: true, .. } | Error::Usage(_) | Error::Schedules(_))
}

/// The error of a wait that `signal` ended.
/// The error of a `--wait` whose only attempts were cut off at its
/// deadline: no quorum answered in time.
fn cut_off(fleet: &Fleet, key: &str, wait: &Wait) -> Error {
    let limit = match wait {
        Wait::For(d) => crate::text::fmt_duration(*d),
        _ => String::new(),
    };
    Error::Unavailable {
        what: format!(
            "acquire {}: no quorum of {} servers answered within --wait {limit}",
            crate::text::display_key(key.as_bytes()),
            fleet.servers().len()
        ),
        failures: crate::quorum::Failures::default(),
        config: false,
    }
}

fn interrupted(signal: i32, key: &str) -> Error {
    Error::Interrupted(
        signal,
        format!("while waiting for {}", crate::text::display_key(key.as_bytes())),
    )
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
    /// A tick's wait (`--once-per`): a lock held is most often the host
    /// that runs the tick, and the wait ends in "already ran", a skip that
    /// nobody need hear of (a cron mail per host and tick). So its lines
    /// about a busy lock, and the one when it is taken after all, are said
    /// only with `-v`; an outage is said at once.
    patient: bool,
}

impl WaitReport {
    /// After an attempt that did not take the lock, `elapsed` into the wait
    /// with `left` to go (`Duration::MAX`: no bound).
    fn waiting(&mut self, log: &Log, key: &str, last: &Error, elapsed: Duration, left: Duration) {
        let Some((event, cause, message)) = self.line(key, last, elapsed, left) else { return };
        let forever = left == Duration::MAX;
        let left_ms = (!forever).then(|| crate::text::millis(left));
        let level =
            if self.patient && cause != "unavailable" { Level::Info } else { Level::Notice };
        log.event(
            level,
            event,
            &message,
            json!({
                "key": key,
                "cause": cause,
                "waited_ms": crate::text::millis(elapsed),
                "left_ms": left_ms,
                "reason": last.to_string(),
            }),
        );
    }

    /// The line [`WaitReport::waiting`] writes, if one is due: its event,
    /// its cause (`busy`, `unavailable`, `split`) and its text.
    fn line(
        &mut self,
        key: &str,
        last: &Error,
        elapsed: Duration,
        left: Duration,
    ) -> Option<(&'static str, &'static str, String)> {
        let shown = crate::text::display_key(key.as_bytes());
        let forever = left == Duration::MAX;
        let more = || format!("at most {} more", crate::text::fmt_duration(left));
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
        match self.next {
            None if self.patient && cause != "unavailable" && elapsed < FIRST_PROGRESS => None,
            None => {
                let first = elapsed < FIRST_PROGRESS;
                self.next = Some(if first { FIRST_PROGRESS } else { elapsed + PROGRESS_EVERY });
                Some(("waiting", cause, format!("{what} ({bound}): {last}")))
            }
            Some(due) if elapsed >= due => {
                self.next = Some(elapsed + PROGRESS_EVERY);
                let waited = crate::text::fmt_duration(elapsed);
                // "retrying after 9m" reads as a delay before the next
                // try: the time is how long the wait has lasted.
                let message = match cause {
                    "unavailable" => format!(
                        "the servers are still unavailable, retrying ({waited} so far, {bound}): {last}"
                    ),
                    _ => format!("still waiting for {shown} after {waited} ({bound}): {last}"),
                };
                Some(("still_waiting", cause, message))
            }
            Some(_) => None,
        }
    }

    /// The lock was taken after `waited`: one line, if the wait was reported.
    fn acquired(&self, log: &Log, key: &str, waited: Duration, attempts: u32) {
        if self.next.is_none() {
            return;
        }
        log.event(
            if self.patient { Level::Info } else { Level::Notice },
            "wait_ended",
            &format!(
                "acquired {} after waiting {} ({attempts} attempts)",
                crate::text::display_key(key.as_bytes()),
                crate::text::fmt_duration(waited)
            ),
            json!({ "key": key, "waited_ms": crate::text::millis(waited), "attempts": attempts }),
        );
    }
}

/// Warns (once, without `-v`) that the lock was taken with some servers
/// failing: the job runs, but one more failure would stop the next one.
fn unreachable_servers(log: &Log, key: &str, servers: &[crate::lock::ServerResult]) {
    let failed: Vec<String> = servers
        .iter()
        .filter_map(|s| match &s.result {
            crate::lock::Part::Failed(e) => Some(format!("{}: {e}", s.server)),
            _ => None,
        })
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
            crate::text::display_key(key.as_bytes()),
            failed.join("; ")
        ),
        json!({ "key": key, "failed": failed }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_outage_says_how_long_it_has_lasted_not_a_delay() {
        let mut report = WaitReport::default();
        let down = Error::Unavailable {
            what: "acquire k: 0 of 1 server answered (quorum 1)".into(),
            failures: crate::quorum::Failures(Vec::new()),
            config: false,
        };
        let first = report.line("k", &down, Duration::ZERO, Duration::MAX);
        assert!(first.is_some_and(|(e, c, _)| e == "waiting" && c == "unavailable"));
        let (event, _, line) =
            report.line("k", &down, Duration::from_secs(586), Duration::MAX).unwrap();
        assert_eq!(event, "still_waiting");
        assert!(
            line.starts_with("the servers are still unavailable, retrying (9m 46s so far, no time limit): acquire k"),
            "{line}"
        );
        assert!(!line.contains("retrying after"), "{line}");
    }

    #[test]
    fn a_tick_s_wait_on_a_busy_lock_speaks_only_once_it_lasts() {
        let mut report = WaitReport { patient: true, ..WaitReport::default() };
        let busy = Error::Busy { message: "k is held by h pid 1".into(), code: 0, quiet: false };
        assert!(report.line("k", &busy, Duration::from_millis(900), Duration::MAX).is_none());
        let (event, cause, _) =
            report.line("k", &busy, Duration::from_secs(11), Duration::MAX).unwrap();
        assert_eq!((event, cause), ("waiting", "busy"));
        assert!(report.line("k", &busy, Duration::from_secs(12), Duration::MAX).is_none());
        assert!(report.line("k", &busy, Duration::from_secs(41), Duration::MAX).is_some());
        // An outage is said at once, tick or not.
        let mut report = WaitReport { patient: true, ..WaitReport::default() };
        let down = Error::Unavailable {
            what: "acquire k: 0 of 1 server answered (quorum 1)".into(),
            failures: crate::quorum::Failures(Vec::new()),
            config: false,
        };
        assert!(report.line("k", &down, Duration::ZERO, Duration::MAX).is_some());
    }

    #[test]
    fn a_wait_that_ran_out_says_it_gave_up_first() {
        let busy = Error::Busy { message: "k is held by h pid 1".into(), code: 0, quiet: false };
        let fifteen = Duration::from_secs(900);
        let e = gave_up(busy, Duration::from_millis(899_600), fifteen, None);
        assert_eq!(e.to_string(), "gave up after 14m 59s (--wait 15m): k is held by h pid 1");
        assert_eq!(e.exit_code(), 0, "the code stays");
        let tick = Tick { start_ms: 60_000, end_ms: 120_000, offset_s: 0 };
        let split = gave_up(Error::Split("acquire k: split".into()), fifteen, fifteen, Some(tick));
        assert!(split.to_string().starts_with(
            "gave up after 15m at the end of the tick of 1970-01-01T00:01:00+00:00, which nobody ran (missed): "
        ));
    }

    #[test]
    fn a_tick_that_ran_ends_a_wait_as_a_quiet_skip_with_the_time_waited() {
        let ran = Error::Busy {
            message: "k: the tick of 04:08Z already ran on web-3 (pid 22101)".into(),
            code: 75,
            quiet: true,
        };
        let tick = Some(Tick { start_ms: 60_000, end_ms: 120_000, offset_s: 0 });
        let e = wait_over(
            ran,
            &Wait::For(Duration::from_secs(50)),
            tick,
            Duration::from_millis(10_100),
        );
        assert_eq!(
            e.to_string(),
            "k: the tick of 04:08Z already ran on web-3 (pid 22101); skipped after 10.1s"
        );
        assert!(matches!(e, Error::Busy { quiet: true, code: 75, .. }));
    }

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
