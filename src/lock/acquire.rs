//! The acquire round: one script call per server that takes the lock, keeps
//! the wait queue and draws the fence; the verdict; the fence write-back;
//! and the withdrawal of a failed attempt on the connection it used.

use super::ops::{Numbers, Untaken};
use super::*;

/// The result of one acquire round, with each server's part in it.
#[derive(Debug)]
pub struct AttemptReport {
    /// The verdict.
    pub attempt: Attempt,
    /// Each server's answer and latency.
    pub servers: Vec<ServerResult>,
    /// How many waiters are queued ahead of this one, as a quorum of the
    /// servers that did not grant it sees it; `None` without a place.
    pub ahead: Option<usize>,
    /// With `-n`'s term: when the contender began by each answering
    /// server's clock (ms since the epoch), no later than it did
    /// ([`super::record`]).
    pub starts: Vec<(String, u64)>,
}

/// The token an attempt sets, and whether it is a shared holder's
/// ([`crate::shared`]): read once where the token is made or comes in.
#[derive(Clone, Copy, Debug)]
pub struct Held<'a> {
    /// The token.
    pub token: &'a str,
    /// A shared holder's token.
    pub shared: bool,
}

/// How an attempt takes part in the lock's wait queue ([`crate::queue`]).
/// Exclusion never rests on it: the attempt is a plain majority round
/// whatever the queue says.
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    /// The waiter's entry, the same for every attempt of one wait.
    pub member: &'a str,
    /// Take (or refresh) the place where not granted; false for `-n`,
    /// which never queues.
    pub join: bool,
    /// Only the first waiter may take a free key. False for the one
    /// attempt after [`Attempt::Disordered`].
    pub order: bool,
    /// When the wait began, by this host's clock (ms since the Unix
    /// epoch): the waiter's place in the queue ([`queue::SKEW`]).
    pub since_ms: u64,
    /// The key's places (`--limit N`; 1 for the lock): any of the first
    /// this many waiters may take a free place.
    pub places: u32,
}

/// The verdict of one acquire round.
#[derive(Debug)]
pub enum Attempt {
    /// The lock is ours.
    Acquired(Lock),
    /// Another value holds it on a quorum.
    Busy(Holder),
    /// Nobody holds it: the votes are split among values, none on a
    /// quorum. Retrying (after a random pause) settles it.
    Split(Split),
    /// Not enough servers answered; `config` is true when retrying cannot help.
    Unavailable(Error),
    /// The key is free on a quorum, but another waiter is first in the
    /// queue there, with `ahead` waiters before this one.
    Queued {
        /// Waiters ahead of this one (at least one).
        ahead: usize,
    },
    /// The queue stood in the way, but no waiter is first on a quorum (the
    /// servers joined waiters in different orders, or some lost their
    /// queue): attempt again at once, without order.
    Disordered,
    /// The key is free, but this attempt's tick already ran
    /// (`--once-per`; [`super::record`]).
    Ran(TickRan),
    /// The key is free, but another token took it since this contender
    /// began (`-n`'s rule; [`super::record`]): busy.
    Taken(String),
    /// This attempt's tick is over by the servers' clocks
    /// ([`Tick::last_grant_ms`]): nobody runs it any more.
    Over(TickOver),
    /// The key's ticks ran under another schedule (or zone): this host
    /// computes other ticks, and must not run any (a usage error).
    Elsewhere(Schedules),
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
}

