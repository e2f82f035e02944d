//! `--shared`: any number of shared holders at once, or one exclusive
//! holder (an ordinary lock, a run without `--shared`), never both.
//!
//! # How
//! The shared holders hold the lock key together: while any of them has a
//! live entry on a server, the key there holds the marker
//! [`SHARED_MARKER`] (never a token) with a PTTL at least as long as the
//! latest entry's, and each holder's token is an entry of a sorted set
//! beside it (`redlock:{KEY}:readers`), scored by the server time at which
//! it expires (`scripts/shared_acquire.lua`). A shared holder joins where
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
//! shorten the marker below a live entry (`shared_release.lua` sets it to
//! the latest live entry), so the marker is there whenever an entry is.
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
//! # No starvation of an exclusive waiter
//! A stream of overlapping shared holders keeps the marker up for ever, so
//! an exclusive waiter would starve if newcomers kept joining. They do
//! not: an exclusive waiter that found the key busy takes its place in the
//! key's wait queue ([`crate::queue`], kept by the exclusive acquire
//! script), and a shared newcomer reads the queue before it joins and
//! does not join while anybody is queued ([`attempt`]). The shared holders inside
//! finish, the marker goes with the last one, and the exclusive waiter,
//! at the head, takes the lock. Like every order in redlock, this rests
//! on the queue and so on the newcomers not passing `--unordered`;
//! exclusion never does.
//!
//! # Fencing, renewal, release
//! A shared holder draws a fence from the key's counter as an exclusive
//! holder does (the rule and argument of [`crate::fence`]; a write-back
//! compares the holder's entry instead of the key). Its token says it is
//! shared ([`Token::shared`]), and [`extend`], [`set_ttl`] and [`release`]
//! go to the shared scripts for such a token and to [`Fleet`] otherwise,
//! so renewal, `--keep`, release and `redlock extend/release --token`
//! work for both.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use redis::{Script, Value};

use crate::clock::BootInstant;
use crate::config::Request;
use crate::error::Error;
use crate::fence;
use crate::lock::{
    Attempt, AttemptReport, Call, Fleet, Holder, KeyLayout, Lock, Place, ServerResult, Split,
    done_here, parse_int,
};
use crate::quorum::{self, Outcome, Reply, Round, Vote};
use crate::server::Op;
use crate::token::{SHARED_MARKER, Token};

/// The shared holders' scripts, hashed once.
struct Scripts {
    acquire: Script,
    extend: Script,
    release: Script,
    status: Script,
    force: Script,
    raise: Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: Script::new(include_str!("scripts/shared_acquire.lua")),
    extend: Script::new(include_str!("scripts/shared_extend.lua")),
    release: Script::new(include_str!("scripts/shared_release.lua")),
    status: Script::new(include_str!("scripts/shared_status.lua")),
    force: Script::new(include_str!("scripts/shared_force.lua")),
    raise: Script::new(include_str!("scripts/shared_raise.lua")),
});

/// The server-side name of the shared holders of `key`: a companion of
/// the lock in its Cluster hash slot (`redlock:{KEY}:readers`).
pub fn readers_key(layout: KeyLayout, key: &str) -> String {
    layout.readers_key(key)
}

/// True when `token` is a shared holder's.
pub fn is_shared(token: &str) -> bool {
    token.parse::<Token>().is_ok_and(|t| t.shared)
}

/// One server's answer to a shared join.
#[derive(Clone, Debug)]
enum Joined {
    /// Joined, with the fence drawn there (when fencing).
    Yes(Option<u64>),
    /// An exclusive holder's value holds the key, for `pttl` ms more.
    No { holder: String, pttl: i64 },
}

fn parse_join(reply: Value) -> Result<Joined, String> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1), Value::Int(f)] => Ok(Joined::Yes(u64::try_from(*f).ok())),
            [Value::Int(0), Value::BulkString(h), Value::Int(pttl)] => {
                Ok(Joined::No { holder: String::from_utf8_lossy(h).into_owned(), pttl: *pttl })
            }
            other => Err(format!("unexpected shared acquire reply {other:?}")),
        },
        other => Err(format!("unexpected shared acquire reply {other:?}")),
    }
}

