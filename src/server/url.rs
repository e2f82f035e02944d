//! A server's URL: parsed and checked, shown without its password
//! ([`redact`]), and the host lists and node URLs of the group kinds.

use std::fmt;

use redis::IntoConnectionInfo;

use super::cluster::ClusterUrl;
use super::sentinel::SentinelUrl;

/// A validated server address: what to connect to and how to name it.
#[derive(Clone)]
pub struct ServerUrl {
    /// The URL as given, password included; never displayed.
    pub(super) secret: String,
    /// `host:port`, `rediss://host:port` or `unix:/path`, plus `/db` when not 0.
    name: String,
    /// A Sentinel group's URL, parsed (`redis+sentinel://`).
    pub(super) sentinel: Option<SentinelUrl>,
    /// A cluster's URL, parsed (`redis+cluster://`).
    pub(super) cluster: Option<ClusterUrl>,
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
            return Ok(ServerUrl {
                secret: raw.to_owned(),
                name,
                sentinel: Some(sentinel),
                cluster: None,
            });
        }
        if raw.starts_with("redis+cluster://") || raw.starts_with("rediss+cluster://") {
            let cluster = ClusterUrl::parse(raw, &shown)?;
            let name = cluster.name();
            return Ok(ServerUrl {
                secret: raw.to_owned(),
                name,
                sentinel: None,
                cluster: Some(cluster),
            });
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
                    "server URL {shown:?} has scheme {other:?}; use redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://"
                ));
            }
        };
        // Let the redis crate check the rest (database number, port range...).
        raw.into_connection_info()
            .map_err(|_| format!("server URL {shown:?} is not a valid Redis URL"))?;
        Ok(ServerUrl { secret: raw.to_owned(), name, sentinel: None, cluster: None })
    }

    /// True for a `redis+cluster://` URL: one member whose vote is the
    /// master of the lock's hash slot.
    pub fn is_cluster(&self) -> bool {
        self.cluster.is_some()
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
        if let Some(cluster) = &self.cluster {
            // Every node's password.
            return Ok(ServerUrl {
                cluster: Some(cluster.with_default_password(password)),
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
        Ok(ServerUrl { secret: url.into(), name: self.name.clone(), sentinel: None, cluster: None })
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

/// `host[:port]`, or `[v6][:port]`, as `host:port` (`default_port` when
/// none is given); `None` when it is not an address. For the host lists of
/// `redis+sentinel://` and `redis+cluster://` URLs.
fn host_port(raw: &str, default_port: u16) -> Option<String> {
    let raw = raw.trim();
    let (host, port) = if let Some(v6) = raw.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (format!("[{host}]"), after.strip_prefix(':'))
    } else {
        match raw.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (raw.to_owned(), None),
        }
    };
    if host.is_empty() || host == "[]" || host.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    let port = match port {
        None => default_port,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
    };
    Some(format!("{host}:{port}"))
}

/// The authority and path of a multi-host URL, given what follows
/// `scheme://` (and any `?query`): `[USERINFO@]HOSTS[/PATH]` as the user
/// info (as written), the comma-separated hosts, and the path after the
/// first `/` (empty when none). For `redis+sentinel://` and
/// `redis+cluster://`.
pub(crate) fn split_authority(rest: &str) -> (Option<String>, &str, &str) {
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    match authority.rfind('@') {
        Some(at) => (Some(authority[..at].to_owned()), &authority[at + 1..], path),
        None => (None, authority, path),
    }
}

/// Each of the comma-separated `hosts` as `host:port` ([`host_port`]);
/// the error names the first that is no address, as a `what` address.
pub(crate) fn host_list(hosts: &str, default_port: u16, what: &str) -> Result<Vec<String>, String> {
    hosts
        .split(',')
        .map(|h| host_port(h, default_port).ok_or_else(|| format!("bad {what} address {h:?}")))
        .collect()
}

/// `password` percent-encoded for the user info of a URL, the way the
/// redis crate decodes it.
pub(crate) fn encode_password(password: &str) -> String {
    let mut encoded = url::Url::parse("redis://placeholder").expect("a constant URL parses");
    let _ = encoded.set_password(Some(password));
    encoded.password().unwrap_or_default().to_owned()
}

/// The URL of the node at `host:port` (a Sentinel group's master, a
/// cluster's node), with the user info as written in the group's URL.
pub(crate) fn node_url(
    scheme: &str,
    userinfo: Option<&str>,
    host: &str,
    port: u16,
    db: i64,
) -> String {
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let auth = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
    format!("{scheme}://{auth}{host}:{port}/{db}")
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
        assert_eq!(redact("redis+cluster://u:pw@h1:1,h2:2"), "redis+cluster://u:***@h1:1,h2:2");
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
            scheme in "(redis|rediss|unix|http|redis\\+cluster|redis\\+sentinel|)",
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
