//! Why a server call failed ([`Failure`]), what it was doing ([`Op`]),
//! and the one-line errors that name the server ([`ServerError`],
//! [`summarize`]).

use std::fmt;
use std::time::Duration;

use redis::{ErrorKind, RedisError};

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
    /// The server granted the lock, but its grant counts towards no
    /// quorum (it restarted too recently to have kept every holder's key,
    /// or its clock is too far from this host's): why. Retried, as the
    /// reason passes.
    NoVote(String),
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
            // A key of redlock's own names holds a value redlock never
            // writes (scripts/acquire.lua): not a lock, as for WRONGTYPE.
            Some("NOTREDLOCK") => return Failure::Unfit(detail()),
            _ => {}
        }
        // A Redis Cluster node given as a plain server answers for the hash
        // slots it owns and redirects the rest; waiting cannot change which
        // node owns the lock's slot: say what to do, at once, instead of
        // retrying. (Through a `redis+cluster://` server a redirect is a
        // broken connection instead: `Server::failure`.)
        let text = e.to_string();
        if matches!(e.code(), Some("MOVED" | "ASK" | "CROSSSLOT" | "CLUSTERDOWN"))
            || ["Moved:", "Ask:", "CrossSlot", "ClusterDown"].iter().any(|t| text.contains(t))
        {
            return Failure::Unfit(format!(
                "a Redis Cluster node ({}): list the cluster as one server, \
                 redis+cluster://HOST:PORT[,HOST:PORT...], so that redlock routes by slot",
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
            Failure::Timeout(d) => write!(f, "timed out after {}", crate::text::fmt_duration(*d)),
            Failure::Refused => f.write_str("connection refused"),
            Failure::NoSocket => f.write_str("no such file: no socket at this path"),
            Failure::TlsTimeout(d) => write!(
                f,
                "no TLS answer within {}: is it a TLS port? (a rediss URL needs one; a plain port takes the redis form)",
                crate::text::fmt_duration(*d)
            ),
            Failure::Connection(s) => write!(f, "connection failed: {s}"),
            Failure::Auth(s) => write!(f, "authentication failed: {s}"),
            Failure::NoPerm(s) => write!(f, "permission denied: {s}"),
            Failure::Tls(s) => write!(f, "TLS error: {s}"),
            Failure::WrongType => {
                f.write_str("WRONGTYPE: the key holds a non-string value, so it is not a lock")
            }
            Failure::Reply(s) | Failure::Unfit(s) => write!(f, "error reply: {s}"),
            Failure::NoVote(s) => write!(f, "no vote: {s}"),
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
/// `a:6379: authentication failed: ... (same on b:6379); c:6379: timed out
/// after 1.0s`. Calls of one operation on one key (one round's, the usual
/// case) leave both out: the sentence they end names them once (`acquire
/// k: 2 of 3 servers failed ...: a:6379: ...`). Calls that differ each say
/// theirs (`a:6379: acquire k: ...; b:6379: status k: ...`).
pub fn summarize(errors: &[ServerError]) -> String {
    let one_call = errors.windows(2).all(|w| w[0].op == w[1].op && w[0].key == w[1].key);
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
        .map(|(first, others)| {
            let first = if one_call {
                format!("{}: {}", first.server, first.failure)
            } else {
                first.to_string()
            };
            match others.as_slice() {
                [] => first,
                others => format!("{first} (same on {})", others.join(", ")),
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
            "a:1: authentication failed: WRONGPASS invalid username-password pair (same on c:1); \
             b:1: connection refused"
        );
        // Calls of different operations each name theirs.
        let status = ServerError { op: Op::Status, ..e("b:1", Failure::Refused) };
        let line = summarize(&[e("a:1", Failure::Refused), status]);
        assert_eq!(line, "a:1: acquire k: connection refused; b:1: status k: connection refused");
    }
}

/// The per-server errors of a round, shown all together.
#[derive(Clone, Debug, Default)]
pub struct Failures(pub Vec<ServerError>);

impl Failures {
    /// True when one of them is a configuration error that retrying cannot fix.
    pub fn any_config(&self) -> bool {
        self.0.iter().any(|e| e.failure.is_config())
    }
}

impl fmt::Display for Failures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no server answered in time");
        }
        f.write_str(&summarize(&self.0))
    }
}
