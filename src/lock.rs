//! The Redlock operations over a set of servers: acquire, extend, release,
//! force-release and status, each one parallel round of a Lua script.
//!
//! Every round goes through [`quorum::fan_out`], so each server call is
//! bounded by the node timeout and the verdict comes from a [`quorum::Tally`]
//! (an acquire round: from [`quorum::standing`], who holds how many
//! servers); the per-server replies are kept for messages and `status`.
//!
//! Where the keys live is a [`KeyLayout`]: redlock's own namespace by
//! default, the key as given for interop. Fencing numbers follow the rule
//! and the argument in [`crate::fence`].

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use redis::aio::MultiplexedConnection;
use redis::{Script, Value};
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use crate::clock::BootInstant;
use crate::error::Error;
use crate::fence;
use crate::queue;
use crate::quorum::{self, Answer, Failures, Listen, Outcome, Reply, Round, Standing, Tally, Vote};
use crate::server::{Conn, Failure, Op, Server, ServerError};
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
    withdraw: Script,
}

/// The withdrawal script's source: it is sent with every withdrawal (see
/// [`withdraw`]).
const WITHDRAW_LUA: &str = include_str!("scripts/withdraw.lua");

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: Script::new(include_str!("scripts/acquire.lua")),
    extend: Script::new(include_str!("scripts/extend.lua")),
    set_ttl: Script::new(include_str!("scripts/set_ttl.lua")),
    release: Script::new(include_str!("scripts/release.lua")),
    status: Script::new(include_str!("scripts/status.lua")),
    raise_fence: Script::new(include_str!("scripts/raise_fence.lua")),
    withdraw: Script::new(WITHDRAW_LUA),
});

/// How long to wait for a busy lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Try once (`-n`).
    Once,
    /// Retry until this much time has passed (`--wait`).
    For(Duration),
    /// Retry until acquired.
    Forever,
}

/// A lock to take: key, TTL, how long to wait, whether to fence. Built by
/// [`crate::config`] from the command line; the layers below take it as
/// plain values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The lock key.
    pub key: String,
    /// The lock TTL.
    pub ttl: Duration,
    /// Busy handling.
    pub wait: Wait,
    /// Draw a fencing number.
    pub fence: bool,
    /// Wait in the queue, served in arrival order ([`crate::queue`]).
    pub ordered: bool,
    /// At most this many holders at once (`--limit`; 1: the ordinary
    /// lock; [`crate::slots`]).
    pub limit: u32,
    /// Hold it shared (`--shared`; [`crate::shared`]).
    pub shared: bool,
}

/// One script call, the same on every server of a round.
pub(crate) struct Call {
    /// What it does, for errors and for whether the round may end early.
    pub(crate) op: Op,
    /// The lock's key as the user gave it, for messages.
    pub(crate) key: String,
    /// The script.
    pub(crate) script: &'static Script,
    /// KEYS: the server-side names ([`KeyLayout`]).
    pub(crate) keys: Vec<String>,
    /// ARGV.
    pub(crate) args: Vec<Vec<u8>>,
}

impl Call {
    /// The key shown in messages: the user's, not its server-side name.
    fn key(&self) -> &str {
        &self.key
    }

    /// Runs the script on `c`, or, on a server that refuses scripts, the
    /// same operation without them.
    async fn invoke(
        &self,
        server: &Server,
        c: &mut MultiplexedConnection,
    ) -> redis::RedisResult<Value> {
        // No-script hook (issue 14, item 2): a server that refused a script
        // once takes the plain-command path from then on (src/noscript.rs,
        // WATCH/MULTI/EXEC on a connection of its own); the refusal itself
        // is answered there too, so the caller sees the script's reply.
        if server.scripts_refused() {
            return crate::noscript::invoke(server, self).await;
        }
        match self.run_script(c).await {
            Err(e) if crate::noscript::refuses_scripts(&e) => {
                server.refuse_scripts();
                crate::noscript::invoke(server, self).await
            }
            reply => reply,
        }
    }

    /// Runs the script on `c`.
    async fn run_script(&self, c: &mut MultiplexedConnection) -> redis::RedisResult<Value> {
        let mut invocation = self.script.prepare_invoke();
        for k in &self.keys {
            invocation.key(k);
        }
        for a in &self.args {
            invocation.arg(a);
        }
        invocation.invoke_async(c).await
    }

    /// Runs the script on `server` (its connection, within the node
    /// timeout) and reads the reply with `read`.
    async fn on<T>(
        &self,
        server: &Server,
        read: fn(Value) -> Result<T, String>,
    ) -> Result<T, ServerError> {
        let key = self.key();
        let reply =
            server.call(self.op, key.as_bytes(), async |c| self.invoke(server, c).await).await?;
        read(reply).map_err(|msg| server.bad_reply(self.op, key, msg))
    }
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
        let shown = crate::display_key(key.as_bytes());
        match self.value.parse::<Token>().map(|t| t.limit()) {
            // A `--limit` key ([`crate::slots`]): this is the place that
            // frees soonest.
            Ok(limit) if limit > 1 => format!(
                "all {limit} places of {shown} are held; the first to free is held by {}, {expiry}",
                describe_value(&self.value)
            ),
            _ => format!("{shown} is held by {}, {expiry}", describe_value(&self.value)),
        }
    }
}

