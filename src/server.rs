//! One Redis server: its URL (never shown with its password), a lazily
//! opened multiplexed connection, and calls bounded by the node timeout whose
//! errors name the server, the operation and the key.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ErrorKind, IntoConnectionInfo, RedisError};

use crate::sentinel::{Group, SentinelUrl};

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

/// A validated server address: what to connect to and how to name it.
#[derive(Clone)]
pub struct ServerUrl {
    /// The URL as given, password included; never displayed.
    secret: String,
    /// `host:port`, `rediss://host:port` or `unix:/path`, plus `/db` when not 0.
    name: String,
    /// A Sentinel group's URL, parsed (`redis+sentinel://`).
    sentinel: Option<SentinelUrl>,
}

impl ServerUrl {
    /// Checks the scheme and the address; the error never contains a password.
    pub fn parse(raw: &str) -> Result<ServerUrl, String> {
        let shown = redact(raw);
        if !raw.contains("://") {
            // `127.0.0.1:6379` or `localhost:6379` (which `url` reads as a scheme).
            return Err(format!(
                "server URL {shown:?} has no scheme; use redis://{shown} (or rediss:// for TLS, unix:///path for a socket)"
            ));
        }
        if raw.starts_with("redis+sentinel://") || raw.starts_with("rediss+sentinel://") {
            let sentinel = SentinelUrl::parse(raw, &shown)?;
            let name = sentinel.name();
            return Ok(ServerUrl { secret: raw.to_owned(), name, sentinel: Some(sentinel) });
        }
        let url =
            url::Url::parse(raw).map_err(|e| format!("server URL {shown:?} is not a URL: {e}"))?;
        let db = url.path().trim_start_matches('/');
        let db_suffix = |db: &str| match db {
            "" | "0" => String::new(),
            db => format!("/{db}"),
        };
        let name = match url.scheme() {
            "redis" | "rediss" => {
                let host = url
                    .host_str()
                    .filter(|h| !h.is_empty())
                    .ok_or_else(|| format!("server URL {shown:?} has no host"))?;
                let port = url.port().unwrap_or(6379);
                let tls = if url.scheme() == "rediss" { "rediss://" } else { "" };
                format!("{tls}{host}:{port}{}", db_suffix(db))
            }
            "unix" | "redis+unix" => {
                if let Some(host) = url.host_str().filter(|h| !h.is_empty()) {
                    let fixed = shown.replacen("://", ":///", 1);
                    return Err(format!(
                        "server URL {shown:?} reads {host:?} as a host name; a socket path needs a third slash: {fixed}"
                    ));
                }
                if url.path().is_empty() || url.path() == "/" {
                    return Err(format!("server URL {shown:?} has no socket path"));
                }
                let db = url.query_pairs().find(|(k, _)| k == "db").map(|(_, v)| v.into_owned());
                format!("unix:{}{}", url.path(), db_suffix(db.as_deref().unwrap_or("")))
            }
            other => {
                return Err(format!(
                    "server URL {shown:?} has scheme {other:?}; use redis://, rediss://, unix:// or redis+sentinel://"
                ));
            }
        };
        // Let the redis crate check the rest (database number, port range...).
        raw.into_connection_info()
            .map_err(|_| format!("server URL {shown:?} is not a valid Redis URL"))?;
        Ok(ServerUrl { secret: raw.to_owned(), name, sentinel: None })
    }

    /// This URL with `password` when it carries none of its own (from
    /// `--password-file` or `REDLOCK_PASSWORD`).
    pub fn with_default_password(&self, password: &str) -> Result<ServerUrl, String> {
        if let Some(sentinel) = &self.sentinel {
            // The master's password; the Sentinels' is `?sentinel_password=`.
            return Ok(ServerUrl {
                sentinel: Some(sentinel.with_default_password(password)),
                ..self.clone()
            });
        }
        let mut url = url::Url::parse(&self.secret)
            .map_err(|_| format!("server URL {:?} is not a URL", self.name))?;
        if url.scheme().contains("unix") {
            if url.query_pairs().any(|(k, _)| k == "pass") {
                return Ok(self.clone());
            }
            url.query_pairs_mut().append_pair("pass", password);
        } else {
            if url.password().is_some() {
                return Ok(self.clone());
            }
            url.set_password(Some(password))
                .map_err(|()| format!("server URL {:?} cannot take a password", self.name))?;
        }
        Ok(ServerUrl { secret: url.into(), name: self.name.clone(), sentinel: None })
    }

