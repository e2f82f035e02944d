//! One Redis server: its URL (never shown with its password), a lazily
//! opened multiplexed connection, and calls bounded by the node timeout whose
//! errors name the server, the operation and the key.
//!
//! The connection kinds are this module's business: a server at a fixed
//! address (plain, TLS, unix socket), a Sentinel group ([`sentinel`]) and a
//! Redis Cluster ([`cluster`]), each one member of the quorum. [`Server`]
//! owns the connection (opening it once for concurrent callers, dropping
//! it after a failure, confirming votes); its target (`target`) finds the
//! node it goes to and says how long that node may be trusted. Its URL is
//! in `url` ([`ServerUrl`]), why a call failed in `failure` ([`Failure`],
//! [`ServerError`]).

pub mod cluster;
mod kept;
pub mod sentinel;
mod target;
mod url;

pub use crate::failure::{Failure, NEEDS_SCRIPTS, Op, ServerError, summarize};
pub use url::{ServerUrl, redact, split_list};
pub(crate) use url::{decode_value, encode_password, group_parts, host_list, node_url, params};

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo, RedisError};

use cluster::Cluster;
use sentinel::Group;
use target::{Found, Target};

use std::cell::RefCell;

tokio::task_local! {
    /// Set by [`Server::dedicated`] inside a call that confirms its write
    /// ([`Server::call_on`]): the connection the operation wrote on (the
    /// no-script path writes on one of its own) and the replicas that
    /// write must reach, so that `WAIT` goes where the write went.
    static WROTE_ON: RefCell<Option<(MultiplexedConnection, usize)>>;

    /// Set by [`Server::call_on`] around its call: the scripts loaded on
    /// the connection it runs on ([`script_loaded`]).
    static LOADED: Loaded;
}

/// The scripts (by SHA-1) whose `SCRIPT LOAD` was handed to one
/// connection: its server runs that load before any later request on the
/// connection, so it has them unless it flushed its cache since. A new
/// connection starts empty, since it may go to another process (a
/// restart, a failover, another cluster node) whose cache is cold.
type Loaded = std::sync::Arc<Mutex<Vec<String>>>;

/// Whether the script `sha` was loaded on the connection of the call in
/// progress ([`Server::call_on`]), answered or not; false outside a call.
pub fn script_loaded(sha: &str) -> bool {
    LOADED.try_with(|l| lock_loaded(l).iter().any(|s| s == sha)).unwrap_or(false)
}

/// Records that the `SCRIPT LOAD` of `sha` goes to the connection of the
/// call in progress, ahead of every later request on it (nothing outside
/// a call).
pub fn note_script_loaded(sha: &str) {
    let _ = LOADED.try_with(|l| {
        let mut loaded = lock_loaded(l);
        if !loaded.iter().any(|s| s == sha) {
            loaded.push(sha.to_owned());
        }
    });
}

fn lock_loaded(loaded: &Loaded) -> std::sync::MutexGuard<'_, Vec<String>> {
    // A poisoned list is still a list of hashes.
    loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// TLS material for `rediss://` (and `rediss+sentinel://`) servers, as read from
/// the files given.
#[derive(Clone, Default)]
pub struct Tls {
    /// PEM of the CA to trust instead of the public roots.
    pub ca: Option<Vec<u8>>,
    /// PEM client certificate and key.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("Tls")
            .field("ca", &self.ca.is_some())
            .field("client", &self.client.is_some())
            .finish()
    }
}

/// rustls needs one process-wide crypto provider and panics on the first
/// TLS handshake without it; this crate builds rustls with ring only.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means another part of the process installed one first: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A connection to one server, handed out so that calls which must reach
/// the server in order travel on it: an acquire attempt and the withdrawal
/// of that attempt. Redis executes the commands of one connection in the
/// order they arrive, so whatever the attempt wrote (even a request whose
/// answer was never awaited, even one that timed out) is executed before
/// the withdrawal. On two connections there is no such order: a SET still
/// in flight on the first could land after a DEL sent on the second and
/// leave a dead token for a whole TTL.
#[derive(Clone)]
pub struct Conn {
    /// The multiplexed connection (cloning shares it).
    conn: MultiplexedConnection,
    /// Which of this server's connections it is, so that a failure on it
    /// never forgets a newer one.
    generation: u64,
    /// What the server said of itself when this connection opened:
    /// `None` until `INFO` answers, then its [`Facts`] (`None`
    /// inside when it could not be asked: an ACL without `INFO`).
    facts: tokio::sync::watch::Receiver<Option<Option<Facts>>>,
    /// The scripts loaded on it ([`script_loaded`]).
    loaded: Loaded,
}

