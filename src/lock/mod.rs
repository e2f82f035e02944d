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
//!
//! This module holds the [`Fleet`], the script calls and the lock a
//! command asks for ([`Request`]); by concept:
//! - `acquire`: the acquire round and its verdict; `tally`: who holds how
//!   many servers in it, and when it may stop listening;
//! - `contend`: one server's part in the round, from the attempt to the
//!   withdrawal; `granted`: its reply, read once;
//! - `vote`: who may vote (a server's clock, a restart, a twin, an
//!   evicting policy);
//! - `untaken`: `-n`'s steps in a round; [`record`]: its rule and the
//!   tick's, kept by the grant record;
//! - `hold`: extend/release/force; `status`; `ops`: the operations as
//!   types; `keys`: the key names.

mod acquire;
mod contend;
mod granted;
mod hold;
mod keys;
pub mod noscript;
mod ops;
pub mod record;
mod scripts_tests;
mod status;
mod tally;
mod untaken;
mod vote;

pub use acquire::{Attempt, AttemptReport, Place, Split};
pub use keys::{KeyLayout, WAKE_TAG, release_channel, wake_channel};
pub(crate) use ops::{
    AcquireOp, ExtendOp, Operation, RaiseFenceOp, ReleaseOp, SetTtlOp, StatusOp, WithdrawOp,
};
pub use record::{
    LOOK_BACK_NODE_TIMEOUT, MAX_TICK, RECORD_LIFE, Since, TICK_MARGIN, Terms, Tick, TickOver,
    TickRan, ran_by,
};
pub use status::{ServerView, Status};
pub use vote::{CLOCK_ALLOWANCE, base_restart_window, clock_too_far, votes_again_in};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use redis::aio::MultiplexedConnection;
use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use crate::clock::BootInstant;
use crate::error::Error;
use crate::fence;
use crate::queue;
use crate::quorum::{self, Answer, Failures, Listen, Outcome, Reply, Round, Standing, Tally, Vote};
use crate::server::{Conn, Failure, Op, Server, ServerError};
use crate::token::{Mode, Token};

/// The lock's Lua scripts ([`Lua`]).
struct Scripts {
    acquire: Lua,
    extend: Lua,
    set_ttl: Lua,
    release: Lua,
    status: Lua,
    raise_fence: Lua,
    withdraw: Lua,
    shared_extend: Lua,
}

/// The scripts as the servers get them, with their SHA-1s (build.rs).
pub(crate) mod bodies {
    include!(concat!(env!("OUT_DIR"), "/scripts.rs"));
}

static SCRIPTS: Scripts = Scripts {
    acquire: Lua::new(bodies::ACQUIRE),
    extend: Lua::new(bodies::EXTEND),
    set_ttl: Lua::new(bodies::SET_TTL),
    release: Lua::new(bodies::RELEASE),
    status: Lua::new(bodies::STATUS),
    raise_fence: Lua::new(bodies::RAISE_FENCE),
    withdraw: Lua::new(bodies::WITHDRAW),
    shared_extend: Lua::new(bodies::SHARED_EXTEND),
};

/// The longest argument Redis reads from a client that has not
/// authenticated yet (16 KiB; a longer one is answered with a protocol
/// error and a closed connection instead of NOAUTH): a script's body is
/// sent with `SCRIPT LOAD` before any answer says whether the password
/// was right.
const UNAUTHENTICATED_BULK: usize = 16 * 1024;

/// A Lua script of `src/scripts/`: its body as sent (build.rs strips its
/// comments) and its SHA-1, both computed at build time: every run used to
/// hash the bodies it sends.
#[derive(Debug)]
pub(crate) struct Lua {
    /// The source, as `SCRIPT LOAD` sends it.
    body: &'static str,
    /// Its SHA-1, as `EVALSHA` names it.
    sha: &'static str,
}

impl Lua {
    /// A script from its `(body, sha1)` ([`bodies`]); one longer than Redis
    /// reads before authentication does not compile.
    pub(crate) const fn new((body, sha): (&'static str, &'static str)) -> Lua {
        assert!(body.len() <= UNAUTHENTICATED_BULK, "a script body over 16 KiB");
        Lua { body, sha }
    }

    /// The body.
    pub(crate) fn body(&self) -> &'static str {
        self.body
    }

    /// The SHA-1 that `EVALSHA` names it by.
    pub(crate) fn get_hash(&self) -> &'static str {
        self.sha
    }
}

