//! The wait queue: waiters on one lock are served in the order they began
//! to wait, across hosts.
//!
//! Each server keeps the queue of the lock in two sorted sets in the lock's
//! hash slot ([`crate::lock::KeyLayout::queue_keys`]): each waiter's entry
//! scored by the server's own `TIME` when it joined, and the server time at
//! which it expires unless refreshed ([`LIFETIME`]). The queue is kept by
//! the acquire round itself (`scripts/acquire.lua`), so that waiting in
//! order costs no round of its own: an attempt on a free key is granted
//! only to the waiter first in the queue there (or to anyone while nobody
//! waits), a waiter not granted takes or refreshes its place, and one
//! granted leaves the queue (and goes back in its place when its attempt
//! is withdrawn). A waiter attempts at its wake-ups (at least every
//! [`REFRESH`] plus one pause), so a waiter that dies (even SIGKILL) leaves
//! the queue by itself within one lifetime, measured on the servers'
//! clocks.
//!
//! A waiter's turn is decided by a quorum: it is the head when it is first
//! on a quorum of servers. Two waiters cannot both be first on a quorum
//! (the quorums intersect in a server where only one of them is first),
//! so at most one waiter takes the lock per release, and the others are
//! refused by the queue, not by a split.
//!
//! Exclusion never depends on the queue: the head still takes the lock by
//! the plain majority rule, and anybody else's attempt is refused the same
//! way. When no waiter is first on a quorum (servers that joined waiters in
//! different orders, a server restarted empty), the waiter attempts once
//! without order ([`crate::lock::Attempt::Disordered`]), which costs order,
//! never safety.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::server::{Op, Server, ServerError};
use crate::token::{Mode, Token};

/// How long an entry lives after its last refresh. A waiter refreshes once
/// [`REFRESH`] has passed, at its next wake-up (at most one backoff step,
/// [`crate::wait::MAX_PAUSE`], later) plus an attempt (at most a node
/// timeout, 1 s by default): about 3 s at worst, so five seconds leave room
/// for a late refresh, and bound how long a dead waiter holds up the one
/// behind it. A `--node-timeout` above 2 s can let a live entry lapse when
/// a quorum is that slow; the waiter then joins again at the back.
pub const LIFETIME: Duration = Duration::from_secs(5);

/// How far a server lets a waiter's place (the time it began to wait, by
/// its own clock) differ from the server's clock. Waiters whose clocks are
/// in step get the same order on every server, so that every server names
/// the same first waiter in its release announcements; a waiter on a clock
/// further off is placed by the server's clock, within this window.
pub const SKEW: Duration = Duration::from_millis(100);

/// How often a waiter refreshes its entry at least (see [`LIFETIME`]).
pub const REFRESH: Duration = Duration::from_secs(1);

/// How long a release's call of a waiter lasts (`scripts/announce.lua`,
/// `CALL_GRACE`, the same number): a later release calls the next waiter
/// instead, and the called waiter's entry lapses this long after the call
/// unless its attempt refreshed it. A waiter woken by a release attempts
/// within a round trip; one that has not within this grace is dead or
/// starved, and stops holding up a free lock.
pub const CALL_GRACE: Duration = Duration::from_secs(1);

/// The longest a free lock can be held up by the queue alone, with no
/// holder: a waiter first in the queue that died lapses within one
/// [`LIFETIME`] of its last refresh ([`CALL_GRACE`] once a release called
/// it). `-n` that finds a free lock that is another waiter's turn keeps
/// trying this long (the waiter either takes it, and it is busy, or
/// lapses, and it takes it), so that a dead waiter never turns a free lock
/// into "busy". A `--wait` keeps its own bound.
pub const HELD_UP: Duration = LIFETIME;

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