/// What a server says of itself (`INFO server`, `INFO persistence` and
/// `CONFIG GET appendfsync`), asked once per connection, beside its first
/// call rather than after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// Its `run_id`: one per server process, so two members with the same
    /// one are one server listed twice.
    pub run_id: String,
    /// When it started, on this host's clock: the answer's arrival less
    /// its `uptime_in_seconds` (whole seconds, so at most a second later
    /// than the true start: a restart is never taken for older than it is).
    pub started: tokio::time::Instant,
    /// Whether it kept every acknowledged write since it started
    /// ([`unkept_writes`]: its append-only file on from the start, synced
    /// before every answer, written without error). `everysec` loses up to
    /// a second of writes, and a renewal's later expiry with them.
    pub keeps_data: bool,
    /// Its `maxmemory-policy`, when it may evict keys ([`evicts`]).
    pub evicts: Option<String>,
}

impl Facts {
    /// Reads the answers of `INFO server`, `INFO persistence`, `INFO
    /// memory` and `CONFIG GET appendfsync` (when allowed), as they arrived
    /// `now`.
    pub fn parse(
        server: &str,
        persistence: &str,
        memory: &str,
        appendfsync: Option<&str>,
        now: tokio::time::Instant,
    ) -> Option<Facts> {
        let uptime: u64 = info_field(server, "uptime_in_seconds")?.parse().ok()?;
        let started = now.checked_sub(Duration::from_secs(uptime)).unwrap_or(now);
        let keeps_data = keeps_every_write(persistence, appendfsync);
        let run_id = info_field(server, "run_id")?.to_owned();
        let policy = info_field(memory, "maxmemory_policy").unwrap_or("noeviction");
        let maxmemory = info_field(memory, "maxmemory").and_then(|m| m.parse().ok()).unwrap_or(0);
        let evicts = evicts(policy, maxmemory).then(|| policy.to_owned());
        Some(Facts { run_id, started, keeps_data, evicts })
    }
}

/// Whether a server with this `maxmemory-policy` and `maxmemory` (bytes,
/// 0: no limit) may evict redlock's keys: any policy but `noeviction`
/// under a limit (`volatile-*` too: every key redlock writes expires).
/// An evicted record forgets a tick that ran or a take a `-n` must see,
/// as a restart without persistence would.
pub fn evicts(policy: &str, maxmemory: u64) -> bool {
    maxmemory > 0 && policy != "noeviction"
}

/// [`Facts::keeps_data`] from the answers of `INFO persistence` (or a
/// whole `INFO`) and `CONFIG GET appendfsync`: [`unkept_writes`] finds no
/// reason to doubt it.
pub fn keeps_every_write(persistence: &str, appendfsync: Option<&str>) -> bool {
    unkept_writes(persistence, appendfsync).is_none()
}

/// Why a server may not have kept every write it acknowledged since it
/// started, from the answers of `INFO persistence` (or a whole `INFO`) and
/// `CONFIG GET appendfsync` (`None`: refused); `None` when it kept them.
///
/// The rule: the append-only file is on, written without error, synced
/// before every answer (`appendfsync always`), and never rewritten since
/// the start (`aof_rewrites:0` where the server reports the count,
/// `aof_last_rewrite_time_sec:-1`, no rewrite in progress or scheduled).
/// Switching `appendonly` on at runtime always starts with a rewrite: a
/// server restarted empty and switched on afterwards reads as `appendonly
/// yes` but kept nothing from before the switch. A server started with
/// the file on writes its base file synchronously, which is no rewrite.
///
/// Where it errs: a rewrite for an ordinary reason (`BGREWRITEAOF`,
/// `auto-aof-rewrite-percentage`, a replica's full sync) also refuses the
/// exemption, so that server waits out its restart window like one
/// without persistence (conservative); and a switch of `appendfsync` from
/// `everysec` to `always` at runtime rewrites nothing, so a server that
/// lost its last second in a restart and was switched afterwards reads as
/// one that kept everything (docs/safety.md).
pub fn unkept_writes(persistence: &str, appendfsync: Option<&str>) -> Option<&'static str> {
    let field = |name| info_field(persistence, name);
    if field("aof_enabled") != Some("1") {
        return Some("no append-only file (appendonly no)");
    }
    if field("aof_last_write_status") != Some("ok") {
        return Some("its append-only file failed a write");
    }
    match appendfsync {
        Some("always") => {}
        Some(_) => return Some("appendfsync is not always: a restart loses the last second"),
        None => return Some("appendfsync unknown (CONFIG GET refused)"),
    }
    let never_rewritten = matches!(field("aof_rewrites"), None | Some("0"))
        && field("aof_last_rewrite_time_sec") == Some("-1")
        && field("aof_rewrite_in_progress") == Some("0")
        && field("aof_rewrite_scheduled") == Some("0");
    if !never_rewritten {
        return Some(
            "its append-only file was rewritten since it started (appendonly switched on at \
             runtime, BGREWRITEAOF, an automatic rewrite), so it may hold nothing from before",
        );
    }
    None
}

