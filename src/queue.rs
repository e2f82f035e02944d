//! The wait queue: waiters on one lock are served in the order they began
//! to wait, across hosts (issue 11, item 1).
//!
//! Each server keeps the queue of the lock in two sorted sets in the lock's
//! hash slot (`redlock:{KEY}:queue` and `redlock:{KEY}:queue:deadlines`
//! with the native key layout): each waiter's entry scored by the server's
//! own `TIME` when it joined, and the server time at which it expires
//! unless refreshed ([`LIFETIME`]). A waiter refreshes its entry at its
//! wake-ups (at least every [`REFRESH`] plus one pause), so a waiter that
//! dies (even SIGKILL) leaves the queue by itself within one lifetime,
//! measured on the servers' clocks.
//!
//! A waiter's turn is decided by a quorum: it is the head when it is first
//! on a quorum of servers. Two waiters cannot both be first on a quorum
//! (the quorums intersect in a server where only one of them is first),
//! so at most one waiter attempts the lock per release.
//!
//! Exclusion never depends on the queue: the head still takes the lock by
//! the plain majority rule, and anybody else's attempt is refused the same
//! way. A queue that cannot be read from a quorum, or on which no waiter
//! is first on a quorum (servers that joined waiters in different orders,
//! a server restarted empty), is [`Turn::Unordered`]: every waiter then
//! attempts as it would without a queue, which costs order and wake-ups,
//! never safety.

use std::time::Duration;

use futures_util::StreamExt;
use redis::{Script, Value};

use crate::lock::{Fleet, KeyLayout};
use crate::server::{Op, Server, ServerError};

/// How long an entry lives after its last refresh. A waiter refreshes once
/// [`REFRESH`] has passed, at its next wake-up (at most one backoff step,
/// [`crate::wait::MAX_PAUSE`], later) plus a queue round (at most a node
/// timeout, 1 s by default): about 3 s at worst, so five seconds leave room
/// for a late refresh, and bound how long a dead waiter holds up the one
/// behind it. A `--node-timeout` above 2 s can let a live entry lapse when
/// a quorum is that slow; the waiter then joins again at the back.
pub const LIFETIME: Duration = Duration::from_secs(5);

/// How often a waiter refreshes its entry at least (see [`LIFETIME`]).
pub const REFRESH: Duration = Duration::from_secs(1);

static SCRIPT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/queue.lua")));

/// A waiter's place, as a quorum of servers sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turn {
    /// First on a quorum: this waiter (or, for a peek, nobody) may attempt.
    Head,
    /// Behind `ahead` other waiters (the quorum-th smallest rank).
    Behind {
        /// Waiters ahead of this one.
        ahead: usize,
    },
    /// No quorum answered, or no waiter is first on a quorum: attempt
    /// without order.
    Unordered,
}

/// One server's view after a queue operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The member's rank (`None`: not queued there).
    pub rank: Option<usize>,
    /// Entries queued there.
    pub len: usize,
    /// The first member there (empty when none).
    pub first: String,
}

/// The server-side names of the queue of `key`: order and deadlines, in
/// the lock's hash slot.
pub fn keys(layout: KeyLayout, key: &str) -> [String; 2] {
    [layout.queue_key(key, "queue"), layout.queue_key(key, "queue-deadlines")]
}

/// Runs the queue script with `op` for `member` on every server at once,
/// and returns as soon as a quorum has answered (or every server has
/// answered or failed): a slow or frozen minority never delays a waiter's
/// turn, as it never delays an acquisition. Calls still in flight are
/// dropped; an entry they would have refreshed or removed on a minority
/// changes nothing that a quorum decides, and expires by itself.
pub async fn round(
    fleet: &Fleet,
    key: &str,
    op: &str,
    member: &str,
) -> Vec<Result<View, ServerError>> {
    let [order, deadlines] = keys(fleet.key_layout(), key);
    let life = LIFETIME.as_millis().to_string();
    let calls = fleet.servers().iter().map(|server| {
        let (order, deadlines, life) = (&order, &deadlines, &life);
        async move {
            let reply = server
                .call(Op::Queue, key.as_bytes(), async |c| {
                    SCRIPT
                        .key(order)
                        .key(deadlines)
                        .arg(op)
                        .arg(member)
                        .arg(life)
                        .invoke_async::<Value>(c)
                        .await
                })
                .await?;
            parse(reply).map_err(|msg| server.bad_reply(Op::Queue, key, msg))
        }
    });
    let mut pending: futures_util::stream::FuturesUnordered<_> = calls.collect();
    let mut views = Vec::new();
    let mut answered = 0;
    while answered < fleet.quorum()
        && let Some(view) = pending.next().await
    {
        answered += usize::from(view.is_ok());
        views.push(view);
    }
    views
}

