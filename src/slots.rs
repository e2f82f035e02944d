//! `--limit N`: at most N holders of a key at once, as N places, each an
//! ordinary Redlock lock.
//!
//! # Why N slot locks, and not one set per server
//! The common Redis semaphore keeps, on each server, a set of at most N
//! holders, and admits a holder that a quorum of servers let into their
//! set (redis-semaphore's RedlockSemaphore, RedPulsar, redlock4j). That
//! bound is not N. Each server admits N holders, so the servers together
//! hold `servers * N` admissions, and a holder needs only `quorum` of them:
//! up to `⌊servers * N / quorum⌋` holders can be admitted at once. With 3
//! servers (quorum 2) and N = 2: holders admitted on {A,B}, {B,C} and
//! {A,C} fill every set exactly to 2 and make three holders. Nothing
//! intersects: two quorums share a server, but a set of size N has room
//! for both of them there.
//!
//! Here place S of key K is its own key (`KeyLayout::slot_key`: place 1 is
//! the lock key itself, so N = 1 is the ordinary lock, keys and all), and
//! holding place S is holding that key by the plain Redlock rule: one
//! value, `SET NX`, on a quorum. Two holders of the same place would need
//! two quorums, which share a server, and that server's key holds one
//! value (the acquire script's `SET NX` is atomic): so each place has at
//! most one holder at any moment, under Redlock's own assumptions (bounded
//! clock drift between the servers' TTLs and the client's validity, a
//! server that lost its data restarts only after the longest TTL). A
//! holder holds exactly one place, hence at most N holders. The bound
//! breaks exactly where the lock breaks: a server restarted without its
//! data before the TTL lapsed may grant the same place twice.
//!
//! # Agreement on N
//! The place and N travel in the holder's token ([`crate::token::Mode::Place`]), so
//! every contender that meets a holder learns the N it was taken with. A
//! contender that meets a holder with another N takes nothing and ends
//! with a usage error naming both values (exit 64). Why the token and not
//! a companion key holding N: the token is already renewed, released and
//! expired with its place, and read by `status`; a companion key would
//! need renewing by every holder (one more script per renewal) and would
//! outlive or underlive the places it describes.
//!
//! Why contenders try the places in order, 1 first: a contender with a
//! larger N than the holders' can only go past their last place after
//! finding every place below busy, so it meets one of them (and stops)
//! before it could raise the number of holders above theirs; and a
//! contender of any N meets the holder of place 1 whenever there is one.
//! What it does not catch: a contender with a smaller N than the holders'
//! that finds a free place among its first N takes it, while holders on
//! places above its N (which it never looks at) may make more holders
//! than its N; the holders' larger bound still holds.
//!
//! # Waiting and cost
//! One attempt of a waiter ([`attempt`]) tries places 1, 2, ... until it
//! wins one: the cost of a round is one acquire round per place tried, N
//! when every place is busy. Places low in the order are handed over
//! first, which is harmless (they are equal) and keeps agreement as above.
//! Contenders that start together split the votes of a place, withdraw,
//! and try the next one; when every place splits, the wait's jittered
//! backoff ([`crate::wait`]) sets them apart as for the lock. The waiters
//! of all places share the key's queue and release channel (the release
//! of any place is announced on the key's channel), so the waiter at the
//! head of the queue wakes when any place frees, and takes it.
//!
//! # Fencing
//! All places share the key's one fencing counter (`KeyLayout::fence_key`),
//! so the argument of [`crate::fence`] carries over unchanged: any two
//! quorums intersect whatever the place, so a holder that acquires after
//! another's acquisition completed draws on a server whose counter is at
//! least the earlier fence, and gets a larger one. Holders that acquire at
//! the same time (each with a place of its own) are concurrent, and may
//! be handed the same number; a store that must order them by fence must
//! order holders that overlap, which no semaphore can.

use std::time::Duration;

use crate::error::Error;
use crate::lock::{
    Attempt, AttemptReport, Fleet, Held, Holders, Request, ServerView, Status, Terms,
};
use crate::token::Token;

/// The largest `--limit`: a busy round of a waiter costs one acquire round
/// per place.
pub const MAX_LIMIT: u32 = 1000;

