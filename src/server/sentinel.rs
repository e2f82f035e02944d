//! Sentinel-managed servers: a `redis+sentinel://` URL names a group of
//! Sentinels and a service; the group is one member of the quorum, and its
//! current master is the server redlock talks to.
//!
//! `redis+sentinel://[user:pass@]h1:26379,h2:26379/service[/db]` (or
//! `rediss+sentinel://` for TLS to the Sentinels and the master alike).
//! The user and password in the URL are the master's, as for a plain
//! server (and `--password-file`/`REDLOCK_PASSWORD` fill in a missing
//! one); Sentinels are asked without credentials unless the URL carries
//! `?sentinel_password=...` (and `&sentinel_user=...`): Sentinels often run
//! without `requirepass`, or with a password of their own, and one given
//! twice would be sent to servers that never asked for it.
//!
//! Resolution, each time the server layer opens a connection (the first
//! call, and every call after a connection failure or a `READONLY` reply,
//! which drops the connection; and when the Sentinels, asked again at most
//! once a node timeout, no longer confirm the master): every Sentinel is
//! asked at once for the master's address and the replicas it sees
//! (`SENTINEL get-master-addr-by-name`, `SENTINEL replicas`, one round
//! trip), and an address counts only when more than half of the LISTED
//! Sentinels name it ([`Group::named`]); the server there must then say
//! `master` to `ROLE`. A Sentinel's view can lag a failover, and a demoted
//! master keeps accepting connections: without the `ROLE` check redlock
//! could count a replica's vote, whose writes are refused (or, with
//! `replica-read-only no`, kept by no one).
//!
//! # Why a vote waits for the replicas
//! The group is one member of the quorum, so what it grants must outlive a
//! failover, or two holders can each count it: the master that granted one
//! holder is replaced, and the new master grants the next. Two ways lose a
//! write. Replication is asynchronous, so the last writes of a master may
//! not have reached the replica promoted in its place. And a master that
//! has been failed away from (`SENTINEL FAILOVER`, or a failover while it
//! was cut off) goes on answering `master` to `ROLE`, and accepting writes,
//! until the Sentinels reconfigure it (about ten seconds after a
//! `SENTINEL FAILOVER`), while the Sentinels that did not lead the failover
//! go on naming it for a second or two: a client asking them then writes
//! there, and nothing it writes survives.
//!
//! So a write that is a vote (acquire, extend, raise-fence) counts only
//! once `WAIT` says the replicas have it (`Server::call_on`, on the
//! connection that wrote: `WAIT` counts that connection's writes): as many
//! replicas as the most that one of the majority of Sentinels sees up
//! (flags without `s_down`/`o_down`), or that the master has online
//! (`ROLE`), and at least one; within the node timeout. A write `WAIT`
//! does not confirm in time is no vote, and after a grant it counts as
//! "may have set": the acquire round withdraws it.
//!
//! - A master already failed away from: the promoted replica left it, and
//!   that replica is among those the Sentinels list (it counts until they
//!   hold it down, and they do not: it is up), so the count is never met.
//!   With one replica, the old master has none left at all. No vote.
//! - A replica not yet reconfigured, still following the old master, would
//!   confirm a write there that the promoted replica never gets: the count
//!   is every replica, so the promoted one must confirm too, and it no
//!   longer follows. No vote.
//! - A write confirmed before the promotion is on every replica the
//!   Sentinels could promote, so on the new master.
//!
//! The assumption: the Sentinels promote a replica they saw up, and every
//! such replica was counted. The case that breaks it: a replica the
//! Sentinels did not list (not yet discovered, or held down at the write)
//! that is promoted anyway after coming back, while it holds fewer writes
//! than the others: Sentinel prefers the highest `replica-priority`, then
//! the largest replication offset, so this takes a replica with a better
//! priority than the ones that confirmed, or offsets Sentinel read before
//! the write. And a restart of the promoted replica without persistence,
//! as for any member (the delayed-restart rule, README).
//!
//! The cost: one `WAIT` per vote (a round trip plus the replicas' ack),
//! and no vote while fewer replicas follow the master than the Sentinels
//! see up: after a `SENTINEL FAILOVER`, until the old master is
//! reconfigured as a replica (seconds); after a crash of the master with a
//! single replica, until a replica follows the new master. A group
//! without a replica never votes (`doctor` says so).

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Value};