/// What the servers said to a call that is no vote ([`Fleet::ask_all`]):
/// the answers of those that answered, in server order, and why others
/// did not (a round that stops once a quorum wrote leaves the rest
/// unawaited, in neither).
pub(crate) struct Answers<T> {
    /// The answers.
    pub values: Vec<T>,
    /// The failures.
    pub failures: Failures,
}

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
    /// How many may hold it at once, and how (`--limit`, `--shared`).
    pub holders: Holders,
    /// The tick the run belongs to (`--once-per`, `--cron`; [`Tick`]).
    pub tick: Option<Tick>,
    /// The tick's schedule, as the servers' record keeps it
    /// ([`Terms::schedule`]).
    pub schedule: Option<String>,
    /// Where the holder runs, as `--note` said ([`Token::note`]).
    pub note: Option<String>,
    /// The CI job the holder runs in ([`Token::job`]).
    pub job: Option<String>,
    /// The end of the freeze this holds (`redlock hold`), ms since the
    /// Unix epoch ([`Token::until`]); `None`: no freeze.
    pub until: Option<u64>,
    /// When the contender began, if before the wait: `-n` refuses a lock
    /// taken since ([`record`]). The process's start for a command line
    /// ([`crate::clock::BootInstant::process_start`]); `None`: when the
    /// wait begins.
    pub began: Option<crate::clock::BootInstant>,
}

impl Request {
    /// The ordinary lock on `key` for `ttl`, waiting `wait`, fenced and in
    /// the queue's order, for no tick: every other field takes its
    /// default, for a caller to set what it asks beside that.
    pub fn new(key: &str, ttl: Duration, wait: Wait) -> Request {
        Request {
            key: key.to_owned(),
            ttl,
            wait,
            fence: true,
            ordered: true,
            holders: Holders::One,
            tick: None,
            schedule: None,
            note: None,
            job: None,
            until: None,
            began: None,
        }
    }

    /// Whether `-n`'s rule applies ([`record`]): one attempt (`-n`, or
    /// `--wait 0`), which never queues, for the ordinary lock.
    pub fn looks_back(&self) -> bool {
        let once = matches!(self.wait, Wait::Once) || self.wait == Wait::For(Duration::ZERO);
        once && self.holders == Holders::One
    }

    /// An attempt's terms for this request: its `place` in the queue,
    /// `-n`'s rule, and the tick with its schedule.
    pub fn terms<'a>(&'a self, place: Option<Place<'a>>, untaken: Option<Since<'a>>) -> Terms<'a> {
        Terms { place, untaken, tick: self.tick, schedule: self.schedule.as_deref() }
    }
}

/// Who may hold a key at once, as a request asks it. Each holder's
/// token carries its part as a [`Mode`], read once where the token is
/// made or comes in and carried with it ([`Held`], [`Lock::mode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Holders {
    /// One holder: the ordinary lock.
    #[default]
    One,
    /// At most this many (`--limit N`, N from 2), each in a place of its
    /// own ([`crate::slots`]).
    Limit(u32),
    /// Any number of shared holders, or one exclusive ([`crate::shared`]).
    Shared,
}

impl Holders {
    /// `--limit N` and `--shared` as given (checked by [`crate::config`]:
    /// they do not mix).
    pub fn of(limit: u32, shared: bool) -> Holders {
        match (shared, limit) {
            (true, _) => Holders::Shared,
            (false, 0 | 1) => Holders::One,
            (false, n) => Holders::Limit(n),
        }
    }

    /// The key's places: `N` for `--limit N`, else 1.
    pub fn places(self) -> u32 {
        match self {
            Holders::Limit(n) => n,
            Holders::One | Holders::Shared => 1,
        }
    }

    /// The mode of this request's token in place `slot` (from 1).
    pub fn mode_at(self, slot: u32) -> Mode {
        match self {
            Holders::One => Mode::Exclusive,
            Holders::Limit(limit) => Mode::Place { slot, limit },
            Holders::Shared => Mode::Shared,
        }
    }

    /// The mode of this request's entry in the wait queue: a shared
    /// waiter's says so, for the queue's turn of shared waiters
    /// (`scripts/acquire.lua`); every other waiter's is an ordinary token.
    pub fn waiter(self) -> Mode {
        if self == Holders::Shared { Mode::Shared } else { Mode::Exclusive }
    }
}

/// One call, the same on every server of a round.
pub(crate) struct Call {
    /// What it does, for errors and for whether the round may end early.
    pub(crate) op: Op,
    /// The lock's key as the user gave it, for messages.
    pub(crate) key: String,
    /// The operation, its keys and arguments by name.
    pub(crate) operation: Operation,
}