/// A fresh queue entry, in `mode`, for a wait of this process (a shared
/// waiter's says so: [`crate::lock::Holders::waiter`]), saying where the
/// waiter runs (`note`, the CI `job`: `status` shows them in its queue
/// lines; [`Token::with_note`] bounds and escapes them, so the entry
/// stays one token). Its first 32 random bits, the first
/// [`crate::lock::WAKE_TAG`] hex digits, are drawn once per process,
/// so that every wait of the process listens on one wake channel
/// ([`crate::lock::wake_channel`]) however many times it waits; the other
/// random bits, with the pid and the time, keep entries unique.
pub fn entry(mode: Mode, note: Option<String>, job: Option<String>) -> Token {
    static TAG: LazyLock<u128> = LazyLock::new(|| uuid::Uuid::new_v4().as_u128() >> 96 << 96);
    let token = Token::new().with_note(note, job);
    Token { random: *TAG | (token.random & ((1 << 96) - 1)), mode, ..token }
}

/// Removes `member`'s entry from the queue (`order`, `deadlines`) on
/// every server, best effort: an entry left behind expires.
pub async fn leave(servers: Vec<Arc<Server>>, key: String, keys: [String; 2], member: String) {
    let [order, deadlines] = &keys;
    let (key, member) = (key.as_str(), member.as_str());
    let calls = servers.iter().map(|server| async move {
        let _ = server
            .call(Op::Queue, key.as_bytes(), async |c| {
                redis::pipe()
                    .cmd("ZREM")
                    .arg(order)
                    .arg(member)
                    .ignore()
                    .cmd("ZREM")
                    .arg(deadlines)
                    .arg(member)
                    .ignore()
                    .query_async::<()>(c)
                    .await
            })
            .await;
    });
    futures_util::future::join_all(calls).await;
}

/// Decides the turn of `member` from the queue views of the servers
/// that answered without granting it.
pub fn turn(views: &[View], quorum: usize, member: &str) -> Turn {
    if views.len() < quorum {
        return Turn::Unordered;
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
    Turn::Behind { ahead: ahead(views, quorum, member).unwrap_or(1).max(1) }
}

/// How many waiters are ahead of `member`, as a quorum sees it: the
/// quorum-th smallest of its ranks (a server where it is not queued counts
/// it last). `None` when fewer than a quorum of views, or no member.
pub fn ahead(views: &[View], quorum: usize, member: &str) -> Option<usize> {
    if member.is_empty() || views.len() < quorum {
        return None;
    }
    let mut ranks: Vec<usize> = views.iter().map(|v| v.rank.unwrap_or(v.len)).collect();
    ranks.sort_unstable();
    Some(ranks[quorum - 1])
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
pub async fn list(
    servers: &[Arc<Server>],
    key: &str,
    [order, deadlines]: &[String; 2],
) -> Vec<Result<Vec<(String, u64)>, ServerError>> {
    let calls = servers.iter().map(|server| {
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

    fn view(rank: i64, len: usize, first: &str) -> View {
        View { rank: usize::try_from(rank).ok(), len, first: first.into() }
    }

    #[test]
    fn the_call_grace_is_the_announcement_scripts() {
        let lua = include_str!("scripts/announce.lua");
        let line = format!("local CALL_GRACE = {}\n", CALL_GRACE.as_millis());
        assert!(lua.contains(&line), "announce.lua lacks {line:?}");
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
        let down = [view(0, 1, "a")];
        assert_eq!(turn(&down, 2, "a"), Turn::Unordered);
        let split = [view(0, 3, "a"), view(1, 3, "b"), view(2, 3, "c")];
        assert_eq!(turn(&split, 2, "a"), Turn::Unordered);
    }

    #[test]
    fn a_newcomer_waits_behind_a_queue_that_a_quorum_holds() {
        let views = [view(-1, 2, "a"), view(-1, 1, "a"), view(-1, 3, "a")];
        assert_eq!(turn(&views, 2, "n"), Turn::Behind { ahead: 2 });
        assert_eq!(ahead(&views, 2, "n"), Some(2));
        assert_eq!(turn(&[view(-1, 1, "a"), view(-1, 1, "b")], 2, "n"), Turn::Unordered);
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