use crate::server::kept::{Kept, connect_failure};
use crate::server::{
    Failure, Tls, decode_value, encode_password, group_parts, host_list, node_url, open_client,
    params,
};

/// The default Sentinel port.
pub const DEFAULT_PORT: u16 = 26379;

/// A parsed `redis+sentinel://` URL.
#[derive(Clone)]
pub struct SentinelUrl {
    /// TLS to the Sentinels and the master (`rediss+sentinel://`).
    pub tls: bool,
    /// The Sentinels, `host:port` (IPv6 hosts in brackets).
    pub sentinels: Vec<String>,
    /// The service (master) name Sentinel monitors.
    pub service: String,
    /// The database on the master.
    pub db: i64,
    /// The master's user info as written in the URL (percent-encoded:
    /// `user:pass`, `:pass` or `pass`), if any.
    userinfo: Option<String>,
    /// The Sentinels' user (`?sentinel_user=`).
    sentinel_user: Option<String>,
    /// The Sentinels' password (`?sentinel_password=`).
    sentinel_password: Option<String>,
}

impl fmt::Debug for SentinelUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl SentinelUrl {
    /// Parses `redis+sentinel://[user:pass@]h1[:p1],h2[:p2]/service[/db][?sentinel_password=..]`;
    /// `shown` is the URL with its passwords hidden, for messages.
    pub fn parse(raw: &str, shown: &str) -> Result<SentinelUrl, String> {
        let bad = |why: &str| format!("server URL {shown:?}: {why}");
        let parts = group_parts(raw).ok_or_else(|| bad("no scheme"))?;
        let tls = match parts.scheme {
            "redis+sentinel" => false,
            "rediss+sentinel" => true,
            _ => return Err(bad("not a redis+sentinel:// URL")),
        };
        let (userinfo, hosts, path) = (parts.userinfo, parts.hosts, parts.path);
        let sentinels = host_list(hosts, DEFAULT_PORT, "Sentinel").map_err(|why| bad(&why))?;
        let mut segments = path.split('/');
        let service = segments.next().unwrap_or("").to_owned();
        if service.is_empty() {
            return Err(bad(
                "no service name; use redis+sentinel://HOST:26379,HOST:26379/SERVICE[/DB]",
            ));
        }
        let db = match segments.next() {
            None | Some("") => 0,
            Some(db) => db
                .parse::<i64>()
                .ok()
                .filter(|d| *d >= 0)
                .ok_or_else(|| bad(&format!("database {db:?} is not a number")))?,
        };
        if segments.next().is_some_and(|p| !p.is_empty()) {
            return Err(bad("too many path parts; the form is /SERVICE[/DB]"));
        }
        let mut sentinel_user = None;
        let mut sentinel_password = None;
        for param in parts.query.map(params).unwrap_or_default() {
            let value = param.value.map(decode_value).unwrap_or_default();
            match param.name {
                "sentinel_user" => sentinel_user = Some(value),
                "sentinel_password" => sentinel_password = Some(value),
                // A name is the first parameter's or a known one (any other
                // `&` or `?` is part of a value: `params`), so the name
                // shown here is never part of a password.
                other => {
                    return Err(bad(&format!(
                        "unknown parameter {other:?} (known: sentinel_user, sentinel_password)"
                    )));
                }
            }
        }
        let url =
            SentinelUrl { tls, sentinels, service, db, userinfo, sentinel_user, sentinel_password };
        // The master's URL must be one the redis crate reads (user info,
        // database); checked here, with a placeholder address.
        redis::IntoConnectionInfo::into_connection_info(url.master_url("127.0.0.1", 1).as_str())
            .map_err(|_| bad("the user, password or database is not valid"))?;
        Ok(url)
    }

    /// The display name: `sentinel:SERVICE@h1:26379,h2:26379` (plus `/db`
    /// when not 0), never a password.
    pub fn name(&self) -> String {
        let tls = if self.tls { "rediss+" } else { "" };
        let db = if self.db == 0 { String::new() } else { format!("/{}", self.db) };
        format!("{tls}sentinel:{}@{}{db}", self.service, self.sentinels.join(","))
    }