/// One attempt to join the shared holders of `request`'s key, with a
/// fresh token. Busy when an exclusive holder has the key on a quorum; a
/// holder taken with `--limit` ends it with a usage error.
///
/// With `place` (an ordered wait), it first reads the key's wait queue
/// and, when anyone is queued (an exclusive waiter: shared contenders
/// never join), does not join: [`Attempt::Queued`], so that the exclusive
/// waiter is served before newcomers.
pub async fn attempt(fleet: &Fleet, request: &Request, place: Option<Place<'_>>) -> AttemptReport {
    let Request { key, ttl, fence, .. } = request;
    if let Some(place) = place.filter(|p| p.order) {
        let queue_keys = fleet.key_layout().queue_keys(key);
        let lists = crate::queue::list(fleet.servers(), key, &queue_keys).await;
        let ahead = crate::queue::agreed(&lists, fleet.quorum())
            .iter()
            .filter(|w| w.member != place.member)
            .count();
        if ahead > 0 {
            return AttemptReport {
                attempt: Attempt::Queued { ahead },
                servers: Vec::new(),
                ahead: Some(ahead),
            };
        }
    }
    let (ttl, layout) = (*ttl, fleet.key_layout());
    let token = Token::new().for_shared().to_string();
    let start = BootInstant::now();
    let proposal = if *fence {
        format!("{} {}", fence::proposal(SystemTime::now()), fence::WINDOW.as_micros())
    } else {
        String::new()
    };
    let call = Call {
        op: Op::Acquire,
        key: key.clone(),
        script: &SCRIPTS.acquire,
        keys: vec![layout.lock_key(key), readers_key(layout, key), layout.fence_key(key)],
        args: vec![
            token.clone().into_bytes(),
            crate::millis(ttl).to_string().into_bytes(),
            proposal.into_bytes(),
            crate::millis(fence::lifetime(ttl)).to_string().into_bytes(),
        ],
    };
    let round = fleet
        .round(call, parse_join, |j| match j {
            Joined::Yes(_) => Vote::Yes,
            Joined::No { .. } => Vote::No,
        })
        .await;
    let servers = fleet.results(&round, |j| match j {
        Joined::Yes(_) => "granted",
        Joined::No { .. } => "held",
    });
    let attempt = conclude(fleet, key, &token, ttl, start, &round).await;
    if !matches!(attempt, Attempt::Acquired(_)) {
        // Withdraw everywhere, the silent servers too.
        let _ = fleet.round(leave_call(layout, key, &token, ""), parse_int, done_here).await;
    }
    AttemptReport { attempt, servers, ahead: None }
}

/// The verdict of a join round.
async fn conclude(
    fleet: &Fleet,
    key: &str,
    token: &str,
    ttl: Duration,
    start: BootInstant,
    round: &Round<Joined>,
) -> Attempt {
    let shown = crate::display_key(key.as_bytes());
    let quorum = fleet.quorum();
    let mut others: Vec<(&str, usize, Option<Duration>)> = Vec::new();
    let mut drawn = Vec::new();
    for reply in &round.replies {
        match reply {
            Reply::Answered(Joined::Yes(f)) => drawn.extend(*f),
            Reply::Answered(Joined::No { holder, pttl }) => {
                let left = u64::try_from(*pttl).ok().map(Duration::from_millis);
                match others.iter_mut().find(|(v, _, _)| v == holder) {
                    Some((_, n, t)) => {
                        *n += 1;
                        *t = match (*t, left) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        };
                    }
                    None => others.push((holder, 1, left)),
                }
            }
            _ => {}
        }
    }
    if round.tally.yes >= quorum {
        let fence = match fence::settle(&drawn, quorum) {
            None => Ok(None),
            Some(s) if !s.write_back => Ok(Some(s.fence)),
            Some(s) => raise(fleet, key, token, ttl, s.fence).await.map(Some),
        };
        let elapsed = start.elapsed();
        return match (fence, quorum::validity(ttl, elapsed, fleet.drift_factor())) {
            (Ok(fence), Some(validity)) => Attempt::Acquired(Lock {
                key: key.to_owned(),
                token: token.to_owned(),
                ttl,
                since: start,
                validity,
                granted: (round.tally.yes, round.tally.total),
                fence,
            }),
            (Err(e), _) => Attempt::Unavailable(e),
            (Ok(_), None) => Attempt::Unavailable(Error::Unavailable {
                what: format!(
                    "acquire {shown} --shared: the quorum answered only after {}, leaving no validity",
                    crate::fmt_duration(elapsed)
                ),
                failures: round.failures(),
                config: false,
            }),
        };
    }
    if let Some((value, _, remaining)) = others.iter().find(|(_, n, _)| *n >= quorum) {
        if let Ok(t) = value.parse::<Token>()
            && t.limit() > 1
        {
            return Attempt::Unavailable(Error::Usage(format!(
                "{shown}: held with --limit {} by {} pid {}, but this asks for --shared; \
                 every holder of a key must use the same mode (nothing taken)",
                t.limit(),
                t.host,
                t.pid
            )));
        }
        return Attempt::Busy(Holder { value: (*value).to_owned(), remaining: *remaining });
    }
    let failures = round.failures();
    let answered = round.tally.yes + round.tally.no;
    if answered < quorum {
        return Attempt::Unavailable(Error::Unavailable {
            what: format!(
                "acquire {shown} --shared: {answered} of {} servers answered, quorum {quorum}",
                round.tally.total
            ),
            config: failures.any_config(),
            failures,
        });
    }
    let mut votes: Vec<usize> = others.iter().map(|(_, n, _)| *n).collect();
    if round.tally.yes > 0 {
        votes.push(round.tally.yes);
    }
    votes.sort_by_key(|n| std::cmp::Reverse(*n));
    Attempt::Split(Split {
        silent: round.tally.total - answered,
        votes,
        expires: others.iter().filter_map(|(_, _, t)| *t).min(),
        failures,
    })
}

