//! The quorum arithmetic of Redlock and the parallel fan-out to the servers.
//!
//! The pure half ([`Tally`], [`Outcome`], [`standing`], [`validity`]) decides
//! from counts and durations and is unit-tested on its own. The async half
//! ([`fan_out`]) runs one call per server at once and stops listening when
//! the caller's [`Listen`] rule says so: as soon as the answer can no longer
//! change, or within a bound of its own that a hung server cannot stretch.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;

pub use crate::failure::Failures;
use crate::server::{Op, Server, ServerError};

/// How a quorum decision ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// At least a quorum of servers said yes.
    Won,
    /// So many servers said no that a quorum is impossible even if every
    /// failed server had said yes: the lock is held elsewhere / not ours.
    Refused,
    /// Neither: too many servers failed to answer for a verdict.
    Unreachable,
}

/// Counts of per-server answers for one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    /// Servers that said yes (set, extended, deleted).
    pub yes: usize,
    /// Servers that answered no (held by another value, not ours).
    pub no: usize,
    /// Servers that failed (timeout, refused, error reply).
    pub failed: usize,
    /// Number of servers.
    pub total: usize,
    /// Yes answers needed.
    pub quorum: usize,
}

impl Tally {
    /// An empty tally for `total` servers.
    pub fn new(total: usize, quorum: usize) -> Tally {
        Tally { yes: 0, no: 0, failed: 0, total, quorum }
    }

    /// Servers that have not answered yet.
    pub fn pending(&self) -> usize {
        self.total.saturating_sub(self.yes + self.no + self.failed)
    }

    fn could_win(&self) -> bool {
        self.yes + self.pending() >= self.quorum
    }

    fn could_be_refused(&self) -> bool {
        self.no + self.pending() > self.total - self.quorum
    }

    fn could_be_unreachable(&self) -> bool {
        // Every pending answer could still be a failure.
        self.yes < self.quorum && self.no <= self.total - self.quorum
    }

    /// The outcome once it can no longer change, whatever the pending
    /// servers answer; `None` while it still can.
    pub fn settled(&self) -> Option<Outcome> {
        let possible = [
            (self.could_win(), Outcome::Won),
            (self.could_be_refused(), Outcome::Refused),
            (self.could_be_unreachable(), Outcome::Unreachable),
        ];
        let mut it = possible.iter().filter(|(p, _)| *p);
        match (it.next(), it.next()) {
            (Some((_, only)), None) => Some(*only),
            _ => None,
        }
    }
}

/// Time left on a lock taken at `elapsed` after the first request went out:
/// `ttl - elapsed - (ttl * drift_factor + 2ms)`, or `None` when nothing is left.
///
/// The 2 ms and the drift term are the Redlock paper's allowance for clock
/// drift between the client and the servers (redis.io/docs/manual/patterns/distributed-locks).
pub fn validity(ttl: Duration, elapsed: Duration, drift_factor: f64) -> Option<Duration> {
    let drift = drift_allowance(ttl, drift_factor);
    ttl.checked_sub(elapsed)?.checked_sub(drift).filter(|v| !v.is_zero())
}

/// What one acquire round's answers prove about who holds the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// A quorum granted the lock to us.
    Won,
    /// Another value holds a quorum: the index into `others`.
    Held(usize),
    /// No value holds a quorum, and none can: the votes are split among
    /// values (contenders, or leftovers of crashed ones), with at most a
    /// minority of servers silent. Nobody holds the lock.
    Split,
    /// Too few servers answered for a quorum of answers: nothing is known.
    Unreachable,
    /// Pending answers could still make a value win.
    Open,
}

/// Decides an acquire round from who holds how many servers: `ours` granted
/// us, `others[i]` hold the i-th other value, `pending` may still answer
/// (the rest failed, or will not be heard). A value holds the lock only on
/// a quorum (the plain majority rule); anything less, however it is
/// spread, is nobody's lock.
pub fn standing(ours: usize, others: &[usize], pending: usize, quorum: usize) -> Standing {
    if ours >= quorum {
        return Standing::Won;
    }
    if let Some(i) = others.iter().position(|&n| n >= quorum) {
        return Standing::Held(i);
    }
    let best = others.iter().copied().max().unwrap_or(0).max(ours);
    if pending > 0 && best + pending >= quorum {
        return Standing::Open;
    }
    let answered = ours + others.iter().sum::<usize>();
    if answered + pending >= quorum { Standing::Split } else { Standing::Unreachable }
}

/// The clock-drift allowance of a lock: `ttl * drift_factor + 2ms`.
pub fn drift_allowance(ttl: Duration, drift_factor: f64) -> Duration {
    ttl.mul_f64(drift_factor) + Duration::from_millis(2)
}