/// One attempt at any place of `request`'s key, in order from place 1,
/// with a fresh token; the
/// place won is in the lock's mode ([`crate::token::Mode::slot`]). With one place it
/// is exactly [`Fleet::attempt`] on the lock key; with `--shared` (one
/// place), the same with a shared holder's token ([`crate::shared`]). `splits` and `place`
/// (the waiter's entry in the key's one queue, shared by the places) are
/// as for [`Fleet::attempt`].
///
/// When no place is won, the verdict is the one that tells a waiter the
/// most: a split (some place has no holder: retrying may win it), then
/// unavailable (some place could not be read), then busy, naming the
/// holder whose place frees soonest so that the waiter never sleeps past
/// it. A holder taken with another limit or mode ends it with a usage error.
pub async fn attempt(
    fleet: &Fleet,
    request: &Request,
    splits: u32,
    terms: Terms<'_>,
) -> AttemptReport {
    let Request { key, ttl, fence, holders, note, job, until, .. } = request;
    let base = Token::new().with_note(note.clone(), job.clone()).with_until(*until);
    let try_place = async |i: u32| {
        let mode = holders.mode_at(i + 1);
        let value = Token { mode, ..base.clone() }.to_string();
        let report = fleet.attempt(key, Held { token: &value, mode }, *ttl, *fence, splits, terms);
        agree(report.await, key, *holders)
    };
    let mut best = try_place(0).await;
    for i in 1..holders.places() {
        if final_(&best.attempt) {
            break;
        }
        let report = try_place(i).await;
        if final_(&report.attempt) || rank(&report.attempt) > rank(&best.attempt) {
            best = report;
        }
    }
    best
}

/// True when an attempt ends the round: a place won, or an error that no
/// other place can change (a limit that disagrees, a configuration error).
fn final_(attempt: &Attempt) -> bool {
    matches!(
        attempt,
        Attempt::Acquired(_)
            | Attempt::Disordered
            | Attempt::Unavailable(Error::Usage(_) | Error::Unavailable { config: true, .. })
    )
}

/// How much a failed attempt tells a waiter: a split (no holder), then
/// unavailable, then busy by the holder that frees soonest.
fn rank(attempt: &Attempt) -> (u8, Duration) {
    match attempt {
        Attempt::Split(_) => (3, Duration::ZERO),
        Attempt::Unavailable(_) => (2, Duration::ZERO),
        // Sooner is better: the inverse of the remaining time.
        Attempt::Busy(h) => (1, Duration::MAX - h.remaining.unwrap_or(Duration::MAX)),
        // Not our turn in the key's queue: wait for it, as for the lock.
        Attempt::Queued { .. } => (4, Duration::ZERO),
        Attempt::Acquired(_) | Attempt::Disordered => (5, Duration::ZERO),
        // Neither comes of a `--limit` key (no terms there).
        Attempt::Ran(_) | Attempt::Taken(_) | Attempt::Over(_) | Attempt::Elsewhere(_) => {
            (0, Duration::ZERO)
        }
    }
}

/// `report`, or a usage error when the place is held by a token taken
/// with a limit other than `holders`' places, or shared holders meet a
/// limit's holder (agreement on N; nothing was taken).
fn agree(report: AttemptReport, key: &str, holders: Holders) -> AttemptReport {
    let limit = holders.places();
    let theirs = match &report.attempt {
        Attempt::Busy(holder) if crate::shared::is_marker(&holder.value) && limit > 1 => {
            let message = format!(
                "{}: held by shared holders (--shared), but this asks for --limit {limit}; \
                 every holder of a key must use the same mode (nothing taken)",
                crate::text::display_key(key.as_bytes()),
            );
            let attempt = Attempt::Unavailable(Error::Usage(message));
            return AttemptReport { attempt, ..report };
        }
        Attempt::Busy(holder) => match holder.value.parse::<Token>() {
            Ok(t) if t.mode.limit() != limit => t,
            _ => return report,
        },
        _ => return report,
    };
    let (ours, what) = if holders == Holders::Shared {
        ("--shared".to_owned(), "mode")
    } else {
        (format!("--limit {limit}"), "limit")
    };
    let message = format!(
        "{}: held with --limit {} by {} pid {}, but this asks for {ours}; \
         every holder of a key must use the same {what} (nothing taken)",
        crate::text::display_key(key.as_bytes()),
        theirs.mode.limit(),
        theirs.host,
        theirs.pid,
    );
    AttemptReport { attempt: Attempt::Unavailable(Error::Usage(message)), ..report }
}