/// Writes `fence` back to a quorum of the servers where `token` has an
/// entry (as [`crate::fence`] requires of a won round).
async fn raise(
    fleet: &Fleet,
    key: &str,
    token: &str,
    ttl: Duration,
    fence: u64,
) -> Result<u64, Error> {
    let layout = fleet.key_layout();
    let call = Call {
        op: Op::RaiseFence,
        key: key.to_owned(),
        script: &SCRIPTS.raise,
        keys: vec![readers_key(layout, key), layout.fence_key(key)],
        args: vec![
            token.into(),
            fence.to_string().into_bytes(),
            crate::millis(fence::lifetime(ttl)).to_string().into_bytes(),
        ],
    };
    let round =
        fleet
            .round(call, parse_int, |n| {
                if u64::try_from(*n) == Ok(fence) { Vote::Yes } else { Vote::No }
            })
            .await;
    match round.outcome() {
        Outcome::Won => Ok(fence),
        _ => Err(fleet.unavailable(
            format!(
                "acquire {} --shared: could not record fence {fence} on a quorum",
                crate::display_key(key.as_bytes())
            ),
            &round,
        )),
    }
}

/// The shared release (or, with an empty `channel`, withdrawal) of `token`.
fn leave_call(layout: KeyLayout, key: &str, token: &str, channel: &str) -> Call {
    Call {
        op: Op::Release,
        key: key.to_owned(),
        script: &SCRIPTS.release,
        keys: vec![layout.lock_key(key), readers_key(layout, key)],
        args: vec![token.into(), channel.into()],
    }
}

/// One compare-and-extend round of a shared holder's entry: at least
/// `ttl` from now, or exactly (`--keep`) when `exact`.
async fn retime(
    fleet: &Fleet,
    key: &str,
    token: &str,
    ttl: Duration,
    exact: bool,
) -> Result<Lock, Error> {
    let layout = fleet.key_layout();
    let keys = vec![layout.lock_key(key), readers_key(layout, key), layout.fence_key(key)];
    let more = vec![
        crate::millis(fence::lifetime(ttl)).to_string().into_bytes(),
        if exact { "exact" } else { "" }.into(),
    ];
    fleet.retime(&SCRIPTS.extend, key, keys, token, ttl, more, NO_SHARED_HOLD).await
}

/// What a quorum of "no entry" answers to a shared extend or release means.
const NO_SHARED_HOLD: &str = "no shared hold of this token";

/// [`Fleet::extend`], for a shared holder's token too.
pub async fn extend(fleet: &Fleet, key: &str, token: &str, ttl: Duration) -> Result<Lock, Error> {
    if is_shared(token) {
        retime(fleet, key, token, ttl, false).await
    } else {
        fleet.extend(key, token, ttl).await
    }
}

/// [`Fleet::set_ttl`], for a shared holder's token too.
pub async fn set_ttl(fleet: &Fleet, key: &str, token: &str, ttl: Duration) -> Result<Lock, Error> {
    if is_shared(token) {
        retime(fleet, key, token, ttl, true).await
    } else {
        fleet.set_ttl(key, token, ttl).await
    }
}

/// [`Fleet::release`], for a shared holder's token too.
pub async fn release(fleet: &Fleet, key: &str, token: &str) -> Result<Vec<ServerResult>, Error> {
    if !is_shared(token) {
        return fleet.release(key, token).await;
    }
    let channel = crate::lock::release_channel(key);
    fleet.release_with(leave_call(fleet.key_layout(), key, token, &channel), NO_SHARED_HOLD).await
}

/// `release --force` of the shared holders of `key`: the marker and every
/// entry, on every server that has the marker. Returns how many had it.
pub async fn force_release(fleet: &Fleet, key: &str) -> usize {
    let layout = fleet.key_layout();
    let call = Call {
        op: Op::ForceRelease,
        key: key.to_owned(),
        script: &SCRIPTS.force,
        keys: vec![layout.lock_key(key), readers_key(layout, key)],
        args: vec![crate::lock::release_channel(key).into_bytes()],
    };
    let round = fleet.round(call, parse_int, |_| Vote::Yes).await;
    round.replies.iter().filter(|r| matches!(r, Reply::Answered(1))).count()
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
        script: &SCRIPTS.status,
        keys: vec![layout.lock_key(key), readers_key(layout, key)],
        args: Vec::new(),
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
