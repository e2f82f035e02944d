//! The acquire round and its verdict: one script call per server that
//! takes the lock, keeps the wait queue and draws the fence, each server's
//! part run by `contend` (whose grants count: `vote`); the verdict, from
//! who holds how many servers (`tally`), read over by the queue and the
//! fleet's identities; and the fence write-back of a won round.

use super::contend::contend;
use super::granted::{Grant, Granted};
use super::ops::{Numbers, Untaken};
use super::record::Schedules;
use super::tally::{After, Votes, patience};
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
        // A token given as text: its mode, read once here.
        self.attempt(key, Held::of(token), ttl, fence, 0, Terms::default()).await
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
        held: Held<'_>,
        ttl: Duration,
        fence: bool,
        splits: u32,
        terms: Terms<'_>,
    ) -> AttemptReport {
        let start = BootInstant::now();
        // `-n`'s rule is on only for `-n`, which attempts no more once busy.
        let after = if terms.untaken.is_some() { After::Nothing } else { After::Retry };
        let call = Arc::new(self.acquire_call(key, held, ttl, fence, terms));
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
                let restart = self.restart_window_for(terms);
                let call =
                    terms.untaken.map_or_else(|| Arc::clone(&call), |s| s.call_for(&call, &server));
                let twin = Arc::clone(&self.twin);
                // A `-n` contender's last attempt: its withdrawals may wait
                // for slow servers' answers until the process exits.
                let exit = (after == After::Nothing).then(|| self.exiting.clone());
                contend(server, call, answer, verdict_rx.clone(), restart, twin, exit)
            },
            Granted::vote,
            |tally, replies, elapsed| patience(tally, replies, elapsed, quorum, splits, after),
        )
        .await;
        // `-n`'s judgment of its grants ([`record`]).
        let starts = terms
            .untaken
            .map(|s| s.judge(&mut round, held.token, &self.servers))
            .unwrap_or_default();
        let servers = self.results(&round, Granted::describe);
        let views: Vec<queue::View> = round
            .replies
            .iter()
            .filter_map(|r| match r {
                Reply::Answered(Granted::No { queue, .. }) => Some(queue.clone()),
                _ => None,
            })
            .collect();
        let attempt = self.conclude_acquire(key, held, ttl, fence, start, &round).await;
        let attempt = self.final_verdict(key, attempt, terms, &round, &views).await;
        verdict.send_replace(Some(matches!(attempt, Attempt::Acquired(_))));
        let ahead = terms.place.and_then(|p| queue::ahead(&views, self.quorum, p.member));
        AttemptReport { attempt, servers, ahead, starts }
    }

    /// The call of an acquire round: `held`'s token for `ttl` on `key`,
    /// drawing a fence when `fence` is true, on `terms`.
    fn acquire_call(
        &self,
        key: &str,
        held: Held<'_>,
        ttl: Duration,
        fence: bool,
        terms: Terms<'_>,
    ) -> Call {
        let place = terms.place;
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
            shared: held.shares(),
            untaken: terms.untaken.map_or(Untaken::Off, |s| s.term(&self.servers)),
            tick: terms.tick,
        };
        Call {
            op: Op::Acquire,
            key: key.to_owned(),
            operation: Operation::Acquire(AcquireOp {
                lock: self.layout.held_key(key, held),
                fence: self.layout.fence_key(key),
                order,
                deadlines,
                // A shared holder's token joins the shared holders instead
                // ([`crate::shared`]): the same script, round and queue.
                readers: held.shares().then(|| self.layout.readers_key(key)),
                record: (!held.shares()).then(|| self.layout.record_key(key)),
                token: held.token.to_owned(),
                member: place.map_or(String::new(), |p| p.member.to_owned()),
                numbers,
                schedule: terms.tick.and(terms.schedule).map(str::to_owned),
            }),
        }
    }

    /// The verdict of `round` once this host, the queue and the fleet's
    /// identities have had their say over `attempt`, the servers' verdict
    /// (`conclude_acquire`); `views` are the queue as each server
    /// that refused saw it.
    async fn final_verdict(
        &self,
        key: &str,
        mut attempt: Attempt,
        terms: Terms<'_>,
        round: &Round<Granted>,
        views: &[queue::View],
    ) -> Attempt {
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
        if let Some(place) = terms.place
            && Votes::of(&round.replies).queued > 0
            && !matches!(attempt, Attempt::Acquired(_) | Attempt::Busy(_) | Attempt::Elsewhere(_))
        {
            // The queue refused us somewhere and no holder explains the
            // rest: wait behind the waiter first on a quorum, or, when
            // none is, attempt again without order.
            attempt = match queue::turn(views, self.quorum, place.member) {
                queue::Turn::Behind { ahead } => Attempt::Queued { ahead },
                queue::Turn::Head | queue::Turn::Unordered => Attempt::Disordered,
            };
        }
        // After the queue's reading, which never touches a won round: the
        // refusal of a fleet that lists a server twice is final (the
        // verdict, sent once this returns, makes every server withdraw its vote). A
        // round the twin refused (it met its own token) is a
        // configuration failure too, and asks the same question.
        if matches!(
            attempt,
            Attempt::Acquired(_) | Attempt::Unavailable(Error::Unavailable { config: true, .. })
        ) && let Some(twins) = self.twins(key).await
        {
            attempt = Attempt::Unavailable(twins);
        }
        attempt
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
                        mode: held.mode,
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
        held: Held<'_>,
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
                lock: self.layout.held_key(key, held),
                fence: self.layout.fence_key(key),
                readers: held.shares().then(|| self.layout.readers_key(key)),
                token: held.token.to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