impl Call {
    /// This acquire call with `-n`'s term for one server: refuse a free key
    /// granted to another token at or after `ms` there ([`record`]).
    fn untaken_since(&self, ms: u64) -> Call {
        let operation = match &self.operation {
            Operation::Acquire(op) => {
                let numbers = ops::Numbers { untaken: ops::Untaken::Since(ms), ..op.numbers };
                Operation::Acquire(AcquireOp { numbers, ..op.clone() })
            }
            other => other.clone(),
        };
        Call { op: self.op, key: self.key.clone(), operation }
    }

    /// This release call, putting back the grant record (the release of
    /// a late vote: [`Call::on`]); any other call as it is.
    fn putting_back(&self) -> Call {
        let operation = match &self.operation {
            Operation::Release(op) => {
                Operation::Release(ReleaseOp { put_back: true, ..op.clone() })
            }
            other => other.clone(),
        };
        Call { op: self.op, key: self.key.clone(), operation }
    }

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
        // No-script hook: a server that refused a script
        // once takes the plain-command path from then on (`noscript`,
        // WATCH/MULTI/EXEC on a connection of its own); the refusal itself
        // is answered there too, so the caller sees the script's reply.
        if server.scripts_refused() {
            // Boxed, as below: the plain-command path's future is large
            // and rarely taken.
            return Box::pin(crate::lock::noscript::invoke(server, self)).await;
        }
        match self.run_script(c).await {
            Err(e) if crate::lock::noscript::refuses_scripts(&e) => {
                server.refuse_scripts();
                Box::pin(crate::lock::noscript::invoke(server, self)).await
            }
            reply => reply,
        }
    }

    /// Runs the script on `c` in one round trip, whatever the server's
    /// script cache holds: `EVALSHA` alone where this connection has
    /// already sent the script's `SCRIPT LOAD` ([`crate::server::script_loaded`]),
    /// else `SCRIPT LOAD` and `EVALSHA` in one pipeline (a fresh or
    /// restarted server, a new connection). `EVAL` with the body would do
    /// the same, but the README's ACL grants `+evalsha +script|load`.
    ///
    /// The load counts once it is handed to the connection, not once it is
    /// answered: Redis runs one connection's requests in order, so every
    /// later call on it finds the script. A server that does not answer
    /// (frozen, or slow behind a proxy) thus gets each body once per
    /// connection, not once per call: sent with every attempt and
    /// withdrawal, the bodies (about 20 KiB a round) would fill the TCP
    /// window of a server that does not read within a few rounds, and a
    /// withdrawal still queued behind them when its deadline passed would
    /// never be written while its attempt was, to land later and stay for
    /// its TTL (`contend`'s `withdraw`). Two cases take a second round trip,
    /// when `EVALSHA` answers NOSCRIPT and the pipeline follows: a script
    /// flushed since (`SCRIPT FLUSH`), and a pipeline given up before the
    /// connection wrote it (redis-rs drops a queued request whose caller
    /// is gone, which happens only while the socket takes no more bytes).
    ///
    /// A frozen process depends on it: it resumes with its answers in the
    /// socket buffer and a deadline passed ([`crate::clock::timeout_at`]),
    /// which reads what arrived but leaves no time for another request.
    async fn run_script(&self, c: &mut MultiplexedConnection) -> RedisResult<Value> {
        let lua = self.operation.script();
        let sha = lua.get_hash();
        let keys = self.operation.keys();
        // The arguments as the request is sent: `-n`'s term reads the time
        // since the contender began then ([`ops::Untaken::For`]).
        let evalsha = || {
            let mut evalsha = redis::cmd("EVALSHA");
            evalsha.arg(sha).arg(keys.len()).arg(&keys);
            for arg in self.operation.args() {
                evalsha.arg(&*arg);
            }
            evalsha
        };
        if crate::server::script_loaded(sha) {
            match evalsha().query_async(c).await {
                Err(e) if is_noscript(&e) => {}
                reply => return reply,
            }
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        pipe.cmd("SCRIPT").arg("LOAD").arg(lua.body());
        pipe.add_command(evalsha());
        // Noted before the pipeline is handed over, with no await in
        // between: a call on this connection that reads the note queues
        // its request behind this one.
        crate::server::note_script_loaded(sha);
        let replies: Vec<RedisResult<Value>> = pipe.query_async(c).await?;
        let Ok([load, reply]) = <[RedisResult<Value>; 2]>::try_from(replies) else {
            return Err(
                (ErrorKind::UnexpectedReturnType, "SCRIPT LOAD, EVALSHA: no 2 replies").into()
            );
        };
        match (load, reply) {
            // The load refused (an ACL without `+script|load`, SCRIPT
            // renamed away) and the script unknown: the refusal says why
            // (`noscript::refuses_scripts` reads it).
            (Err(refused), Err(e)) if is_noscript(&e) => Err(refused),
            (_, reply) => reply,
        }
    }

    /// Runs the script on `server` (its connection, within the node
    /// timeout) and reads the reply with `read`.
    async fn on<T>(
        &self,
        server: &Server,
        read: fn(Value) -> Result<T, String>,
    ) -> Result<T, ServerError> {
        let key = self.key();
        // A delete goes after any acquire attempt still landing here
        // ([`Server::attempting`]), on the connection of a won round's
        // vote that may land late ([`Server::late_vote`]); on a fresh one
        // when that connection broke (the server reads no more of it).
        //
        // The release of a late vote also puts back the grant record that
        // vote replaced ([`record`]). The argument: the record serves `-n`
        // and `--once-per` through quorum intersection, and the quorum that
        // won is the servers that granted before the verdict, which keep
        // their records; a late vote is on none of it. Kept, its record
        // says the key was taken when the vote landed, which on a server
        // frozen for seconds is long after the round was won: a `-n` that
        // began in between read it as a take since it began, and skipped
        // as busy a tick nobody else ran (campaign `persist`, seed
        // 3209046234). The bound: the record goes back only while it still
        // names this token (nobody was granted there since), so it never
        // hides a later grant. Not on a server without scripts, whose
        // release runs on a connection of its own.
        let late = if matches!(self.op, Op::Release | Op::ForceRelease) {
            server.after_attempts().await;
            self.operation.held().and_then(|(lock, token)| server.late_vote(lock, token))
        } else {
            None
        };
        let call = match late {
            Some(_) => &self.putting_back(),
            None => self,
        };
        let run = async |c: &mut MultiplexedConnection| call.invoke(server, c).await;
        if let Some(conn) = late {
            let deadline = server.deadline();
            match server.call_on(&conn, self.op, key.as_bytes(), deadline, run).await {
                Err(e) if matches!(e.failure, Failure::Connection(_)) => {}
                reply => return read(reply?).map_err(|msg| server.bad_reply(self.op, key, msg)),
            }
        }
        let reply = server.call(self.op, key.as_bytes(), run).await?;
        read(reply).map_err(|msg| server.bad_reply(self.op, key, msg))
    }
}