    /// True when the master's URL carries a password of its own.
    pub fn has_password(&self) -> bool {
        self.userinfo.as_deref().is_some_and(|u| !u.is_empty())
    }

    /// This URL with `password` for the master when the URL gives none.
    pub fn with_default_password(&self, password: &str) -> SentinelUrl {
        if self.has_password() {
            return self.clone();
        }
        SentinelUrl { userinfo: Some(format!(":{}", encode_password(password))), ..self.clone() }
    }

    fn scheme(&self) -> &'static str {
        if self.tls { "rediss" } else { "redis" }
    }

    /// The URL of the master at `host:port`, with the master's credentials.
    fn master_url(&self, host: &str, port: u16) -> String {
        node_url(self.scheme(), self.userinfo.as_deref(), host, port, self.db)
    }

    /// The URL of one Sentinel, with the Sentinels' credentials.
    fn sentinel_url(&self, address: &str) -> String {
        let plain = format!("{}://{address}", self.scheme());
        let Ok(mut url) = url::Url::parse(&plain) else {
            return plain;
        };
        if let Some(pw) = &self.sentinel_password {
            let _ = url.set_username(self.sentinel_user.as_deref().unwrap_or(""));
            let _ = url.set_password(Some(pw));
        }
        url.into()
    }
}

/// What `ROLE` says of a server: its role (`master`, `slave`,
/// `sentinel`) and, for a master, how many replicas are online there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// The first element of the reply.
    pub role: String,
    /// A master's online replicas (its third element); 0 for the others.
    pub replicas: usize,
}

/// Asks `ROLE` on `conn`.
pub async fn role(conn: &mut MultiplexedConnection) -> Result<Role, Failure> {
    let role: Value =
        redis::cmd("ROLE").query_async(conn).await.map_err(|e| match Failure::from_redis(&e) {
            Failure::NoPerm(why) => Failure::NoPerm(format!(
                "{why} (redlock checks with ROLE that a Sentinel's master is one: grant +role)"
            )),
            other => other,
        })?;
    let Value::Array(items) = role else {
        return Ok(Role { role: String::new(), replicas: 0 });
    };
    let text = |v: Option<&Value>| match v {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        _ => String::new(),
    };
    let role = text(items.first());
    let replicas = match (role.as_str(), items.get(2)) {
        ("master", Some(Value::Array(replicas))) => replicas.len(),
        _ => 0,
    };
    Ok(Role { role, replicas })
}

/// What one Sentinel said about the service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The master's `host:port`, and how many of its replicas this
    /// Sentinel lists and does not hold down (`s_down`, `o_down`).
    Master {
        /// `host:port`.
        address: String,
        /// The replicas it sees up.
        replicas: usize,
    },
    /// The Sentinel does not monitor the service.
    Unknown,
}

/// The master more than half of the listed Sentinels name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    /// `host:port`.
    pub address: String,
    /// The most replicas one of those Sentinels sees up.
    pub replicas: usize,
}

/// A Sentinel group, ready to resolve its master.
pub struct Group {
    url: SentinelUrl,
    tls: Tls,
    /// The node timeout.
    timeout: Duration,
    /// The Sentinels, in URL order.
    sentinels: Kept,
}

/// The master found, with a connection to it.
pub struct Master {
    /// `host:port`.
    pub address: String,
    /// A client for it (pub/sub connections).
    pub client: Client,
    /// The connection whose `ROLE` said master.
    pub conn: MultiplexedConnection,
    /// How many replicas a write there must reach before it counts: the
    /// most the Sentinels see up or the master has online
    /// ([`crate::server::sentinel`], "Why a vote waits for the replicas").
    pub replicas: usize,
}