/// Joins (or refreshes) `member`'s entry and says whose turn it is.
pub async fn join(fleet: &Fleet, key: &str, member: &str) -> Turn {
    turn(&round(fleet, key, "join", member).await, fleet.quorum(), member)
}

/// Whose turn it is for a newcomer that does not queue (`-n`, or a first
/// attempt): [`Turn::Head`] when the queue is empty on a quorum.
pub async fn peek(fleet: &Fleet, key: &str) -> Turn {
    turn(&round(fleet, key, "peek", "").await, fleet.quorum(), "")
}

/// Removes `member`'s entry (best effort: an entry left behind expires).
pub async fn leave(fleet: &Fleet, key: &str, member: &str) {
    let _ = round(fleet, key, "leave", member).await;
}

/// Decides the turn of `member` (empty: a newcomer not queued) from the
/// servers' views (those of the first quorum to answer, and any failures).
/// Pure, for tests.
pub fn turn(views: &[Result<View, ServerError>], quorum: usize, member: &str) -> Turn {
    let views: Vec<&View> = views.iter().filter_map(|v| v.as_ref().ok()).collect();
    if views.len() < quorum {
        return Turn::Unordered;
    }
    if member.is_empty() {
        // A newcomer waits only behind a queue that a quorum holds (the
        // quorum-th longest): entries on a minority are leftovers.
        let mut lens: Vec<usize> = views.iter().map(|v| v.len).collect();
        lens.sort_unstable_by(|a, b| b.cmp(a));
        return match lens[quorum - 1] {
            0 => Turn::Head,
            ahead => Turn::Behind { ahead },
        };
    }
    let first_here = views.iter().filter(|v| v.first == member).count();
    if first_here >= quorum {
        return Turn::Head;
    }
    // Someone else is first on a quorum: wait behind them.
    let someone_first = views.iter().any(|v| {
        !v.first.is_empty() && views.iter().filter(|w| w.first == v.first).count() >= quorum
    });
    if !someone_first {
        return Turn::Unordered;
    }
    let mut ranks: Vec<usize> = views.iter().map(|v| v.rank.unwrap_or(v.len)).collect();
    ranks.sort_unstable();
    Turn::Behind { ahead: ranks[quorum - 1].max(1) }
}

/// Reads the script's reply: `{rank, len, first}`.
fn parse(reply: Value) -> Result<View, String> {
    let bad = || format!("unexpected queue reply {reply:?}");
    let Value::Array(items) = &reply else { return Err(bad()) };
    match items.as_slice() {
        [Value::Int(rank), Value::Int(len), first] => {
            let first = match first {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => return Err(bad()),
            };
            Ok(View {
                rank: usize::try_from(*rank).ok(),
                len: usize::try_from(*len).map_err(|_| bad())?,
                first,
            })
        }
        _ => Err(bad()),
    }
}

/// One waiter in the queue as `status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// Its entry: the token-shaped member ([`crate::token::Token`]).
    pub member: String,
    /// When it joined, in ms since the Unix epoch on the servers' clocks
    /// (the median of the servers that have it).
    pub since_ms: u64,
}

