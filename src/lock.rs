//! The Redlock operations over a set of servers: acquire, extend, release,
//! force-release and status, each one parallel round of a Lua script.
//!
//! Every round goes through [`quorum::fan_out`], so each server call is
//! bounded by the node timeout and the verdict comes from a [`quorum::Tally`]; the
//! per-server replies are kept for messages and `status`.
//!
//! Where the keys live is a [`KeyLayout`]: redlock's own namespace by
//! default, the key as given for interop. Fencing numbers follow the rule
//! and the argument in [`crate::fence`].

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use redis::{Script, Value};
use tokio_util::task::TaskTracker;

use crate::clock::BootInstant;
use crate::error::Error;
use crate::fence;
use crate::quorum::{self, Outcome, Reply, Round, Vote};
use crate::server::{Op, Server, ServerError};
use crate::token::Token;

/// The Lua scripts, hashed once; `Script` sends EVALSHA and, when the
/// server answers NOSCRIPT, SCRIPT LOAD and EVALSHA again (the README's ACL
/// grants exactly those two).
struct Scripts {
    acquire: Script,
    extend: Script,
    set_ttl: Script,
    release: Script,
    status: Script,
    raise_fence: Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: Script::new(include_str!("scripts/acquire.lua")),
    extend: Script::new(include_str!("scripts/extend.lua")),
    set_ttl: Script::new(include_str!("scripts/set_ttl.lua")),
    release: Script::new(include_str!("scripts/release.lua")),
    status: Script::new(include_str!("scripts/status.lua")),
    raise_fence: Script::new(include_str!("scripts/raise_fence.lua")),
});

/// One script call, the same on every server of a round.
struct Call {
    /// What it does, for errors and for whether the round may end early.
    op: Op,
    /// The lock's key as the user gave it, for messages.
    key: String,
    /// The script.
    script: &'static Script,
    /// KEYS: the server-side names ([`KeyLayout`]).
    keys: Vec<String>,
    /// ARGV.
    args: Vec<Vec<u8>>,
}

/// How one server took part in a round, for events and messages.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServerResult {
    /// The server's display name.
    pub server: String,
    /// `granted`, `held` (acquire), `deleted`, `not held` (release),
    /// `not awaited`, or `error: ...`.
    pub result: String,
    /// Time to answer from the start of the round, in milliseconds.
    pub latency_ms: Option<f64>,
}

/// The servers of one lock service and the rules for deciding over them.
pub struct Fleet {
    servers: Vec<Arc<Server>>,
    quorum: usize,
    drift_factor: f64,
    layout: KeyLayout,
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
    /// When the round that took (or last extended) the lock started, on
    /// the boot clock (suspended time counts against validity).
    pub since: BootInstant,
    /// How long the lock is certainly held from `since`.
    pub validity: Duration,
    /// Servers that granted the lock, and the total.
    pub granted: (usize, usize),
    /// The fencing number of this acquisition, when fencing is on.
    pub fence: Option<u64>,
}

impl Lock {
    /// The instant after which the lock can no longer be trusted.
    pub fn deadline(&self) -> BootInstant {
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
            "{} pid {} (since {}, for {})",
            t.host,
            t.pid,
            humantime::format_rfc3339_seconds(t.created()),
            crate::fmt_duration(t.held_for())
        ),
        Err(()) => format!("another client (value {:?})", crate::display_key(value.as_bytes())),
    }
}

/// The result of one acquire round, with each server's part in it.
#[derive(Debug)]
pub struct AttemptReport {
    /// The verdict.
    pub attempt: Attempt,
    /// Each server's answer and latency.
    pub servers: Vec<ServerResult>,
}

/// The verdict of one acquire round.
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
        /// The key's fencing counter on this server.
        fence: Option<u64>,
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
    /// The holder's fencing number: the counter a quorum of its servers
    /// agree on ([`fence::holder_fence`]); `None` when unknown.
    pub fence: Option<u64>,
    /// True when enough servers answered to say the lock is free.
    pub known: bool,
    /// The quorum used.
    pub quorum: usize,
}