    /// The display name: host and port, never a password.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Hides the password of a URL-like string, even one that does not parse:
/// `redis://user:pw@h` becomes `redis://user:***@h`, `?password=pw` becomes
/// `?password=***`.
pub fn redact(raw: &str) -> String {
    let mut out = raw.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..].find(['/', '?', '#']).map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@') {
            let at = rest + at;
            match out[rest..at].find(':') {
                Some(colon) => out.replace_range(rest + colon + 1..at, "***"),
                // `redis://secret@host` is a password alone in the crate's reading.
                None => out.replace_range(rest..at, "***"),
            }
        }
    }
    if let Some(q) = out.find('?') {
        let query: Vec<String> = out[q + 1..]
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if ["pass", "password", "sentinel_password"].contains(&k) => {
                    format!("{k}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.replace_range(q + 1.., &query.join("&"));
    }
    out
}

/// What redlock was doing when a server failed; shown in every error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `SET NX PX` through the acquire script.
    Acquire,
    /// The compare-and-extend script.
    Extend,
    /// The compare-and-delete script.
    Release,
    /// `release --force`.
    ForceRelease,
    /// Reading the value and PTTL.
    Status,
    /// Subscribing to the release channel while waiting.
    Subscribe,
    /// `doctor`'s checks (PING, INFO, TIME, CONFIG GET).
    Doctor,
    /// Writing a fencing number back to a quorum.
    RaiseFence,
    /// Taking back the vote of a failed acquire attempt.
    Withdraw,
    /// Writing a run's entry or a skip to the history.
    Record,
    /// Reading the history (`history`, `check`).
    History,
    /// The wait queue ([`crate::queue`]).
    Queue,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Acquire => "acquire",
            Op::Extend => "extend",
            Op::Release => "release",
            Op::ForceRelease => "force-release",
            Op::Status => "status",
            Op::Subscribe => "subscribe",
            Op::Doctor => "doctor",
            Op::RaiseFence => "raise-fence",
            Op::Withdraw => "withdraw",
            Op::Record => "record",
            Op::History => "history",
            Op::Queue => "queue",
        })
    }
}

/// The words of the error for an operation that needs a script on a server
/// that refuses them ([`crate::lock::noscript`]); counted as a
/// configuration failure (no retry cures it).
pub const NEEDS_SCRIPTS: &str = "the server refuses scripts";

/// Why one server call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the node timeout (connect included).
    Timeout(Duration),
    /// Nothing listens at the address.
    Refused,
    /// The unix socket file does not exist.
    NoSocket,
    /// A `rediss://` connection got no TLS answer in time: often a plain port.
    TlsTimeout(Duration),
    /// The connection could not be made or broke (DNS, reset, EOF...).
    Connection(String),
    /// The server wants a password or refused the one given (NOAUTH, WRONGPASS).
    Auth(String),
    /// The ACL user lacks a command or key (NOPERM).
    NoPerm(String),
    /// TLS handshake or certificate problem.
    Tls(String),
    /// The key holds a value that is not a string: it is not a lock.
    WrongType,
    /// An error reply that retrying cannot cure: an unknown (renamed,
    /// disabled) command, OOM, a database index out of range.
    Unfit(String),
    /// Any other error reply, or an answer redlock cannot read.
    Reply(String),
}