/// The live entries of each server's queue of `key`, with the server time
/// each joined: read-only (expired entries are skipped, not purged).
pub async fn list(fleet: &Fleet, key: &str) -> Vec<Result<Vec<(String, u64)>, ServerError>> {
    let [order, deadlines] = keys(fleet.key_layout(), key);
    let calls = fleet.servers().iter().map(|server: &std::sync::Arc<Server>| {
        let (order, deadlines) = (&order, &deadlines);
        async move {
            type Reply = ((u64, u64), Vec<(String, u64)>, Vec<(String, u64)>);
            let ((secs, micros), joined, expiry): Reply = server
                .call(Op::Queue, key.as_bytes(), async |c| {
                    redis::pipe()
                        .cmd("TIME")
                        .cmd("ZRANGE")
                        .arg(order)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .cmd("ZRANGE")
                        .arg(deadlines)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .query_async(c)
                        .await
                })
                .await?;
            let now = secs * 1000 + micros / 1000;
            let live: std::collections::HashSet<&str> =
                expiry.iter().filter(|(_, at)| *at > now).map(|(m, _)| m.as_str()).collect();
            Ok(joined.into_iter().filter(|(m, _)| live.contains(m.as_str())).collect())
        }
    });
    futures_util::future::join_all(calls).await
}

/// The queue a quorum agrees on: the waiters queued on at least `quorum`
/// servers, first-come first, by the median time they joined.
pub fn agreed(lists: &[Result<Vec<(String, u64)>, ServerError>], quorum: usize) -> Vec<Waiter> {
    let mut seen: std::collections::HashMap<&str, Vec<u64>> = std::collections::HashMap::new();
    for list in lists.iter().filter_map(|l| l.as_ref().ok()) {
        for (member, since) in list {
            seen.entry(member).or_default().push(*since);
        }
    }
    let mut waiters: Vec<Waiter> = seen
        .into_iter()
        .filter(|(_, times)| times.len() >= quorum)
        .map(|(member, mut times)| {
            times.sort_unstable();
            Waiter { member: member.to_owned(), since_ms: times[times.len() / 2] }
        })
        .collect();
    waiters.sort_by(|a, b| (a.since_ms, &a.member).cmp(&(b.since_ms, &b.member)));
    waiters
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(rank: i64, len: usize, first: &str) -> Result<View, ServerError> {
        Ok(View { rank: usize::try_from(rank).ok(), len, first: first.into() })
    }

    #[test]
    fn the_head_is_first_on_a_quorum_and_only_one_can_be() {
        let views = [view(0, 2, "a"), view(0, 2, "a"), view(1, 2, "b")];
        assert_eq!(turn(&views, 2, "a"), Turn::Head);
        let views_b = [view(1, 2, "a"), view(1, 2, "a"), view(0, 2, "b")];
        assert_eq!(turn(&views_b, 2, "b"), Turn::Behind { ahead: 1 });
    }

    #[test]
    fn no_quorum_or_no_first_on_a_quorum_is_unordered() {
        let down = [view(0, 1, "a"), Err(fake_error())];
        assert_eq!(turn(&down, 2, "a"), Turn::Unordered);
        let split = [view(0, 3, "a"), view(1, 3, "b"), view(2, 3, "c")];
        assert_eq!(turn(&split, 2, "a"), Turn::Unordered);
    }

    #[test]
    fn a_newcomer_goes_first_only_on_an_empty_queue() {
        assert_eq!(turn(&[view(-1, 0, ""), view(-1, 0, ""), view(-1, 1, "a")], 2, ""), Turn::Head);
        assert_eq!(turn(&[view(-1, 0, ""), view(-1, 1, "a")], 2, ""), Turn::Head);
        assert_eq!(
            turn(&[view(-1, 1, "a"), view(-1, 1, "a"), view(-1, 0, "")], 2, ""),
            Turn::Behind { ahead: 1 }
        );
    }

    #[test]
    fn status_shows_the_waiters_a_quorum_has_in_arrival_order() {
        let lists = vec![
            Ok(vec![("b".to_owned(), 20), ("a".to_owned(), 10), ("x".to_owned(), 5)]),
            Ok(vec![("a".to_owned(), 11), ("b".to_owned(), 21)]),
            Err(fake_error()),
        ];
        let q = agreed(&lists, 2);
        assert_eq!(q.iter().map(|w| w.member.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(q[0].since_ms, 11);
    }

    fn fake_error() -> ServerError {
        ServerError {
            server: "a:1".into(),
            op: Op::Queue,
            key: "k".into(),
            failure: crate::server::Failure::Refused,
        }
    }
}