impl Fleet {
    /// A fleet of servers deciding with `quorum` and `drift_factor`, with
    /// the keys in redlock's own namespace ([`KeyLayout::Native`]).
    pub fn new(servers: Vec<Server>, quorum: usize, drift_factor: f64) -> Fleet {
        let servers = servers.into_iter().map(Arc::new).collect();
        let layout = KeyLayout::Native;
        Fleet { servers, quorum, drift_factor, layout, tasks: TaskTracker::new() }
    }

    /// The same fleet with its keys where `layout` puts them.
    pub fn with_key_layout(self, layout: KeyLayout) -> Fleet {
        Fleet { layout, ..self }
    }

    /// Where the keys live.
    pub fn key_layout(&self) -> KeyLayout {
        self.layout
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

    /// Runs `call` on every server; `read` checks the reply's shape and
    /// `vote` counts it. Rounds that take or keep the lock end as soon as
    /// the verdict is settled; release and status rounds hear every server.
    async fn round<T: Send + 'static>(
        &self,
        call: Call,
        read: fn(Value) -> Result<T, String>,
        vote: impl Fn(&T) -> Vote,
    ) -> Round<T> {
        self.round_on(&self.servers, call, read, vote).await
    }

    /// [`Fleet::round`] on some of the servers.
    async fn round_on<T: Send + 'static>(
        &self,
        servers: &[Arc<Server>],
        call: Call,
        read: fn(Value) -> Result<T, String>,
        vote: impl Fn(&T) -> Vote,
    ) -> Round<T> {
        let Call { op, key: shown, script, keys, args } = call;
        let early = matches!(op, Op::Acquire | Op::Extend | Op::RaiseFence);
        let (keys, args, key) = (Arc::new(keys), Arc::new(args), Arc::new(shown.clone()));
        quorum::fan_out(
            servers,
            &self.tasks,
            self.quorum,
            early,
            (op, &shown),
            |server| {
                let (keys, args, key) = (Arc::clone(&keys), Arc::clone(&args), Arc::clone(&key));
                async move {
                    let key = key.as_str();
                    let reply: Value = server
                        .call(op, key.as_bytes(), async |c| {
                            let mut invocation = script.prepare_invoke();
                            for k in keys.iter() {
                                invocation.key(k);
                            }
                            for a in args.iter() {
                                invocation.arg(a);
                            }
                            invocation.invoke_async(c).await
                        })
                        .await?;
                    read(reply).map_err(|msg| server.bad_reply(op, key, msg))
                }
            },
            vote,
        )
        .await
    }

    fn unavailable<T>(&self, what: String, round: &Round<T>) -> Error {
        let failures = round.failures();
        let config = failures.any_config();
        Error::Unavailable {
            what: format!(
                "{what}: {} of {} servers answered, quorum {}",
                round.tally.yes + round.tally.no,
                round.tally.total,
                self.quorum
            ),
            failures,
            config,
        }
    }

    /// Each server's part in a round, described by `describe` when it answered.
    fn results<T>(
        &self,
        round: &Round<T>,
        describe: impl Fn(&T) -> &'static str,
    ) -> Vec<ServerResult> {
        self.servers
            .iter()
            .zip(&round.replies)
            .zip(&round.latency)
            .map(|((server, reply), latency)| ServerResult {
                server: server.name().to_owned(),
                result: match reply {
                    Reply::Answered(v) => describe(v).to_owned(),
                    Reply::Failed(e) => format!("error: {}", e.failure),
                    Reply::NotAwaited => "not awaited".to_owned(),
                },
                latency_ms: latency.map(|d| d.as_secs_f64() * 1000.0),
            })
            .collect()
    }

    /// One acquire round: `SET key token NX PX ttl` on every server at once,
    /// drawing a fencing number where the lock is granted when `fence` is
    /// true. On anything but success, the token is released everywhere
    /// before returning, including on the servers that said no or did not
    /// answer.
    pub async fn try_acquire(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
        fence: bool,
    ) -> AttemptReport {
        let start = BootInstant::now();
        let call = Call {
            op: Op::Acquire,
            key: key.to_owned(),
            script: &SCRIPTS.acquire,
            keys: vec![self.layout.lock_key(key), self.layout.fence_key(key)],
            args: vec![
                token.into(),
                crate::millis(ttl).to_string().into(),
                if fence { fence::proposal(SystemTime::now()).to_string() } else { String::new() }
                    .into(),
                fence::WINDOW.as_micros().to_string().into(),
                crate::millis(fence::lifetime(ttl)).to_string().into(),
            ],
        };
        let round = self
            .round(call, parse_acquire, |r| match r {
                Granted::Yes(_) => Vote::Yes,
                Granted::No { .. } => Vote::No,
            })
            .await;
        let servers = self.results(&round, |r| match r {
            Granted::Yes(_) => "granted",
            Granted::No { .. } => "held",
        });
        let attempt = self.conclude_acquire(key, token, ttl, fence, start, &round).await;
        AttemptReport { attempt, servers }
    }

    async fn conclude_acquire(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
        fence: bool,
        start: BootInstant,
        round: &Round<Granted>,
    ) -> Attempt {
        let shown = crate::display_key(key.as_bytes());
        let outcome = round.outcome();
        if outcome == Outcome::Won {
            let fence =
                if fence { self.settle_fence(key, token, ttl, round).await } else { Ok(None) };
            let elapsed = start.elapsed();
            match (fence, quorum::validity(ttl, elapsed, self.drift_factor)) {
                (Ok(fence), Some(validity)) => {
                    return Attempt::Acquired(Lock {
                        key: key.to_owned(),
                        token: token.to_owned(),
                        ttl,
                        since: start,
                        validity,
                        granted: (round.tally.yes, round.tally.total),
                        fence,
                    });
                }
                (Err(e), _) => {
                    self.withdraw(key, token, round).await;
                    return Attempt::Unavailable(e);
                }
                (Ok(_), None) => {
                    self.withdraw(key, token, round).await;
                    return Attempt::Unavailable(Error::Unavailable {
                        what: format!(
                            "acquire {shown}: the quorum answered only after {}, leaving no validity out of a {} TTL",
                            crate::fmt_duration(elapsed),
                            crate::fmt_duration(ttl)
                        ),
                        failures: round.failures(),
                        config: false,
                    });
                }
            }
        }
        self.withdraw(key, token, round).await;
        match outcome {
            Outcome::Refused => Attempt::Busy(holder_of(&round.replies)),
            _ => Attempt::Unavailable(self.unavailable(format!("acquire {shown}"), round)),
        }
    }

    /// Takes back what a failed acquire round set, or may still set: the
    /// token is deleted wherever the server did not answer "held" (granted,
    /// failed, or not awaited: a call still in flight is ahead of the
    /// delete on that connection). A server that said "held" set nothing,
    /// so a busy lock costs no extra round trip there. Best effort: errors
    /// change nothing about the verdict, which is already known.
    async fn withdraw(&self, key: &str, token: &str, round: &Round<Granted>) {
        let unsure: Vec<Arc<Server>> = self
            .servers
            .iter()
            .zip(&round.replies)
            .filter(|(_, reply)| !matches!(reply, Reply::Answered(Granted::No { .. })))
            .map(|(server, _)| Arc::clone(server))
            .collect();
        if !unsure.is_empty() {
            self.round_on(&unsure, self.release_call(key, token), parse_int, |_| Vote::Yes).await;
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
        token: &str,
        ttl: Duration,
        round: &Round<Granted>,
    ) -> Result<Option<u64>, Error> {
        let drawn: Vec<u64> = round
            .replies
            .iter()
            .filter_map(|r| match r {
                Reply::Answered(Granted::Yes(Some(f))) => Some(*f),
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
            script: &SCRIPTS.raise_fence,
            keys: vec![self.layout.lock_key(key), self.layout.fence_key(key)],
            args: vec![
                token.into(),
                fence.to_string().into_bytes(),
                crate::millis(fence::lifetime(ttl)).to_string().into(),
            ],
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
                    crate::display_key(key.as_bytes())
                ),
                &raised,
            )),
        }
    }

    /// Makes a lock held by `token` last at least `ttl` from now on every
    /// server, never shortening it. The new validity counts from the start
    /// of the round and assumes only `ttl`.
    pub async fn extend(&self, key: &str, token: &str, ttl: Duration) -> Result<Lock, Error> {
        let keys = vec![self.layout.lock_key(key), self.layout.fence_key(key)];
        let lifetime = crate::millis(crate::fence::lifetime(ttl)).to_string();
        self.retime(&SCRIPTS.extend, key, keys, token, ttl, vec![lifetime.into_bytes()]).await
    }

    /// Sets the TTL of a lock held by `token` to exactly `ttl` on every
    /// server, shortening it if need be (`run --keep`).
    pub async fn set_ttl(&self, key: &str, token: &str, ttl: Duration) -> Result<Lock, Error> {
        let keys = vec![self.layout.lock_key(key)];
        self.retime(&SCRIPTS.set_ttl, key, keys, token, ttl, Vec::new()).await
    }

    /// One compare-and-set round on the lock's TTL: [`Fleet::extend`] or
    /// [`Fleet::set_ttl`].
    async fn retime(
        &self,
        script: &'static Script,
        key: &str,
        keys: Vec<String>,
        token: &str,
        ttl: Duration,
        more: Vec<Vec<u8>>,
    ) -> Result<Lock, Error> {
        let start = BootInstant::now();
        let mut args = vec![token.into(), crate::millis(ttl).to_string().into()];
        args.extend(more);
        let call = Call { op: Op::Extend, key: key.to_owned(), script, keys, args };
        let round = self.round(call, parse_int, done_here).await;
        let shown = crate::display_key(key.as_bytes());
        match round.outcome() {
            Outcome::Won => {
                let validity = quorum::validity(ttl, start.elapsed(), self.drift_factor)
                    .ok_or_else(|| {
                        self.unavailable(
                            format!("extend {shown}: too slow to leave any validity"),
                            &round,
                        )
                    })?;
                Ok(Lock {
                    key: key.to_owned(),
                    token: token.to_owned(),
                    ttl,
                    since: start,
                    validity,
                    granted: (round.tally.yes, round.tally.total),
                    fence: None,
                })
            }
            Outcome::Refused => Err(Error::Lost(format!(
                "extend {shown}: the lock is not held by this token ({} of {} servers say so)",
                round.tally.no, round.tally.total
            ))),
            Outcome::Unreachable => Err(self.unavailable(format!("extend {shown}"), &round)),
        }
    }

    /// Deletes the key on every server where `token` holds it, announcing
    /// the release to waiters. Returns each server's part.
    pub async fn release(&self, key: &str, token: &str) -> Result<Vec<ServerResult>, Error> {
        let round = self.round(self.release_call(key, token), parse_int, done_here).await;
        let shown = crate::display_key(key.as_bytes());
        match round.outcome() {
            Outcome::Won => {
                Ok(self.results(&round, |n| if *n == 1 { "deleted" } else { "not held" }))
            }
            Outcome::Refused => Err(Error::Lost(format!(
                "release {shown}: the lock is not held by this token ({} of {} servers say so)",
                round.tally.no, round.tally.total
            ))),
            Outcome::Unreachable => Err(self.unavailable(format!("release {shown}"), &round)),
        }
    }

    /// Deletes the lock whoever holds it (`release --force`). Returns how
    /// many servers had it.
    ///
    /// It reads every server first ([`Fleet::status`]) and then deletes,
    /// per server, only the value it read there (compare-and-delete, so a
    /// lock that changed hands in between is left alone). A value that is
    /// not a redlock token is refused, and nothing is deleted, unless
    /// `any_value`: with the key as given ([`KeyLayout::Raw`]) it may be
    /// another client's lock or an application's data.
    pub async fn force_release(&self, key: &str, any_value: bool) -> Result<usize, Error> {
        let shown = crate::display_key(key.as_bytes());
        let status = self.status(key).await;
        let failures: Vec<ServerError> = status
            .servers
            .iter()
            .filter_map(|(_, v)| match v {
                ServerView::Error(e) => Some(e.clone()),
                _ => None,
            })
            .collect();
        if failures.len() > self.servers.len() - self.quorum {
            let failures = quorum::Failures(failures);
            return Err(Error::Unavailable {
                what: format!(
                    "release --force {shown}: {} of {} servers answered, quorum {}",
                    self.servers.len() - failures.0.len(),
                    self.servers.len(),
                    self.quorum
                ),
                config: failures.any_config(),
                failures,
            });
        }
        let mut values: Vec<(&str, Vec<Arc<Server>>)> = Vec::new();
        for (server, (name, view)) in self.servers.iter().zip(&status.servers) {
            let ServerView::Held { value, .. } = view else { continue };
            if !any_value && value.parse::<Token>().is_err() {
                return Err(Error::Usage(format!(
                    "release --force {shown}: {name} holds a value that is not a redlock lock ({:?}); \
                     nothing deleted (--force-any-value deletes it anyway)",
                    crate::display_key(value.as_bytes())
                )));
            }
            match values.iter_mut().find(|(v, _)| v == value) {
                Some((_, servers)) => servers.push(Arc::clone(server)),
                None => values.push((value, vec![Arc::clone(server)])),
            }
        }
        let mut deleted = 0;
        for (value, servers) in values {
            let call = Call { op: Op::ForceRelease, ..self.release_call(key, value) };
            let round = self.round_on(&servers, call, parse_int, |_| Vote::Yes).await;
            deleted += round.replies.iter().filter(|r| matches!(r, Reply::Answered(1))).count();
        }
        Ok(deleted)
    }

    /// Reads the key's value, TTL and fencing counter on every server.
    pub async fn status(&self, key: &str) -> Status {
        let call = Call {
            op: Op::Status,
            key: key.to_owned(),
            script: &SCRIPTS.status,
            keys: vec![self.layout.lock_key(key), self.layout.fence_key(key)],
            args: Vec::new(),
        };
        let round = self.round(call, parse_status, |_| Vote::Yes).await;
        let servers: Vec<(String, ServerView)> = self
            .servers
            .iter()
            .zip(round.replies)
            .map(|(server, reply)| {
                let view = match reply {
                    Reply::Answered(view) => view,
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

/// The vote of a compare-and-extend or compare-and-delete reply: 1 when
/// the server did it (the token held the key there), 0 when it did not.
fn done_here(n: &i64) -> Vote {
    if *n == 1 { Vote::Yes } else { Vote::No }
}

impl Fleet {
    /// The compare-and-delete of `token` on `key`, announcing the release.
    fn release_call(&self, key: &str, token: &str) -> Call {
        Call {
            op: Op::Release,
            key: key.to_owned(),
            script: &SCRIPTS.release,
            keys: vec![self.layout.lock_key(key)],
            args: vec![token.into(), release_channel(key).into_bytes()],
        }
    }
}

/// Where the keys of a lock live on the servers. Every key redlock writes
/// expires: the lock with its TTL (renewed while held), the fencing counter
/// [`fence::lifetime`] after the last acquisition that wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyLayout {
    /// redlock's own namespace (the default): the lock `KEY` is
    /// `redlock:{KEY}` and its counter `redlock:{KEY}:fence`, so redlock
    /// never reads, extends or deletes a key it did not write. The braces
    /// are a Cluster hash tag: every key of one lock is in one slot. `%`,
    /// `{` and `}` in KEY are written `%25`, `%7B` and `%7D`, so that the
    /// tag is always the whole key and two keys never share a name.
    #[default]
    Native,
    /// The key as given (`--raw-key`), for other Redlock clients (redsync,
    /// node-redlock, `redis-cli SET KEY VALUE NX PX`): the lock is `KEY`
    /// itself, its counter `redlock:{TAG}:fence:KEY` with TAG the key's own
    /// Cluster hash tag, or the key when it has none (the counter is then in
    /// the key's slot unless the key holds a `}` without a valid tag).
    Raw,
}

impl KeyLayout {
    /// The server-side name of the lock `key`.
    pub fn lock_key(self, key: &str) -> String {
        match self {
            KeyLayout::Native => format!("redlock:{{{}}}", escape_tag(key)),
            KeyLayout::Raw => key.to_owned(),
        }
    }

    /// The server-side name of the fencing counter of the lock `key`.
    pub fn fence_key(self, key: &str) -> String {
        match self {
            KeyLayout::Native => format!("redlock:{{{}}}:fence", escape_tag(key)),
            KeyLayout::Raw => {
                format!("redlock:{{{}}}:fence:{key}", cluster_tag(key).unwrap_or(key))
            }
        }
    }
}

/// `key` with `%`, `{` and `}` percent-encoded: usable inside a hash tag.
fn escape_tag(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out
}

/// The part of `key` that Redis Cluster hashes when the key has a hash tag:
/// between the first `{` and the next `}`, when not empty.
fn cluster_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
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
        if let ServerView::Held { value, ttl, .. } = view {
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
    let failed = servers.iter().filter(|(_, v)| matches!(v, ServerView::Error(_))).count();
    let best_count = best.as_ref().map_or(0, |(_, t)| t.len());
    let holder = best.filter(|(_, ttls)| ttls.len() >= quorum).map(|(value, mut ttls)| {
        // Longest first, `None` (no expiry) before all; the quorum-th longest
        // is what a quorum guarantees.
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
    let fence = holder.as_ref().and_then(|(value, _)| {
        let counters: Vec<Option<u64>> = servers
            .iter()
            .filter_map(|(_, v)| match v {
                ServerView::Held { value: h, fence, .. } if h == value => Some(*fence),
                _ => None,
            })
            .collect();
        fence::holder_fence(&counters, quorum)
    });
    Status { servers, holder, fence, known, quorum }
}

/// The most common holder among the refusing servers, with its shortest TTL.
fn holder_of(replies: &[Reply<Granted>]) -> Holder {
    let mut holders: Vec<(&str, usize, Option<Duration>)> = Vec::new();
    for reply in replies {
        if let Reply::Answered(Granted::No { holder, pttl }) = reply {
            let ttl = ttl_of(*pttl);
            match holders.iter_mut().find(|(v, _, _)| v == holder) {
                Some((_, n, t)) => {
                    *n += 1;
                    *t = match (*t, ttl) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                None => holders.push((holder, 1, ttl)),
            }
        }
    }
    holders.sort_by_key(|(_, n, _)| std::cmp::Reverse(*n));
    match holders.first() {
        Some((value, _, remaining)) => Holder { value: (*value).to_owned(), remaining: *remaining },
        None => Holder { value: String::new(), remaining: None },
    }
}

/// One server's answer to the acquire script.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Granted {
    /// Set; with the fence drawn there when fencing is on.
    Yes(Option<u64>),
    /// Held by `holder` for another `pttl` ms (-1: no expiry).
    No {
        /// The holder's value.
        holder: String,
        /// Its PTTL.
        pttl: i64,
    },
}

/// Reads the acquire script's reply.
fn parse_acquire(reply: Value) -> Result<Granted, String> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1), Value::Int(fence)] => Ok(Granted::Yes(u64::try_from(*fence).ok())),
            [Value::Int(0), Value::BulkString(holder), Value::Int(pttl)] => Ok(Granted::No {
                holder: String::from_utf8_lossy(holder).into_owned(),
                pttl: *pttl,
            }),
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

/// Reads the status script's reply.
fn parse_status(reply: Value) -> Result<ServerView, String> {
    let Value::Array(items) = reply else {
        return Err(format!("unexpected status reply {reply:?}"));
    };
    let fence = match items.get(2) {
        Some(Value::BulkString(f)) => String::from_utf8_lossy(f).parse().ok(),
        _ => None,
    };
    match items.as_slice() {
        [Value::Nil, ..] | [] => Ok(ServerView::Free),
        [Value::BulkString(v), Value::Int(pttl), ..] => Ok(ServerView::Held {
            value: String::from_utf8_lossy(v).into_owned(),
            ttl: ttl_of(*pttl),
            fence,
        }),
        other => Err(format!("unexpected status reply {other:?}")),
    }
}

/// A PTTL reply as a duration; `None` for "no expiry" (-1).
fn ttl_of(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(value: &str, ms: i64) -> (String, ServerView) {
        let fence = u64::try_from(ms).ok();
        ("s".into(), ServerView::Held { value: value.into(), ttl: ttl_of(ms), fence })
    }

    #[test]
    fn status_needs_a_quorum_of_one_value() {
        let s = summarize(vec![held("a", 900), held("a", 500), held("b", 700)], 2);
        assert_eq!(s.holder, Some(("a".into(), Some(Duration::from_millis(500)))));
        assert_eq!(s.fence, None, "no counter that a quorum of the holder's servers agree on");
        let s = summarize(vec![held("a", 900), held("a", 900), held("a", 950)], 2);
        assert_eq!(s.fence, Some(900), "the holder's own fence, not the late server's larger one");
        let s = summarize(
            vec![held("a", 900), held("a", 500), held("a", 700), ("s".into(), ServerView::Free)],
            3,
        );
        assert_eq!(s.holder, Some(("a".into(), Some(Duration::from_millis(500)))));
        let s = summarize(vec![held("a", 900), held("b", 500), ("s".into(), ServerView::Free)], 2);
        assert!(s.holder.is_none() && s.known);
    }

    #[test]
    fn native_keys_share_one_hash_tag_and_never_collide() {
        let native = KeyLayout::Native;
        assert_eq!(native.lock_key("job"), "redlock:{job}");
        assert_eq!(native.fence_key("job"), "redlock:{job}:fence");
        for key in ["a}b", "}", "{x}", "a{b}c", "%7D", "100%", "{}"] {
            let (lock, counter) = (native.lock_key(key), native.fence_key(key));
            let tag = cluster_tag(&lock);
            assert!(tag.is_some_and(|t| !t.contains(['{', '}'])), "{key:?}: {lock}");
            assert_eq!(tag, cluster_tag(&counter), "{key:?}: one slot");
        }
        assert_ne!(native.lock_key("a}b"), native.lock_key("a%7Db"));
        assert_ne!(native.lock_key("a%7Db"), native.lock_key("a%257Db"));
    }

    #[test]
    fn raw_keys_are_as_given_with_the_counter_in_their_slot() {
        let raw = KeyLayout::Raw;
        assert_eq!(raw.lock_key("job"), "job");
        assert_eq!(raw.fence_key("job"), "redlock:{job}:fence:job");
        assert_eq!(raw.fence_key("{user1}.job"), "redlock:{user1}:fence:{user1}.job");
        assert_eq!(cluster_tag("{user1}.job"), Some("user1"));
        assert_eq!(cluster_tag("{}.job"), None);
        assert_ne!(raw.fence_key("job"), KeyLayout::Native.fence_key("job"));
    }

    #[test]
    fn acquire_reply_is_read_strictly() {
        let yes = Value::Array(vec![Value::Int(1), Value::Int(7)]);
        assert_eq!(parse_acquire(yes), Ok(Granted::Yes(Some(7))));
        let unfenced = Value::Array(vec![Value::Int(1), Value::Int(-1)]);
        assert_eq!(parse_acquire(unfenced), Ok(Granted::Yes(None)));
        let busy =
            Value::Array(vec![Value::Int(0), Value::BulkString(b"t".to_vec()), Value::Int(5)]);
        assert_eq!(parse_acquire(busy), Ok(Granted::No { holder: "t".into(), pttl: 5 }));
        assert!(parse_acquire(Value::Okay).is_err());
    }
}