/// One server's part in a round.
#[derive(Debug)]
pub enum Reply<T> {
    /// It answered.
    Answered(T),
    /// It failed.
    Failed(ServerError),
    /// The verdict was settled before it answered; its call was dropped.
    NotAwaited,
}

impl Failures {
    /// Collects the failures of a round.
    pub fn of<T>(replies: &[Reply<T>]) -> Failures {
        Failures(
            replies
                .iter()
                .filter_map(|r| match r {
                    Reply::Failed(e) => Some(e.clone()),
                    _ => None,
                })
                .collect(),
        )
    }
}

/// How each answer counts in the tally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vote {
    /// Counts toward the quorum.
    Yes,
    /// Counts against it.
    No,
}

/// The result of one round over all servers.
#[derive(Debug)]
pub struct Round<T> {
    /// The counts the verdict comes from.
    pub tally: Tally,
    /// Each server's reply, in server order.
    pub replies: Vec<Reply<T>>,
    /// Each server's time to answer from the start of the round (`None`: not awaited).
    pub latency: Vec<Option<Duration>>,
    /// When the round began, before its first call was sent: each answer
    /// arrived at `start` plus its latency, on the boot clock.
    pub start: crate::clock::BootInstant,
}

impl<T> Round<T> {
    /// The verdict (a finished round is always settled).
    pub fn outcome(&self) -> Outcome {
        self.tally.settled().unwrap_or(Outcome::Unreachable)
    }

    /// The per-server errors.
    pub fn failures(&self) -> Failures {
        Failures::of(&self.replies)
    }
}

/// Where one server's task puts its answer. The task may go on after it
/// answered: an acquire task waits for the verdict and, when told to,
/// withdraws on the same connection.
pub struct Answer<T>(oneshot::Sender<Result<T, ServerError>>);

impl<T> Answer<T> {
    /// Hands the answer to the round (a no-op once the round stopped listening).
    pub fn send(self, result: Result<T, ServerError>) {
        // Err: the round has already ended; the answer is simply not heard.
        let _ = self.0.send(result);
    }
}

/// How much longer a round listens, given what it has heard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// The verdict is settled: stop now.
    Stop,
    /// Wait for every pending server (each bounded by the node timeout).
    On,
    /// Wait for the pending servers at most this much longer (counted from
    /// when the rule said so; the earliest such bound holds).
    For(Duration),
}

/// The usual rule: stop as soon as the tally is settled when `early`,
/// otherwise hear every server.
pub fn until_settled<T>(early: bool) -> impl Fn(&Tally, &[Reply<T>], Duration) -> Listen {
    move |tally, _, _| if early && tally.settled().is_some() { Listen::Stop } else { Listen::On }
}