/// Whether `e` is a NOSCRIPT answer: the server does not know the script.
fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// How one server took part in a round, for events and messages.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServerResult {
    /// The server's display name.
    pub server: String,
    /// What it did (in JSON, its text: `granted`, `error: ...`).
    pub result: Part,
    /// Time to answer from the start of the round, in milliseconds (to
    /// the microsecond).
    pub latency_ms: Option<f64>,
}

/// What one server did in a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// It answered: what the answer was (`granted`, `held`, `queued` for
    /// an acquire; `deleted`, `not held` for a release).
    Answered(&'static str),
    /// It failed: why.
    Failed(String),
    /// It answered, but has no vote yet (restarted within the window, a
    /// clock off, an evicting policy): why. Routine after a restart, and
    /// no failure of the server.
    NoVote(String),
    /// The round stopped listening once its verdict was settled.
    NotAwaited,
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Answered(what) => f.write_str(what),
            Part::Failed(why) => write!(f, "error: {why}"),
            Part::NoVote(why) => write!(f, "no vote yet: {why}"),
            Part::NotAwaited => f.write_str("not awaited"),
        }
    }
}

impl serde::Serialize for Part {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What the servers of a round did, for messages: `first` (the count
/// that matters, e.g. `granted by 2 of 3 (quorum 2)`), then how many did
/// anything else, by kind: `, 1 failed, 1 not awaited`. `main` is the
/// result `first` counts (`granted`, `deleted`). A server the round
/// stopped listening to once the verdict was settled is "not awaited":
/// it is neither a failure nor a refusal.
///
/// Without `verbose` (`-v`) the servers not awaited are left out: a server
/// the quorum did not need is no fault, and naming it sends a reader to
/// check a healthy server.
pub fn took_part(
    first: String,
    results: &[ServerResult],
    main: &'static str,
    verbose: bool,
) -> String {
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    let shown = |r: &&ServerResult| verbose || r.result != Part::NotAwaited;
    for r in results.iter().filter(|r| r.result != Part::Answered(main)).filter(shown) {
        let kind = match &r.result {
            Part::Failed(_) => "failed",
            Part::NoVote(_) => "without a vote yet",
            Part::NotAwaited => "not awaited",
            Part::Answered("held") => "held by another",
            Part::Answered("queued") => "kept for a waiter ahead",
            Part::Answered("not held") => "did not hold it",
            Part::Answered(other) => other,
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
        }
    }
    kinds.iter().fold(first, |line, (kind, n)| format!("{line}, {n} {kind}"))
}

/// The servers of one lock service and the rules for deciding over them.
pub struct Fleet {
    servers: Vec<Arc<Server>>,
    quorum: usize,
    drift_factor: f64,
    /// How long a restarted server's grants count towards no quorum
    /// (`None`: restarted servers are trusted to keep their data).
    restart_window: Option<Duration>,
    layout: KeyLayout,
    /// Server calls, including those still running after a verdict.
    tasks: TaskTracker,
    /// Set once an acquire round of this process won: from then on its
    /// stragglers may be the release of a lock it held ([`Fleet::settle`]).
    won: std::sync::atomic::AtomicBool,
    /// A member that answered a won round late with the round's own token:
    /// the same server as another member (`contend::contend`).
    twin: Arc<std::sync::Mutex<Option<ServerError>>>,
    /// Cancelled when the process settles before its exit
    /// ([`Fleet::settle`]): a `-n` loser's withdrawal that waits for a slow
    /// server's answer goes at once (`contend::contend`).
    exiting: tokio_util::sync::CancellationToken,
    /// Started by the first round: from the next round on, keeps the timer
    /// driver from a system call per server call, for as long as the fleet
    /// lives ([`crate::clock::warm_timers`]).
    warm: std::sync::OnceLock<Option<tokio_util::task::AbortOnDropHandle<()>>>,
}

/// A lock this process holds.
#[derive(Clone, Debug)]
pub struct Lock {
    /// The key.
    pub key: String,
    /// The value stored under the key on the servers that granted it.
    pub token: String,
    /// How the token holds it, as the token says: a shared holder's token
    /// is an entry among the shared holders, not the key's value; a
    /// place's token holds the place's key.
    pub mode: Mode,
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

    /// The token this lock is held by, with its mode.
    pub fn held(&self) -> Held<'_> {
        Held { token: &self.token, mode: self.mode }
    }
}

/// A token that holds (or tries) a lock, with its mode, read from the
/// token once where it is made or comes in ([`Held::of`]).
#[derive(Clone, Copy, Debug)]
pub struct Held<'a> {
    /// The token.
    pub token: &'a str,
    /// How it holds the lock.
    pub mode: Mode,
}

