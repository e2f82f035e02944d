//! The Redlock operations over a set of servers: acquire, extend, release,
//! force-release and status, each one parallel round of a Lua script.
//!
//! Every round goes through [`quorum::fan_out`], so each server call is
//! bounded by the node timeout and the verdict comes from a [`Tally`]; the
//! per-server replies are kept for messages and `status`.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use redis::{Script, Value};

use crate::error::Error;
use crate::quorum::{self, Failures, Outcome, Reply, Tally, Vote};
use crate::server::{Op, Server, ServerError};
use crate::token::Token;
use tokio_util::task::TaskTracker;

/// The Lua scripts, hashed once; `Script` sends EVALSHA and falls back to
/// EVAL (loading the script) when the server answers NOSCRIPT.
struct Scripts {
    acquire: Script,
    extend: Script,
    release: Script,
    force_release: Script,
    status: Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: Script::new(include_str!("scripts/acquire.lua")),
    extend: Script::new(include_str!("scripts/extend.lua")),
    release: Script::new(include_str!("scripts/release.lua")),
    force_release: Script::new(include_str!("scripts/force_release.lua")),
    status: Script::new(include_str!("scripts/status.lua")),
});

/// The servers of one lock service and the rules for deciding over them.
pub struct Fleet {
    servers: Vec<Arc<Server>>,
    quorum: usize,
    drift_factor: f64,
    /// Server calls, including those still running after a verdict.
    tasks: TaskTracker,
}

/// A lock this process holds.
#[derive(Clone, Debug)]
pub struct Lock {
    /// The key.
    pub key: String,
    /// The value stored under the key on the servers that granted it.
    pub token: String,
    /// The TTL the servers were given.
    pub ttl: Duration,
    /// When the round that took (or last extended) the lock started.
    pub since: Instant,
    /// How long the lock is certainly held from `since`.
    pub validity: Duration,
    /// Servers that granted the lock, and the total.
    pub granted: (usize, usize),
}

impl Lock {
    /// The monotonic instant after which the lock can no longer be trusted.
    pub fn deadline(&self) -> Instant {
        self.since + self.validity
    }
}

/// Who holds a lock that we could not take, as the refusing servers saw it.
#[derive(Clone, Debug)]
pub struct Holder {
    /// The holder's value (its token).
    pub value: String,
    /// The shortest remaining TTL reported for it; `None` when it never expires.
    pub remaining: Option<Duration>,
}

impl Holder {
    /// One line: who holds `key` and for how long.
    pub fn describe(&self, key: &str) -> String {
        let expiry = match self.remaining {
            Some(d) => format!("expires in {}", crate::fmt_duration(d)),
            None => "has no expiry".to_owned(),
        };
        format!(
            "{} is held by {}, {expiry}",
            crate::display_key(key.as_bytes()),
            describe_value(&self.value)
        )
    }
}

/// Describes a lock value: the holder facts of a redlock token, or the raw value.
pub fn describe_value(value: &str) -> String {
    match value.parse::<Token>() {
        Ok(t) => format!(
            "{} pid {} (since {})",
            t.host,
            t.pid,
            humantime::format_rfc3339_seconds(t.created())
        ),
        Err(()) => format!(
            "another client (value {:?})",
            crate::display_key(value.as_bytes())
        ),
    }
}

/// The result of one acquire round.
#[derive(Debug)]
pub enum Attempt {
    /// The lock is ours.
    Acquired(Lock),
    /// Another value holds it on enough servers.
    Busy(Holder),
    /// Not enough servers answered; `config` is true when retrying cannot help.
    Unavailable(Error),
}

/// One server's view of a key, for `status`.
#[derive(Clone, Debug)]
pub enum ServerView {
    /// The key holds `value`, expiring in `ttl` (`None`: no expiry).
    Held {
        /// The value.
        value: String,
        /// Remaining TTL.
        ttl: Option<Duration>,
    },
    /// The key is absent.
    Free,
    /// The server could not be read.
    Error(ServerError),
}

/// What `status` found on every server.
#[derive(Clone, Debug)]
pub struct Status {
    /// One entry per server, in `--servers` order: name and view.
    pub servers: Vec<(String, ServerView)>,
    /// The value held on at least a quorum, and the TTL the quorum still
    /// guarantees (the quorum-th longest); `None` when no value has a quorum.
    pub holder: Option<(String, Option<Duration>)>,
    /// True when enough servers answered to say the lock is free.
    pub known: bool,
    /// The quorum used.
    pub quorum: usize,
}

