//! `--shared`: any number of shared holders at once, or one exclusive
//! holder (an ordinary lock, a run without `--shared`), never both.
//!
//! # How
//! The shared holders hold the lock key together: while any of them has a
//! live entry on a server, the key there holds the marker
//! [`SHARED_MARKER`] (never a token) with a PTTL at least as long as the
//! latest entry's, and each holder's token is an entry of a sorted set
//! beside it (`redlock:{KEY}:readers`), scored by the server time at which
//! it expires (`scripts/acquire.lua` with a fifth key). A shared holder joins where
//! the key is free or holds the marker, and holds when a quorum let it in
//! and validity is left, by the lock's own rule and arithmetic. An
//! exclusive holder is an ordinary lock: `SET NX` of its token, which the
//! marker refuses.
//!
//! # Why a shared quorum and an exclusive quorum are never both granted
//! Let S hold shared on quorum Qs and E hold exclusive on quorum Qe at the
//! same moment, both within validity. Qs and Qe share a server X. On X the
//! lock key holds one value: the marker (from S's join, kept at least as
//! long as S's entry, hence at least S's TTL from the join, which outlasts
//! S's validity under the lock's clock-drift assumption) or E's token
//! (for E's TTL). The scripts run atomically, one after the other. If S's
//! join ran first, E's `SET NX` found the marker and X said no to E; if
//! E's ran first, S's join found E's token and X said no to S. Either way
//! X is not in both quorums: a contradiction. Releases and renewals never
//! shorten the marker below a live entry (`withdraw.lua` sets it to the
//! latest live entry), so the marker is there whenever an entry is.
//! What breaks it is what breaks the lock: a server that restarts without
//! its data before the longest TTL has passed, or clocks that drift more
//! than the drift factor allows.
//!
//! Shared holders do not exclude each other: any number join. An attempt
//! that did not reach a quorum withdraws its entry everywhere (the same
//! script as a release, announcing nothing); an entry that lands after its
//! withdrawal (a frozen server answering late) keeps the marker up to its
//! TTL, which delays exclusive holders but never breaks exclusion.
//!
//! # Served in turn: no starvation either way
//! A stream of overlapping shared holders keeps the marker up for ever, so
//! an exclusive waiter would starve if newcomers kept joining; a stream of
//! exclusive holders, each queued behind the last, would starve a shared
//! waiter that stepped aside for them. Neither happens: both kinds wait in
//! the key's one queue ([`crate::queue`]), kept by the same acquire script
//! in the same round (`scripts/acquire.lua`, which a shared token sends
//! with the shared holders as a fifth key). An exclusive waiter takes a
//! free key only when it is first in the queue; a shared waiter joins when
//! no exclusive waiter is ahead of it, so the shared waiters queued
//! together go in together, and a shared newcomer queues behind an
//! exclusive waiter instead of joining. When the last shared holder
//! leaves, the release names the first waiter, as an exclusive release
//! does; a shared waiter woken by a release that names another shared
//! waiter attempts too ([`crate::wait`]), since it may go in alongside.
//! Like every order in redlock, this rests on the queue and so on the
//! newcomers not passing `--unordered`; exclusion never does.
//!
//! # Fencing, renewal, release
//! A shared holder draws a fence from the key's counter as an exclusive
//! holder does, in the same script (the rule and argument of
//! [`crate::fence`]; a write-back compares the holder's entry instead of
//! the key). Its token says it is shared ([`crate::token::Mode::Shared`]),
//! read once where the token comes in, and carried as the lock's
//! [`crate::lock::Lock::mode`] ([`crate::lock::Held`]): the acquire, fence write-back, withdrawal,
//! release and renewal rounds of [`Fleet`] (`scripts/shared_extend.lua`
//! for `extend` and `--keep`) take the shared holders' key for it, so
//! renewal, `--keep`, release and `redlock extend/release --token` work
//! for both.

use std::time::Duration;

use redis::Value;

use crate::lock::{Call, Fleet, Lua, Operation, parse_int};
use crate::quorum::{Failures, Reply, Vote};
use crate::server::Op;
use crate::token::SHARED_MARKER;
/// The shared holders' scripts.
struct Scripts {
    status: Lua,
    force: Lua,
}