impl<'a> Held<'a> {
    /// A token given from outside (`--token`, a value read on the
    /// servers), in the mode it says ([`Mode::of`]).
    pub fn of(token: &'a str) -> Held<'a> {
        Held { token, mode: Mode::of(token) }
    }

    /// True for a shared holder's token ([`crate::shared`]).
    fn shares(self) -> bool {
        self.mode == Mode::Shared
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
            Some(d) => {
                format!("lapses {} after its holder stops renewing", crate::text::fmt_duration(d))
            }
            None => "has no expiry".to_owned(),
        };
        let shown = crate::text::display_key(key.as_bytes());
        match self.value.parse::<Token>().map(|t| t.mode.limit()) {
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
        Ok(t) if t.until.is_some() => describe_freeze(&t),
        Ok(t) => format!(
            "{} pid {} ({}since {}, for {}{}){}",
            t.host,
            t.pid,
            if t.caller { "the caller of redlock acquire, " } else { "" },
            humantime::format_rfc3339_seconds(t.created()),
            crate::text::fmt_duration(t.held_for()),
            if process_ended(&t) { "; that process has ended" } else { "" },
            whereabouts(&t),
        ),
        Err(()) => {
            format!("another client (value {:?})", crate::text::display_key(value.as_bytes()))
        }
    }
}

/// An instant of a freeze (its end, a gap's) for people: `ms` since the
/// Unix epoch to the second, in the one format of instants
/// ([`crate::schedule::format_at_offset`], UTC): a freeze ends at the
/// second a person named, and a fraction only hides it.
pub fn freeze_instant(ms: u64) -> String {
    crate::schedule::format_at_offset(ms / 1000 * 1000, 0)
}

/// A freeze's holder (`redlock hold`): `a freeze until
/// 2026-11-29T18:00:00+00:00: "Black Friday, ask alice" (host web-1, pid
/// 4242)`, the end as [`freeze_instant`] shows it, then its note, its CI
/// job, and whether its process has ended on this host.
pub fn describe_freeze(t: &Token) -> String {
    let until = t.until.map_or_else(String::new, |ms| format!(" until {}", freeze_instant(ms)));
    let note = t.note.as_ref().map_or_else(String::new, |n| format!(": {n:?}"));
    let job = t.job.as_ref().map_or_else(String::new, |j| format!(", CI job {j}"));
    let ended = if process_ended(t) { "; that process has ended" } else { "" };
    format!("a freeze{until}{note} (host {}, pid {}{job}{ended})", t.host, t.pid)
}

/// Where a token's holder runs, as it said when it took the lock: `, CI
/// job URL, note "TEXT"`, or nothing.
pub fn whereabouts(t: &Token) -> String {
    let mut out = String::new();
    if let Some(job) = &t.job {
        out.push_str(&format!(", CI job {job}"));
    }
    if let Some(note) = &t.note {
        out.push_str(&format!(", note {note:?}"));
    }
    out
}

/// True when the process a token names ran on this host and exists no
/// more (a `run --keep` whose run ended, a holder killed with SIGKILL, or
/// an `acquire` token of an earlier version, which named the `acquire`
/// process itself). Another host's processes cannot be seen: false.
pub fn process_ended(t: &Token) -> bool {
    t.host == crate::token::hostname()
        && i32::try_from(t.pid).is_ok_and(|pid| crate::procs::stat(pid).is_none())
}

impl Fleet {
    /// A fleet of servers deciding with `quorum` and `drift_factor`, with
    /// the keys in redlock's own namespace ([`KeyLayout::Native`]).
    pub fn new(servers: Vec<Server>, quorum: usize, drift_factor: f64) -> Fleet {
        let servers = servers.into_iter().map(Arc::new).collect();
        Fleet {
            servers,
            quorum,
            drift_factor,
            restart_window: Some(DEFAULT_RESTART_WINDOW),
            layout: KeyLayout::Native,
            tasks: TaskTracker::new(),
            won: std::sync::atomic::AtomicBool::new(false),
            twin: Arc::default(),
            exiting: tokio_util::sync::CancellationToken::new(),
            warm: std::sync::OnceLock::new(),
        }
        .with_key_layout(KeyLayout::Native)
    }

