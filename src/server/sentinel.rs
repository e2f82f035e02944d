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
//! once a node timeout, name another master): every Sentinel is asked
//! `SENTINEL get-master-addr-by-name` at once; each address named is tried
//! in the order the answers arrive, and kept only if the server there says
//! `master` to `ROLE`. A Sentinel's view can lag a failover, and a demoted
//! master keeps accepting connections: without the `ROLE` check redlock
//! could count a replica's vote, whose writes are refused (or, with
//! `replica-read-only no`, kept by no one). The `ROLE` check is what makes
//! "never votes with a replica" hold, whatever the Sentinels say.

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

/// The first element of `ROLE`'s reply: `master`, `slave` or `sentinel`.
pub async fn role(conn: &mut MultiplexedConnection) -> Result<String, Failure> {
    let role: Value =
        redis::cmd("ROLE").query_async(conn).await.map_err(|e| match Failure::from_redis(&e) {
            Failure::NoPerm(why) => Failure::NoPerm(format!(
                "{why} (redlock checks with ROLE that a Sentinel's master is one: grant +role)"
            )),
            other => other,
        })?;
    Ok(match role {
        Value::Array(items) => match items.first() {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            _ => String::new(),
        },
        _ => String::new(),
    })
}

/// What one Sentinel said about the service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The master's address.
    Master(String, u16),
    /// The Sentinel does not monitor the service.
    Unknown,
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

    /// Asks one Sentinel (`index` in URL order) for the master's address.
    pub async fn ask(
        &self,
        index: usize,
        config: &AsyncConnectionConfig,
    ) -> Result<Answer, Failure> {
        let question =
            redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(&self.url.service).clone();
        let reply: Option<(String, u16)> = self
            .sentinels
            .ask(index, &question, config, Failure::from_redis)
            .await
            .map_err(|f| self.sentinel_failure(f))?;
        Ok(match reply {
            Some((host, port)) => Answer::Master(host, port),
            None => Answer::Unknown,
        })
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

    /// Connects to `host:port` and asks its role (`ROLE`'s first element:
    /// `master`, `slave`, `sentinel`).
    pub async fn role_of(
        &self,
        host: &str,
        port: u16,
        config: &AsyncConnectionConfig,
    ) -> Result<(Client, MultiplexedConnection, String), Failure> {
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

    /// The master's address as the first Sentinel to answer names it
    /// (`None`: it does not monitor the service); an error when none answers.
    pub async fn named(&self, config: &AsyncConnectionConfig) -> Result<Option<String>, Failure> {
        let mut asks: FuturesUnordered<_> =
            (0..self.sentinels.len()).map(|i| self.ask(i, config)).collect();
        let mut last = Failure::Connection("no Sentinel listed".to_owned());
        while let Some(answer) = asks.next().await {
            match answer {
                Ok(Answer::Master(host, port)) => return Ok(Some(format!("{host}:{port}"))),
                Ok(Answer::Unknown) => return Ok(None),
                Err(failure) => last = failure,
            }
        }
        Err(last)
    }

    /// Finds the current master: asks every Sentinel at once and tries the
    /// addresses in the order the answers arrive, keeping the first whose
    /// `ROLE` is master. The caller bounds the whole by its deadline.
    pub async fn master(&self, config: &AsyncConnectionConfig) -> Result<Master, Failure> {
        let mut asks: FuturesUnordered<_> = (0..self.sentinels.len())
            .map(|i| async move { (i, self.ask(i, config).await) })
            .collect();
        let mut tried: Vec<String> = Vec::new();
        let mut problems: Vec<String> = Vec::new();
        let mut config_failure: Option<Failure> = None;
        let mut unknown = 0;
        while let Some((i, answer)) = asks.next().await {
            let sentinel = self.sentinels.address(i);
            let (host, port) = match answer {
                Ok(Answer::Master(host, port)) => (host, port),
                Ok(Answer::Unknown) => {
                    unknown += 1;
                    problems
                        .push(format!("Sentinel {sentinel} does not know {:?}", self.service()));
                    continue;
                }
                Err(failure) => {
                    if failure.is_config() && config_failure.is_none() {
                        config_failure = Some(failure.clone());
                    }
                    problems.push(format!("Sentinel {sentinel}: {failure}"));
                    continue;
                }
            };
            let address = format!("{host}:{port}");
            if tried.contains(&address) {
                continue;
            }
            tried.push(address.clone());
            match self.role_of(&host, port, config).await {
                Ok((client, conn, role)) if role == "master" => {
                    return Ok(Master { address, client, conn });
                }
                Ok((_, _, role)) => problems.push(format!(
                    "Sentinel {sentinel} names {address}, whose role is {role:?}, not master \
                     (a failover in progress?)"
                )),
                Err(failure) => {
                    if failure.is_config() && config_failure.is_none() {
                        config_failure = Some(failure.clone());
                    }
                    problems
                        .push(format!("master {address} (from Sentinel {sentinel}): {failure}"));
                }
            }
        }
        let summary = problems.join("; ");
        // Waiting cannot cure a password or ACL the servers refuse, nor a
        // service that no Sentinel that answered monitors.
        if let Some(failure) = config_failure {
            return Err(match failure {
                Failure::Auth(_) => Failure::Auth(summary),
                Failure::NoPerm(_) => Failure::NoPerm(summary),
                Failure::Tls(_) => Failure::Tls(summary),
                _ => Failure::Unfit(summary),
            });
        }
        if unknown > 0 && unknown == problems.len() {
            return Err(Failure::Unfit(format!(
                "no Sentinel monitors the service {:?} (check the name after the hosts)",
                self.service()
            )));
        }
        Err(Failure::Connection(format!("no master found: {summary}")))
    }
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