/// The largest limit written in the tokens that `status` saw (1 when none).
fn limit_seen(status: &Status) -> u32 {
    status
        .servers
        .iter()
        .filter_map(|(_, view)| match view {
            ServerView::Held { value, .. } => value.parse::<Token>().ok(),
            _ => None,
        })
        .map(|t| t.mode.limit())
        .max()
        .unwrap_or(1)
}

/// Reads every place of `key`: places 1 to `limit`, or, when `limit` is
/// `None`, to the largest limit written in the tokens found on place 1.
/// (A key whose place 1 is free shows no other place then: pass `limit`.)
pub async fn status(fleet: &Fleet, key: &str, limit: Option<u32>) -> Vec<(u32, Status)> {
    let first = fleet.status_of(key, 1).await;
    let limit = limit.unwrap_or_else(|| limit_seen(&first)).clamp(1, MAX_LIMIT);
    let rest = futures_util::future::join_all((2..=limit).map(|s| fleet.status_of(key, s))).await;
    std::iter::once((1, first)).chain((2..=limit).zip(rest)).collect()
}

/// What `release --force` of the places of a key did.
#[derive(Debug)]
pub struct Forced {
    /// How many servers had each place deleted, place 1 first.
    pub deleted: Vec<usize>,
    /// Place 1 as every server showed it while the deletes began: the
    /// holders deleted, and the servers that did not answer.
    pub read: Status,
}

/// `release --force` of every place of `key`: places 1 to `limit`, or,
/// when `limit` is `None`, to the largest limit written in the tokens
/// found on place 1.
///
/// The read of place 1 (for that limit and for naming the holders) goes
/// out with the deletes of places 1 to `limit`, not before them, and the
/// places are freed at once, not one after another: a server that does not
/// answer costs one node timeout. Places above 1 that only place 1's tokens
/// reveal (`limit` is `None`) take a second round, and with it a second
/// node timeout; `--limit N` avoids it.
pub async fn force_release(
    fleet: &Fleet,
    key: &str,
    limit: Option<u32>,
    any_value: bool,
) -> Result<Forced, Error> {
    let given = limit.unwrap_or(1).clamp(1, MAX_LIMIT);
    let free = |places: std::ops::RangeInclusive<u32>| {
        futures_util::future::join_all(
            places.map(|slot| fleet.force_release_of(key, slot, any_value)),
        )
    };
    let (read, freed) = tokio::join!(fleet.status_of(key, 1), free(1..=given));
    let mut deleted = freed.into_iter().collect::<Result<Vec<usize>, Error>>()?;
    if limit.is_none() {
        let seen = limit_seen(&read).clamp(1, MAX_LIMIT);
        let more = free(2..=seen).await;
        deleted.extend(more.into_iter().collect::<Result<Vec<usize>, Error>>()?);
    }
    Ok(Forced { deleted, read })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::Holder;

    #[test]
    fn a_split_beats_unavailable_beats_the_soonest_busy() {
        let busy = |ms| {
            Attempt::Busy(Holder { value: "v".into(), remaining: Some(Duration::from_millis(ms)) })
        };
        let never = Attempt::Busy(Holder { value: "v".into(), remaining: None });
        assert!(rank(&busy(10)) > rank(&busy(20)));
        assert!(rank(&busy(20)) > rank(&never));
        let unavailable = Attempt::Unavailable(Error::Usage(String::new()));
        assert!(rank(&unavailable) > rank(&busy(1)));
    }

    #[test]
    fn a_holder_with_another_limit_is_a_usage_error() {
        let theirs = Holders::Limit(3).mode_at(2);
        let theirs = Token { mode: theirs, ..Token::new() }.to_string();
        let report = |value: &str| AttemptReport {
            attempt: Attempt::Busy(Holder { value: value.to_owned(), remaining: None }),
            servers: Vec::new(),
            ahead: None,
            starts: Vec::new(),
        };
        match agree(report(&theirs), "k", Holders::Limit(2)).attempt {
            Attempt::Unavailable(Error::Usage(m)) => {
                assert!(m.contains("--limit 3") && m.contains("--limit 2"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(agree(report(&theirs), "k", Holders::Limit(3)).attempt, Attempt::Busy(_)));
        assert!(matches!(
            agree(report("foreign"), "k", Holders::Limit(2)).attempt,
            Attempt::Busy(_)
        ));
        let plain = Token::new().to_string();
        assert!(matches!(
            agree(report(&plain), "k", Holders::Limit(2)).attempt,
            Attempt::Unavailable(_)
        ));
    }
}