static SCRIPTS: Scripts = Scripts {
    status: Lua::new(crate::lock::bodies::SHARED_STATUS),
    force: Lua::new(crate::lock::bodies::SHARED_FORCE),
};

/// What `release --force` of the shared holders did, server by server.
#[derive(Debug)]
pub struct Forced {
    /// The servers that had the marker (and now have no shared holders).
    pub deleted: usize,
    /// The servers that answered (every server is heard, each within the
    /// node timeout).
    pub answered: usize,
    /// The servers that did not answer, and why.
    pub failures: Failures,
}

/// `release --force` of the shared holders of `key`: the marker and every
/// entry, on every server that has the marker.
pub async fn force_release(fleet: &Fleet, key: &str) -> Forced {
    let layout = fleet.key_layout();
    let call = Call {
        op: Op::ForceRelease,
        key: key.to_owned(),
        operation: Operation::Scripted {
            script: &SCRIPTS.force,
            keys: [
                vec![layout.lock_key(key), layout.readers_key(key)],
                layout.queue_keys(key).to_vec(),
            ]
            .concat(),
            args: vec![crate::lock::release_channel(key).into_bytes()],
        },
    };
    let round = fleet.round(call, parse_int, |_| Vote::Yes).await;
    Forced {
        deleted: round.replies.iter().filter(|r| matches!(r, Reply::Answered(1))).count(),
        answered: round.replies.iter().filter(|r| matches!(r, Reply::Answered(_))).count(),
        failures: round.failures(),
    }
}

/// A shared holder as a quorum sees it.
#[derive(Clone, Debug)]
pub struct SharedHolder {
    /// Its token.
    pub token: String,
    /// The time its entry is still guaranteed on a quorum.
    pub ttl: Duration,
}

fn parse_status(reply: Value) -> Result<Vec<(String, i64)>, String> {
    let Value::Array(items) = reply else {
        return Err(format!("unexpected shared status reply {reply:?}"));
    };
    let mut out = Vec::new();
    for pair in items.get(1..).unwrap_or_default().chunks(2) {
        match pair {
            [Value::BulkString(t), Value::Int(ms)] => {
                out.push((String::from_utf8_lossy(t).into_owned(), *ms));
            }
            other => return Err(format!("unexpected shared status entry {other:?}")),
        }
    }
    Ok(out)
}

/// The shared holders of `key` live on a quorum, longest-lived first.
pub async fn holders(fleet: &Fleet, key: &str) -> Vec<SharedHolder> {
    let layout = fleet.key_layout();
    let call = Call {
        op: Op::Status,
        key: key.to_owned(),
        operation: Operation::Scripted {
            script: &SCRIPTS.status,
            keys: vec![layout.lock_key(key), layout.readers_key(key)],
            args: Vec::new(),
        },
    };
    let round = fleet.round(call, parse_status, |_| Vote::Yes).await;
    let quorum = fleet.quorum();
    let mut seen: Vec<(String, Vec<i64>)> = Vec::new();
    for reply in &round.replies {
        if let Reply::Answered(entries) = reply {
            for (token, ms) in entries {
                match seen.iter_mut().find(|(t, _)| t == token) {
                    Some((_, all)) => all.push(*ms),
                    None => seen.push((token.clone(), vec![*ms])),
                }
            }
        }
    }
    let mut out: Vec<SharedHolder> = seen
        .into_iter()
        .filter(|(_, all)| all.len() >= quorum)
        .map(|(token, mut all)| {
            all.sort_by_key(|ms| std::cmp::Reverse(*ms));
            let ms = u64::try_from(all[quorum - 1]).unwrap_or(0);
            SharedHolder { token, ttl: Duration::from_millis(ms) }
        })
        .collect();
    out.sort_by_key(|h| std::cmp::Reverse(h.ttl));
    out
}

/// True when `value` is the marker of shared holders.
pub fn is_marker(value: &str) -> bool {
    value == SHARED_MARKER
}