/// Calls `call` on every server at once, each as a task on `tasks`, and
/// collects the answers in server order. `vote` classifies each answer;
/// after each one, `listen` (given the tally, the replies so far and the
/// time since the start) says whether to go on. The calls still running
/// when the round stops go on in the background (so a slow server still
/// gets the lock, the extension or the delete, and an acquire task can
/// still withdraw); their servers show as [`Reply::NotAwaited`], and the
/// caller drains `tasks` before exiting.
pub async fn fan_out<T, Fut>(
    servers: &[Arc<Server>],
    tasks: &TaskTracker,
    quorum: usize,
    (op, key): (Op, &str),
    call: impl Fn(Arc<Server>, Answer<T>) -> Fut,
    vote: impl Fn(&T) -> Vote,
    listen: impl Fn(&Tally, &[Reply<T>], Duration) -> Listen,
) -> Round<T>
where
    T: Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let start = crate::clock::BootInstant::now();
    let mut tally = Tally::new(servers.len(), quorum);
    let mut replies: Vec<Reply<T>> = servers.iter().map(|_| Reply::NotAwaited).collect();
    let mut latency = vec![None; servers.len()];
    let mut running: FuturesUnordered<_> = servers
        .iter()
        .enumerate()
        .map(|(i, server)| {
            let (tx, rx) = oneshot::channel();
            // Boxed: a task's future is moved into its cell and its
            // stages, and a call's (the connection, the script, the
            // withdrawal) is kilobytes; a pointer moves for nothing.
            tasks.spawn(Box::pin(call(Arc::clone(server), Answer(tx))));
            async move { (i, rx.await) }
        })
        .collect();
    let mut cutoff: Option<tokio::time::Instant> = None;
    loop {
        let next = match cutoff {
            Some(at) => match crate::clock::timeout_at(at, running.next()).await {
                Ok(next) => next,
                Err(_) => break,
            },
            None => running.next().await,
        };
        let Some((i, result)) = next else { break };
        latency[i] = Some(start.elapsed());
        replies[i] = match result {
            Ok(Ok(value)) => {
                match vote(&value) {
                    Vote::Yes => tally.yes += 1,
                    Vote::No => tally.no += 1,
                }
                Reply::Answered(value)
            }
            Ok(Err(e)) => {
                tally.failed += 1;
                Reply::Failed(e)
            }
            Err(_) => {
                tally.failed += 1;
                let why = "call aborted: its task ended without an answer".to_owned();
                Reply::Failed(servers[i].bad_reply(op, key, why))
            }
        };
        match listen(&tally, &replies, start.elapsed()) {
            Listen::Stop => break,
            Listen::On => {}
            Listen::For(more) => {
                let at = tokio::time::Instant::now() + more;
                cutoff = Some(cutoff.map_or(at, |c| c.min(at)));
            }
        }
    }
    Round { tally, replies, latency, start }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(yes: usize, no: usize, failed: usize, total: usize, quorum: usize) -> Tally {
        Tally { yes, no, failed, total, quorum }
    }

    #[test]
    fn settles_as_soon_as_the_answer_is_known() {
        // 5 servers, quorum 3.
        assert_eq!(t(3, 0, 0, 5, 3).settled(), Some(Outcome::Won));
        assert_eq!(t(2, 0, 0, 5, 3).settled(), None);
        assert_eq!(t(0, 3, 0, 5, 3).settled(), Some(Outcome::Refused));
        assert_eq!(t(0, 0, 3, 5, 3).settled(), Some(Outcome::Unreachable));
        // Two no and two failures: the last answer decides between refused and unreachable.
        assert_eq!(t(0, 2, 2, 5, 3).settled(), None);
        assert_eq!(t(1, 2, 2, 5, 3).settled(), Some(Outcome::Unreachable));
        assert_eq!(t(0, 3, 2, 5, 3).settled(), Some(Outcome::Refused));
        // One server: its answer is the verdict.
        assert_eq!(t(0, 0, 0, 1, 1).settled(), None);
        assert_eq!(t(1, 0, 0, 1, 1).settled(), Some(Outcome::Won));
        assert_eq!(t(0, 1, 0, 1, 1).settled(), Some(Outcome::Refused));
        assert_eq!(t(0, 0, 1, 1, 1).settled(), Some(Outcome::Unreachable));
        // Quorum of all 3.
        assert_eq!(t(2, 1, 0, 3, 3).settled(), Some(Outcome::Refused));
        assert_eq!(t(2, 0, 1, 3, 3).settled(), Some(Outcome::Unreachable));
    }

    #[test]
    fn every_final_tally_is_settled() {
        for total in 1..=7 {
            for quorum in total / 2 + 1..=total {
                for yes in 0..=total {
                    for no in 0..=total - yes {
                        let failed = total - yes - no;
                        let outcome = t(yes, no, failed, total, quorum).settled();
                        assert!(outcome.is_some(), "{yes}/{no}/{failed} of {total} q{quorum}");
                    }
                }
            }
        }
    }

    #[test]
    fn only_a_quorum_holds_and_a_split_is_nobodys_lock() {
        use Standing::*;
        // 5 servers, quorum 3.
        assert_eq!(standing(3, &[2], 0, 3), Won);
        assert_eq!(standing(1, &[1, 3], 0, 3), Held(1));
        assert_eq!(standing(0, &[3], 2, 3), Held(0), "a quorum is proof, whatever is pending");
        // Split among tokens, every server heard: nobody holds it.
        assert_eq!(standing(1, &[2, 2], 0, 3), Split);
        assert_eq!(standing(1, &[1, 1, 1, 1], 0, 3), Split);
        // A split plus one silent server is still a split, not unavailable.
        assert_eq!(standing(2, &[2], 0, 3), Split);
        // A pending server that could complete anyone's quorum keeps it open.
        assert_eq!(standing(2, &[2], 1, 3), Open);
        assert_eq!(standing(1, &[2, 1], 1, 3), Open);
        // ... one that could not is not waited for.
        assert_eq!(standing(1, &[1, 1], 2, 3), Open);
        assert_eq!(standing(1, &[1, 1], 1, 3), Split);
        // Fewer than a quorum of answers: nothing is known.
        assert_eq!(standing(1, &[1], 0, 3), Unreachable);
        assert_eq!(standing(0, &[], 0, 3), Unreachable);
        // One server.
        assert_eq!(standing(0, &[], 1, 1), Open);
        assert_eq!(standing(0, &[1], 0, 1), Held(0));
    }

    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        let ttl = Duration::from_secs(10);
        // 10s - 1s - (100ms + 2ms)
        assert_eq!(validity(ttl, Duration::from_secs(1), 0.01), Some(Duration::from_millis(8898)));
        assert_eq!(validity(ttl, Duration::from_secs(11), 0.01), None);
        assert_eq!(validity(ttl, Duration::from_millis(9898), 0.01), None);
        assert_eq!(validity(Duration::from_millis(2), Duration::ZERO, 0.0), None);
    }
}
