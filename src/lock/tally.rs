//! An acquire round's answers read: who holds how many servers
//! ([`Votes`]), which decides the verdict, and whether the round may stop
//! listening before every server answered (`patience`).

use super::granted::Granted;
use super::record::Schedules;
use super::*;

/// Who holds how many servers, from one acquire round's answers.
pub(super) struct Votes<'a> {
    /// Servers that granted us.
    pub(super) ours: usize,
    /// The tick that ran, and how many servers said so.
    pub(super) ran: Option<(TickRan, usize)>,
    /// A token that took the key since the contender began, and how many
    /// servers said so.
    pub(super) taken: Option<(&'a str, usize)>,
    /// The tick is over, as the first server that said so saw it, and how
    /// many servers said so.
    pub(super) over: Option<(&'a TickOver, usize)>,
    /// Another schedule ran the key's ticks, as the first server that said
    /// so recorded it.
    pub(super) elsewhere: Option<(&'a Schedules, usize)>,
    /// Every other value seen: the value, how many servers hold it, and its
    /// shortest remaining TTL among them (`None`: no expiry).
    pub(super) others: Vec<(&'a str, usize, Option<Duration>)>,
    /// Servers where the key is free but another waiter is first in the
    /// queue: they count as one more value, "the queue".
    pub(super) queued: usize,
}

impl<'a> Votes<'a> {
    pub(super) fn of(replies: &'a [Reply<Granted>]) -> Votes<'a> {
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
    pub(super) fn counts(&self) -> Vec<usize> {
        let mut counts: Vec<usize> = self.others.iter().map(|(_, n, _)| *n).collect();
        let taken = self.taken.map_or(0, |(_, n)| n);
        let ran = self.ran.as_ref().map_or(0, |(_, n)| *n);
        let over = self.over.map_or(0, |(_, n)| n);
        let elsewhere = self.elsewhere.map_or(0, |(_, n)| n);
        counts.extend([self.queued, ran, taken, over, elsewhere].into_iter().filter(|n| *n > 0));
        counts
    }
}

/// The least an acquire round with split votes (or a configuration error)
/// waits for its slowest servers, on top of the time it has already taken.
const STRAGGLER_FLOOR: Duration = Duration::from_millis(2);

/// What follows an acquire round that another holder won: another
/// attempt (a wait), or nothing (`-n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum After {
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
pub(super) fn patience(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