impl Schedules {
    /// One line: this host's schedule for `key`, and the one its ticks ran
    /// under.
    pub fn describe(&self, key: &str) -> String {
        format!(
            "{}: this host reads its ticks as `{}`; {} ran them as `{}`: every host of a key must \
             give the same --cron or --once-per and --tz",
            crate::text::display_key(key.as_bytes()),
            self.ours,
            ran_by(&self.token),
            crate::text::printable(&self.theirs),
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

/// An acquire round in which no value holds a quorum: contenders that
/// started together (or leftovers of crashed ones) each hold a minority.
#[derive(Clone, Debug)]
pub struct Split {
    /// How many servers each value holds, most first; ours among them when
    /// any server granted us.
    pub votes: Vec<usize>,
    /// Servers that failed or were not awaited.
    pub silent: usize,
    /// The soonest another value's vote expires (`None`: none of them will).
    pub expires: Option<Duration>,
    /// The errors of the servers that failed.
    pub failures: Failures,
}

impl Split {
    /// One line: nobody holds `key`, and how the votes are spread.
    pub fn describe(&self, key: &str, quorum: usize) -> String {
        let total = self.votes.iter().sum::<usize>() + self.silent;
        let counts: Vec<String> = self.votes.iter().map(usize::to_string).collect();
        let counts = match counts.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        };
        let silent = match self.silent {
            0 => String::new(),
            n => format!("; {n} did not answer: {}", self.failures),
        };
        format!(
            "{}: no holder has a quorum ({quorum} of {total}); the votes are split among {} tokens ({counts} servers){silent}",
            crate::text::display_key(key.as_bytes()),
            self.votes.len(),
        )
    }
}

impl Fleet {
    /// One acquire round: `SET key token NX PX ttl` on every server at once,
    /// drawing a fencing number where the lock is granted when `fence` is
    /// true. On anything but success, the token is withdrawn everywhere it
    /// may have been set, including on the servers that did not answer.
    /// It ignores the wait queue: see [`Fleet::attempt`] for a waiter's.
    pub async fn try_acquire(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
        fence: bool,
    ) -> AttemptReport {
        // A token given as text: a shared holder's says so, read once here.
        let held = Held { token, shared: is_shared(token) };
        self.attempt(key, held, ttl, fence, 0, Terms::default()).await
    }

    /// [`Fleet::try_acquire`] by a contender whose last `splits` rounds in
    /// a row found the votes split (it waits longer for slow servers, see
    /// `patience`).
    ///
    /// The verdict does not wait for what it does not need: the round
    /// stops listening once [`quorum::standing`] is settled (a round lost
    /// to another value, or a split, waits a bounded while more: see
    /// `patience`), and the withdrawal runs in the
    /// background. Nothing is left behind for that: each server's task
    /// (`contend`) withdraws on the connection its attempt used, after
    /// it, and [`Fleet::drain`] waits for those tasks before the process
    /// exits.
    ///
    /// With a `place`, the same round keeps the wait queue: a free key is
    /// granted only to the first waiter (or to anyone while nobody waits),
    /// a waiter not granted takes or refreshes its place, and one granted
    /// leaves the queue where it was granted (and returns there if the
    /// attempt is withdrawn). One round per attempt, queue included.
    pub async fn attempt(
        &self,
        key: &str,
        Held { token, shared }: Held<'_>,
        ttl: Duration,
        fence: bool,
        splits: u32,
        terms: Terms<'_>,
    ) -> AttemptReport {
        let start = BootInstant::now();
        let place = terms.place;
        // `-n`'s rule is on only for `-n`, which attempts no more once busy.
        let after = if terms.untaken.is_some() { After::Nothing } else { After::Retry };
        let [order, deadlines] = self.layout.queue_keys(key);
        let numbers = Numbers {
            ttl_ms: crate::text::millis(ttl),
            proposal: fence.then(|| fence::proposal(SystemTime::now())),
            window_us: u64::try_from(fence::WINDOW.as_micros()).unwrap_or(u64::MAX),
            life_ms: crate::text::millis(fence::lifetime(ttl)),
            join: place.is_some_and(|p| p.join),
            order: place.is_some_and(|p| p.order),
            queue_life_ms: crate::text::millis(queue::LIFETIME),
            since_ms: place.map_or(0, |p| p.since_ms),
            skew_ms: crate::text::millis(queue::SKEW),
            places: place.map_or(1, |p| p.places),
            shared,
            // Where no answer said when the contender began by a server's
            // clock: the time since it began, plus on a later attempt one
            // node timeout, the longest a call may run after it was sent
            // ([`super::record`]).
            untaken: match terms.untaken {
                None => Untaken::Off,
                Some(Since::First { began }) => Untaken::For { began, more: Duration::ZERO },
                Some(Since::Later { began, .. }) => {
                    let now = tokio::time::Instant::now();
                    let call = self.servers.iter().map(|s| s.deadline()).max();
                    let more = call.map(|d| d.saturating_duration_since(now)).unwrap_or_default();
                    Untaken::For { began, more }
                }
            },
            tick: terms.tick,
        };
        let call = Arc::new(Call {
            op: Op::Acquire,
            key: key.to_owned(),
            operation: Operation::Acquire(AcquireOp {
                lock: self.layout.held_key(key, token),
                fence: self.layout.fence_key(key),
                order,
                deadlines,
                // A shared holder's token joins the shared holders instead
                // ([`crate::shared`]): the same script, round and queue.
                readers: shared.then(|| self.layout.readers_key(key)),
                record: (!shared).then(|| self.layout.record_key(key)),
                token: token.to_owned(),
                member: place.map_or(String::new(), |p| p.member.to_owned()),
                numbers,
                schedule: terms.tick.and(terms.schedule).map(str::to_owned),
            }),
        });
        // The verdict every server task waits for: Some(true) keeps the
        // votes, Some(false) withdraws them. Dropped unsent (this future
        // was abandoned), it means withdraw.
        let (verdict, verdict_rx) = watch::channel(None);
        let quorum = self.quorum;
        self.warm();
        let mut round = quorum::fan_out(
            &self.servers,
            &self.tasks,
            quorum,
            (Op::Acquire, key),
            |server, answer| {
                // A tick's record may be lost by a server restarted since
                // the tick began: no vote from it for the tick. So may the
                // record of a take since a `-n` began ([`record`]): no vote
                // from a server restarted since then either (give or take
                // the clock allowance), for a `-n` that began longer ago
                // than the window allows for (up to `record::STARTUP` and
                // the wait's settle bound: a `--max-ttl` under 12 s).
                let mut restart = match terms.tick {
                    Some(tick) => tick.restart_window(self.restart_window),
                    None => self.restart_window,
                };
                if let Some(since) = terms.untaken {
                    restart = restart.map(|w| w.max(since.began().elapsed() + CLOCK_ALLOWANCE));
                }
                let call = match terms.untaken {
                    Some(Since::Later { starts, .. }) => {
                        match starts.iter().find(|(name, _)| name == server.name()) {
                            Some(&(_, ms)) => Arc::new(call.untaken_since(ms)),
                            None => Arc::clone(&call),
                        }
                    }
                    _ => Arc::clone(&call),
                };
                let twin = Arc::clone(&self.twin);
                // A `-n` contender's last attempt: its withdrawals may wait
                // for slow servers' answers until the process exits.
                let exit = (after == After::Nothing).then(|| self.exiting.clone());
                contend(server, call, answer, verdict_rx.clone(), restart, twin, exit)
            },
            |r| match r {
                Granted::Yes(..) => Vote::Yes,
                Granted::No { .. }
                | Granted::Ran(_)
                | Granted::Taken(_)
                | Granted::Over(_)
                | Granted::Elsewhere(_) => Vote::No,
            },
            |tally, replies, elapsed| patience(tally, replies, elapsed, quorum, splits, after),
        )
        .await;
        // When the contender began by each answering server's clock, and
        // `-n`'s judgment of its grants by it ([`record`]).
        let began = terms.untaken.map(|s| s.began());
        let starts = began.map(|began| starts(&round, began)).unwrap_or_default();
        judge_takes(&mut round.replies, &starts, token);
        let servers = self.results(&round, |r| match r {
            Granted::Yes(..) => "granted",
            Granted::No { holder: Some(_), .. } => "held",
            Granted::No { holder: None, .. } => "queued",
            Granted::Ran(_) => "ran",
            Granted::Taken(_) => "taken",
            Granted::Over(_) => "over",
            Granted::Elsewhere(_) => "another schedule",
        });
        let views: Vec<queue::View> = round
            .replies
            .iter()
            .filter_map(|r| match r {
                Reply::Answered(Granted::No { queue, .. }) => Some(queue.clone()),
                _ => None,
            })
            .collect();
        let held = Held { token, shared };
        let mut attempt = self.conclude_acquire(key, held, ttl, fence, start, &round).await;
        // The servers say a tick's span; this host knows its zone.
        match (&mut attempt, terms.tick) {
            (
                Attempt::Ran(TickRan { tick, .. }) | Attempt::Over(TickOver { tick, .. }),
                Some(ours),
            ) => {
                tick.offset_s = ours.offset_s;
            }
            (Attempt::Elsewhere(schedules), _) => {
                schedules.ours = terms.schedule.unwrap_or_default().to_owned();
            }
            _ => {}
        }
        if let Some(place) = place
            && Votes::of(&round.replies).queued > 0
            && !matches!(attempt, Attempt::Acquired(_) | Attempt::Busy(_) | Attempt::Elsewhere(_))
        {
            // The queue refused us somewhere and no holder explains the
            // rest: wait behind the waiter first on a quorum, or, when
            // none is, attempt again without order.
            attempt = match queue::turn(&views, self.quorum, place.member) {
                queue::Turn::Behind { ahead } => Attempt::Queued { ahead },
                queue::Turn::Head | queue::Turn::Unordered => Attempt::Disordered,
            };
        }
        // After the queue's reading, which never touches a won round: the
        // refusal of a fleet that lists a server twice is final (the
        // verdict below then makes every server withdraw its vote). A
        // round the twin refused (it met its own token) is a
        // configuration failure too, and asks the same question.
        if matches!(
            attempt,
            Attempt::Acquired(_) | Attempt::Unavailable(Error::Unavailable { config: true, .. })
        ) && let Some(twins) = self.twins(key).await
        {
            attempt = Attempt::Unavailable(twins);
        }
        verdict.send_replace(Some(matches!(attempt, Attempt::Acquired(_))));
        let ahead = place.and_then(|p| queue::ahead(&views, self.quorum, p.member));
        let starts = self
            .servers
            .iter()
            .zip(starts)
            .filter_map(|(server, start)| Some((server.name().to_owned(), start?)))
            .collect();
        AttemptReport { attempt, servers, ahead, starts }
    }

    /// Two members that are one server (the same `run_id`, however their
    /// URLs are spelled), as a configuration error. One server counted as
    /// two makes a quorum of fewer servers than it says, and renewals count
    /// it twice: the fleet is refused as a usage error (64: a mistake in
    /// the server list, not servers down), whatever won this round. The
    /// twin of a server that answered is as quick to connect and answer
    /// (its connection may still be opening: a host name to resolve);
    /// [`TWIN_WAIT`] bounds the wait for it. A member that does not answer
    /// in time (down, hung), or whose `INFO` is refused, is not compared
    /// here; a twin slower than that is caught when it answers (`contend`:
    /// this attempt's own token) or at the first renewal, which compares
    /// every member that answered it ([`Fleet::twin_among`]).
    async fn twins(&self, key: &str) -> Option<Error> {
        let deadline = tokio::time::Instant::now() + TWIN_WAIT;
        let facts = futures_util::future::join_all(self.servers.iter().map(|s| async move {
            // A cluster member's connection is for the lock's slot, which
            // a call naming no key would not reuse; a cluster listed twice
            // meets its own token instead (`contend`).
            if s.cluster().is_some() {
                return None;
            }
            // The connection the round's call opens (or opened): one open
            // per server, shared.
            let conn = crate::clock::timeout_at(deadline, s.connect(Op::Acquire, b"", deadline));
            s.facts(&conn.await.ok()?.ok()?, deadline).await
        }))
        .await;
        self.same_server(&facts, Op::Acquire, key)
    }

    /// The error for two members of `facts` (by index) that are one
    /// server, if any. An empty run_id (a proxy or a fork that blanks it)
    /// tells nothing, as in `doctor`.
    pub(super) fn same_server(
        &self,
        facts: &[Option<crate::server::Facts>],
        op: Op,
        key: &str,
    ) -> Option<Error> {
        for (i, a) in facts.iter().enumerate() {
            let Some(a) = a.as_ref().filter(|a| !a.run_id.is_empty()) else { continue };
            for (j, b) in facts.iter().enumerate().skip(i + 1) {
                if b.as_ref().is_some_and(|b| b.run_id == a.run_id) {
                    let why = format!(
                        "is the same server as {} (run_id {})",
                        self.servers[i].name(),
                        a.run_id.get(..12).unwrap_or(&a.run_id)
                    );
                    return Some(listed_twice(op, key, self.servers[j].name(), &why));
                }
            }
        }
        None
    }

    /// A twin found after the lock was taken: a member that answered this
    /// process's attempt with the attempt's own token once the round had
    /// been won without it (`contend`), as an error.
    pub fn late_twin(&self, key: &str) -> Option<Error> {
        let twin = self.twin.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()?;
        let why = "answered with this attempt's own token: it is the same server as another";
        Some(listed_twice(Op::Acquire, key, &twin.server, why))
    }

    async fn conclude_acquire(
        &self,
        key: &str,
        held: Held<'_>,
        ttl: Duration,
        fence: bool,
        start: BootInstant,
        round: &Round<Granted>,
    ) -> Attempt {
        let shown = crate::text::display_key(key.as_bytes());
        let votes = Votes::of(&round.replies);
        // Servers not heard from count as silent: the verdict is final.
        let standing = quorum::standing(votes.ours, &votes.counts(), 0, self.quorum);
        if !matches!(standing, Standing::Won) {
            // Two schedules for one key: one server that says so is enough
            // to stop, as no tick this host computes means anything.
            if let Some((schedules, _)) = votes.elsewhere {
                return Attempt::Elsewhere(schedules.clone());
            }
            // Another token took the key since this contender began (`-n`):
            // one server that says so is enough, since that holder's quorum
            // shares a server with any this contender could win.
            if let Some((token, _)) = votes.taken {
                return Attempt::Taken(token.to_owned());
            }
            // The tick ran: said by enough servers that nobody can win
            // without them, or by any while no other contender holds votes
            // (a split is settled first: a leftover record of a contender
            // that crashed mid-round must not make the others skip).
            let blocking = self.servers.len().saturating_sub(self.quorum) + 1;
            if let Some((ran, n)) = &votes.ran
                && (*n >= blocking || !matches!(standing, Standing::Split))
            {
                return Attempt::Ran(ran.clone());
            }
            // The tick is over: a server says so only by its own clock,
            // which votes (`no_vote`), so no leftover of another
            // contender makes it up.
            if let Some((over, _)) = votes.over {
                return Attempt::Over(over.clone());
            }
        }
        match standing {
            Standing::Won => {
                self.won.store(true, std::sync::atomic::Ordering::Relaxed);
                let fence =
                    if fence { self.settle_fence(key, held, ttl, round).await } else { Ok(None) };
                let elapsed = start.elapsed();
                match (fence, quorum::validity(ttl, elapsed, self.drift_factor)) {
                    (Ok(fence), Some(validity)) => Attempt::Acquired(Lock {
                        key: key.to_owned(),
                        token: held.token.to_owned(),
                        shared: held.shared,
                        ttl,
                        since: start,
                        validity,
                        granted: (round.tally.yes, round.tally.total),
                        fence,
                    }),
                    (Err(e), _) => Attempt::Unavailable(e),
                    (Ok(_), None) => Attempt::Unavailable(Error::Unavailable {
                        what: format!(
                            "acquire {shown}: the quorum answered only after {}, leaving no validity out of a {} TTL",
                            crate::text::fmt_duration(elapsed),
                            crate::text::fmt_duration(ttl)
                        ),
                        failures: round.failures(),
                        config: false,
                    }),
                }
            }
            Standing::Held(i) => match votes.others.get(i) {
                Some(&(value, _, remaining)) => {
                    Attempt::Busy(Holder { value: value.to_owned(), remaining })
                }
                // The queue has a quorum: [`Fleet::attempt`] says whose
                // turn it is.
                None => Attempt::Disordered,
            },
            Standing::Split => {
                let mut counts = votes.counts();
                if votes.ours > 0 {
                    counts.push(votes.ours);
                }
                counts.sort_by_key(|n| std::cmp::Reverse(*n));
                Attempt::Split(Split {
                    silent: round.tally.total - counts.iter().sum::<usize>(),
                    votes: counts,
                    expires: votes.others.iter().filter_map(|(_, _, ttl)| *ttl).min(),
                    failures: round.failures(),
                })
            }
            Standing::Unreachable | Standing::Open => {
                Attempt::Unavailable(self.unavailable(format!("acquire {shown}"), round))
            }
        }
    }

    /// The fence of a won round ([`fence::settle`]): the largest number
    /// drawn by the granting servers heard. When fewer than a quorum drew
    /// exactly it, it is first written back (compare the token, then raise)
    /// until a quorum of the servers holding `token` has exactly that
    /// counter: any later holder's quorum shares one of them, and `status`
    /// reads the fence back from them. Why that makes every later fence
    /// larger, without persistence: [`crate::fence`].
    async fn settle_fence(
        &self,
        key: &str,
        Held { token, shared }: Held<'_>,
        ttl: Duration,
        round: &Round<Granted>,
    ) -> Result<Option<u64>, Error> {
        let drawn: Vec<u64> = round
            .replies
            .iter()
            .filter_map(|r| match r {
                Reply::Answered(Granted::Yes(Grant { fence: Some(f), .. })) => Some(*f),
                _ => None,
            })
            .collect();
        let Some(settled) = fence::settle(&drawn, self.quorum) else {
            return Ok(None);
        };
        let fence = settled.fence;
        if !settled.write_back {
            return Ok(Some(fence));
        }
        let call = Call {
            op: Op::RaiseFence,
            key: key.to_owned(),
            operation: Operation::RaiseFence(RaiseFenceOp {
                lock: self.layout.held_key(key, token),
                fence: self.layout.fence_key(key),
                readers: shared.then(|| self.layout.readers_key(key)),
                token: token.to_owned(),
                value: fence,
                life_ms: crate::text::millis(fence::lifetime(ttl)),
            }),
        };
        // Yes only where the counter is now exactly the fence: a server that
        // granted late may have drawn more, and would not give it back.
        let raised = self
            .round(call, parse_int, |n| {
                if u64::try_from(*n) == Ok(fence) { Vote::Yes } else { Vote::No }
            })
            .await;
        match raised.outcome() {
            Outcome::Won => Ok(Some(fence)),
            _ => Err(self.unavailable(
                format!(
                    "acquire {}: could not record fence {fence} on a quorum",
                    crate::text::display_key(key.as_bytes())
                ),
                &raised,
            )),
        }
    }
}

/// When a contender that began at `began` did so by each server's clock
/// (ms, in server order; `None` where the server gave no clock): its clock
/// in the answer less the time from the start to the answer's arrival
/// (the round's start plus the latency, both taken by the round itself),
/// as the call ran within that time ([`record`]). Rounded down to the
/// records' whole milliseconds: never later than the start.
fn starts(round: &Round<Granted>, began: BootInstant) -> Vec<Option<u64>> {
    round
        .replies
        .iter()
        .zip(&round.latency)
        .map(|(reply, latency)| {
            let (
                Reply::Answered(
                    Granted::Yes(Grant { clock: Some(c), .. }) | Granted::No { clock: Some(c), .. },
                ),
                Some(latency),
            ) = (reply, latency)
            else {
                return None;
            };
            let since = round.start.saturating_duration_since(began) + *latency;
            Some(crate::text::millis(c.saturating_sub(since)))
        })
        .collect()
}

/// `-n`'s rule, judged after the fact: a grant that replaced the record of
/// another token's grant made at or after the contender began (`starts`,
/// by that server's clock) is a take meanwhile, and counts as the refusal
/// that names it, so that the round is lost and withdrawn.
///
/// Why after the fact: the script refuses a take since the start as far
/// as the server's clock when it runs the call tells, less the time from
/// the start to the request's making ([`record`]); a call that waited in
/// the server's queue (a slow script ahead of it, a server stalled) runs
/// later than that says, and a take made and released meanwhile is missed
/// there. The answer's clock less the time to its arrival is never later
/// than the start whatever the call waited for. A take since the start
/// held a quorum, which shares a server with any quorum this contender
/// won; that server's grant replaced the take's record (or a later one),
/// so one of the winning grants shows it. Breaks as the rule does: a
/// record lost (a restart, an expiry past [`super::RECORD_LIFE`]) or a
/// clock stepped back between the take and the grant.
fn judge_takes(replies: &mut [Reply<Granted>], starts: &[Option<u64>], token: &str) {
    for (reply, start) in replies.iter_mut().zip(starts) {
        if let (Reply::Answered(Granted::Yes(Grant { replaced: Some((at, by)), .. })), Some(start)) =
            (&*reply, start)
            && at >= start
            && by != token
        {
            *reply = Reply::Answered(Granted::Taken(by.clone()));
        }
    }
}

/// Who holds how many servers, from one acquire round's answers.
struct Votes<'a> {
    /// Servers that granted us.
    ours: usize,
    /// The tick that ran, and how many servers said so.
    ran: Option<(TickRan, usize)>,
    /// A token that took the key since the contender began, and how many
    /// servers said so.
    taken: Option<(&'a str, usize)>,
    /// The tick is over, as the first server that said so saw it, and how
    /// many servers said so.
    over: Option<(&'a TickOver, usize)>,
    /// Another schedule ran the key's ticks, as the first server that said
    /// so recorded it.
    elsewhere: Option<(&'a Schedules, usize)>,
    /// Every other value seen: the value, how many servers hold it, and its
    /// shortest remaining TTL among them (`None`: no expiry).
    others: Vec<(&'a str, usize, Option<Duration>)>,
    /// Servers where the key is free but another waiter is first in the
    /// queue: they count as one more value, "the queue".
    queued: usize,
}

impl<'a> Votes<'a> {
    fn of(replies: &'a [Reply<Granted>]) -> Votes<'a> {
        let mut votes = Votes {
            ours: 0,
            ran: None,
            taken: None,
            over: None,
            elsewhere: None,
            others: Vec::new(),
            queued: 0,
        };
        for reply in replies {
            match reply {
                Reply::Answered(Granted::Yes(..)) => votes.ours += 1,
                Reply::Answered(Granted::Ran(ran)) => match &mut votes.ran {
                    Some((_, n)) => *n += 1,
                    None => votes.ran = Some((ran.clone(), 1)),
                },
                Reply::Answered(Granted::Taken(token)) => {
                    votes.taken = Some((token, votes.taken.map_or(1, |(_, n)| n + 1)));
                }
                Reply::Answered(Granted::Elsewhere(schedules)) => {
                    let n = votes.elsewhere.map_or(0, |(_, n)| n);
                    votes.elsewhere = Some((votes.elsewhere.map_or(schedules, |(s, _)| s), n + 1));
                }
                Reply::Answered(Granted::Over(over)) => {
                    votes.over = Some((
                        votes.over.map_or(over, |(o, _)| o),
                        votes.over.map_or(1, |(_, n)| n + 1),
                    ));
                }
                Reply::Answered(Granted::No { holder: None, .. }) => votes.queued += 1,
                Reply::Answered(Granted::No { holder: Some(holder), pttl, .. }) => {
                    let ttl = ttl_of(*pttl);
                    match votes.others.iter_mut().find(|(v, _, _)| v == holder) {
                        Some((_, n, t)) => {
                            *n += 1;
                            // The shortest of a value's expiries, `None`
                            // (never) counting as the longest.
                            *t = match (*t, ttl) {
                                (Some(a), Some(b)) => Some(a.min(b)),
                                (a, b) => a.or(b),
                            };
                        }
                        None => votes.others.push((holder, 1, ttl)),
                    }
                }
                Reply::Failed(_) | Reply::NotAwaited => {}
            }
        }
        votes
    }

    /// How many servers each other value holds, the queue last when it
    /// refused any (and after it a tick that ran, a key taken since the
    /// contender began, and a tick that is over, each as one more value).
    fn counts(&self) -> Vec<usize> {
        let mut counts: Vec<usize> = self.others.iter().map(|(_, n, _)| *n).collect();
        let taken = self.taken.map_or(0, |(_, n)| n);
        let ran = self.ran.as_ref().map_or(0, |(_, n)| *n);
        let over = self.over.map_or(0, |(_, n)| n);
        let elsewhere = self.elsewhere.map_or(0, |(_, n)| n);
        counts.extend([self.queued, ran, taken, over, elsewhere].into_iter().filter(|n| *n > 0));
        counts
    }
}

/// How long a won round (or one a configuration failure ended, such as a
/// twin meeting its own token) waits for the `INFO` answers of members that are
/// still in flight before it compares the servers' identities: a twin
/// answers with its twin.
const TWIN_WAIT: Duration = Duration::from_millis(20);

/// How long a `-n` contender that lost before a server answered waits for
/// that answer before it withdraws there blindly (`contend`); less if the
/// process settles to exit first ([`Fleet::settle`], which then makes it
/// withdraw at once, before the exit's flush can end the process).
const ANSWER_GRACE: Duration = Duration::from_millis(50);

/// The least an acquire round with split votes (or a configuration error)
/// waits for its slowest servers, on top of the time it has already taken.
const STRAGGLER_FLOOR: Duration = Duration::from_millis(2);

/// What follows an acquire round that another holder won: another
/// attempt (a wait), or nothing (`-n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    /// The contender attempts again, on the same connections.
    Retry,
    /// The contender is done: its "busy" is final.
    Nothing,
}

/// When an acquire round may stop listening. As soon as its standing is
/// settled (won, held by another value on a quorum, or split so that no
/// value can reach a quorum whatever the pending servers say); held by
/// another value with servers pending, after at most as long again as it
/// has taken (see the rule below). When it is
/// still open, the round waits for every pending server (each bounded by
/// the node timeout) unless the answers already show contention (another
/// value holds a vote) and a quorum of servers has answered: then it waits
/// only as long again as it has taken so far, plus [`STRAGGLER_FLOOR`],
/// doubled for each split round in a row (`splits`).
///
/// Why that is safe: a round cut short treats its pending servers as
/// silent, so it can only end in a split, never in a wrong "won" or
/// "busy": this contender withdraws and retries, and the others see no
/// quorum for it. Why it is needed: in a burst with one server frozen,
/// every split in which the frozen server could complete somebody's
/// quorum would otherwise hold every contender for a whole node timeout,
/// round after round. Why it doubles: a server that is slow but alive
/// (another data centre) may be the one that completes a real holder's
/// quorum; after a few split rounds the wait outgrows its latency and the
/// holder shows, so a contender ends busy rather than at the settling
/// bound. A server frozen for good costs at most one node timeout per
/// round at the end of that doubling, as before.
fn patience(
    tally: &Tally,
    replies: &[Reply<Granted>],
    elapsed: Duration,
    quorum: usize,
    splits: u32,
    after: After,
) -> Listen {
    let votes = Votes::of(replies);
    let counts = votes.counts();
    let answered = votes.ours + counts.iter().sum::<usize>();
    match quorum::standing(votes.ours, &counts, tally.pending(), quorum) {
        Standing::Open if !counts.is_empty() && answered >= quorum => {
            Listen::For((elapsed + STRAGGLER_FLOOR).saturating_mul(1 << splits.min(16)))
        }
        Standing::Open => Listen::On,
        // Lost to another value on a quorum, with servers still pending:
        // their answers cannot change that, but each one that says "held
        // by another value" set nothing there, so it needs no withdrawal
        // (otherwise a waiter that re-joins the queue right after its
        // release sends about one withdrawal script per critical section).
        // Waiting here, before the verdict, keeps every withdrawal ahead
        // of this contender's next attempt on the same connection, which
        // a wait after the verdict would not. Bound: a "busy" comes at
        // most as long again as the round took later when a server is slow
        // or frozen (no floor: `--limit N` pays it once per place); that
        // server then gets its withdrawal as before. An earlier bound of
        // the round (a split seen first) still holds (`fan_out`).
        //
        // Unless no attempt follows (`-n`, whose "busy" is final): then
        // nothing here can overtake a withdrawal, and a burst's losers
        // need not wait for the slow servers ([`After::Nothing`]). Their
        // calls go on in the background (`contend`: each answer gets
        // [`ANSWER_GRACE`], then a withdrawal unless it refused), and the
        // exit flushes them.
        Standing::Held(_) if tally.pending() > 0 && after == After::Retry => Listen::For(elapsed),
        // A configuration error (a wrong password, a missing permission)
        // ends the attempt, but the error should name every server it
        // concerns: the others, which answer as fast, get as long again.
        Standing::Unreachable
            if tally.pending() > 0
                && replies
                    .iter()
                    .any(|r| matches!(r, Reply::Failed(e) if e.failure.is_config())) =>
        {
            Listen::For(elapsed + STRAGGLER_FLOOR)
        }
        _ => Listen::Stop,
    }
}

/// Waits for an acquire round's verdict: true keeps the votes, false
/// withdraws them. A verdict that never comes (the round was abandoned)
/// withdraws.
async fn decided(verdict: &mut watch::Receiver<Option<bool>>) -> bool {
    match verdict.wait_for(Option::is_some).await {
        Ok(keep) => keep.unwrap_or(false),
        Err(_) => false,
    }
}

/// One server's part in an acquire round: the attempt, its answer to the
/// round, then the verdict, and when the verdict is "withdraw", the
/// withdrawal on the same connection, after the attempt.
///
/// The order is the point. Redis executes one
/// connection's commands in the order they arrive. The attempt's future is
/// dropped (or done) before the withdrawal is sent, so every request it
/// wrote is ahead of the withdrawal, even when the server is frozen and
/// answers both an hour later. (redis-rs writes a request handed to the
/// connection unless its caller gave up before the connection took it
/// from its queue; the withdrawal's bound is at [`withdraw`].) The
/// connection is the server's shared one, opened once for all callers
/// ([`Server::connect`]); a timed-out attempt makes the server forget it
/// for new calls, but this task keeps its handle, and so does the release
/// of a round won without this server ([`Server::late_vote`]).
async fn contend(
    server: Arc<Server>,
    call: Arc<Call>,
    answer: Answer<Granted>,
    mut verdict: watch::Receiver<Option<bool>>,
    restart_window: Option<Duration>,
    twin: Arc<std::sync::Mutex<Option<ServerError>>>,
    exit: Option<tokio_util::sync::CancellationToken>,
) {
    let key = call.key();
    let Operation::Acquire(op) = &call.operation else {
        let why = "an acquire round ran another operation".to_owned();
        return answer.send(Err(server.bad_reply(Op::Acquire, key, why)));
    };
    // Until this attempt is done, releases here wait.
    let _attempting = server.attempting().await;
    let deadline = server.deadline();
    // Nothing is sent before the connection is there: a "withdraw" that
    // comes first leaves nothing to withdraw on this server. A "keep" that
    // comes first does not stop the connect: the round was won without
    // this server, and its vote must land all the same (as below, once
    // connected), or the lock rests on a bare quorum with nothing here for
    // renewals to extend. A server slow to connect is the usual case: a
    // Sentinel group resolves its master (every Sentinel, then ROLE)
    // while plain servers have long granted.
    let connect = server.connect(Op::Acquire, key.as_bytes(), deadline);
    tokio::pin!(connect);
    let conn = tokio::select! {
        conn = &mut connect => conn,
        keep = decided(&mut verdict) => {
            if !keep {
                return;
            }
            connect.await
        }
    };
    let conn = match conn {
        Ok(conn) => conn,
        Err(e) => return answer.send(Err(e)),
    };
    let mut set = Box::pin(attempt_here(&server, &conn, &call, op, deadline, restart_window));
    // The queue entry a grant here removed, to put back on a withdrawal.
    let mut entry = None;
    let keep = tokio::select! {
        result = &mut set => {
            // "Held by another value": this attempt set nothing here. Any
            // other answer (granted, an error, a timeout) may have set it.
            let refused_here = refused(&result);
            let timed_out = matches!(&result, Err(e) if matches!(e.failure, Failure::Timeout(_)));
            if let Ok((Granted::Yes(grant), _)) = &result {
                entry = grant.entry;
            }
            answer.send(counted(&server, key, result));
            let won = decided(&mut verdict).await;
            if refused_here {
                if won {
                    leave_here(&server, &conn, key, op).await;
                }
                return;
            }
            // Won while this server timed out (before the verdict, which
            // may wait for the twins and the fence): its vote may still
            // land, as below. Any other failure set nothing, or broke the
            // connection.
            if won && timed_out {
                server.expect_late_vote(&op.lock, &op.token, &conn);
            }
            won
        }
        keep = decided(&mut verdict) => {
            if keep {
                // Won without this server: let its vote land all the same,
                // and the release follow it on this connection.
                server.expect_late_vote(&op.lock, &op.token, &conn);
                let late = set.await;
                if refused(&late) {
                    leave_here(&server, &conn, key, op).await;
                }
                // A twin slower than the round: the lock's holder learns
                // it from the fleet (`Fleet::late_twin`).
                if let Err(e) = late
                    && matches!(&e.failure, Failure::Unfit(why) if why == OWN_TOKEN)
                {
                    *twin.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
                }
                return;
            }
            // Lost before this server answered. A contender that attempts
            // again withdraws at once, so that the withdrawal goes ahead
            // of its next attempt on this connection. One that is done
            // (`-n`: [`After::Nothing`]; `exit` is then its process's exit)
            // has no next attempt to overtake: it gives the answer
            // [`ANSWER_GRACE`], or until the process settles to exit
            // ([`Fleet::settle`], which is why it cannot be cut off), and
            // withdraws only what may have been set, so that a burst's
            // losers do not send a withdrawal script to every server a
            // little slower than the quorum. A server that does not answer
            // in that time (frozen, far) gets the withdrawal all the same,
            // queued behind the attempt on this connection, so that it
            // runs both in order when it wakes and keeps no dead vote.
            if let Some(exiting) = &exit
                && let Some(late) = answer_in_grace(&mut set, exiting).await
            {
                if refused(&late) {
                    return;
                }
                if let Ok((Granted::Yes(grant), _)) = &late {
                    entry = grant.entry;
                }
            }
            false
        }
    };
    drop(set);
    if !keep {
        withdraw(&server, &conn, key, op, entry).await;
    }
}

/// One server's answer to an attempt ([`attempt_here`]): what it said,
/// and why it has no vote, if it has none.
type Answered = Result<(Granted, Option<String>), ServerError>;

/// The answer of a `-n` loser's attempt, if it comes within
/// [`ANSWER_GRACE`] and before the process settles to exit
/// ([`Fleet::settle`]: `exiting`).
async fn answer_in_grace(
    set: &mut (impl Future<Output = Answered> + Unpin),
    exiting: &tokio_util::sync::CancellationToken,
) -> Option<Answered> {
    tokio::select! {
        late = tokio::time::timeout(ANSWER_GRACE, set) => late.ok(),
        () = exiting.cancelled() => None,
    }
}

/// Whether this server refused (and so set nothing, and kept or refreshed
/// the waiter's entry).
fn refused(result: &Answered) -> bool {
    matches!(
        result,
        Ok((
            Granted::No { .. }
                | Granted::Ran(_)
                | Granted::Taken(_)
                | Granted::Over(_)
                | Granted::Elsewhere(_),
            _
        ))
    )
}

/// What a server's answer counts for in the round: a server without a vote
/// answers as a failure (`attempt_here`), whatever it said.
fn counted(server: &Server, key: &str, result: Answered) -> Result<Granted, ServerError> {
    let (granted, no_vote) = result?;
    match no_vote {
        Some(why) => Err(ServerError {
            server: server.name().to_owned(),
            op: Op::Acquire,
            key: crate::text::display_key(key.as_bytes()),
            failure: Failure::NoVote(why),
        }),
        None => Ok(granted),
    }
}

/// One server's answer to the attempt `call` on `conn`, by `deadline`: the
/// acquire script's reply, with why the server has no vote where its clock
/// is off or it restarted within `restart_window` ([`no_vote`],
/// [`restarted`]), and this attempt's own token met here refused as a
/// server listed twice.
///
/// A server without a vote counts for nobody, whatever it answers. Its
/// grant is kept but not counted; its refusal ("held by X", "X took it
/// since you began", "the tick ran") is not counted either: X could not
/// win with that server, so X's quorum, which every quorum this contender
/// could win shares a server with, is made of voting servers, and one of
/// those refuses too. Counted, it made a burst's hosts all skip as busy
/// behind a holder that had only the restarted server and one other, and
/// then lost its round: a tick that nobody ran (campaign `persist`, seed
/// 3209046234). The cost: such a refusal is a failure, so a round that
/// needed it ends "unavailable" (retried by a wait, and by `-n` while the
/// rest only timed out), not "busy".
async fn attempt_here(
    server: &Server,
    conn: &Conn,
    call: &Call,
    op: &AcquireOp,
    deadline: tokio::time::Instant,
    restart_window: Option<Duration>,
) -> Answered {
    let key = call.key();
    // When the attempt was sent and answered, on this host's clock:
    // the server's clock in its answer is compared with their middle.
    let sent = SystemTime::now();
    let reply = server
        .call_on(conn, Op::Acquire, key.as_bytes(), deadline, async |c| {
            call.invoke(server, c).await
        })
        .await?;
    let answered = SystemTime::now();
    let granted = parse_acquire(reply).map_err(|msg| server.bad_reply(Op::Acquire, key, msg))?;
    // The server's own account of itself came in the same round trip, on
    // a new connection; on an old one it is known.
    let records = op.numbers.tick.is_some() || op.numbers.untaken != Untaken::Off;
    let facts = match restart_window.is_some() || records {
        true => server.facts(conn, deadline).await,
        false => None,
    };
    let no_vote = no_vote(granted.clock(), (sent, answered))
        .or_else(|| restarted(facts.as_ref(), restart_window))
        .or_else(|| evicting(facts.as_ref().filter(|_| records)));
    // This attempt's own token, fresh and random, already here: another
    // member of the fleet is this same server (one URL listed twice, a
    // cluster listed once per node, a Sentinel group beside its own
    // master). Counted as "held elsewhere", the lock would look busy,
    // held by this very attempt, on every try: a cron job skipped for
    // ever. It is a configuration that waiting cannot cure. Exclusion
    // is safe either way: one server grants one SET NX.
    if let Granted::No { holder: Some(holder), .. } = &granted
        && op.token == *holder
    {
        return Err(server.unfit(Op::Acquire, key, OWN_TOKEN.to_owned()));
    }
    Ok((granted, no_vote))
}

/// A fleet that lists a server twice: a configuration mistake (64), with
/// the fix. `twin` is the second listing, `why` says how it was told.
fn listed_twice(op: Op, key: &str, twin: &str, why: &str) -> Error {
    Error::Usage(format!(
        "{op} {}: a server is listed twice: {twin} {why}: list each server once (--servers, \
         REDLOCK_SERVERS or the configuration file's servers)",
        crate::text::display_key(key.as_bytes()),
    ))
}

/// Why a member that answers with the attempt's own token is refused: it
/// is the same server as another member that granted it.
const OWN_TOKEN: &str = "already holds this attempt's own token: the same server is listed \
                         more than once (run `redlock doctor`)";

/// Takes the waiter's entry out of this server's queue, after an attempt
/// that won elsewhere but was refused here (and so kept or refreshed the
/// entry, which would otherwise stand first for others until it expires).
/// Best effort, on the attempt's connection: after the attempt.
async fn leave_here(server: &Server, conn: &Conn, key: &str, op: &AcquireOp) {
    if op.member.is_empty() {
        return;
    }
    let mut pipe = redis::pipe();
    pipe.cmd("ZREM").arg(&op.order).arg(&op.member).ignore();
    pipe.cmd("ZREM").arg(&op.deadlines).arg(&op.member).ignore();
    let send = async |c: &mut MultiplexedConnection| pipe.query_async::<()>(c).await;
    let _ = server.call_on(conn, Op::Queue, key.as_bytes(), server.deadline(), send).await;
}

/// Deletes the token of `call`, a failed attempt, from its lock key on
/// `conn`, the connection of the attempt being withdrawn, in one round
/// trip ([`Call::run_script`]: the body goes with the connection's first
/// withdrawal only), so that no second round trip (after NOSCRIPT) is
/// left for a process exiting to cut off: once written, it runs on the
/// server even if this process is gone by then. Best effort: errors
/// change nothing about the verdict, which is already known.
///
/// The bound: it is written only if the connection takes it before its
/// deadline (redis-rs drops a queued request whose caller gave up), that
/// is while the socket still takes bytes. A server that does not read
/// (frozen, or behind a slow link) takes the TCP window's worth (64 KiB
/// or more) before that; each round adds a few hundred bytes to it once
/// the scripts went with the first. A round whose attempt fills the
/// window leaves its withdrawal unwritten and its vote to the TTL.
///
/// When the connection broke, the server has closed it or will read no
/// more from it than it already holds, so the delete goes on a fresh one;
/// it could overtake only bytes of the dead connection still unread in the
/// server's buffer, a window of one turn of the server's event loop.
///
/// `entry` is the waiter's queue entry (join score, deadline) that the
/// grant being withdrawn removed: it goes back, so that a head whose
/// attempt failed keeps its place.
async fn withdraw(
    server: &Server,
    conn: &Conn,
    key: &str,
    op: &AcquireOp,
    entry: Option<(u64, u64)>,
) {
    // No-script hook: the same compare-and-delete without a script.
    if server.scripts_refused() {
        let send = async |_: &mut MultiplexedConnection| {
            crate::lock::noscript::withdraw(
                server,
                &op.lock,
                op.record.as_deref(),
                op.token.as_bytes(),
            )
            .await
        };
        let _ = Box::pin(server.call(Op::Withdraw, key.as_bytes(), send)).await;
        return;
    }
    // A shared attempt withdraws its entry among the shared holders
    // (announcing nothing).
    let withdrawal = Operation::Withdraw(WithdrawOp {
        lock: op.lock.clone(),
        order: op.order.clone(),
        deadlines: op.deadlines.clone(),
        readers: op.readers.clone(),
        record: op.record.clone(),
        token: op.token.clone(),
        entry: entry.map(|(score, deadline)| (op.member.clone(), score, deadline)),
        channel: None,
    });
    let call = Call { op: Op::Withdraw, key: key.to_owned(), operation: withdrawal };
    let send = async |c: &mut MultiplexedConnection| call.run_script(c).await;
    let first = server.call_on(conn, Op::Withdraw, key.as_bytes(), server.deadline(), send).await;
    if let Err(e) = first
        && matches!(e.failure, Failure::Connection(_))
    {
        let _ = server.call(Op::Withdraw, key.as_bytes(), send).await;
    }
}

/// One server's grant of the lock: the key is set there.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Grant {
    /// The fence drawn there, when fencing is on.
    fence: Option<u64>,
    /// The waiter's queue entry that the grant removed there (its join
    /// score and deadline), which a withdrawal puts back.
    entry: Option<(u64, u64)>,
    /// The server's clock when it granted (`TIME`, since the Unix epoch),
    /// when it said.
    clock: Option<Duration>,
    /// The grant record this grant replaced there: when (server ms) and
    /// to which token the key was last granted, if it was.
    replaced: Option<(u64, String)>,
}

/// One server's answer to the acquire script.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Granted {
    /// Set.
    Yes(Grant),
    /// Not set: held by `holder` for another `pttl` ms (-1: no expiry), or,
    /// with no holder, free but another waiter's turn; and the queue there.
    No {
        /// The holder's value; `None` when the key is free there.
        holder: Option<String>,
        /// Its PTTL.
        pttl: i64,
        /// The queue as this server sees it after the attempt.
        queue: queue::View,
        /// The server's clock, when the refusal said it (`-n`'s term).
        clock: Option<Duration>,
    },
    /// Not set: the key is free, but the record holds a tick that ends
    /// after this attempt's starts.
    Ran(TickRan),
    /// Not set: the key is free, but this token took it since the
    /// contender began.
    Taken(String),
    /// Not set: the tick is over by this server's clock.
    Over(TickOver),
    /// Not set: the key's ticks ran under another schedule.
    Elsewhere(Schedules),
}

impl Granted {
    /// The server's clock, where its answer said it.
    fn clock(&self) -> Option<Duration> {
        match self {
            Granted::Yes(Grant { clock, .. }) | Granted::No { clock, .. } => *clock,
            Granted::Over(over) => {
                Some(Duration::from_millis(over.tick.end_ms).saturating_add(over.ended))
            }
            Granted::Ran(_) | Granted::Taken(_) | Granted::Elsewhere(_) => None,
        }
    }
}

/// How far a server's clock may be from this host's before its grant
/// counts towards no quorum: the spread of clocks that fences already
/// assume: [`fence::LINGER`] less [`fence::WINDOW`].
pub const CLOCK_ALLOWANCE: Duration = fence::LINGER.saturating_sub(fence::WINDOW);

/// Why a grant counts towards no quorum, if it does not: the server's
/// clock (`clock`, its `TIME` in the grant) is further from this host's
/// than [`CLOCK_ALLOWANCE`], beyond what the round trip `asked` (sent,
/// answered) can explain.
///
/// The argument: a server's clock decides when its keys expire. One that
/// jumped forward (a stepped NTP correction, a VM restored from a
/// snapshot) let a holder's key expire early, so its "free" may hide a
/// holder that still relies on it; a holder with exactly a quorum then
/// shares a second quorum with a newcomer. Its grant is kept (the key is
/// set there, so that it rejoins), but not counted. The bound: a clock
/// that jumped and was stepped back before the next round looks sound
/// again (the harm, an early expiry, is done and not seen); a holder that
/// holds every server needs no detection at all, since any quorum of the
/// newcomer shares a server that still has the key. A host whose own
/// clock is off sees every server off, and takes no lock until its clock
/// is fixed: the error names the offset.
pub(super) fn no_vote(
    clock: Option<Duration>,
    (sent, answered): (SystemTime, SystemTime),
) -> Option<String> {
    let clock = clock?;
    let epoch = |t: SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (sent, answered) = (epoch(sent), epoch(answered));
    let middle = (sent + answered) / 2;
    let (ahead, off) =
        if clock >= middle { (true, clock - middle) } else { (false, middle - clock) };
    clock_too_far(off, answered.saturating_sub(sent) / 2).then(|| {
        format!(
            "its clock is {} {} this host's (more than the {} the locks allow): a holder's key \
             may have expired there early",
            crate::text::fmt_duration(off),
            if ahead { "ahead of" } else { "behind" },
            crate::text::fmt_duration(CLOCK_ALLOWANCE)
        )
    })
}

/// Whether a server whose clock reads `off` from this host's, give or
/// take `uncertainty` (half the round trip that read it), gets no vote
/// (`no_vote`'s rule; `doctor` applies the same).
pub fn clock_too_far(off: Duration, uncertainty: Duration) -> bool {
    off.saturating_sub(uncertainty) > CLOCK_ALLOWANCE
}

/// Why a grant counts towards no quorum, if it does not: the server
/// (`facts`, its own account) started less than `window` ago.
///
/// The argument: a server that restarts without its data (no persistence,
/// or `appendfsync everysec` losing the last second) forgets every
/// holder's key, so its "free" may hide a holder that relies on it; with a
/// holder on exactly a quorum, a newcomer then shares a second quorum with
/// it. Redlock's answer is a delayed restart: no vote until no holder can
/// still rely on a key the server forgot. A key lives at most the longest
/// TTL (`--max-ttl`, which `run`, `acquire` and `extend` never exceed)
/// after its last write, and the fences need their linger more
/// ([`crate::fence`]): that sum is `window`. The grant is kept (the server
/// rejoins with the key), but not counted. A fleet restarted at once takes
/// no lock for `window`, and the error says when each server votes again.
///
/// What it assumes, and the cases that break it (none can be told from
/// what a server says of itself):
/// - a server that keeps every write (`appendfsync always` since it started:
///   [`crate::server::Facts::keeps_data`]) is taken at its configuration
///   and votes at once: one that came back without its data directory (a
///   container recreated without its volume, a disk replaced) looks the
///   same, and votes for a newcomer;
/// - uptime is the server's wall clock less its start: a server that
///   restarted with its clock behind, then stepped forward before anyone
///   asked, looks up for long;
/// - a server whose uptime cannot be read (an ACL without `INFO`) is
///   assumed to have restarted long ago, and `doctor` says so; one whose
///   data was lost without a restart (`FLUSHALL`) is not seen;
/// - a holder with a TTL above `--max-ttl` (another configuration) is not
///   covered.
///
/// A marker key that redlock writes on each server would see the first two
/// (absent: no vote for `window`), at the price of a window's wait the
/// first time redlock meets any server, which a new server and an emptied
/// one share.
pub(super) fn restarted(
    facts: Option<&crate::server::Facts>,
    window: Option<Duration>,
) -> Option<String> {
    let (facts, window) = (facts?, window?);
    let up = facts.started.elapsed();
    votes_again_in(up, facts.keeps_data, Some(window)).map(|rest| {
        format!(
            "it started {} ago, within the longest TTL plus 1s ({}): a restart may have lost a \
             holder's key; it votes in {} (at once if it keeps every write: start it with \
             appendonly yes and appendfsync always; or --trust-restarts)",
            crate::text::fmt_duration(up),
            crate::text::fmt_duration(window),
            crate::text::fmt_duration(rest)
        )
    })
}

/// Why a grant for a tick or a `-n` counts towards no quorum, if it does
/// not: the server (`facts`) may evict keys ([`crate::server::evicts`]).
/// An evicted grant record forgets the tick that ran or the take since the
/// `-n` began, as a restart without its data would, and unlike a restart
/// nothing tells when: no vote for as long as the policy stands. A server
/// whose `INFO` is refused is not seen.
fn evicting(facts: Option<&crate::server::Facts>) -> Option<String> {
    let policy = facts?.evicts.as_deref()?;
    Some(format!(
        "its maxmemory-policy {policy} may evict the record of a tick or of a take: no vote for \
         --once-per or -n (set maxmemory-policy noeviction)"
    ))
}

/// How long until a server up for `up` votes again, if it has no vote
/// now (`restarted`'s rule; `doctor` applies the same): `None` once it
/// is older than `window`, when it keeps every write, or with no window
/// (`--trust-restarts`).
pub fn votes_again_in(
    up: Duration,
    keeps_data: bool,
    window: Option<Duration>,
) -> Option<Duration> {
    let window = window?;
    (!keeps_data && up < window).then(|| window - up)
}

/// A server's `TIME` (seconds, microseconds) as time since the epoch;
/// `None` for a reply no clock gives (missing, or past `Duration::MAX`).
pub(super) fn server_time(secs: Option<u64>, micros: Option<u64>) -> Option<Duration> {
    Duration::from_secs(secs?).checked_add(Duration::from_micros(micros?))
}

/// Reads the acquire script's reply.
fn parse_acquire(reply: Value) -> Result<Granted, String> {
    let bad = |reply: &Value| format!("unexpected acquire reply {reply:?}");
    let Value::Array(items) = &reply else { return Err(bad(&reply)) };
    // A server's TIME at the end of a reply, when it says it.
    let clock = |time: &[Value]| -> Result<Option<Duration>, String> {
        let number = |v: &Value| match v {
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse::<u64>().ok(),
            _ => None,
        };
        match time {
            [] => Ok(None),
            [secs, micros] => {
                Ok(Some(server_time(number(secs), number(micros)).ok_or_else(|| bad(&reply))?))
            }
            _ => Err(bad(&reply)),
        }
    };
    match items.as_slice() {
        [Value::Int(1), Value::Int(fence), Value::Int(score), Value::Int(deadline), rest @ ..] => {
            let entry = u64::try_from(*score).ok().zip(u64::try_from(*deadline).ok());
            let (time, replaced) = match rest {
                [_, _, Value::Int(at), Value::BulkString(token)] => (
                    &rest[..2],
                    u64::try_from(*at)
                        .ok()
                        .map(|at| (at, String::from_utf8_lossy(token).into_owned())),
                ),
                [] | [_, _] => (rest, None),
                _ => return Err(bad(&reply)),
            };
            let clock = clock(time)?;
            Ok(Granted::Yes(Grant { fence: u64::try_from(*fence).ok(), entry, clock, replaced }))
        }
        [Value::Int(4), Value::Int(start), Value::Int(end), Value::Int(now)] => {
            let number = |n: &i64| u64::try_from(*n).map_err(|_| bad(&reply));
            let tick = Tick { start_ms: number(start)?, end_ms: number(end)?, offset_s: 0 };
            let ended = Duration::from_millis(number(now)?.saturating_sub(tick.end_ms));
            Ok(Granted::Over(TickOver { tick, ended }))
        }
        [Value::Int(2), Value::BulkString(token), Value::Int(start), Value::Int(end)] => {
            let tick = Tick {
                start_ms: u64::try_from(*start).map_err(|_| bad(&reply))?,
                end_ms: u64::try_from(*end).map_err(|_| bad(&reply))?,
                offset_s: 0,
            };
            Ok(Granted::Ran(TickRan { token: String::from_utf8_lossy(token).into_owned(), tick }))
        }
        [Value::Int(5), Value::BulkString(token), Value::BulkString(schedule)] => {
            Ok(Granted::Elsewhere(Schedules {
                token: String::from_utf8_lossy(token).into_owned(),
                theirs: String::from_utf8_lossy(schedule).into_owned(),
                ours: String::new(),
            }))
        }
        [Value::Int(3), Value::BulkString(token), Value::Int(_)] => {
            Ok(Granted::Taken(String::from_utf8_lossy(token).into_owned()))
        }
        [
            Value::Int(0),
            holder,
            Value::Int(pttl),
            Value::Int(rank),
            Value::Int(len),
            first,
            time @ ..,
        ] => {
            let text = |v: &Value| match v {
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            };
            let (Some(holder), Some(first)) = (text(holder), text(first)) else {
                return Err(bad(&reply));
            };
            Ok(Granted::No {
                // A key that exists has a PTTL of -1 or more: -2 is "free".
                holder: (*pttl != -2).then_some(holder),
                pttl: *pttl,
                queue: queue::View {
                    rank: usize::try_from(*rank).ok(),
                    len: usize::try_from(*len).map_err(|_| bad(&reply))?,
                    first,
                },
                clock: clock(time)?,
            })
        }
        _ => Err(bad(&reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_numbers_are_packed_as_sixteen_little_endian_doubles() {
        let numbers = Numbers {
            ttl_ms: 30_000,
            proposal: Some(1_795_621_712_435_565),
            window_us: 500_000,
            life_ms: 31_000,
            join: true,
            order: false,
            queue_life_ms: 60_000,
            since_ms: 1_795_621_712_435,
            skew_ms: 100,
            places: 3,
            shared: false,
            untaken: Untaken::Since(1_795_621_712_000),
            tick: Some(Tick {
                start_ms: 1_795_621_500_000,
                end_ms: 1_795_621_800_000,
                offset_s: 0,
            }),
        };
        let packed = numbers.pack();
        let read: Vec<f64> =
            packed.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
        #[allow(clippy::cast_precision_loss)]
        let expected = [
            30_000.0,
            1_795_621_712_435_565.0,
            500_000.0,
            31_000.0,
            1.0,
            0.0,
            60_000.0,
            1_795_621_712_435.0,
            100.0,
            3.0,
            0.0,
            1_795_621_712_000.0,
            -1.0,
            1_795_621_500_000.0,
            1_795_621_800_000.0,
            1_795_621_800_000.0 + CLOCK_ALLOWANCE.as_millis() as f64,
        ];
        assert_eq!(read, expected);
        // A start in the future: no time since it, only `more`.
        let began = crate::clock::BootInstant::now() + Duration::from_secs(3600);
        let untaken = Untaken::For { began, more: Duration::from_millis(7) };
        let unfenced = Numbers { proposal: None, untaken, ..numbers }.pack();
        assert_eq!(f64::from_le_bytes(unfenced[8..16].try_into().unwrap()), -1.0);
        let untaken: Vec<f64> = unfenced[88..104]
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(untaken, [-1.0, 7.0], "untaken for: since -1, for 7");
    }

    #[test]
    fn a_busy_round_waits_for_its_slow_servers_only_when_another_attempt_follows() {
        let queue = queue::View { rank: None, len: 0, first: String::new() };
        let held = || {
            Reply::Answered(Granted::No {
                holder: Some("other".into()),
                pttl: 9000,
                queue: queue.clone(),
                clock: None,
            })
        };
        // 3 of 5 say "held by another": busy, whatever the last 2 say.
        let replies = vec![held(), held(), held(), Reply::NotAwaited, Reply::NotAwaited];
        let tally = Tally { no: 3, ..Tally::new(5, 3) };
        let took = Duration::from_millis(40);
        // A wait attempts again on the same connections: it lets the slow
        // servers answer first, as long again as the round took.
        let wait = patience(&tally, &replies, took, 3, 0, After::Retry);
        assert_eq!(wait, Listen::For(took));
        // `-n` is done: it stops at once.
        assert_eq!(patience(&tally, &replies, took, 3, 0, After::Nothing), Listen::Stop);
        // Not yet settled (2 held, 3 pending): both listen on.
        let open = Tally { no: 2, ..Tally::new(5, 3) };
        let some = vec![held(), held(), Reply::NotAwaited, Reply::NotAwaited, Reply::NotAwaited];
        for after in [After::Retry, After::Nothing] {
            assert_eq!(patience(&open, &some, took, 3, 0, after), Listen::On);
        }
    }

    #[test]
    fn a_split_names_no_holder_and_says_how_the_votes_lie() {
        let queue = queue::View { rank: None, len: 0, first: String::new() };
        let no = |holder: Option<&str>, pttl| {
            let holder = holder.map(str::to_owned);
            Reply::Answered(Granted::No { holder, pttl, queue: queue.clone(), clock: None })
        };
        let replies = || {
            vec![
                no(Some("a"), 900),
                no(Some("a"), 500),
                no(Some("b"), -1),
                Reply::Answered(Granted::Yes(Grant {
                    fence: None,
                    entry: None,
                    clock: None,
                    replaced: None,
                })),
            ]
        };
        let replies_now = replies();
        let votes = Votes::of(&replies_now);
        assert_eq!(votes.ours, 1);
        assert_eq!(votes.counts(), vec![2, 1]);
        let mut with_queue = replies();
        with_queue.extend([no(None, -2), no(None, -2)]);
        assert_eq!(Votes::of(&with_queue).counts(), vec![2, 1, 2], "the queue counts last");
        assert_eq!(votes.others[0].2, Some(Duration::from_millis(500)), "the shortest expiry");
        assert_eq!(votes.others[1].2, None, "no expiry");
        let split =
            Split { votes: vec![2, 1, 1], silent: 1, expires: None, failures: Failures::default() };
        assert_eq!(
            split.describe("k", 3),
            "k: no holder has a quorum (3 of 5); the votes are split among 3 tokens (2, 1 and 1 servers); 1 did not answer: no server answered in time"
        );
    }

    #[test]
    fn a_grant_from_a_clock_too_far_from_ours_is_no_vote() {
        let at = |s: u64| std::time::UNIX_EPOCH + Duration::from_secs(s);
        let asked = (at(1_000), at(1_000) + Duration::from_millis(10));
        let clock = |ms: u64| Some(Duration::from_secs(1_000) + Duration::from_millis(ms));
        assert_eq!(no_vote(clock(5), asked), None, "in step");
        assert_eq!(no_vote(clock(800), asked), None, "within the allowance");
        assert_eq!(no_vote(None, asked), None, "no clock said (no scripts)");
        let why = no_vote(clock(60_000), asked).unwrap();
        assert!(why.contains("ahead of") && why.contains("60.0s"), "{why}");
        let behind = no_vote(Some(Duration::from_secs(998)), asked).unwrap();
        assert!(behind.contains("behind"), "{behind}");
        // A slow round trip explains up to half of itself.
        let slow = (at(1_000), at(1_002));
        assert_eq!(no_vote(clock(1_500), slow), None);
    }

    #[test]
    fn a_grant_that_replaced_a_take_since_the_start_is_a_take() {
        let grant = |replaced: Option<(u64, &str)>| {
            Reply::Answered(Granted::Yes(Grant {
                fence: None,
                entry: None,
                clock: Some(Duration::from_millis(10_000)),
                replaced: replaced.map(|(at, by)| (at, by.to_owned())),
            }))
        };
        // Started at 9,000 by servers 0 and 1's clocks; server 2 said none.
        let starts = [Some(9_000), Some(9_000), None, Some(9_000), Some(9_000)];
        let mut replies = vec![
            grant(Some((9_000, "taker"))),
            grant(Some((8_999, "before"))),
            grant(Some((9_500, "unknown start"))),
            grant(Some((9_500, "mine"))),
            grant(None),
        ];
        judge_takes(&mut replies, &starts, "mine");
        assert!(matches!(&replies[0], Reply::Answered(Granted::Taken(t)) if t == "taker"));
        for (i, reply) in replies.iter().enumerate().skip(1) {
            assert!(matches!(reply, Reply::Answered(Granted::Yes(_))), "{i}: {reply:?}");
        }
    }

    #[test]
    fn acquire_reply_is_read_strictly() {
        let int = Value::Int;
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let yes = Value::Array(vec![int(1), int(7), int(10), int(20)]);
        let grant = |fence, entry, clock| Grant { fence, entry, clock, replaced: None };
        assert_eq!(parse_acquire(yes), Ok(Granted::Yes(grant(Some(7), Some((10, 20)), None))));
        let timed = Value::Array(vec![int(1), int(7), int(-1), int(-1), text("12"), text("5")]);
        let clock = Some(Duration::from_secs(12) + Duration::from_micros(5));
        assert_eq!(parse_acquire(timed), Ok(Granted::Yes(grant(Some(7), None, clock))));
        let unfenced = Value::Array(vec![int(1), int(-1), int(-1), int(-1)]);
        assert_eq!(parse_acquire(unfenced), Ok(Granted::Yes(grant(None, None, None))));
        // The record the grant replaced: when and to whom; -1 for none.
        let replacing = |at: i64, by: &str| {
            Value::Array(vec![
                int(1),
                int(7),
                int(-1),
                int(-1),
                text("12"),
                text("5"),
                int(at),
                text(by),
            ])
        };
        assert_eq!(
            parse_acquire(replacing(11_900, "a")),
            Ok(Granted::Yes(Grant {
                replaced: Some((11_900, "a".into())),
                ..grant(Some(7), None, clock)
            }))
        );
        assert_eq!(parse_acquire(replacing(-1, "")), Ok(Granted::Yes(grant(Some(7), None, clock))));
        assert!(
            parse_acquire(Value::Array(vec![int(1), int(7), int(-1), int(-1), text("12")]))
                .is_err()
        );
        // The tick is over: its start, end and the server's clock.
        let over_reply = Value::Array(vec![int(4), int(60_000), int(120_000), int(185_500)]);
        let tick = Tick { start_ms: 60_000, end_ms: 120_000, offset_s: 0 };
        let over = TickOver { tick, ended: Duration::from_millis(65_500) };
        assert_eq!(
            parse_acquire(over_reply).map(|g| (g.clock(), g)),
            Ok((Some(Duration::from_millis(185_500)), Granted::Over(over)))
        );
        let busy = Value::Array(vec![int(0), text("t"), int(5), int(1), int(2), text("w")]);
        let queue = queue::View { rank: Some(1), len: 2, first: "w".into() };
        let held =
            Granted::No { holder: Some("t".into()), pttl: 5, queue: queue.clone(), clock: None };
        assert_eq!(parse_acquire(busy), Ok(held));
        let queued = Value::Array(vec![int(0), text(""), int(-2), int(1), int(2), text("w")]);
        assert_eq!(
            parse_acquire(queued),
            Ok(Granted::No { holder: None, pttl: -2, queue: queue.clone(), clock: None })
        );
        let stamped = Value::Array(vec![
            int(0),
            text("t"),
            int(5),
            int(-1),
            int(0),
            text(""),
            text("12"),
            text("5"),
        ]);
        let clock = Some(Duration::from_secs(12) + Duration::from_micros(5));
        assert!(matches!(parse_acquire(stamped), Ok(Granted::No { clock: c, .. }) if c == clock));
        let raw_empty_value =
            Value::Array(vec![int(0), text(""), int(-1), int(-1), int(0), text("")]);
        assert!(matches!(parse_acquire(raw_empty_value), Ok(Granted::No { holder: Some(_), .. })));
        assert!(parse_acquire(Value::Array(vec![int(1), int(7)])).is_err());
        assert!(parse_acquire(Value::Okay).is_err());
    }
}