/// Describes a lock value: the holder facts of a redlock token, or the raw value.
pub fn describe_value(value: &str) -> String {
    if value == crate::token::SHARED_MARKER {
        return "shared holders (--shared)".to_owned();
    }
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
    /// How many waiters are queued ahead of this one, as a quorum of the
    /// servers that did not grant it sees it; `None` without a place.
    pub ahead: Option<usize>,
}

/// How an attempt takes part in the lock's wait queue ([`crate::queue`]).
/// Exclusion never rests on it: the attempt is a plain majority round
/// whatever the queue says.
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    /// The waiter's entry, the same for every attempt of one wait.
    pub member: &'a str,
    /// Take (or refresh) the place where not granted; false for `-n`,
    /// which never queues.
    pub join: bool,
    /// Only the first waiter may take a free key. False for the one
    /// attempt after [`Attempt::Disordered`].
    pub order: bool,
    /// When the wait began, by this host's clock (ms since the Unix
    /// epoch): the waiter's place in the queue ([`queue::SKEW`]).
    pub since_ms: u64,
}

/// The verdict of one acquire round.
#[derive(Debug)]
pub enum Attempt {
    /// The lock is ours.
    Acquired(Lock),
    /// Another value holds it on a quorum.
    Busy(Holder),
    /// Nobody holds it: the votes are split among values, none on a
    /// quorum. Retrying (after a random pause) settles it.
    Split(Split),
    /// Not enough servers answered; `config` is true when retrying cannot help.
    Unavailable(Error),
    /// The key is free on a quorum, but another waiter is first in the
    /// queue there, with `ahead` waiters before this one.
    Queued {
        /// Waiters ahead of this one (at least one).
        ahead: usize,
    },
    /// The queue stood in the way, but no waiter is first on a quorum (the
    /// servers joined waiters in different orders, or some lost their
    /// queue): attempt again at once, without order.
    Disordered,
}

/// An acquire round in which no value holds a quorum: contenders that
/// started together (or leftovers of crashed ones) each hold a minority.
#[derive(Clone, Debug)]
pub struct Split {
    /// How many servers each value holds, most first; ours among them when
    /// any server granted us.
    pub votes: Vec<usize>,
    /// Servers that failed or were not awaited.
    pub silent: usize,
    /// The soonest another value's vote expires (`None`: none of them will).
    pub expires: Option<Duration>,
    /// The errors of the servers that failed.
    pub failures: Failures,
}

impl Split {
    /// One line: nobody holds `key`, and how the votes are spread.
    pub fn describe(&self, key: &str, quorum: usize) -> String {
        let total = self.votes.iter().sum::<usize>() + self.silent;
        let counts: Vec<String> = self.votes.iter().map(usize::to_string).collect();
        let counts = match counts.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        };
        let silent = match self.silent {
            0 => String::new(),
            n => format!("; {n} did not answer: {}", self.failures),
        };
        format!(
            "{}: no holder has a quorum ({quorum} of {total}); the votes are split among {} tokens ({counts} servers){silent}",
            crate::display_key(key.as_bytes()),
            self.votes.len(),
        )
    }
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

impl Status {
    /// The servers that could not be read, with their errors.
    pub fn failures(&self) -> quorum::Failures {
        quorum::Failures(
            self.servers
                .iter()
                .filter_map(|(_, view)| match view {
                    ServerView::Error(e) => Some(e.clone()),
                    _ => None,
                })
                .collect(),
        )
    }

    /// The error for a read that cannot tell held from free; `what` names
    /// what needed to know.
    pub fn unknown(&self, what: String) -> Error {
        let failures = self.failures();
        Error::Unavailable { what, config: failures.any_config(), failures }
    }
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

    /// The clock drift allowance, as a fraction of the TTL.
    pub fn drift_factor(&self) -> f64 {
        self.drift_factor
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
    /// `vote` counts it. Extend, raise-fence and release rounds end as soon
    /// as the verdict is settled (a release is done once a quorum deleted:
    /// nobody can hold the token's quorum any more), the calls still in
    /// flight finishing in the background before the process exits; status
    /// rounds hear every server. Acquire rounds have their own rule ([`Fleet::attempt`]).
    /// The run history ([`crate::history`]) sends its own scripts through it.
    pub(crate) async fn round<T: Send + 'static>(
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
        let early = matches!(call.op, Op::Extend | Op::RaiseFence | Op::Release);
        let op = call.op;
        let shown = call.key.clone();
        let call = Arc::new(call);
        quorum::fan_out(
            servers,
            &self.tasks,
            self.quorum,
            (op, &shown),
            |server, answer| {
                let call = Arc::clone(&call);
                async move { answer.send(call.on(&server, read).await) }
            },
            vote,
            quorum::until_settled(early),
        )
        .await
    }