    /// The same fleet with restarted servers kept out of every quorum for
    /// `window` (`None`: trusted at once, for servers that keep every write).
    pub fn with_restart_window(self, window: Option<Duration>) -> Fleet {
        Fleet { restart_window: window, ..self }
    }

    /// How long a restarted server's grants count towards no quorum.
    pub fn restart_window(&self) -> Option<Duration> {
        self.restart_window
    }

    /// Starts [`crate::clock::warm_timers`] for the shortest node timeout,
    /// once, in the runtime of the first round.
    fn warm(&self) {
        self.warm.get_or_init(|| {
            let shortest = self.servers.iter().map(|s| s.timeout()).min();
            shortest.and_then(crate::clock::warm_timers)
        });
    }

    /// The same fleet with its keys where `layout` puts them. A cluster
    /// among the servers routes each call by the hash slot of the lock's
    /// server-side key, which every other key of the lock shares.
    pub fn with_key_layout(self, layout: KeyLayout) -> Fleet {
        for server in &self.servers {
            server.set_route(Arc::new(move |key: &[u8]| {
                layout.lock_key(&String::from_utf8_lossy(key)).into_bytes()
            }));
        }
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

    /// [`Fleet::drain`] for at most [`FLUSH`]: for a process that holds
    /// nothing at its exit (its wait ran out, or it failed). Its stragglers
    /// are withdrawals and queue exits, each handed to its connection as
    /// soon as the verdict was known, and waiting only for an answer that
    /// changes nothing; a server that hangs must not hold the exit past
    /// `--wait` for it. What is cut off: a call still connecting (it has
    /// sent nothing, so there is nothing to undo), and the answer of one
    /// already sent (the server runs what it read even after the socket
    /// closes).
    async fn flush(&self) {
        let _ = tokio::time::timeout(FLUSH, self.drain()).await;
    }

    /// Before the process exits: [`Fleet::drain`] when this process ever
    /// held a lock (any error after a hold: a release cut off would leave
    /// the lock on a server for its TTL), otherwise at most [`FLUSH`] of it.
    ///
    /// First it tells the calls still waiting to withdraw (a `-n` loser's,
    /// on a server slower than the verdict: `contend::contend`) to withdraw
    /// now, before [`FLUSH`]'s timer exists. The rule: on the one-thread
    /// runtime the future awaiting the flush is polled again only after a
    /// park, which comes once every task ready then has run (the woken
    /// withdrawals, and the connection tasks that write them), and a timer
    /// is seen expired only at a park; so however long the process is
    /// descheduled, no withdrawal is cut off unsent. The bound: the 61
    /// tasks the scheduler runs between two parks (about 30 servers'
    /// worth). What breaks it: more; a withdrawal that needs more than its
    /// connection (a server without scripts, a broken connection); a socket
    /// that takes no more bytes (`withdraw` in `lock::contend`). A library
    /// program that settles and goes on keeps the token cancelled: its `-n`
    /// losers then withdraw without the grace, which costs scripts, not
    /// safety.
    pub async fn settle(&self) {
        self.exiting.cancel();
        if self.won.load(std::sync::atomic::Ordering::Relaxed) {
            self.drain().await;
        } else {
            self.flush().await;
        }
    }

    /// Runs `work` (a best-effort server call whose answer nobody awaits)
    /// in the background; [`Fleet::drain`] waits for it.
    pub fn background(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(work);
    }

    /// Runs `call`, which is no vote (a history write or read), on every
    /// server, and says what came of it in plain terms ([`Answers`]), for
    /// the layers above the engine, which need no rounds or tallies.
    pub(crate) async fn ask_all<T: Send + 'static>(
        &self,
        call: Call,
        read: fn(Value) -> Result<T, String>,
    ) -> Answers<T> {
        let round = self.round(call, read, |_| Vote::Yes).await;
        let failures = round.failures();
        let values = round
            .replies
            .into_iter()
            .filter_map(|r| match r {
                Reply::Answered(value) => Some(value),
                _ => None,
            })
            .collect();
        Answers { values, failures }
    }