impl Group {
    /// Prepares clients for the Sentinels; nothing is connected yet.
    /// `timeout`: the node timeout, which bounds each connect.
    pub fn new(url: SentinelUrl, tls: &Tls, timeout: Duration) -> Result<Group, String> {
        let name = url.name();
        let sentinels = url
            .sentinels
            .iter()
            .map(|address| {
                open_client(&url.sentinel_url(address), tls)
                    .map(|client| (address.clone(), client))
                    .map_err(|e| format!("{name}: Sentinel {address}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let over_tls = url.tls.then_some(timeout);
        Ok(Group { url, tls: tls.clone(), timeout, sentinels: Kept::new(sentinels, over_tls) })
    }

    /// The Sentinels' addresses.
    pub fn sentinels(&self) -> impl Iterator<Item = &str> {
        self.sentinels.addresses()
    }

    /// The service name.
    pub fn service(&self) -> &str {
        &self.url.service
    }

    /// Asks one Sentinel (`index` in URL order) for the master's address
    /// and the replicas it sees, in one round trip.
    pub async fn ask(
        &self,
        index: usize,
        config: &AsyncConnectionConfig,
    ) -> Result<Answer, Failure> {
        let mut question = redis::pipe();
        question.cmd("SENTINEL").arg("get-master-addr-by-name").arg(&self.url.service);
        question.cmd("SENTINEL").arg("replicas").arg(&self.url.service);
        question.ignore_errors();
        let replies: Vec<redis::RedisResult<Value>> = self
            .sentinels
            .ask_pipe(index, &question, config, Failure::from_redis)
            .await
            .map_err(|f| self.sentinel_failure(f))?;
        let failed = |e: &redis::RedisError| self.sentinel_failure(Failure::from_redis(e));
        let master = match replies.first() {
            Some(Ok(Value::Nil)) => return Ok(Answer::Unknown),
            Some(Ok(reply)) => redis::from_redis_value::<(String, u16)>(reply.clone())
                .map_err(|_| Failure::Reply(format!("unexpected Sentinel reply {reply:?}")))?,
            Some(Err(e)) => return Err(failed(e)),
            None => return Err(Failure::Reply("no Sentinel reply".to_owned())),
        };
        let replicas = match replies.get(1) {
            Some(Ok(reply)) => replicas_up(reply),
            Some(Err(e)) => return Err(failed(e)),
            None => return Err(Failure::Reply("no SENTINEL replicas reply".to_owned())),
        };
        let host = if master.0.contains(':') { format!("[{}]", master.0) } else { master.0 };
        Ok(Answer::Master { address: format!("{host}:{}", master.1), replicas })
    }

    /// A Sentinel's failure, said in the Sentinels' terms: a password
    /// wanted or refused is the Sentinels' own (`?sentinel_password=`),
    /// never the master's, which is not sent to them.
    fn sentinel_failure(&self, failure: Failure) -> Failure {
        match failure {
            Failure::Auth(_) if self.url.sentinel_password.is_none() => Failure::Auth(
                "the Sentinel wants a password of its own: add ?sentinel_password=... (and \
                 &sentinel_user=...) to the URL; the master's password is never sent to Sentinels"
                    .to_owned(),
            ),
            Failure::Auth(why) => Failure::Auth(format!(
                "the Sentinel refused the URL's ?sentinel_password= (and ?sentinel_user=): {why}"
            )),
            other => other,
        }
    }

    /// Connects to `address` (`host:port`) and asks its `ROLE`.
    pub async fn role_of(
        &self,
        address: &str,
        config: &AsyncConnectionConfig,
    ) -> Result<(Client, MultiplexedConnection, Role), Failure> {
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
            .ok_or_else(|| Failure::Reply(format!("not an address: {address}")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let client =
            open_client(&self.url.master_url(host, port), &self.tls).map_err(Failure::Reply)?;
        let mut conn =
            client.get_multiplexed_async_connection_with_config(config).await.map_err(|e| {
                connect_failure(&e, self.url.tls.then_some(self.timeout))
                    .unwrap_or_else(|| Failure::from_redis(&e))
            })?;
        let role = role(&mut conn).await?;
        Ok((client, conn, role))
    }

    /// The master more than half of the listed Sentinels name, asking all
    /// at once and ending as soon as one address has that many, or none
    /// can. A Sentinel listed twice (or a group of fewer answering) makes
    /// the majority harder, never easier; two Sentinels that disagree (a
    /// failover on its way through the group, a split, a stale or
    /// misconfigured Sentinel) are no majority: the group then fails the
    /// call, so that two processes that ask different Sentinels never
    /// vote on two masters. Any two majorities of one list share a
    /// Sentinel, and a Sentinel names one master at a time.
    pub async fn named(&self, config: &AsyncConnectionConfig) -> Result<Named, Failure> {
        let listed = self.sentinels.len();
        let need = listed / 2 + 1;
        let mut asks: FuturesUnordered<_> =
            (0..listed).map(|i| async move { (i, self.ask(i, config).await) }).collect();
        let mut pending = listed;
        // Each address named: how many Sentinels name it, the most
        // replicas one of them sees.
        let mut votes: Vec<(String, usize, usize)> = Vec::new();
        let mut problems: Vec<String> = Vec::new();
        let mut config_failure: Option<Failure> = None;
        let mut unknown = 0;
        while let Some((i, answer)) = asks.next().await {
            pending -= 1;
            let sentinel = self.sentinels.address(i);
            match answer {
                Ok(Answer::Master { address, replicas }) => {
                    let at = match votes.iter().position(|(a, _, _)| *a == address) {
                        Some(at) => at,
                        None => {
                            votes.push((address, 0, 0));
                            votes.len() - 1
                        }
                    };
                    votes[at].1 += 1;
                    votes[at].2 = votes[at].2.max(replicas);
                    if votes[at].1 >= need {
                        let (address, _, replicas) = votes.swap_remove(at);
                        return Ok(Named { address, replicas });
                    }
                }
                Ok(Answer::Unknown) => {
                    unknown += 1;
                    problems
                        .push(format!("Sentinel {sentinel} does not know {:?}", self.service()));
                }
                Err(failure) => {
                    if failure.is_config() && config_failure.is_none() {
                        config_failure = Some(failure.clone());
                    }
                    problems.push(format!("Sentinel {sentinel}: {failure}"));
                }
            }
            if votes.iter().map(|v| v.1).max().unwrap_or(0) + pending < need {
                break;
            }
        }
        let summary = problems.join("; ");
        // Waiting cannot cure a password or ACL the Sentinels refuse, nor
        // a service that no Sentinel that answered monitors.
        if let Some(failure) = config_failure {
            return Err(match failure {
                Failure::Auth(_) => Failure::Auth(summary),
                Failure::NoPerm(_) => Failure::NoPerm(summary),
                Failure::Tls(_) => Failure::Tls(summary),
                _ => Failure::Unfit(summary),
            });
        }
        if votes.is_empty() && unknown > 0 && unknown == problems.len() {
            return Err(Failure::Unfit(format!(
                "no Sentinel monitors the service {:?} (check the name after the hosts)",
                self.service()
            )));
        }
        let named: Vec<String> =
            votes.iter().map(|(a, n, _)| format!("{a} by {n} of {listed}")).collect();
        let said = match named.as_slice() {
            [] => format!("no master named by a majority ({need} of {listed} Sentinels)"),
            [one] => format!(
                "the master is named {one} Sentinels: more than half of the listed must name it"
            ),
            many => format!(
                "the Sentinels disagree on the master ({}): more than half of the listed must \
                 name the same one (a failover in progress, or a split)",
                many.join(", ")
            ),
        };
        Err(Failure::Connection(if summary.is_empty() {
            said
        } else {
            format!("{said}; {summary}")
        }))
    }

    /// Finds the current master: the address a majority of the Sentinels
    /// name ([`Group::named`]), kept only if its `ROLE` is master. The
    /// caller bounds the whole by its deadline.
    pub async fn master(&self, config: &AsyncConnectionConfig) -> Result<Master, Failure> {
        let named = self.named(config).await?;
        let address = named.address;
        match self.role_of(&address, config).await {
            Ok((client, conn, role)) if role.role == "master" => {
                Ok(Master { replicas: named.replicas.max(role.replicas), address, client, conn })
            }
            Ok((_, _, role)) => Err(Failure::Connection(format!(
                "the Sentinels name {address}, whose role is {:?}, not master (a failover in \
                 progress?)",
                role.role
            ))),
            // Waiting cannot cure what the master refuses: the same kind.
            Err(Failure::Auth(why)) => Err(Failure::Auth(format!("master {address}: {why}"))),
            Err(Failure::NoPerm(why)) => Err(Failure::NoPerm(format!("master {address}: {why}"))),
            Err(Failure::Tls(why)) => Err(Failure::Tls(format!("master {address}: {why}"))),
            Err(Failure::Unfit(why)) => Err(Failure::Unfit(format!("master {address}: {why}"))),
            Err(failure) => Err(Failure::Connection(format!("master {address}: {failure}"))),
        }
    }
}

/// How many replicas a `SENTINEL replicas` reply lists that the Sentinel
/// does not hold down (`s_down` or `o_down` in their flags): the ones it
/// could promote. An entry it cannot read counts as up.
fn replicas_up(reply: &Value) -> usize {
    let Value::Array(entries) = reply else { return 0 };
    entries
        .iter()
        .filter(|entry| {
            let flags = match entry {
                Value::Array(fields) => fields
                    .chunks(2)
                    .find(|kv| matches!(&kv[0], Value::BulkString(k) if k == b"flags"))
                    .and_then(|kv| kv.get(1)),
                Value::Map(pairs) => pairs
                    .iter()
                    .find(|(k, _)| matches!(k, Value::BulkString(k) if k == b"flags"))
                    .map(|(_, v)| v),
                _ => None,
            };
            let flags = match flags {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(Value::SimpleString(s)) => s.clone(),
                _ => String::new(),
            };
            !flags.split(',').any(|f| f == "s_down" || f == "o_down")
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<SentinelUrl, String> {
        SentinelUrl::parse(raw, &crate::server::redact(raw))
    }

    #[test]
    fn parses_hosts_service_db_and_credentials() {
        let u = parse("redis+sentinel://u:p%40ss@h1,h2:26380,[::1]:7/mymaster/2").unwrap();
        assert_eq!(u.sentinels, ["h1:26379", "h2:26380", "[::1]:7"]);
        assert_eq!((u.service.as_str(), u.db, u.tls), ("mymaster", 2, false));
        assert_eq!(u.name(), "sentinel:mymaster@h1:26379,h2:26380,[::1]:7/2");
        // The master gets the URL's credentials, the Sentinels none.
        assert_eq!(u.master_url("10.0.0.1", 6380), "redis://u:p%40ss@10.0.0.1:6380/2");
        assert_eq!(u.master_url("fe80::1", 6380), "redis://u:p%40ss@[fe80::1]:6380/2");
        assert_eq!(u.sentinel_url("h1:26379"), "redis://h1:26379");
        let u = parse("rediss+sentinel://h1/m?sentinel_user=s&sentinel_password=a%20b").unwrap();
        assert!(u.tls && u.name().starts_with("rediss+sentinel:m@"));
        assert_eq!(u.sentinel_url("h1:26379"), "rediss://s:a%20b@h1:26379");
        assert_eq!(u.master_url("h", 1), "rediss://h:1/0");
    }

    #[test]
    fn a_default_password_goes_to_the_master_only() {
        let u = parse("redis+sentinel://h1/m").unwrap().with_default_password("p w");
        assert_eq!(u.master_url("h", 1), "redis://:p%20w@h:1/0");
        assert_eq!(u.sentinel_url("h1:26379"), "redis://h1:26379");
        let own = parse("redis+sentinel://:mine@h1/m").unwrap().with_default_password("other");
        assert_eq!(own.master_url("h", 1), "redis://:mine@h:1/0");
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        for (raw, expect) in [
            ("redis+sentinel://:secret@h1", "no service name"),
            ("redis+sentinel://:secret@h1:0/m", "bad Sentinel address"),
            ("redis+sentinel://:secret@h1,,h2/m", "bad Sentinel address"),
            ("redis+sentinel://:secret@h1/m/-1", "database"),
            ("redis+sentinel://:secret@h1/m/1/x", "too many path parts"),
            ("redis+sentinel://:secret@h1/m?db=1", "unknown parameter"),
        ] {
            let e = parse(raw).unwrap_err();
            assert!(e.contains(expect) && !e.contains("secret"), "{raw}: {e}");
        }
    }
}