    /// The error of a round that too few servers answered; `what` names it.
    pub(crate) fn unavailable<T>(&self, what: String, round: &Round<T>) -> Error {
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
    pub(crate) fn results<T>(
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
    /// true. On anything but success, the token is withdrawn everywhere it
    /// may have been set, including on the servers that did not answer.
    /// It ignores the wait queue: see [`Fleet::attempt`] for a waiter's.
    pub async fn try_acquire(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
        fence: bool,
    ) -> AttemptReport {
        self.attempt(key, token, ttl, fence, 0, None).await
    }

    /// [`Fleet::try_acquire`] by a contender whose last `splits` rounds in
    /// a row found the votes split (it waits longer for slow servers, see
    /// `patience`).
    ///
    /// The verdict does not wait for what it does not need: the round
    /// stops listening once [`quorum::standing`] is settled (or, in a
    /// split, after `patience`), and the withdrawal runs in the
    /// background. Nothing is left behind for that: each server's task
    /// (`contend`) withdraws on the connection its attempt used, after
    /// it, and [`Fleet::drain`] waits for those tasks before the process
    /// exits.
    ///
    /// With a `place`, the same round keeps the wait queue: a free key is
    /// granted only to the first waiter (or to anyone while nobody waits),
    /// a waiter not granted takes or refreshes its place, and one granted
    /// leaves the queue where it was granted (and returns there if the
    /// attempt is withdrawn). One round per attempt, queue included.
    pub async fn attempt(
        &self,
        key: &str,
        token: &str,
        ttl: Duration,
        fence: bool,
        splits: u32,
        place: Option<Place<'_>>,
    ) -> AttemptReport {
        let start = BootInstant::now();
        let [order, deadlines] = self.layout.queue_keys(key);
        let mut keys =
            vec![self.layout.held_key(key, token), self.layout.fence_key(key), order, deadlines];
        // A shared holder's token joins the shared holders instead
        // ([`crate::shared`]): the same script, round and queue.
        if is_shared(token) {
            keys.push(self.layout.readers_key(key));
        }
        let numbers = format!(
            "{} {} {} {} {} {} {} {} {}",
            crate::millis(ttl),
            if fence { fence::proposal(SystemTime::now()).to_string() } else { "-".to_owned() },
            fence::WINDOW.as_micros(),
            crate::millis(fence::lifetime(ttl)),
            u8::from(place.is_some_and(|p| p.join)),
            u8::from(place.is_some_and(|p| p.order)),
            queue::LIFETIME.as_millis(),
            place.map_or(0, |p| p.since_ms),
            queue::SKEW.as_millis(),
        );
        let call = Arc::new(Call {
            op: Op::Acquire,
            key: key.to_owned(),
            script: &SCRIPTS.acquire,
            keys,
            args: vec![token.into(), place.map_or("", |p| p.member).into(), numbers.into_bytes()],
        });
        // The verdict every server task waits for: Some(true) keeps the
        // votes, Some(false) withdraws them. Dropped unsent (this future
        // was abandoned), it means withdraw.
        let (verdict, verdict_rx) = watch::channel(None);
        let quorum = self.quorum;
        let round = quorum::fan_out(
            &self.servers,
            &self.tasks,
            quorum,
            (Op::Acquire, key),
            |server, answer| contend(server, Arc::clone(&call), answer, verdict_rx.clone()),
            |r| match r {
                Granted::Yes(..) => Vote::Yes,
                Granted::No { .. } => Vote::No,
            },
            |tally, replies, elapsed| patience(tally, replies, elapsed, quorum, splits),
        )
        .await;
        let servers = self.results(&round, |r| match r {
            Granted::Yes(..) => "granted",
            Granted::No { holder: Some(_), .. } => "held",
            Granted::No { holder: None, .. } => "queued",
        });
        let views: Vec<queue::View> = round
            .replies
            .iter()
            .filter_map(|r| match r {
                Reply::Answered(Granted::No { queue, .. }) => Some(queue.clone()),
                _ => None,
            })
            .collect();
        let mut attempt = self.conclude_acquire(key, token, ttl, fence, start, &round).await;
        if let Some(place) = place
            && Votes::of(&round.replies).queued > 0
            && !matches!(attempt, Attempt::Acquired(_) | Attempt::Busy(_))
        {
            // The queue refused us somewhere and no holder explains the
            // rest: wait behind the waiter first on a quorum, or, when
            // none is, attempt again without order.
            attempt = match queue::turn(&views, self.quorum, place.member) {
                queue::Turn::Behind { ahead } => Attempt::Queued { ahead },
                queue::Turn::Head | queue::Turn::Unordered => Attempt::Disordered,
            };
        }
        verdict.send_replace(Some(matches!(attempt, Attempt::Acquired(_))));
        let ahead = place.and_then(|p| queue::ahead(&views, self.quorum, p.member));
        AttemptReport { attempt, servers, ahead }
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
        let votes = Votes::of(&round.replies);
        // Servers not heard from count as silent: the verdict is final.
        match quorum::standing(votes.ours, &votes.counts(), 0, self.quorum) {
            Standing::Won => {
                let fence =
                    if fence { self.settle_fence(key, token, ttl, round).await } else { Ok(None) };
                let elapsed = start.elapsed();
                match (fence, quorum::validity(ttl, elapsed, self.drift_factor)) {
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
                            "acquire {shown}: the quorum answered only after {}, leaving no validity out of a {} TTL",
                            crate::fmt_duration(elapsed),
                            crate::fmt_duration(ttl)
                        ),
                        failures: round.failures(),
                        config: false,
                    }),
                }
            }
            Standing::Held(i) => match votes.others.get(i) {
                Some(&(value, _, remaining)) => {
                    Attempt::Busy(Holder { value: value.to_owned(), remaining })
                }
                // The queue has a quorum: [`Fleet::attempt`] says whose
                // turn it is.
                None => Attempt::Disordered,
            },
            Standing::Split => {
                let mut counts = votes.counts();
                if votes.ours > 0 {
                    counts.push(votes.ours);
                }
                counts.sort_by_key(|n| std::cmp::Reverse(*n));
                Attempt::Split(Split {
                    silent: round.tally.total - counts.iter().sum::<usize>(),
                    votes: counts,
                    expires: votes.others.iter().filter_map(|(_, _, ttl)| *ttl).min(),
                    failures: round.failures(),
                })
            }
            Standing::Unreachable | Standing::Open => {
                Attempt::Unavailable(self.unavailable(format!("acquire {shown}"), round))
            }
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
                Reply::Answered(Granted::Yes(Some(f), _)) => Some(*f),
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
        let mut keys = vec![self.layout.held_key(key, token), self.layout.fence_key(key)];
        if is_shared(token) {
            keys.push(self.layout.readers_key(key));
        }
        let call = Call {
            op: Op::RaiseFence,
            key: key.to_owned(),
            script: &SCRIPTS.raise_fence,
            keys,
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
        let keys = vec![self.layout.held_key(key, token), self.layout.fence_key(key)];
        let lifetime = crate::millis(crate::fence::lifetime(ttl)).to_string();
        let more = vec![lifetime.into_bytes()];
        self.retime(&SCRIPTS.extend, key, keys, token, ttl, more, NOT_HELD).await
    }

    /// Sets the TTL of a lock held by `token` to exactly `ttl` on every
    /// server, shortening it if need be (`run --keep`).
    pub async fn set_ttl(&self, key: &str, token: &str, ttl: Duration) -> Result<Lock, Error> {
        let keys = vec![self.layout.held_key(key, token)];
        self.retime(&SCRIPTS.set_ttl, key, keys, token, ttl, Vec::new(), NOT_HELD).await
    }

    /// One compare-and-set round on a holder's TTL: [`Fleet::extend`],
    /// [`Fleet::set_ttl`] and their shared twins ([`crate::shared`]).
    /// `script` gets KEYS `keys` and ARGV token, ttl ms, then `more`, and
    /// answers 1 where the token holds; `refused` says what a quorum of 0
    /// means.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn retime(
        &self,
        script: &'static Script,
        key: &str,
        keys: Vec<String>,
        token: &str,
        ttl: Duration,
        more: Vec<Vec<u8>>,
        refused: &str,
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
                "extend {shown}: {refused} ({} of {} servers say so)",
                round.tally.no, round.tally.total
            ))),
            Outcome::Unreachable => Err(self.unavailable(format!("extend {shown}"), &round)),
        }
    }

    /// Deletes the key on every server where `token` holds it, announcing
    /// the release to waiters. Returns once a quorum has deleted it (the
    /// other servers' deletes go on in the background, see
    /// [`Fleet::drain`]), with each server's part.
    /// A shared holder's token leaves the shared holders
    /// ([`Fleet::release_call`]).
    pub async fn release(&self, key: &str, token: &str) -> Result<Vec<ServerResult>, Error> {
        let refused = if is_shared(token) { NO_SHARED_HOLD } else { NOT_HELD };
        let call = self.release_call(key, token);
        let round = self.round(call, parse_int, done_here).await;
        let shown = crate::display_key(key.as_bytes());
        match round.outcome() {
            Outcome::Won => {
                Ok(self.results(&round, |n| if *n == 1 { "deleted" } else { "not held" }))
            }
            Outcome::Refused => Err(Error::Lost(format!(
                "release {shown}: {refused} ({} of {} servers say so)",
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
        self.force_release_of(key, 1, any_value).await
    }

    /// [`Fleet::force_release`] of place `slot` of a `--limit` lock.
    pub async fn force_release_of(
        &self,
        key: &str,
        slot: u32,
        any_value: bool,
    ) -> Result<usize, Error> {
        let shown = crate::display_key(key.as_bytes());
        let status = self.status_of(key, slot).await;
        let failures = status.failures();
        if failures.0.len() > self.servers.len() - self.quorum {
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
        self.status_of(key, 1).await
    }

    /// [`Fleet::status`] of place `slot` of a `--limit` lock ([`crate::slots`]).
    pub async fn status_of(&self, key: &str, slot: u32) -> Status {
        let call = Call {
            op: Op::Status,
            key: key.to_owned(),
            script: &SCRIPTS.status,
            keys: vec![self.layout.slot_key(key, slot), self.layout.fence_key(key)],
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

/// What a quorum of "not held" answers to an extend or a release means.
const NOT_HELD: &str = "the lock is not held by this token";

/// The same for a shared holder's token ([`crate::shared`]).
pub(crate) const NO_SHARED_HOLD: &str = "no shared hold of this token";

/// True when `token` is a shared holder's ([`crate::shared`]).
pub fn is_shared(token: &str) -> bool {
    token.parse::<Token>().is_ok_and(|t| t.shared)
}

/// The vote of a compare-and-extend or compare-and-delete reply: 1 when
/// the server did it (the token held the key there), 0 when it did not.
pub(crate) fn done_here(n: &i64) -> Vote {
    if *n == 1 { Vote::Yes } else { Vote::No }
}

impl Fleet {
    /// The compare-and-delete of `token` on `key`, announcing the release.
    /// A shared holder's token ([`crate::shared`]) leaves the shared
    /// holders instead: the withdrawal script, with the release channel.
    fn release_call(&self, key: &str, token: &str) -> Call {
        if is_shared(token) {
            let [order, deadlines] = self.layout.queue_keys(key);
            return Call {
                op: Op::Release,
                key: key.to_owned(),
                script: &SCRIPTS.withdraw,
                keys: vec![
                    self.layout.lock_key(key),
                    order,
                    deadlines,
                    self.layout.readers_key(key),
                ],
                args: vec![token.into(), Vec::new(), Vec::new(), release_channel(key).into_bytes()],
            };
        }
        Call {
            op: Op::Release,
            key: key.to_owned(),
            script: &SCRIPTS.release,
            keys: [vec![self.layout.held_key(key, token)], self.layout.queue_keys(key).to_vec()]
                .concat(),
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
        self.companion(key, "fence")
    }

    /// The server-side name of the run history of the lock `key` (a list,
    /// newest first; [`crate::history`]).
    pub fn history_key(self, key: &str) -> String {
        self.companion(key, "history")
    }

    /// The server-side name of the skip counter of the lock `key` (a hash;
    /// [`crate::history`]).
    pub fn skips_key(self, key: &str) -> String {
        self.companion(key, "skips")
    }

    /// A key that goes with the lock `key`, in its Cluster hash slot:
    /// `redlock:{KEY}:WHAT`, or `redlock:{TAG}:WHAT:KEY` for a raw key.
    fn companion(self, key: &str, what: &str) -> String {
        match self {
            KeyLayout::Native => format!("redlock:{{{}}}:{what}", escape_tag(key)),
            KeyLayout::Raw => {
                format!("redlock:{{{}}}:{what}:{key}", cluster_tag(key).unwrap_or(key))
            }
        }
    }
}

impl KeyLayout {
    /// The server-side names of the wait queue of `key` ([`crate::queue`]):
    /// its order and its deadlines, in the lock's slot.
    pub fn queue_keys(self, key: &str) -> [String; 2] {
        [self.companion(key, "queue"), self.companion(key, "queue-deadlines")]
    }
}

impl KeyLayout {
    /// The server-side name of place `slot` (1-based) of the `--limit`
    /// lock `key` ([`crate::slots`]): place 1 is the lock key itself, so
    /// `--limit 1` is the ordinary lock; place S > 1 is
    /// `redlock:{KEY}:slot:S` (raw: `redlock:{TAG}:slot:S:KEY`), in the
    /// lock's Cluster hash slot like its other companions. With the key as
    /// given, other Redlock clients exclude and are excluded by place 1
    /// only: they count as one more holder, never as N.
    pub fn slot_key(self, key: &str, slot: u32) -> String {
        if slot <= 1 { self.lock_key(key) } else { self.companion(key, &format!("slot:{slot}")) }
    }

    /// The server-side name of the `--shared` holders of `key`
    /// (`redlock:{KEY}:readers`; [`crate::shared`]).
    pub fn readers_key(self, key: &str) -> String {
        self.companion(key, "readers")
    }

    /// The server-side name of the place that `token` holds (or tries):
    /// the place written in a redlock token ([`Token::slot`]), place 1 for
    /// any other value.
    pub fn held_key(self, key: &str, token: &str) -> String {
        self.slot_key(key, token.parse::<Token>().map_or(1, |t| t.slot()))
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

/// Who holds how many servers, from one acquire round's answers.
struct Votes<'a> {
    /// Servers that granted us.
    ours: usize,
    /// Every other value seen: the value, how many servers hold it, and its
    /// shortest remaining TTL among them (`None`: no expiry).
    others: Vec<(&'a str, usize, Option<Duration>)>,
    /// Servers where the key is free but another waiter is first in the
    /// queue: they count as one more value, "the queue".
    queued: usize,
}

impl<'a> Votes<'a> {
    fn of(replies: &'a [Reply<Granted>]) -> Votes<'a> {
        let mut votes = Votes { ours: 0, others: Vec::new(), queued: 0 };
        for reply in replies {
            match reply {
                Reply::Answered(Granted::Yes(..)) => votes.ours += 1,
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
    /// refused any.
    fn counts(&self) -> Vec<usize> {
        let mut counts: Vec<usize> = self.others.iter().map(|(_, n, _)| *n).collect();
        if self.queued > 0 {
            counts.push(self.queued);
        }
        counts
    }
}

/// The least an acquire round with split votes waits for its slowest
/// servers, on top of the time it has already taken.
const STRAGGLER_FLOOR: Duration = Duration::from_millis(2);

/// When an acquire round may stop listening. As soon as its standing is
/// settled (won, held by another value on a quorum, or split so that no
/// value can reach a quorum whatever the pending servers say). When it is
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
fn patience(
    tally: &Tally,
    replies: &[Reply<Granted>],
    elapsed: Duration,
    quorum: usize,
    splits: u32,
) -> Listen {
    let votes = Votes::of(replies);
    let counts = votes.counts();
    let answered = votes.ours + counts.iter().sum::<usize>();
    match quorum::standing(votes.ours, &counts, tally.pending(), quorum) {
        Standing::Open if !counts.is_empty() && answered >= quorum => {
            Listen::For((elapsed + STRAGGLER_FLOOR).saturating_mul(1 << splits.min(16)))
        }
        Standing::Open => Listen::On,
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

/// Waits for an acquire round's verdict: true keeps the votes, false
/// withdraws them. A verdict that never comes (the round was abandoned)
/// withdraws.
async fn decided(verdict: &mut watch::Receiver<Option<bool>>) -> bool {
    match verdict.wait_for(Option::is_some).await {
        Ok(keep) => keep.unwrap_or(false),
        Err(_) => false,
    }
}

/// One server's part in an acquire round: the attempt, its answer to the
/// round, then the verdict, and when the verdict is "withdraw", the
/// withdrawal on the same connection, after the attempt.
///
/// The order is the point (issue 9, item 7). Redis executes one
/// connection's commands in the order they arrive. The attempt's future is
/// dropped (or done) before the withdrawal is sent, so every request it
/// wrote (a request already handed to the connection is written even if
/// its answer is no longer awaited; one that was not is never written) is
/// ahead of the withdrawal, even when the server is frozen and answers
/// both an hour later. The connection is the server's shared one, opened
/// once for all callers ([`Server::connect`]); a timed-out attempt makes
/// the server forget it for new calls, but this task keeps its handle.
async fn contend(
    server: Arc<Server>,
    call: Arc<Call>,
    answer: Answer<Granted>,
    mut verdict: watch::Receiver<Option<bool>>,
) {
    let key = call.key();
    let deadline = server.deadline();
    // Nothing is sent before the connection is there: a verdict that comes
    // first leaves nothing to withdraw on this server.
    let conn = tokio::select! {
        conn = server.connect(Op::Acquire, key.as_bytes(), deadline) => conn,
        _ = decided(&mut verdict) => return,
    };
    let conn = match conn {
        Ok(conn) => conn,
        Err(e) => return answer.send(Err(e)),
    };
    let mut set = Box::pin(async {
        let reply = server
            .call_on(&conn, Op::Acquire, key.as_bytes(), deadline, async |c| {
                call.invoke(&server, c).await
            })
            .await?;
        parse_acquire(reply).map_err(|msg| server.bad_reply(Op::Acquire, key, msg))
    });
    // The queue entry a grant here removed, to put back on a withdrawal.
    let mut entry = None;
    // Whether this server refused (and so kept or refreshed our entry).
    let refused = |result: &Result<Granted, ServerError>| matches!(result, Ok(Granted::No { .. }));
    let keep = tokio::select! {
        result = &mut set => {
            // "Held by another value": this attempt set nothing here. Any
            // other answer (granted, an error, a timeout) may have set it.
            let refused_here = refused(&result);
            if let Ok(Granted::Yes(_, removed)) = &result {
                entry = *removed;
            }
            answer.send(result);
            let won = decided(&mut verdict).await;
            if refused_here {
                if won {
                    leave_here(&server, &conn, &call).await;
                }
                return;
            }
            won
        }
        keep = decided(&mut verdict) => {
            if keep {
                // Won without this server: let its vote land all the same.
                if refused(&set.await) {
                    leave_here(&server, &conn, &call).await;
                }
                return;
            }
            false
        }
    };
    drop(set);
    if !keep {
        withdraw(&server, &conn, &call, entry).await;
    }
}

/// Takes the waiter's entry out of this server's queue, after an attempt
/// that won elsewhere but was refused here (and so kept or refreshed the
/// entry, which would otherwise stand first for others until it expires).
/// Best effort, on the attempt's connection: after the attempt.
async fn leave_here(server: &Server, conn: &Conn, call: &Call) {
    let member = &call.args[1];
    if member.is_empty() {
        return;
    }
    let mut pipe = redis::pipe();
    pipe.cmd("ZREM").arg(&call.keys[2]).arg(member).ignore();
    pipe.cmd("ZREM").arg(&call.keys[3]).arg(member).ignore();
    let send = async |c: &mut MultiplexedConnection| pipe.query_async::<()>(c).await;
    let _ = server.call_on(conn, Op::Queue, call.key().as_bytes(), server.deadline(), send).await;
}

/// Deletes the token of `call`, a failed attempt, from its lock key on
/// `conn`, the connection of the attempt being withdrawn. The script is
/// sent as SCRIPT LOAD and EVALSHA in one pipeline, so it never needs a second round trip (after NOSCRIPT) that
/// a process exiting could cut off: once written, both run on the server
/// even if this process is gone by then. Best effort: errors change
/// nothing about the verdict, which is already known.
///
/// When the connection broke, the server has closed it or will read no
/// more from it than it already holds, so the delete goes on a fresh one;
/// it could overtake only bytes of the dead connection still unread in the
/// server's buffer, a window of one turn of the server's event loop.
///
/// `entry` is the waiter's queue entry (join score, deadline) that the
/// grant being withdrawn removed: it goes back, so that a head whose
/// attempt failed keeps its place.
async fn withdraw(server: &Server, conn: &Conn, call: &Call, entry: Option<(u64, u64)>) {
    let key = call.key();
    // No-script hook: the same compare-and-delete without a script.
    if server.scripts_refused() {
        let send = async |_: &mut MultiplexedConnection| {
            crate::noscript::withdraw(server, &call.keys[0], &call.args[0]).await
        };
        let _ = server.call(Op::Withdraw, key.as_bytes(), send).await;
        return;
    }
    let (member, (score, deadline)) = match entry {
        Some(entry) => (call.args[1].as_slice(), entry),
        None => (&b""[..], (0, 0)),
    };
    // A shared attempt's call has the shared holders as a fifth key: the
    // script then withdraws its entry there (announcing nothing).
    let readers = call.keys.get(4);
    let mut pipe = redis::pipe();
    pipe.cmd("SCRIPT").arg("LOAD").arg(WITHDRAW_LUA).ignore();
    pipe.cmd("EVALSHA")
        .arg(SCRIPTS.withdraw.get_hash())
        .arg(3 + usize::from(readers.is_some()))
        .arg(&call.keys[0])
        .arg(&call.keys[2])
        .arg(&call.keys[3])
        .arg(readers)
        .arg(&call.args[0])
        .arg(member)
        .arg(format!("{score} {deadline}"))
        .arg(readers.map(|_| ""));
    let send = async |c: &mut MultiplexedConnection| pipe.query_async::<Value>(c).await;
    let first = server.call_on(conn, Op::Withdraw, key.as_bytes(), server.deadline(), send).await;
    if let Err(e) = first
        && matches!(e.failure, Failure::Connection(_))
    {
        let _ = server.call(Op::Withdraw, key.as_bytes(), send).await;
    }
}

/// One server's answer to the acquire script.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Granted {
    /// Set; with the fence drawn there when fencing is on, and the
    /// waiter's queue entry that the grant removed there (its join score
    /// and deadline), which a withdrawal puts back.
    Yes(Option<u64>, Option<(u64, u64)>),
    /// Not set: held by `holder` for another `pttl` ms (-1: no expiry), or,
    /// with no holder, free but another waiter's turn; and the queue there.
    No {
        /// The holder's value; `None` when the key is free there.
        holder: Option<String>,
        /// Its PTTL.
        pttl: i64,
        /// The queue as this server sees it after the attempt.
        queue: queue::View,
    },
}

/// Reads the acquire script's reply.
fn parse_acquire(reply: Value) -> Result<Granted, String> {
    let bad = |reply: &Value| format!("unexpected acquire reply {reply:?}");
    let Value::Array(items) = &reply else { return Err(bad(&reply)) };
    match items.as_slice() {
        [Value::Int(1), Value::Int(fence), Value::Int(score), Value::Int(deadline)] => {
            let entry = u64::try_from(*score).ok().zip(u64::try_from(*deadline).ok());
            Ok(Granted::Yes(u64::try_from(*fence).ok(), entry))
        }
        [Value::Int(0), holder, Value::Int(pttl), Value::Int(rank), Value::Int(len), first] => {
            let text = |v: &Value| match v {
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            };
            let (Some(holder), Some(first)) = (text(holder), text(first)) else {
                return Err(bad(&reply));
            };
            Ok(Granted::No {
                // A key that exists has a PTTL of -1 or more: -2 is "free".
                holder: (*pttl != -2).then_some(holder),
                pttl: *pttl,
                queue: queue::View {
                    rank: usize::try_from(*rank).ok(),
                    len: usize::try_from(*len).map_err(|_| bad(&reply))?,
                    first,
                },
            })
        }
        _ => Err(bad(&reply)),
    }
}

/// Reads an integer reply.
pub(crate) fn parse_int(reply: Value) -> Result<i64, String> {
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
            assert_eq!(tag, cluster_tag(&native.history_key(key)), "{key:?}: history in the slot");
            assert_eq!(tag, cluster_tag(&native.skips_key(key)), "{key:?}: skips in the slot");
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
        assert_eq!(raw.history_key("{user1}.job"), "redlock:{user1}:history:{user1}.job");
        assert_eq!(raw.skips_key("job"), "redlock:{job}:skips:job");
        assert_eq!(cluster_tag("{user1}.job"), Some("user1"));
        assert_eq!(cluster_tag("{}.job"), None);
        assert_ne!(raw.fence_key("job"), KeyLayout::Native.fence_key("job"));
    }

    #[test]
    fn a_split_names_no_holder_and_says_how_the_votes_lie() {
        let queue = queue::View { rank: None, len: 0, first: String::new() };
        let no = |holder: Option<&str>, pttl| {
            let holder = holder.map(str::to_owned);
            Reply::Answered(Granted::No { holder, pttl, queue: queue.clone() })
        };
        let replies = || {
            vec![
                no(Some("a"), 900),
                no(Some("a"), 500),
                no(Some("b"), -1),
                Reply::Answered(Granted::Yes(None, None)),
            ]
        };
        let replies_now = replies();
        let votes = Votes::of(&replies_now);
        assert_eq!(votes.ours, 1);
        assert_eq!(votes.counts(), vec![2, 1]);
        let mut with_queue = replies();
        with_queue.extend([no(None, -2), no(None, -2)]);
        assert_eq!(Votes::of(&with_queue).counts(), vec![2, 1, 2], "the queue counts last");
        assert_eq!(votes.others[0].2, Some(Duration::from_millis(500)), "the shortest expiry");
        assert_eq!(votes.others[1].2, None, "no expiry");
        let split =
            Split { votes: vec![2, 1, 1], silent: 1, expires: None, failures: Failures::default() };
        assert_eq!(
            split.describe("k", 3),
            "k: no holder has a quorum (3 of 5); the votes are split among 3 tokens (2, 1 and 1 servers); 1 did not answer: no server answered in time"
        );
    }

    #[test]
    fn acquire_reply_is_read_strictly() {
        let int = Value::Int;
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let yes = Value::Array(vec![int(1), int(7), int(10), int(20)]);
        assert_eq!(parse_acquire(yes), Ok(Granted::Yes(Some(7), Some((10, 20)))));
        let unfenced = Value::Array(vec![int(1), int(-1), int(-1), int(-1)]);
        assert_eq!(parse_acquire(unfenced), Ok(Granted::Yes(None, None)));
        let busy = Value::Array(vec![int(0), text("t"), int(5), int(1), int(2), text("w")]);
        let queue = queue::View { rank: Some(1), len: 2, first: "w".into() };
        let held = Granted::No { holder: Some("t".into()), pttl: 5, queue: queue.clone() };
        assert_eq!(parse_acquire(busy), Ok(held));
        let queued = Value::Array(vec![int(0), text(""), int(-2), int(1), int(2), text("w")]);
        assert_eq!(parse_acquire(queued), Ok(Granted::No { holder: None, pttl: -2, queue }));
        let raw_empty_value =
            Value::Array(vec![int(0), text(""), int(-1), int(-1), int(0), text("")]);
        assert!(matches!(parse_acquire(raw_empty_value), Ok(Granted::No { holder: Some(_), .. })));
        assert!(parse_acquire(Value::Array(vec![int(1), int(7)])).is_err());
        assert!(parse_acquire(Value::Okay).is_err());
    }
}