    /// Runs `call` on every server; `read` checks the reply's shape and
    /// `vote` counts it. Extend, raise-fence, release and history-write
    /// rounds end as soon as the verdict is settled (a release is done once
    /// a quorum deleted: nobody can hold the token's quorum any more; a
    /// history entry once a quorum has it, as `history` reads a quorum),
    /// the calls still in flight finishing in the background before the
    /// process exits; status rounds hear every server. Acquire rounds have their own rule ([`Fleet::attempt`]).
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
        let early = matches!(call.op, Op::Extend | Op::RaiseFence | Op::Release | Op::Record);
        let op = call.op;
        let shown = call.key.clone();
        let call = Arc::new(call);
        self.warm();
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

    /// The error of a round that too few servers answered; `what` names
    /// the operation and the key, and the counts say what each server did:
    /// `acquire k: 1 of 3 servers answered (quorum 2), 2 failed: a:
    /// connection refused (same on b)`. A server the round stopped listening to (its
    /// answer could not change the verdict) is "not awaited", never counted
    /// as failed or silent.
    pub(crate) fn unavailable<T>(&self, what: String, round: &Round<T>) -> Error {
        let failures = round.failures();
        let config = failures.any_config();
        let count = |kind: fn(&Reply<T>) -> bool| round.replies.iter().filter(|r| kind(r)).count();
        let kinds = [
            (count(|r| matches!(r, Reply::Answered(_))), "answered"),
            (
                count(|r| {
                    matches!(r, Reply::Failed(ServerError { failure: Failure::NoVote(_), .. }))
                }),
                "without a vote yet",
            ),
            (
                count(
                    |r| matches!(r, Reply::Failed(e) if !matches!(e.failure, Failure::NoVote(_))),
                ),
                "failed",
            ),
            (count(|r| matches!(r, Reply::NotAwaited)), "not awaited"),
        ];
        let total = round.replies.len();
        let mut present = kinds.iter().filter(|(n, _)| *n > 0);
        let servers = if total == 1 { "server" } else { "servers" };
        let first = present.next().map_or_else(
            || format!("0 of {total} {servers} answered"),
            |(n, kind)| format!("{n} of {total} {servers} {kind}"),
        );
        let rest: String = present.map(|(n, kind)| format!(", {n} {kind}")).collect();
        Error::Unavailable {
            what: format!("{what}: {first} (quorum {}){rest}", self.quorum),
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
                    Reply::Answered(v) => Part::Answered(describe(v)),
                    Reply::Failed(ServerError { failure: Failure::NoVote(why), .. }) => {
                        Part::NoVote(why.clone())
                    }
                    Reply::Failed(e) => Part::Failed(e.failure.to_string()),
                    Reply::NotAwaited => Part::NotAwaited,
                },
                latency_ms: latency.map(crate::text::ms_f64),
            })
            .collect()
    }
}