impl Fleet {
    /// A fleet of servers deciding with `quorum` and `drift_factor`.
    pub fn new(servers: Vec<Server>, quorum: usize, drift_factor: f64) -> Fleet {
        let servers = servers.into_iter().map(Arc::new).collect();
        Fleet {
            servers,
            quorum,
            drift_factor,
            tasks: TaskTracker::new(),
        }
    }

    /// The servers.
    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// The quorum.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Waits for server calls that outlived their round's verdict, each
    /// already bounded by the node timeout. Call before the process exits,
    /// so that a straggler's SET or DEL is not cut off.
    pub async fn drain(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        self.tasks.reopen();
    }

    /// Runs `script` for `op` on every server with the same key and
    /// arguments; `read` checks the reply's shape and `vote` counts it.
    /// Rounds that take or keep the lock end as soon as the verdict is
    /// settled; release and status rounds hear from every server.
    async fn round<T: Send + 'static>(
        &self,
        op: Op,
        key: &str,
        script: &'static Script,
        args: Vec<Vec<u8>>,
        read: fn(Value) -> Result<T, String>,
        vote: impl Fn(&T) -> Vote,
    ) -> (Tally, Vec<Reply<T>>) {
        let early = matches!(op, Op::Acquire | Op::Extend);
        let key_owned: Arc<str> = key.into();
        let args = Arc::new(args);
        quorum::fan_out(
            &self.servers,
            &self.tasks,
            self.quorum,
            early,
            (op, key),
            |server| {
                let (key, args) = (Arc::clone(&key_owned), Arc::clone(&args));
                async move {
                    let reply: Value = server
                        .call(op, key.as_bytes(), async |c| {
                            let mut invocation = script.key(&*key);
                            for arg in args.iter() {
                                invocation.arg(arg);
                            }
                            invocation.invoke_async(c).await
                        })
                        .await?;
                    read(reply).map_err(|msg| server.bad_reply(op, &key, msg))
                }
            },
            vote,
        )
        .await
    }

    fn unavailable(&self, what: String, tally: Tally, failures: Failures) -> Error {
        let config = failures.any_config();
        Error::Unavailable {
            what: format!(
                "{what}: {} of {} servers answered, quorum {}",
                tally.yes + tally.no,
                tally.total,
                self.quorum
            ),
            failures,
            config,
        }
    }

    /// One acquire round: `SET key token NX PX ttl` on every server at once.
    /// On anything but success, the token is released everywhere before
    /// returning, including on the servers that said no or did not answer.
    pub async fn try_acquire(&self, key: &str, token: &str, ttl: Duration) -> Attempt {
        let start = Instant::now();
        let (tally, replies) = self
            .round(
                Op::Acquire,
                key,
                &SCRIPTS.acquire,
                vec![token.into(), millis(ttl).to_string().into()],
                parse_acquire,
                |r| if r.is_none() { Vote::Yes } else { Vote::No },
            )
            .await;
        let elapsed = start.elapsed();
        let outcome = tally.settled().unwrap_or(Outcome::Unreachable);
        if outcome == Outcome::Won
            && let Some(validity) = quorum::validity(ttl, elapsed, self.drift_factor)
        {
            return Attempt::Acquired(Lock {
                key: key.to_owned(),
                token: token.to_owned(),
                ttl,
                since: start,
                validity,
                granted: (tally.yes, tally.total),
            });
        }
        // Best effort: whatever this round did set must not linger. Errors
        // here change nothing about the verdict, which is already known.
        let _ = self.release_round(key, token).await;
        let shown = crate::display_key(key.as_bytes());
        match outcome {
            Outcome::Won => Attempt::Unavailable(Error::Unavailable {
                what: format!(
                    "acquire {shown}: the quorum answered only after {}, leaving no validity out of a {} TTL",
                    crate::fmt_duration(elapsed),
                    crate::fmt_duration(ttl)
                ),
                failures: Failures::of(&replies),
                config: false,
            }),
            Outcome::Refused => Attempt::Busy(holder_of(&replies)),
            Outcome::Unreachable => Attempt::Unavailable(self.unavailable(
                format!("acquire {shown}"),
                tally,
                Failures::of(&replies),
            )),
        }
    }

    /// Resets the TTL of a lock held by `token` to `ttl` on every server.
    /// The new validity counts from the start of the round.
    pub async fn extend(&self, key: &str, token: &str, ttl: Duration) -> Result<Lock, Error> {
        let start = Instant::now();
        let (tally, replies) = self
            .round(
                Op::Extend,
                key,
                &SCRIPTS.extend,
                vec![token.into(), millis(ttl).to_string().into()],
                parse_int,
                |n| if *n == 1 { Vote::Yes } else { Vote::No },
            )
            .await;
        let shown = crate::display_key(key.as_bytes());
        match tally.settled().unwrap_or(Outcome::Unreachable) {
            Outcome::Won => {
                let validity = quorum::validity(ttl, start.elapsed(), self.drift_factor)
                    .ok_or_else(|| {
                        self.unavailable(
                            format!("extend {shown}: too slow to leave any validity"),
                            tally,
                            Failures::of(&replies),
                        )
                    })?;
                Ok(Lock {
                    key: key.to_owned(),
                    token: token.to_owned(),
                    ttl,
                    since: start,
                    validity,
                    granted: (tally.yes, tally.total),
                })
            }
            Outcome::Refused => Err(Error::Lost(format!(
                "extend {shown}: the lock is not held by this token ({} of {} servers say so)",
                tally.no, tally.total
            ))),
            Outcome::Unreachable => {
                Err(self.unavailable(format!("extend {shown}"), tally, Failures::of(&replies)))
            }
        }
    }

    async fn release_round(&self, key: &str, token: &str) -> (Tally, Vec<Reply<i64>>) {
        self.round(
            Op::Release,
            key,
            &SCRIPTS.release,
            vec![token.into(), release_channel(key).into_bytes()],
            parse_int,
            |n| if *n == 1 { Vote::Yes } else { Vote::No },
        )
        .await
    }

    /// Deletes the key on every server where `token` holds it. Returns how
    /// many servers deleted it.
    pub async fn release(&self, key: &str, token: &str) -> Result<usize, Error> {
        let (tally, replies) = self.release_round(key, token).await;
        let shown = crate::display_key(key.as_bytes());
        match tally.settled().unwrap_or(Outcome::Unreachable) {
            Outcome::Won => Ok(tally.yes),
            Outcome::Refused => Err(Error::Lost(format!(
                "release {shown}: the lock is not held by this token ({} of {} servers say so)",
                tally.no, tally.total
            ))),
            Outcome::Unreachable => {
                Err(self.unavailable(format!("release {shown}"), tally, Failures::of(&replies)))
            }
        }
    }

    /// Deletes the lock whoever holds it. Returns how many servers had it.
    pub async fn force_release(&self, key: &str) -> Result<usize, Error> {
        let (tally, replies) = self
            .round(
                Op::ForceRelease,
                key,
                &SCRIPTS.force_release,
                vec![release_channel(key).into_bytes()],
                parse_int,
                // Deleted or already absent: either way the key is gone there.
                |_| Vote::Yes,
            )
            .await;
        if tally.settled() == Some(Outcome::Won) {
            let deleted = replies
                .iter()
                .filter(|r| matches!(r, Reply::Answered(1)))
                .count();
            return Ok(deleted);
        }
        let shown = crate::display_key(key.as_bytes());
        Err(self.unavailable(
            format!("release --force {shown}"),
            tally,
            Failures::of(&replies),
        ))
    }

    /// Reads the key's value and TTL on every server.
    pub async fn status(&self, key: &str) -> Status {
        let (_, replies) = self
            .round(
                Op::Status,
                key,
                &SCRIPTS.status,
                Vec::new(),
                parse_status,
                |_| Vote::Yes,
            )
            .await;
        let servers: Vec<(String, ServerView)> = self
            .servers
            .iter()
            .zip(replies)
            .map(|(server, reply)| {
                let view = match reply {
                    Reply::Answered(Some((value, ttl))) => ServerView::Held { value, ttl },
                    Reply::Answered(None) => ServerView::Free,
                    Reply::Failed(e) => ServerView::Error(e),
                    Reply::NotAwaited => ServerView::Error(server.bad_reply(
                        Op::Status,
                        key,
                        "not awaited".to_owned(),
                    )),
                };
                (server.name().to_owned(), view)
            })
            .collect();
        summarize(servers, self.quorum)
    }
}