impl Failure {
    /// True when retrying cannot help: the configuration or the data is wrong.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            Failure::Auth(_)
                | Failure::NoPerm(_)
                | Failure::Tls(_)
                | Failure::WrongType
                | Failure::Unfit(_)
                | Failure::NoSocket
        )
    }

    /// The failure a redis crate error stands for.
    pub fn from_redis(e: &RedisError) -> Failure {
        let detail = || short_detail(&e.to_string());
        match e.code() {
            Some("NOAUTH") => {
                return Failure::Auth(
                    "NOAUTH: the server wants a password (in the URL, --password-file or REDLOCK_PASSWORD)"
                        .to_owned(),
                );
            }
            Some("WRONGPASS") => return Failure::Auth(detail()),
            // A server that wants a password answers a command of more than
            // ten words, before AUTH, with this instead of NOAUTH (the
            // shared acquire has eleven: `scripts/acquire.lua`), and closes
            // the connection.
            _ if e.to_string().contains("unauthenticated multibulk") => {
                return Failure::Auth(
                    "NOAUTH: the server wants a password (in the URL, --password-file or REDLOCK_PASSWORD)"
                        .to_owned(),
                );
            }
            Some("NOPERM") => return Failure::NoPerm(detail()),
            Some("WRONGTYPE") => return Failure::WrongType,
            Some("OOM") => return Failure::Unfit(detail()),
            _ => {}
        }
        // A Redis Cluster node answers for the hash slots it owns and
        // redirects the rest. redlock does not route by slot (issue 14,
        // item 4), and waiting cannot change which node owns the lock's
        // slot: say what the server is, at once, instead of retrying.
        let text = e.to_string();
        if matches!(e.code(), Some("MOVED" | "ASK" | "CROSSSLOT" | "CLUSTERDOWN"))
            || ["Moved:", "Ask:", "CrossSlot", "ClusterDown"].iter().any(|t| text.contains(t))
        {
            return Failure::Unfit(format!(
                "a Redis Cluster node ({}): redlock cannot lock through a cluster yet; \
                 give it independent servers (each cluster master's own address does not work either)",
                detail()
            ));
        }
        if e.kind() == ErrorKind::AuthenticationFailed {
            // The crate reports the server's WRONGPASS in words of its own.
            return Failure::Auth("WRONGPASS: wrong user name or password".to_owned());
        }
        if e.is_connection_refusal() {
            // The crate counts a missing socket file as a refusal (its io
            // error is not reachable from outside the crate, its text is).
            if e.to_string().contains("No such file or directory") {
                return Failure::NoSocket;
            }
            return Failure::Refused;
        }
        let text = detail();
        // Redis 6.2 wraps the error of a command a script called in
        // `ERR Error running script (...): @user_script:36: WRONGTYPE ...`
        // (7.0 passes the code through): the same failure either way.
        if text.contains("WRONGTYPE") {
            return Failure::WrongType;
        }
        // Redis 7.0 answers an `EXEC` the ACL user may not run with
        // `EXECABORT Transaction discarded because of: NOPERM ...`
        // (src/lock/noscript.rs): the NOPERM is the failure.
        if e.code() == Some("EXECABORT")
            && let Some((_, cause)) = text.split_once("because of: ")
            && cause.starts_with("NOPERM")
        {
            return Failure::NoPerm(cause.to_owned());
        }
        if text.contains("OOM command not allowed") {
            return Failure::Unfit(text);
        }
        // A replica refuses writes (a Sentinel failover demoted the server,
        // or the URL names a replica). Counted as a broken connection: it is
        // dropped, so that the next call connects afresh (and, for a
        // Sentinel group, asks the Sentinels for the new master), and a
        // wait retries it.
        if e.code() == Some("READONLY") || text.contains("READONLY") {
            return Failure::Connection(format!("the server is a replica now ({text})"));
        }
        // Waiting cannot cure a command the server does not have (renamed
        // or disabled: `rename-command EVALSHA ""`) or a database it lacks.
        if text.contains("DB index is out of range") {
            return Failure::Unfit(
                "DB index is out of range (the server has fewer databases: its `databases` setting)"
                    .to_owned(),
            );
        }
        // Likewise an operation that needs a script on a server that
        // refuses them (src/lock/noscript.rs: `--shared`, the run history).
        if text.contains("unknown command") || text.contains(NEEDS_SCRIPTS) {
            return Failure::Unfit(text);
        }
        // rustls reports through io errors; its messages name certificates.
        let lower = text.to_lowercase();
        if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
            return Failure::Tls(text);
        }
        if e.is_io_error() || e.is_connection_dropped() {
            return Failure::Connection(text);
        }
        Failure::Reply(text)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "timed out after {}", crate::fmt_duration(*d)),
            Failure::Refused => f.write_str("connection refused"),
            Failure::NoSocket => f.write_str("no such file: no socket at this path"),
            Failure::TlsTimeout(d) => write!(
                f,
                "no TLS answer within {}: is it a TLS port? (rediss:// needs one; use redis:// for a plain port)",
                crate::fmt_duration(*d)
            ),
            Failure::Connection(s) => write!(f, "connection failed: {s}"),
            Failure::Auth(s) => write!(f, "authentication failed: {s}"),
            Failure::NoPerm(s) => write!(f, "permission denied: {s}"),
            Failure::Tls(s) => write!(f, "TLS error: {s}"),
            Failure::WrongType => {
                f.write_str("WRONGTYPE: the key holds a non-string value, so it is not a lock")
            }
            Failure::Reply(s) | Failure::Unfit(s) => write!(f, "error reply: {s}"),
        }
    }
}