/// The restart window of a [`Fleet`] unless set: for the default
/// `--max-ttl`, 1 minute ([`base_restart_window`]).
pub const DEFAULT_RESTART_WINDOW: Duration = base_restart_window(Duration::from_secs(60));

/// How long a process that holds nothing lets its stragglers' writes reach
/// their connections before it exits ([`Fleet::settle`]): a few turns of the
/// runtime, with room for a loaded machine.
pub const FLUSH: Duration = Duration::from_millis(100);

/// What a quorum of "not held" answers to an extend or a release means.
const NOT_HELD: &str = "the lock is not held by this token";

/// The same for a shared holder's token ([`crate::shared`]).
pub(crate) const NO_SHARED_HOLD: &str = "no shared hold of this token";

/// The vote of a compare-and-extend or compare-and-delete reply: 1 when
/// the server did it (the token held the key there), 0 when it did not.
pub(crate) fn done_here(n: &i64) -> Vote {
    if *n == 1 { Vote::Yes } else { Vote::No }
}

/// Reads an integer reply.
pub(crate) fn parse_int(reply: Value) -> Result<i64, String> {
    match reply {
        Value::Int(n) => Ok(n),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// A PTTL reply as a duration; `None` for "no expiry" (-1).
fn ttl_of(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::{Holders, bodies};
    use crate::token::{Mode, Token};

    /// `--limit 1` is the ordinary lock, whose token keeps the old form
    /// (no place written); a place of `--limit N` and a shared holder say
    /// so in their tokens, and only a shared waiter's queue entry does.
    #[test]
    fn a_request_s_holders_give_each_token_its_mode() {
        assert_eq!(Holders::of(1, false), Holders::One);
        assert_eq!(Holders::of(1, true), Holders::Shared);
        assert_eq!(Holders::of(3, false), Holders::Limit(3));
        let plain = Token::new();
        let at_one = Token { mode: Holders::One.mode_at(1), ..plain.clone() };
        assert_eq!(at_one.to_string(), plain.to_string());
        assert_eq!(Holders::Limit(3).mode_at(2), Mode::Place { slot: 2, limit: 3 });
        assert_eq!(Holders::Shared.mode_at(1), Mode::Shared);
        assert_eq!(Holders::Limit(3).waiter(), Mode::Exclusive);
        assert_eq!(Holders::Shared.waiter(), Mode::Shared);
        assert_eq!(
            [Holders::One, Holders::Limit(7), Holders::Shared].map(Holders::places),
            [1, 7, 1]
        );
    }

    /// Every script as build.rs wrote it: the SHA-1 is the one `EVALSHA`
    /// needs (redis-rs's own computation), and the body is the code lines
    /// of its files, in order, with no comment line and nothing else lost.
    #[test]
    fn a_script_is_its_files_code_lines_named_by_their_sha1() {
        let files = [
            (bodies::ACQUIRE, vec![include_str!("../scripts/acquire.lua")]),
            (
                bodies::RELEASE,
                vec![
                    include_str!("../scripts/announce.lua"),
                    include_str!("../scripts/put_back.lua"),
                    include_str!("../scripts/release.lua"),
                ],
            ),
            (
                bodies::WITHDRAW,
                vec![
                    include_str!("../scripts/announce.lua"),
                    include_str!("../scripts/put_back.lua"),
                    include_str!("../scripts/withdraw.lua"),
                ],
            ),
            (bodies::EXTEND, vec![include_str!("../scripts/extend.lua")]),
        ];
        for ((body, sha), sources) in files {
            assert_eq!(sha, redis::Script::new(body).get_hash());
            let code: Vec<&str> = sources
                .iter()
                .flat_map(|s| s.lines())
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("--"))
                .collect();
            assert_eq!(body.lines().collect::<Vec<_>>(), code);
            assert!(!body.contains("\n--"), "a comment line was sent");
            assert!(body.len() < sources.iter().map(|s| s.len()).sum::<usize>() / 2);
        }
    }
}