/// The pub/sub channel on which releases of `key` are announced, so that
/// waiters retry at once instead of at their next backoff step.
pub fn release_channel(key: &str) -> String {
    format!("redlock:released:{key}")
}

/// Decides `status` from the per-server views: a value held on a quorum is
/// the holder, with the TTL that a quorum still guarantees.
fn summarize(servers: Vec<(String, ServerView)>, quorum: usize) -> Status {
    let mut best: Option<(&str, Vec<Option<Duration>>)> = None;
    let mut values: Vec<(&str, Vec<Option<Duration>>)> = Vec::new();
    for (_, view) in &servers {
        if let ServerView::Held { value, ttl } = view {
            match values.iter_mut().find(|(v, _)| v == value) {
                Some((_, ttls)) => ttls.push(*ttl),
                None => values.push((value, vec![*ttl])),
            }
        }
    }
    for (value, ttls) in values {
        if best.as_ref().is_none_or(|(_, b)| ttls.len() > b.len()) {
            best = Some((value, ttls));
        }
    }
    let failed = servers
        .iter()
        .filter(|(_, v)| matches!(v, ServerView::Error(_)))
        .count();
    let best_count = best.as_ref().map_or(0, |(_, t)| t.len());
    let holder = best
        .filter(|(_, ttls)| ttls.len() >= quorum)
        .map(|(value, mut ttls)| {
            // `None` (no expiry) sorts last; the quorum-th longest is what a quorum guarantees.
            ttls.sort_by(|a, b| match (a, b) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, _) => std::cmp::Ordering::Less,
                (_, None) => std::cmp::Ordering::Greater,
                (Some(a), Some(b)) => b.cmp(a),
            });
            (value.to_owned(), ttls[quorum - 1])
        });
    // Free is only known when even the failed servers could not make up a quorum.
    let known = holder.is_some() || best_count + failed < quorum;
    Status {
        servers,
        holder,
        known,
        quorum,
    }
}