/// The redis crate's error text, short: no "signalled by the server"
/// preamble, no "- AuthenticationFailed" kind suffix, no echo of a refused
/// command's arguments (a script hash and the token), one line.
fn short_detail(text: &str) -> String {
    let text = text.trim();
    let text = text.strip_prefix("An error was signalled by the server - ").unwrap_or(text);
    let text = text.split(", with args beginning with").next().unwrap_or(text);
    let text = text.rsplit_once(" - ").map_or(text, |(head, kind)| {
        if kind.chars().all(|c| c.is_ascii_alphanumeric() || "():".contains(c)) {
            head
        } else {
            text
        }
    });
    text.replace('\n', " ")
}

/// Failed calls in one line, servers with the same failure named together:
/// `a:6379: acquire k: authentication failed: ... (same on b:6379); c:6379:
/// acquire k: timed out after 1.0s`.
pub fn summarize(errors: &[ServerError]) -> String {
    let mut groups: Vec<(&ServerError, Vec<&str>)> = Vec::new();
    for e in errors {
        let same = |(first, _): &&mut (&ServerError, Vec<&str>)| {
            first.failure == e.failure && first.op == e.op && first.key == e.key
        };
        match groups.iter_mut().find(same) {
            Some((_, others)) => others.push(&e.server),
            None => groups.push((e, Vec::new())),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(first, others)| match others.as_slice() {
            [] => first.to_string(),
            others => format!("{first} (same on {})", others.join(", ")),
        })
        .collect();
    parts.join("; ")
}

/// One failed call: which server, doing what, on which key, and why.
#[derive(Clone, Debug, thiserror::Error)]
pub struct ServerError {
    /// The server's display name (no password).
    pub server: String,
    /// The operation.
    pub op: Op,
    /// The key, shortened for display.
    pub key: String,
    /// The cause.
    pub failure: Failure,
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.key.as_str() {
            "" => write!(f, "{}: {}: {}", self.server, self.op, self.failure),
            key => write!(f, "{}: {} {key}: {}", self.server, self.op, self.failure),
        }
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
/// leave a dead token for a whole TTL (issue 9, item 7).
#[derive(Clone)]
pub struct Conn {
    /// The multiplexed connection (cloning shares it).
    conn: MultiplexedConnection,
    /// Which of this server's connections it is, so that a failure on it
    /// never forgets a newer one.
    generation: u64,
}

/// What a server's URL leads to.
enum Target {
    /// One server at a fixed address.
    Direct(Client),
    /// The current master of a Sentinel group, found again at each connect.
    Sentinel(Group),
}

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

/// One Redis server (or Sentinel group) and its connection, opened on first use.
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
    /// For a Sentinel group: which master the current connection goes to,
    /// and when the Sentinels last named it.
    verified: Mutex<Option<Verified>>,
    /// Set once the server refused a script (EVALSHA unknown, or NOPERM for
    /// it): from then on every operation takes the no-script path
    /// ([`crate::lock::noscript`]) without trying the script first. Never unset:
    /// a server's configuration rarely gains scripting while redlock runs,
    /// and the no-script path is as safe, only slower.
    scripts_refused: AtomicBool,
    /// Shared by each acquire attempt on this server while it runs,
    /// exclusive for a release before it deletes ([`Server::attempting`]).
    attempts: tokio::sync::RwLock<()>,
}

/// A Sentinel group's master as last confirmed.
struct Verified {
    /// The connection it is for.
    generation: u64,
    /// The master's `host:port`.
    address: String,
    /// When the Sentinels (or, with none answering, `ROLE`) confirmed it.
    at: tokio::time::Instant,
}

impl Server {
    /// Prepares a server; nothing is connected until the first call.
    /// `rediss://` servers use `tls` (a private CA, a client certificate).
    pub fn new(url: ServerUrl, timeout: Duration, tls: &Tls) -> Result<Server, String> {
        install_crypto_provider();
        let target = match &url.sentinel {
            Some(sentinel) => Target::Sentinel(Group::new(sentinel.clone(), tls)?),
            None => Target::Direct(open_client(&url.secret, tls).map_err(|e| {
                if e.starts_with("not a valid") {
                    format!("server URL {:?} is not a valid Redis URL", url.name())
                } else {
                    format!("{}: {e}", url.name())
                }
            })?),
        };
        Ok(Server {
            url,
            target,
            timeout,
            conn: Mutex::new(None),
            opening: tokio::sync::Mutex::new(0),
            verified: Mutex::new(None),
            scripts_refused: AtomicBool::new(false),
            attempts: tokio::sync::RwLock::new(()),
        })
    }

    /// Marks an acquire attempt on this server as running until the guard
    /// drops; [`Server::after_attempts`] waits for it.
    ///
    /// Why: an attempt whose round was won without this server still lets
    /// its vote land here (src/lock/acquire.rs, `contend`), possibly after
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
    /// master the Sentinels name now.
    pub async fn dedicated(&self) -> redis::RedisResult<MultiplexedConnection> {
        let config = self.connection_config();
        match &self.target {
            Target::Direct(client) => {
                client.get_multiplexed_async_connection_with_config(&config).await
            }
            Target::Sentinel(group) => group.master(&config).await.map(|m| m.conn).map_err(|f| {
                RedisError::from((ErrorKind::Io, "no Sentinel master", f.to_string()))
            }),
        }
    }

    /// The display name (no password).
    pub fn name(&self) -> &str {
        self.url.name()
    }

    /// An error for an answer that is not what the script returns.
    pub fn bad_reply(&self, op: Op, key: &str, what: String) -> ServerError {
        self.error(op, key.as_bytes(), Failure::Reply(what))
    }

    fn error(&self, op: Op, key: &[u8], failure: Failure) -> ServerError {
        ServerError { server: self.name().to_owned(), op, key: crate::display_key(key), failure }
    }

    /// Opens a dedicated pub/sub connection subscribed to `channel`,
    /// bounded by the node timeout.
    pub async fn subscribe(&self, channel: &str) -> Result<redis::aio::PubSub, ServerError> {
        let work = async {
            let client = match &self.target {
                Target::Direct(client) => client.clone(),
                // Pub/sub only wakes waiters early: the master found now
                // is the one to listen on (a stale one costs a wake-up).
                Target::Sentinel(group) => group.master(&self.connection_config()).await?.client,
            };
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
        let failure = match tokio::time::timeout_at(deadline, self.open()).await {
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
    pub async fn call_on<T>(
        &self,
        conn: &Conn,
        op: Op,
        key: &[u8],
        deadline: tokio::time::Instant,
        f: impl AsyncFnOnce(&mut MultiplexedConnection) -> redis::RedisResult<T>,
    ) -> Result<T, ServerError> {
        let mut c = conn.conn.clone();
        let failure = match tokio::time::timeout_at(deadline, f(&mut c)).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) if e.is_timeout() => self.timed_out(),
            Ok(Err(e)) => Failure::from_redis(&e),
            Err(_) => self.timed_out(),
        };
        if !matches!(failure, Failure::WrongType | Failure::Reply(_) | Failure::Unfit(_)) {
            self.forget(conn.generation);
        }
        Err(self.error(op, key, failure))
    }

    /// The current connection, or a new one. Single flight: the `opening`
    /// lock is held across the connect, and the slot is checked again once
    /// it is taken, so concurrent callers end up on one connection. A
    /// caller whose deadline passes while it opens drops the attempt (and
    /// the lock); the next caller tries afresh.
    async fn open(&self) -> Result<Conn, Failure> {
        if let Some(conn) = self.current() {
            return Ok(conn);
        }
        let mut opened = self.opening.lock().await;
        if let Some(conn) = self.current() {
            return Ok(conn);
        }
        let config = self.connection_config();
        let conn = match &self.target {
            Target::Direct(client) => {
                client.get_multiplexed_async_connection_with_config(&config).await.map_err(|e| {
                    if e.is_timeout() {
                        Failure::Timeout(self.timeout)
                    } else {
                        Failure::from_redis(&e)
                    }
                })?
            }
            Target::Sentinel(group) => {
                let current = self.lock_conn().clone();
                if let Some(conn) = current
                    && self.still_master(group, &conn, &config).await
                {
                    return Ok(conn);
                }
                // Asked afresh: the first call, each call after a failure
                // or a READONLY reply dropped the connection, and each call
                // after the Sentinels named another master.
                let master = group.master(&config).await?;
                *self.lock_verified() = Some(Verified {
                    generation: *opened + 1,
                    address: master.address,
                    at: tokio::time::Instant::now(),
                });
                master.conn
            }
        };
        *opened += 1;
        let conn = Conn { conn, generation: *opened };
        *self.lock_conn() = Some(conn.clone());
        Ok(conn)
    }

    /// The current connection, if there is one and, for a Sentinel group,
    /// its master was confirmed less than a node timeout ago.
    ///
    /// Why confirm again: a master can lose its role while redlock's
    /// connection to it stays open and keeps working. After `SENTINEL
    /// FAILOVER`, or a failover while it was cut off, the old master goes on
    /// accepting writes until the Sentinels reconfigure it (seconds later),
    /// while other clients, asking the Sentinels, already lock on the new
    /// one: redlock's vote on the old master would be a second vote of the
    /// same group. Asking again before a call, at most once a node timeout,
    /// bounds that window to one node timeout past the Sentinels' switch.
    fn current(&self) -> Option<Conn> {
        let conn = self.lock_conn().clone()?;
        match &self.target {
            Target::Direct(_) => Some(conn),
            Target::Sentinel(_) => {
                let verified = self.lock_verified();
                let fresh = verified.as_ref().is_some_and(|v| {
                    v.generation == conn.generation && v.at.elapsed() < self.timeout
                });
                fresh.then_some(conn)
            }
        }
    }

    /// Whether the Sentinels still name the master `conn` goes to (and
    /// records when they did); with no Sentinel answering, whether it still
    /// says `master` to `ROLE`, so that a master outliving its Sentinels
    /// keeps its vote. When false, the connection is dropped.
    async fn still_master(
        &self,
        group: &Group,
        conn: &Conn,
        config: &AsyncConnectionConfig,
    ) -> bool {
        let address = self.lock_verified().as_ref().map(|v| v.address.clone());
        let Some(address) = address else {
            self.forget(conn.generation);
            return false;
        };
        let same = match group.named(config).await {
            Ok(named) => named.as_deref() == Some(address.as_str()),
            Err(_) => {
                let mut c = conn.conn.clone();
                crate::sentinel::role(&mut c).await.is_ok_and(|role| role == "master")
            }
        };
        if same {
            if let Some(v) = self.lock_verified().as_mut() {
                v.at = tokio::time::Instant::now();
            }
        } else {
            self.forget(conn.generation);
        }
        same
    }

    fn lock_verified(&self) -> std::sync::MutexGuard<'_, Option<Verified>> {
        // As for `lock_conn`: a poisoned Option is still an Option.
        self.verified.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Connect and response timeouts: the node timeout.
    fn connection_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
    }

    /// The Sentinel group behind this server, if its URL names one.
    pub fn sentinel(&self) -> Option<&Group> {
        match &self.target {
            Target::Sentinel(group) => Some(group),
            Target::Direct(_) => None,
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

    /// A timeout; on a `rediss://` server that never got connected, most
    /// likely a plain port that waits for a command instead of answering
    /// the TLS handshake: say so (still retried, as a hung server would be).
    fn timed_out(&self) -> Failure {
        if self.url.secret.starts_with("rediss:") && self.lock_conn().is_none() {
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

    #[test]
    fn redact_hides_passwords() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:secret@h"), "redis://:***@h");
        assert_eq!(redact("redis://secret@h"), "redis://***@h");
        assert_eq!(redact("unix:///s.sock?db=1&pass=secret"), "unix:///s.sock?db=1&pass=***");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(
            redact("redis+sentinel://u:pw@h1:1,h2:2/m?sentinel_password=sp"),
            "redis+sentinel://u:***@h1:1,h2:2/m?sentinel_password=***"
        );
    }

    #[test]
    fn parse_names_servers_without_secrets() {
        let u = ServerUrl::parse("redis://user:pw@127.0.0.1:7001").unwrap();
        assert_eq!(u.name(), "127.0.0.1:7001");
        let u = ServerUrl::parse("rediss://:pw@example.com/2").unwrap();
        assert_eq!(u.name(), "rediss://example.com:6379/2");
        let u = ServerUrl::parse("unix:///run/redis.sock?pass=pw").unwrap();
        assert_eq!(u.name(), "unix:/run/redis.sock");
        let e = ServerUrl::parse("http://u:pw@h").unwrap_err();
        assert!(e.contains("scheme \"http\"") && !e.contains("pw@"), "{e}");
        assert!(ServerUrl::parse("redis://").is_err());
        assert!(ServerUrl::parse("not a url").is_err());
    }

    #[test]
    fn parse_hints_at_the_likely_fix() {
        let e = ServerUrl::parse("127.0.0.1:6379").unwrap_err();
        assert!(e.contains("use redis://127.0.0.1:6379"), "{e}");
        let e = ServerUrl::parse("localhost:6379").unwrap_err();
        assert!(e.contains("use redis://localhost:6379"), "{e}");
        let e = ServerUrl::parse("unix://tmp/redis.sock").unwrap_err();
        assert!(e.contains("third slash: unix:///tmp/redis.sock"), "{e}");
    }

    #[test]
    fn details_are_short_and_failures_grouped() {
        let long = "An error was signalled by the server - ResponseError: unknown command 'EVALSHA', with args beginning with: '9b8a' '2' 'k'";
        assert_eq!(short_detail(long), "ResponseError: unknown command 'EVALSHA'");
        assert_eq!(
            short_detail("Password authentication failed - AuthenticationFailed"),
            "Password authentication failed"
        );
        let e = |server: &str, failure: Failure| ServerError {
            server: server.into(),
            op: Op::Acquire,
            key: "k".into(),
            failure,
        };
        let wrong = Failure::Auth("WRONGPASS invalid username-password pair".into());
        let line =
            summarize(&[e("a:1", wrong.clone()), e("b:1", Failure::Refused), e("c:1", wrong)]);
        assert_eq!(
            line,
            "a:1: acquire k: authentication failed: WRONGPASS invalid username-password pair (same on c:1); \
             b:1: acquire k: connection refused"
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any string parses or fails with a message; neither the message
        /// nor the display name ever contains the password.
        #[test]
        fn urls_never_panic_or_leak(
            scheme in "(redis|rediss|unix|http|)",
            user in "[a-z]{0,6}",
            pass in "[A-Za-z0-9]{8,16}",
            rest in "[ -~]{0,30}",
        ) {
            let raw = format!("{scheme}://{user}:{pass}@{rest}");
            match ServerUrl::parse(&raw) {
                Ok(url) => prop_assert!(!url.name().contains(&pass)),
                Err(message) => prop_assert!(!message.contains(&pass), "{message}"),
            }
            let leaked = format!(":{}@", pass);
            prop_assert!(!redact(&raw).contains(&leaked));
        }

        #[test]
        fn arbitrary_text_never_panics(raw in "\\PC{0,80}") {
            let _ = ServerUrl::parse(&raw);
            let _ = redact(&raw);
        }
    }
}
