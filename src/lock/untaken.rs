//! `-n`'s steps in an acquire round, each a method of its rule for the
//! attempt ([`Since`]); [`super::record`] states the rule and its
//! argument. The term each server's call carries, and after the round,
//! when the contender began by each answering server's clock and the
//! grants judged by it.

use super::granted::{Grant, Granted};
use super::ops::Untaken;
use super::*;

impl Since<'_> {
    /// The term of an acquire call. Where no answer said when the
    /// contender began by a server's clock: the time since it began, plus
    /// on a later attempt one node timeout of `servers`, the longest a call
    /// may run after it was sent ([`super::record`]).
    pub(super) fn term(self, servers: &[Arc<Server>]) -> Untaken {
        match self {
            Since::First { began } => Untaken::For { began, more: Duration::ZERO },
            Since::Later { began, .. } => {
                let now = tokio::time::Instant::now();
                let call = servers.iter().map(|s| s.deadline()).max();
                let more = call.map(|d| d.saturating_duration_since(now)).unwrap_or_default();
                Untaken::For { began, more }
            }
        }
    }

    /// The acquire `call` as `server` gets it: on a later attempt, with the
    /// start by its clock that an earlier answer of it said.
    pub(super) fn call_for(self, call: &Arc<Call>, server: &Server) -> Arc<Call> {
        let Since::Later { starts, .. } = self else { return Arc::clone(call) };
        match starts.iter().find(|(name, _)| name == server.name()) {
            Some(&(_, ms)) => Arc::new(call.untaken_since(ms)),
            None => Arc::clone(call),
        }
    }

    /// Judges the grants of `round` (of `token`) after the fact
    /// ([`judge_takes`]) by when the contender began by each answering
    /// server's clock ([`starts`]), and returns those starts by server
    /// name for the next attempt.
    pub(super) fn judge(
        self,
        round: &mut Round<Granted>,
        token: &str,
        servers: &[Arc<Server>],
    ) -> Vec<(String, u64)> {
        let starts = starts(round, self.began());
        judge_takes(&mut round.replies, &starts, token);
        servers
            .iter()
            .zip(starts)
            .filter_map(|(server, start)| Some((server.name().to_owned(), start?)))
            .collect()
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
/// clock stepped back between the take and the grant. Costs a false busy
/// only where the start is unknown: a take made less than one answer's
/// latency (its fsync, the host's scheduling) before the start, by a
/// holder that took, ran and released within that time.
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