/// The most common holder among the refusing servers, with its shortest TTL.
fn holder_of(replies: &[Reply<Option<(String, i64)>>]) -> Holder {
    let mut holders: Vec<(&str, usize, Option<Duration>)> = Vec::new();
    for reply in replies {
        if let Reply::Answered(Some((value, pttl))) = reply {
            let ttl = ttl_of(*pttl);
            match holders.iter_mut().find(|(v, _, _)| v == value) {
                Some((_, n, t)) => {
                    *n += 1;
                    *t = match (*t, ttl) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                None => holders.push((value, 1, ttl)),
            }
        }
    }
    holders.sort_by_key(|(_, n, _)| std::cmp::Reverse(*n));
    match holders.first() {
        Some((value, _, remaining)) => Holder {
            value: (*value).to_owned(),
            remaining: *remaining,
        },
        None => Holder {
            value: String::new(),
            remaining: None,
        },
    }
}

/// Reads the acquire script's reply: `None` when set, else the holder and PTTL.
fn parse_acquire(reply: Value) -> Result<Option<(String, i64)>, String> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1)] => Ok(None),
            [Value::Int(0), Value::BulkString(holder), Value::Int(pttl)] => {
                Ok(Some((String::from_utf8_lossy(holder).into_owned(), *pttl)))
            }
            other => Err(format!("unexpected acquire reply {other:?}")),
        },
        other => Err(format!("unexpected acquire reply {other:?}")),
    }
}

/// Reads an integer reply.
fn parse_int(reply: Value) -> Result<i64, String> {
    match reply {
        Value::Int(n) => Ok(n),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// Reads the status script's reply: the value and its TTL, or `None` when absent.
fn parse_status(reply: Value) -> Result<Option<(String, Option<Duration>)>, String> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Nil, _] | [] => Ok(None),
            [Value::BulkString(v), Value::Int(pttl)] => Ok(Some((
                String::from_utf8_lossy(v).into_owned(),
                ttl_of(*pttl),
            ))),
            other => Err(format!("unexpected status reply {other:?}")),
        },
        other => Err(format!("unexpected status reply {other:?}")),
    }
}

/// A PTTL reply as a duration; `None` for "no expiry" (-1).
fn ttl_of(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

/// Whole milliseconds, as Redis wants them; TTLs are validated far below overflow.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(value: &str, ms: i64) -> (String, ServerView) {
        (
            "s".into(),
            ServerView::Held {
                value: value.into(),
                ttl: ttl_of(ms),
            },
        )
    }

    #[test]
    fn status_needs_a_quorum_of_one_value() {
        let s = summarize(vec![held("a", 900), held("a", 500), held("b", 700)], 2);
        assert_eq!(
            s.holder,
            Some(("a".into(), Some(Duration::from_millis(500))))
        );
        let s = summarize(
            vec![
                held("a", 900),
                held("a", 500),
                held("a", 700),
                ("s".into(), ServerView::Free),
            ],
            3,
        );
        assert_eq!(
            s.holder,
            Some(("a".into(), Some(Duration::from_millis(500))))
        );
        let s = summarize(
            vec![
                held("a", 900),
                held("b", 500),
                ("s".into(), ServerView::Free),
            ],
            2,
        );
        assert!(s.holder.is_none() && s.known);
    }

    #[test]
    fn acquire_reply_is_read_strictly() {
        assert_eq!(parse_acquire(Value::Array(vec![Value::Int(1)])), Ok(None));
        let busy = Value::Array(vec![
            Value::Int(0),
            Value::BulkString(b"t".to_vec()),
            Value::Int(5),
        ]);
        assert_eq!(parse_acquire(busy), Ok(Some(("t".into(), 5))));
        assert!(parse_acquire(Value::Okay).is_err());
    }
}