/// The value of `name` in an `INFO` answer (`name:value` lines).
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
}

/// Maps the key a caller names (the user's, as shown in messages) to the
/// key whose hash slot a cluster routes by (its server-side name). The lock
/// layer installs it ([`Server::set_route`]); this layer knows no layout.
pub type Route = std::sync::Arc<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

/// A client for `raw` (a `redis://` or `rediss://` URL), with `tls` for
/// `rediss://` when it gives a CA or a client certificate.
pub fn open_client(raw: &str, tls: &Tls) -> Result<Client, String> {
    let invalid = || "not a valid Redis URL".to_owned();
    let info = raw.into_connection_info().map_err(|_| invalid())?;
    // Skip CLIENT SETINFO on connect: one round trip less, and no NOPERM
    // noise for an ACL user limited to the lock commands.
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    let info = info.set_redis_settings(settings);
    if raw.starts_with("rediss:") && (tls.ca.is_some() || tls.client.is_some()) {
        let certificates = redis::TlsCertificates {
            client_tls: tls.client.as_ref().map(|(cert, key)| redis::ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
            root_cert: tls.ca.clone(),
        };
        Client::build_with_tls(info, certificates)
            .map_err(|e| format!("TLS setup: {}", e.detail().unwrap_or("bad certificate or key")))
    } else {
        Client::open(info).map_err(|_| invalid())
    }
}

/// One Redis server (or Sentinel group, or cluster) and its connection,
/// opened on first use.
pub struct Server {
    url: ServerUrl,
    target: Target,
    timeout: Duration,
    /// The current connection, if one is open.
    conn: Mutex<Option<Conn>>,
    /// Held while a connection is being opened, so that callers who arrive
    /// meanwhile wait for that one open and share its connection (single
    /// flight) instead of opening their own; counts the opens.
    opening: tokio::sync::Mutex<u64>,
    /// For a Sentinel group or a cluster: which master the current
    /// connection goes to, and when it was last confirmed.
    verified: Mutex<Option<Verified>>,
    /// For a cluster: the user key to the key its slot is taken from.
    route: Mutex<Option<Route>>,
    /// Set once the server refused a script (EVALSHA unknown, or NOPERM for
    /// it): from then on every operation takes the no-script path
    /// ([`crate::lock::noscript`]) without trying the script first. Never unset:
    /// a server's configuration rarely gains scripting while redlock runs,
    /// and the no-script path is as safe, only slower.
    scripts_refused: AtomicBool,
    /// Shared by each acquire attempt on this server while it runs,
    /// exclusive for a release before it deletes ([`Server::attempting`]).
    attempts: tokio::sync::RwLock<()>,
    /// Connections that carry a won round's vote still on its way here,
    /// by lock key and token ([`Server::expect_late_vote`]).
    late_votes: Mutex<Vec<LateVote>>,
}

/// A won round's vote sent on `conn` and not answered when the round was
/// decided: it may still land, and the release of `key`/`token` follows
/// it on `conn`.
struct LateVote {
    /// The lock key (as the server names it).
    key: String,
    /// The token the vote sets.
    token: String,
    /// The connection the vote went on.
    conn: Conn,
}

/// A Sentinel group's master, or a cluster slot's, as last confirmed.
struct Verified {
    /// The connection it is for.
    generation: u64,
    /// When a majority of the Sentinels (and `ROLE`), or the
    /// cluster's seeds, confirmed it.
    at: tokio::time::Instant,
    /// The node they named.
    found: Found,
}

impl Server {
    /// Prepares a server; nothing is connected until the first call.
    /// `rediss://` servers use `tls` (a private CA, a client certificate).
    pub fn new(url: ServerUrl, timeout: Duration, tls: &Tls) -> Result<Server, String> {
        install_crypto_provider();
        let target = Target::new(&url, tls, timeout)?;
        Ok(Server {
            url,
            target,
            timeout,
            conn: Mutex::new(None),
            opening: tokio::sync::Mutex::new(0),
            verified: Mutex::new(None),
            route: Mutex::new(None),
            scripts_refused: AtomicBool::new(false),
            attempts: tokio::sync::RwLock::new(()),
            late_votes: Mutex::new(Vec::new()),
        })
    }

    /// Installs how a cluster finds the slot of a key named in a call
    /// (until then, the key itself); other kinds of server ignore it.
    pub fn set_route(&self, route: Route) {
        *self.route.lock().unwrap_or_else(|p| p.into_inner()) = Some(route);
    }

    /// The hash slot calls about `key` go by, for a cluster; `None` for
    /// other servers, and for a call that names no key (doctor's PING,
    /// INFO...), which any node of the cluster answers.
    fn hash_slot(&self, key: &[u8]) -> Option<u16> {
        if !self.target.routes_by_slot() || key.is_empty() {
            return None;
        }
        let route = self.route.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let routed = route.map_or_else(|| key.to_vec(), |route| route(key));
        Some(cluster::key_slot(&routed))
    }

    /// The failure a redis crate error stands for on this server
    /// ([`Target::failure`]).
    fn failure(&self, e: &RedisError) -> Failure {
        self.target.failure(e)
    }

    /// Marks an acquire attempt on this server as running until the guard
    /// drops; [`Server::after_attempts`] waits for it.
    ///
    /// Why: an attempt whose round was won without this server still lets
    /// its vote land here (src/lock/contend.rs, `contend`), possibly after
    /// the holder is done and releasing (`run -- true`). A release that
    /// overtook it (another connection, as the no-script path uses, or the
    /// same one while the attempt is still connecting) would leave the key
    /// behind until its TTL. Each attempt is bounded by its node timeout,
    /// so the wait is too.
    pub async fn attempting(&self) -> tokio::sync::RwLockReadGuard<'_, ()> {
        self.attempts.read().await
    }

    /// Waits until no acquire attempt runs on this server (for a release).
    pub async fn after_attempts(&self) {
        drop(self.attempts.write().await);
    }

    /// Records that a vote setting `key` to `token`, sent on `conn`, may
    /// land after its round was won ([`Server::late_vote`]).
    pub fn expect_late_vote(&self, key: &str, token: &str, conn: &Conn) {
        let vote = LateVote { key: key.to_owned(), token: token.to_owned(), conn: conn.clone() };
        self.lock_late_votes().push(vote);
    }

    /// The connection of a vote setting `key` to `token` that may still
    /// land ([`Server::expect_late_vote`]), taken out of the record: the
    /// release goes on it, behind the vote.
    ///
    /// Why: the vote's call timed out, so the server dropped that
    /// connection for new calls, and a release on a new one may run first
    /// on a server that was hung (its accept queue, then its event loop,
    /// set the order), leaving the token there for its TTL after a release
    /// a quorum answered. [`Server::after_attempts`] bounds the wait for
    /// the vote's call, not its arrival.
    pub fn late_vote(&self, key: &str, token: &str) -> Option<Conn> {
        let mut votes = self.lock_late_votes();
        let i = votes.iter().position(|v| v.key == key && v.token == token)?;
        Some(votes.swap_remove(i).conn)
    }

    fn lock_late_votes(&self) -> std::sync::MutexGuard<'_, Vec<LateVote>> {
        // A poisoned list is still a list of connections.
        self.late_votes.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether this server refused scripts ([`Server::refuse_scripts`]).
    pub fn scripts_refused(&self) -> bool {
        self.scripts_refused.load(Ordering::Relaxed)
    }

    /// Remembers that this server refuses scripts, for the rest of the run.
    pub fn refuse_scripts(&self) {
        self.scripts_refused.store(true, Ordering::Relaxed);
    }

    /// A new connection of its own, shared with no other call: for
    /// `WATCH`/`MULTI`/`EXEC` ([`crate::lock::noscript`]), whose WATCH state is
    /// the connection's, so that another call on the shared multiplexed
    /// connection could run between WATCH and EXEC, inside the transaction
    /// or with its own WATCH/UNWATCH, and break the compare-and-set. The
    /// caller drops it when done (closing it). For a Sentinel group, the
    /// master the Sentinels name now; for a cluster, the master of the slot
    /// of `routed` (a server-side key name): the node the current
    /// connection is bound to while it is confirmed, else the one the
    /// seeds name now.
    pub async fn dedicated(&self, routed: &[u8]) -> redis::RedisResult<MultiplexedConnection> {
        let config = self.connection_config();
        let bound = if self.target.routes_by_slot() {
            self.current(Some(cluster::key_slot(routed)))
                .and_then(|_| self.lock_verified().as_ref().map(|v| v.found.address.clone()))
        } else {
            None
        };
        let (conn, confirm) = self.target.dedicated(routed, bound.as_deref(), &config).await?;
        if let Some(replicas) = confirm {
            // The write this connection is for is confirmed on it
            // (`Server::call_on`): `WAIT` counts its own connection's
            // writes only.
            let _ = WROTE_ON.try_with(|w| *w.borrow_mut() = Some((conn.clone(), replicas)));
        }
        Ok(conn)
    }

    /// The display name (no password).
    pub fn name(&self) -> &str {
        self.url.name()
    }

    /// An error for an answer that is not what the script returns.
    pub fn bad_reply(&self, op: Op, key: &str, what: String) -> ServerError {
        self.error(op, key.as_bytes(), Failure::Reply(what))
    }

    /// An error naming this server, `op` and `key`: `what` is wrong, and
    /// retrying cannot cure it ([`Failure::Unfit`]).
    pub fn unfit(&self, op: Op, key: &str, what: String) -> ServerError {
        self.error(op, key.as_bytes(), Failure::Unfit(what))
    }

    fn error(&self, op: Op, key: &[u8], failure: Failure) -> ServerError {
        ServerError {
            server: self.name().to_owned(),
            op,
            key: crate::text::display_key(key),
            failure,
        }
    }

    /// Opens a dedicated pub/sub connection subscribed to `channel`,
    /// bounded by the node timeout.
    pub async fn subscribe(&self, channel: &str) -> Result<redis::aio::PubSub, ServerError> {
        let work = async {
            let client = self.target.listener(channel, &self.connection_config()).await?;
            let mut pubsub =
                client.get_async_pubsub().await.map_err(|e| Failure::from_redis(&e))?;
            pubsub.subscribe(channel).await.map_err(|e| Failure::from_redis(&e))?;
            Ok::<_, Failure>(pubsub)
        };
        let failure = match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(pubsub)) => return Ok(pubsub),
            Ok(Err(failure)) => failure,
            Err(_) => Failure::Timeout(self.timeout),
        };
        Err(self.error(Op::Subscribe, channel.as_bytes(), failure))
    }

    /// When a call starting now must be over: one node timeout from now.
    pub fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.timeout
    }

    /// Runs `f` on this server's connection, connecting first when needed,
    /// the whole bounded by the node timeout. A failed or timed-out call
    /// drops the connection so that the next call reconnects.
    pub async fn call<T>(
        &self,
        op: Op,
        key: &[u8],
        f: impl AsyncFnOnce(&mut MultiplexedConnection) -> redis::RedisResult<T>,
    ) -> Result<T, ServerError> {
        let deadline = self.deadline();
        let conn = self.connect(op, key, deadline).await?;
        self.call_on(&conn, op, key, deadline, f).await
    }

    /// This server's connection, opened when there is none, by `deadline`.
    /// Callers that arrive while it is being opened share that one open.
    pub async fn connect(
        &self,
        op: Op,
        key: &[u8],
        deadline: tokio::time::Instant,
    ) -> Result<Conn, ServerError> {
        let slot = self.hash_slot(key);
        if let Some(conn) = self.current(slot) {
            return Ok(conn);
        }
        // Boxed: opening (a Sentinel's or a cluster's search included) is
        // a future of kilobytes, which every future awaiting a connection
        // would otherwise carry and copy, open or not.
        let open = Box::pin(self.open(slot));
        let failure = match crate::clock::timeout_at(deadline, open).await {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(Failure::Timeout(_))) => self.timed_out(),
            Ok(Err(failure)) => failure,
            Err(_) => self.timed_out(),
        };
        Err(self.error(op, key, failure))
    }

    /// Runs `f` on `conn`, bounded by `deadline`. A failure other than an
    /// error reply forgets `conn` (when it is still the current one), so
    /// that the next call reconnects; calls already holding it go on with
    /// it, which keeps their order.
    ///
    /// Through a Sentinel group, an operation whose answer is a vote
    /// (acquire, extend, raise-fence) answers only once the replicas have
    /// what it wrote (`Server::confirm`); otherwise it fails, and a
    /// failure after a grant counts as "may have set", never as a vote.
    pub async fn call_on<T>(
        &self,
        conn: &Conn,
        op: Op,
        key: &[u8],
        deadline: tokio::time::Instant,
        f: impl AsyncFnOnce(&mut MultiplexedConnection) -> redis::RedisResult<T>,
    ) -> Result<T, ServerError> {
        let mut c = conn.conn.clone();
        let read = |e: redis::RedisError| {
            if e.is_timeout() { self.timed_out() } else { self.failure(&e) }
        };
        let work = async {
            if !self.confirms(op) {
                return f(&mut c).await.map_err(read);
            }
            let (value, wrote_on) = WROTE_ON
                .scope(RefCell::new(None), async {
                    let value = f(&mut c).await;
                    (value, WROTE_ON.with(|w| w.borrow_mut().take()))
                })
                .await;
            let value = value.map_err(read)?;
            let (mut on, replicas) =
                wrote_on.unwrap_or_else(|| (c.clone(), self.replicas_to_reach()));
            Box::pin(self.confirm(&mut on, replicas, deadline)).await?;
            Ok(value)
        };
        let work = LOADED.scope(conn.loaded.clone(), work);
        let failure = match crate::clock::timeout_at(deadline, work).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(failure)) => failure,
            Err(_) => self.timed_out(),
        };
        if !matches!(failure, Failure::WrongType | Failure::Reply(_) | Failure::Unfit(_)) {
            self.forget(conn.generation);
        }
        Err(self.error(op, key, failure))
    }

    /// Whether `op`'s answer on this server is a vote that must survive a
    /// failover: through a Sentinel group, the writes a lock's holder (or
    /// its fencing number) rests on. A release, a withdrawal, the queue
    /// and the history are not votes: losing them in a failover costs time
    /// (a key left to expire), never exclusion.
    fn confirms(&self, op: Op) -> bool {
        self.target.confirms_votes() && matches!(op, Op::Acquire | Op::Extend | Op::RaiseFence)
    }

    /// How many replicas a write must reach: as the master was last
    /// confirmed. A call still on an older connection takes the newest
    /// count; if its master is not the newest one, it is one failed away
    /// from, which no count of one or more confirms.
    fn replicas_to_reach(&self) -> usize {
        self.lock_verified().as_ref().map_or(0, |v| v.found.replicas)
    }

    /// Waits until `replicas` replicas (at least one) have every write made
    /// so far on `conn`, with `WAIT`, by `deadline`; a failure otherwise.
    ///
    /// The argument, with its assumption and its bound, is in the
    /// [`sentinel`] module doc ("Why a vote waits for the replicas"): a
    /// write a failover would drop never counts, because the failover
    /// promotes a replica that has it, and a master already failed away
    /// from has no replica to confirm it. `WAIT`, not `WAITAOF`: what a
    /// failover keeps is what a replica received, not what a disk holds.
    async fn confirm(
        &self,
        conn: &mut MultiplexedConnection,
        replicas: usize,
        deadline: tokio::time::Instant,
    ) -> Result<(), Failure> {
        let needed = replicas.max(1);
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        // WAIT's own timeout leaves room for its reply: Redis ends a
        // blocked WAIT at its next event-loop turn after the timeout, up to
        // 1/hz later (100ms at the default `hz 10`), so the slack is 150ms,
        // or half of what is left when less. A WAIT answered late is a
        // timeout, which fails the vote the same way. `WAIT n 0` would
        // block for ever, so it is never sent.
        let slack = (left / 2).min(Duration::from_millis(150));
        let wait = crate::text::millis(left.saturating_sub(slack));
        if wait == 0 {
            return Err(Failure::NoVote(format!(
                "not confirmed on the replicas: no time left to confirm the write on {needed} \
                 replica(s)"
            )));
        }
        let acked: i64 = redis::cmd("WAIT").arg(needed).arg(wait).query_async(conn).await.map_err(
            |e| match self.failure(&e) {
                Failure::NoPerm(why) => Failure::NoPerm(format!(
                    "{why} (through a Sentinel group, redlock confirms each vote with WAIT: \
                     grant +wait)"
                )),
                other => other,
            },
        )?;
        if usize::try_from(acked).is_ok_and(|acked| acked >= needed) {
            return Ok(());
        }
        Err(Failure::NoVote(format!(
            "not confirmed on the replicas: {acked} of {needed} replica(s) acknowledged the \
             write within {wait}ms (a master without a replica, or one failed away from, gets \
             no vote)"
        )))
    }

    /// The current connection, or a new one. Single flight: the `opening`
    /// lock is held across the connect, and the slot is checked again once
    /// it is taken, so concurrent callers end up on one connection. A
    /// caller whose deadline passes while it opens drops the attempt (and
    /// the lock); the next caller tries afresh. `slot`: for a cluster, the
    /// hash slot whose master the connection must go to.
    async fn open(&self, slot: Option<u16>) -> Result<Conn, Failure> {
        if let Some(conn) = self.current(slot) {
            return Ok(conn);
        }
        let mut opened = self.opening.lock().await;
        if let Some(conn) = self.current(slot) {
            return Ok(conn);
        }
        let config = self.connection_config();
        let current = self.lock_conn().clone();
        if let Some(conn) = current
            && self.target.rechecks(slot)
            && self.still_confirmed(&conn, slot, &config).await
        {
            return Ok(conn);
        }
        // Asked afresh: the first call, each call after a failure (or a
        // READONLY reply, or a cluster's redirect) dropped the connection,
        // and each call after the Sentinels, or the seeds for the slot,
        // named another master.
        let (conn, found) = self.target.locate(slot, &config, self.timeout).await?;
        if let Some(found) = found {
            let at = tokio::time::Instant::now();
            *self.lock_verified() = Some(Verified { generation: *opened + 1, at, found });
        }
        *opened += 1;
        let facts = self.ask_facts(&conn);
        let conn = Conn { facts, conn, generation: *opened, loaded: Loaded::default() };
        *self.lock_conn() = Some(conn.clone());
        Ok(conn)
    }

    /// Asks the server behind a new connection for its [`Facts`], in the
    /// background: the request goes out with the connection's first call,
    /// and its answer arrives before that call's. Bounded by the node
    /// timeout; a refusal (an ACL without `INFO`) or no answer leaves them
    /// unknown.
    fn ask_facts(
        &self,
        conn: &MultiplexedConnection,
    ) -> tokio::sync::watch::Receiver<Option<Option<Facts>>> {
        let (tx, rx) = tokio::sync::watch::channel(None);
        let mut c = conn.clone();
        let timeout = self.timeout;
        tokio::spawn(async move {
            let (mut c1, mut c2, mut c3) = (c.clone(), c.clone(), c.clone());
            let (mut server, mut persistence, mut memory, mut fsync) =
                (redis::cmd("INFO"), redis::cmd("INFO"), redis::cmd("INFO"), redis::cmd("CONFIG"));
            server.arg("server");
            persistence.arg("persistence");
            memory.arg("memory");
            fsync.arg("GET").arg("appendfsync");
            let asks = async {
                tokio::join!(
                    server.query_async::<String>(&mut c),
                    persistence.query_async::<String>(&mut c1),
                    memory.query_async::<String>(&mut c3),
                    fsync.query_async::<Vec<String>>(&mut c2)
                )
            };
            let facts = match tokio::time::timeout(timeout, asks).await {
                Ok((Ok(server), persistence, memory, fsync)) => Facts::parse(
                    &server,
                    persistence.as_deref().unwrap_or(""),
                    memory.as_deref().unwrap_or(""),
                    fsync.ok().as_ref().and_then(|f| f.get(1)).map(String::as_str),
                    tokio::time::Instant::now(),
                ),
                _ => None,
            };
            tx.send_replace(Some(facts));
        });
        rx
    }

    /// What the server behind `conn` said of itself ([`Facts`]), waiting
    /// for the answer at most until `deadline`; `None` when it could not
    /// be asked or did not answer in time.
    pub async fn facts(&self, conn: &Conn, deadline: tokio::time::Instant) -> Option<Facts> {
        let mut rx = conn.facts.clone();
        let known = crate::clock::timeout_at(deadline, rx.wait_for(Option::is_some)).await;
        known.ok()?.ok()?.clone().flatten()
    }

    /// The [`Facts`] of the current connection (if any), waiting for them
    /// at most until `deadline`.
    pub async fn current_facts(&self, deadline: tokio::time::Instant) -> Option<Facts> {
        let conn = self.lock_conn().clone()?;
        self.facts(&conn, deadline).await
    }

    /// The current connection, if there is one and its target trusts it
    /// for a call about `slot` without asking again ([`Target::trusts`]:
    /// a Sentinel group's master, or a cluster slot's, confirmed less than
    /// a node timeout ago).
    fn current(&self, slot: Option<u16>) -> Option<Conn> {
        let conn = self.lock_conn().clone()?;
        let verified = self.lock_verified();
        let verified = verified.as_ref().filter(|v| v.generation == conn.generation);
        let fresh = verified.is_some_and(|v| v.at.elapsed() < self.timeout);
        self.target.trusts(verified.map(|v| &v.found), fresh, slot).then_some(conn)
    }

    /// Whether the node `conn` goes to is still the one for calls about
    /// `slot`, asked again ([`Target::reconfirm`]); records when it was
    /// confirmed and what changed. When not, the connection is dropped.
    async fn still_confirmed(
        &self,
        conn: &Conn,
        slot: Option<u16>,
        config: &AsyncConnectionConfig,
    ) -> bool {
        let found = self
            .lock_verified()
            .as_ref()
            .filter(|v| v.generation == conn.generation)
            .map(|v| v.found.clone());
        let confirmed = match found {
            Some(found) => self.target.reconfirm(&found, &conn.conn, slot, config).await,
            None => None,
        };
        let Some(found) = confirmed else {
            self.forget(conn.generation);
            return false;
        };
        if let Some(v) = self.lock_verified().as_mut() {
            v.at = tokio::time::Instant::now();
            v.found = found;
        }
        true
    }

    fn lock_verified(&self) -> std::sync::MutexGuard<'_, Option<Verified>> {
        // As for `lock_conn`: a poisoned Option is still an Option.
        self.verified.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The connect timeout: the node timeout. No response timeout of the
    /// redis crate's: every call is bounded by its caller's
    /// ([`crate::clock::timeout_at`], which reads an answer that arrived
    /// while the process was frozen before it declares the timeout; the
    /// crate's own would fire first and throw that answer away).
    pub fn connection_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(None)
    }

    /// The Sentinel group behind this server, if its URL names one.
    pub fn sentinel(&self) -> Option<&Group> {
        match &self.target {
            Target::Sentinel(group) => Some(group),
            Target::Direct(_) | Target::Cluster(_) => None,
        }
    }

    /// The cluster behind this server, if its URL names one.
    pub fn cluster(&self) -> Option<&Cluster> {
        match &self.target {
            Target::Cluster(cluster) => Some(cluster),
            Target::Direct(_) | Target::Sentinel(_) => None,
        }
    }

    /// The node timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Drops the current connection if it is generation `generation`.
    fn forget(&self, generation: u64) {
        let mut slot = self.lock_conn();
        if slot.as_ref().is_some_and(|c| c.generation == generation) {
            *slot = None;
        }
    }

    /// A timeout; on a `rediss://`, `rediss+sentinel://` or
    /// `rediss+cluster://` server that never got connected, most likely a
    /// plain port that waits for a command instead of answering the TLS
    /// handshake: say so (still retried, as a hung server would be).
    fn timed_out(&self) -> Failure {
        if self.url.secret.starts_with("rediss") && self.lock_conn().is_none() {
            Failure::TlsTimeout(self.timeout)
        } else {
            Failure::Timeout(self.timeout)
        }
    }

    fn lock_conn(&self) -> std::sync::MutexGuard<'_, Option<Conn>> {
        // A poisoned lock only means another call panicked mid-assignment of
        // an Option; the value is still a valid Option.
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `INFO persistence` answer with `aof_enabled`, `aof_last_write_status`
    /// and the rewrite fields of a server that never rewrote its file.
    fn persistence(enabled: u8, status: &str) -> String {
        format!(
            "# Persistence\r\naof_enabled:{enabled}\r\naof_rewrite_in_progress:0\r\n\
             aof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\naof_rewrites:0\r\n\
             aof_last_write_status:{status}\r\n"
        )
    }

    #[test]
    fn only_a_healthy_append_only_file_synced_on_every_write_keeps_every_write() {
        let info = persistence;
        assert!(keeps_every_write(&info(1, "ok"), Some("always")));
        assert!(!keeps_every_write(&info(1, "err"), Some("always")), "a failed AOF write");
        assert!(!keeps_every_write(&info(1, "ok"), Some("everysec")));
        assert!(!keeps_every_write(&info(0, "ok"), Some("always")));
        assert!(!keeps_every_write(&info(1, "ok"), None), "CONFIG GET refused");
    }

    #[test]
    fn an_append_only_file_rewritten_since_the_start_keeps_nothing_from_before() {
        let started_with_it = persistence(1, "ok");
        let swap = |from: &str, to: &str| started_with_it.replace(from, to);
        // `CONFIG SET appendonly yes` at runtime: the rewrite it starts,
        // while it runs, once it is scheduled behind another child, and
        // once it is done (counted, and timed; a server without the count).
        let switched = [
            swap("aof_rewrite_in_progress:0", "aof_rewrite_in_progress:1"),
            swap("aof_rewrite_scheduled:0", "aof_rewrite_scheduled:1"),
            swap("aof_rewrites:0", "aof_rewrites:1"),
            swap("aof_last_rewrite_time_sec:-1", "aof_last_rewrite_time_sec:0"),
            swap("aof_rewrites:0\r\n", "").replace("time_sec:-1", "time_sec:0"),
        ];
        for info in &switched {
            assert!(!keeps_every_write(info, Some("always")), "{info}");
        }
        // A server without `aof_rewrites`: the other fields decide.
        assert!(keeps_every_write(&swap("aof_rewrites:0\r\n", ""), Some("always")));
        // A server that does not say: not taken on trust.
        assert!(!keeps_every_write(&swap("aof_rewrite_scheduled:0\r\n", ""), Some("always")));
    }
}
