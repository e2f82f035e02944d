//! A server's URL: parsed and checked, shown without its password
//! ([`redact`], for one URL or a list, whether or not it parses), a list
//! split into its entries ([`split_list`]), and the host lists and node
//! URLs of the group kinds. One reading of a URL serves all of them, so
//! that what a message shows and what is hidden never disagree.

use std::fmt;

use redis::IntoConnectionInfo;

use super::cluster::ClusterUrl;
use super::sentinel::SentinelUrl;

/// The schemes a server URL may have, the longer of two with the same
/// start first.
const SCHEMES: [&str; 7] = [
    "rediss+sentinel",
    "redis+sentinel",
    "rediss+cluster",
    "redis+cluster",
    "rediss",
    "redis",
    "unix",
];

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
        // `redis://a:1 redis://b:2`: a list written with spaces.
        let words: Vec<&str> = raw.split_whitespace().collect();
        if words.iter().filter(|w| w.contains("://")).count() > 1 {
            let words: Vec<String> = words.iter().map(|w| redact(w)).collect();
            return Err(format!(
                "server URL {:?} holds {} URLs: separate servers with commas, not spaces: {}",
                words.join(" "),
                words.len(),
                words.join(",")
            ));
        }
        let shown = redact(raw);
        // `redis//host:6391`, `unix:/tmp/s.sock`: a scheme whose `://` is
        // misspelt (never `redis:6379`, a host named redis).
        let misspelt = SCHEMES.iter().find(|scheme| {
            raw.strip_prefix(**scheme)
                .is_some_and(|rest| rest.starts_with("//") || rest.starts_with(":/"))
        });
        if let Some(scheme) = misspelt.filter(|_| !raw.contains("://")) {
            let rest = raw[scheme.len()..].trim_start_matches(':').trim_start_matches('/');
            let slash = if *scheme == "unix" { "/" } else { "" };
            let fixed = redact(&format!("{scheme}://{slash}{rest}"));
            return Err(format!(
                "server URL {shown:?} misspells the \"://\" after {scheme}; use {fixed}"
            ));
        }
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
        // A password written raw (a base64 one holds `/`) is encoded, so
        // that the URL reads as the user meant it.
        let tidy = tidy(raw);
        let raw = tidy.as_str();
        let url = url::Url::parse(raw)
            .map_err(|e| format!("server URL {shown:?} is not a URL: {e}{}", encoding_hint(raw)))?;
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
        raw.into_connection_info().map_err(|_| {
            format!("server URL {shown:?} is not a valid Redis URL{}", encoding_hint(raw))
        })?;
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

/// `raw` with its user info percent-encoded where a character written raw
/// would end it ([`encode_userinfo`]); as it is when there is nothing to
/// encode.
pub(crate) fn tidy(raw: &str) -> String {
    let p = parts(raw);
    match p.userinfo {
        Some(userinfo) if encode_userinfo(userinfo) != userinfo => {
            let query = p.query.map(|q| format!("?{q}")).unwrap_or_default();
            format!("{}{}@{}{query}", p.head, encode_userinfo(userinfo), p.body)
        }
        _ => raw.to_owned(),
    }
}

/// The query parameters of every URL form redlock reads. A value runs
/// until the next `&NAME=` or `?NAME=` with NAME one of these, or to the
/// end of the URL: a password written raw (`&`, `=`, `?` and all) stays
/// one value, and is hidden whole ([`redact`]).
const PARAMS: [&str; 8] = [
    "db",
    "user",
    "username",
    "pass",
    "password",
    "protocol",
    "sentinel_user",
    "sentinel_password",
];

/// The parameters whose value is a password.
const SECRET_PARAMS: [&str; 3] = ["pass", "password", "sentinel_password"];

/// Hides every password of a server URL or of a comma-separated list of
/// them, however it is spelled and whether or not it parses:
/// `redis://u:pw@h` becomes `redis://u:***@h`, `?pass=pw` becomes
/// `?pass=***`, for each entry of the list ([`split_list`]).
///
/// The rule: the user info runs to the last `@` before the parameters,
/// so a raw `/`, `?`, `#`, `@`, `:` or `,` in a password is inside it; a
/// secret parameter's value runs to the next parameter of a known name
/// (`db`, `user`, `username`, `pass`, `password`, `protocol`,
/// `sentinel_user`, `sentinel_password`) or to the end. What cannot be told
/// apart from the structure, and so must be percent-encoded in a password:
/// a `,` followed by `SCHEME://` (the next entry), and `&NAME=` or
/// `?NAME=` for one of those names (the next parameter).
pub fn redact(raw: &str) -> String {
    split_list(raw).into_iter().map(redact_one).collect::<Vec<_>>().join(",")
}

/// [`redact`] for one entry of a list.
fn redact_one(entry: &str) -> String {
    let p = parts(entry);
    let mut out = p.head.to_owned();
    if let Some(userinfo) = p.userinfo {
        match userinfo.split_once(':') {
            // A user name is shown only when it cannot be part of a
            // password written raw.
            Some((user, _)) if plain_user(user) => out.push_str(&format!("{user}:***@")),
            // `redis://secret@host` is a password alone in the crate's reading.
            _ => out.push_str("***@"),
        }
    }
    out.push_str(p.body);
    if let Some(query) = p.query {
        out.push('?');
        for param in params(query) {
            out.push_str(param.separator);
            out.push_str(param.name);
            match param.value {
                Some(_) if SECRET_PARAMS.contains(&param.name) => out.push_str("=***"),
                Some(value) => {
                    out.push('=');
                    out.push_str(value);
                }
                None => {}
            }
        }
    }
    out
}

/// True for a user name that holds nothing a password written raw does.
fn plain_user(user: &str) -> bool {
    user.chars().all(|c| c.is_ascii_alphanumeric() || "-_.~+%!$*'()".contains(c))
}

/// The entries of a comma-separated list of server URLs, untrimmed.
///
/// A comma ends an entry when `SCHEME://` follows it. Otherwise it stays
/// inside the entry when an `@` comes before the next entry (the comma is
/// in a user info: a password written raw), or when the entry is a
/// `redis+sentinel://` or `redis+cluster://` URL whose host list is still
/// open (no `/`, `?` or `#` after its user info yet); and it ends the
/// entry otherwise (so `redis://a,,redis://b` has an empty entry, and
/// `127.0.0.1:6379,127.0.0.1:6380` two entries without a scheme).
pub fn split_list(raw: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in raw.match_indices(',') {
        if ends_entry(&raw[start..i], &raw[i + 1..]) {
            out.push(&raw[start..i]);
            start = i + 1;
        }
    }
    out.push(&raw[start..]);
    out
}

/// Whether the comma between `entry` (so far) and `after` ends the entry
/// ([`split_list`]).
fn ends_entry(entry: &str, after: &str) -> bool {
    if has_scheme(after) {
        return true;
    }
    let next_entry = after.match_indices(',').find(|(i, _)| has_scheme(&after[i + 1..]));
    let ahead = &after[..next_entry.map_or(after.len(), |(i, _)| i)];
    let (head, rest) = split_head(entry);
    // Still where a user info can be: an authority, before any parameter.
    let userinfo_open = !no_authority(head, rest) && param_starts(rest).is_empty();
    if userinfo_open && ahead.contains('@') {
        return false;
    }
    let p = parts(entry);
    // In a password given as a parameter (`?pass=`, `?sentinel_password=`).
    let in_secret = p.query.is_some_and(|q| {
        params(q).last().is_some_and(|l| l.value.is_some() && SECRET_PARAMS.contains(&l.name))
    });
    let group = p
        .head
        .trim_start()
        .strip_suffix("://")
        .is_some_and(|scheme| scheme.ends_with("+sentinel") || scheme.ends_with("+cluster"));
    let open_hosts = group && p.query.is_none() && !p.body.contains(['/', '#']);
    !(in_secret || open_hosts)
}

/// True when `text` (after blanks) starts with `SCHEME://`.
fn has_scheme(text: &str) -> bool {
    text.trim_start().split_once("://").is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    })
}

/// One entry taken apart: `HEAD` (`scheme://`, or empty), the user info,
/// the body (hosts, path) and the query, by the rule of [`redact`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Parts<'a> {
    /// `scheme://` with any blanks before it, or empty when there is no scheme.
    pub(crate) head: &'a str,
    /// Everything before the last `@` that comes before the parameters;
    /// `None` without an `@`, and for `unix:///path` (no authority).
    pub(crate) userinfo: Option<&'a str>,
    /// Hosts and path: from after the user info to the first `?`.
    pub(crate) body: &'a str,
    /// After that `?`, if any.
    pub(crate) query: Option<&'a str>,
}

/// Takes one entry apart ([`Parts`]).
pub(crate) fn parts(entry: &str) -> Parts<'_> {
    let (head, rest) = split_head(entry);
    let params_at = param_starts(rest).first().map_or(rest.len(), |&(at, _)| at);
    let (userinfo, after) = match rest[..params_at].rfind('@') {
        Some(at) if !no_authority(head, rest) => (Some(&rest[..at]), &rest[at + 1..]),
        _ => (None, rest),
    };
    let (body, query) = match after.find('?') {
        Some(q) => (&after[..q], Some(&after[q + 1..])),
        None => (after, None),
    };
    Parts { head, userinfo, body, query }
}

/// `entry` as `scheme://` (with any blanks before it; empty without a
/// scheme) and the rest.
fn split_head(entry: &str) -> (&str, &str) {
    match entry.find("://") {
        Some(i) if has_scheme(entry) => entry.split_at(i + 3),
        _ => ("", entry),
    }
}

/// True for `unix:///path`, which has no authority: an `@` there is in
/// the path.
fn no_authority(head: &str, rest: &str) -> bool {
    head.contains("unix") && rest.starts_with('/')
}

/// Where each `?NAME=` or `&NAME=` with NAME in [`PARAMS`] starts in
/// `text` (the index of its `?` or `&`), and its NAME.
fn param_starts(text: &str) -> Vec<(usize, &'static str)> {
    text.match_indices(['?', '&'])
        .filter_map(|(i, _)| {
            let rest = &text[i + 1..];
            PARAMS
                .iter()
                .find(|name| rest.strip_prefix(**name).is_some_and(|r| r.starts_with('=')))
                .map(|name| (i, *name))
        })
        .collect()
}

/// One parameter of a query, as written.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Param<'a> {
    /// `&` or `?` before it; empty for the first.
    pub(crate) separator: &'a str,
    /// Its name.
    pub(crate) name: &'a str,
    /// What follows `=`, still encoded; `None` without `=`.
    pub(crate) value: Option<&'a str>,
}

/// The parameters of `query` (what follows the first `?`): the first, and
/// one more at each `&NAME=` or `?NAME=` of a known NAME ([`PARAMS`]); any
/// other `&` or `?` is part of a value.
pub(crate) fn params(query: &str) -> Vec<Param<'_>> {
    let mut bounds: Vec<usize> = param_starts(query).into_iter().map(|(at, _)| at).collect();
    bounds.retain(|&at| at > 0);
    let mut out = Vec::new();
    let mut start = 0;
    for end in bounds.into_iter().chain(std::iter::once(query.len())) {
        let (separator, text) =
            if start == 0 { ("", &query[..end]) } else { query[start..end].split_at(1) };
        let (name, value) = match text.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (text, None),
        };
        out.push(Param { separator, name, value });
        start = end;
    }
    out
}

/// A parameter's value decoded as a form field (`+` is a space, `%XX` a
/// byte), as the redis crate decodes a `unix://` URL's `pass=`.
pub(crate) fn decode_value(value: &str) -> String {
    let bytes = value.as_bytes();
    let hex = |b: u8| char::from(b).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (
            bytes[i],
            bytes.get(i + 1).and_then(|&b| hex(b)),
            bytes.get(i + 2).and_then(|&b| hex(b)),
        ) {
            (b'+', _, _) => out.push(b' '),
            (b'%', Some(high), Some(low)) => {
                out.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
                i += 2;
            }
            (b, _, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The user info of a URL with the characters that would end it (or the
/// URL's authority) percent-encoded, so that a password written raw
/// (`pa/ss?w#rd@`) reaches the server as written. A `%` is left as it is:
/// the user info may be encoded already.
pub(crate) fn encode_userinfo(userinfo: &str) -> String {
    let mut out = String::with_capacity(userinfo.len());
    for c in userinfo.chars() {
        match c {
            '/' | '?' | '#' | '@' | '[' | ']' | ' ' | '"' | '<' | '>' | '\\' | '^' | '`' | '{'
            | '|' | '}' => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The hint for a URL that does not parse while its user info holds a
/// character that must be percent-encoded there; empty otherwise.
fn encoding_hint(raw: &str) -> &'static str {
    match parts(raw).userinfo {
        Some(u) if u.contains(['/', '?', '#', '@']) => {
            " (a password with / ? # or @ must be percent-encoded in a URL: %2F %3F %23 %40; \
             or give it with --password-file)"
        }
        _ => "",
    }
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

/// A multi-host URL (`redis+sentinel://`, `redis+cluster://`) taken
/// apart by the rule of [`parts`].
pub(crate) struct GroupParts<'a> {
    /// The scheme, without `://`.
    pub(crate) scheme: &'a str,
    /// The user info, percent-encoded where written raw ([`encode_userinfo`]).
    pub(crate) userinfo: Option<String>,
    /// The comma-separated hosts.
    pub(crate) hosts: &'a str,
    /// The path after the first `/` of the body (empty when none).
    pub(crate) path: &'a str,
    /// The query, if any.
    pub(crate) query: Option<&'a str>,
}

/// Takes `raw`, a multi-host URL, apart; `None` without a scheme.
pub(crate) fn group_parts(raw: &str) -> Option<GroupParts<'_>> {
    let p = parts(raw);
    let scheme = p.head.trim_start().strip_suffix("://")?;
    let (hosts, path) = match p.body.find('/') {
        Some(i) => (&p.body[..i], &p.body[i + 1..]),
        None => (p.body, ""),
    };
    Some(GroupParts {
        scheme,
        userinfo: p.userinfo.map(encode_userinfo),
        hosts,
        path,
        query: p.query,
    })
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
    fn a_misspelt_scheme_and_a_list_with_spaces_get_the_fix() {
        let err = |raw: &str| ServerUrl::parse(raw).err().unwrap_or_default();
        let m = err("redis//host:6391");
        assert!(m.ends_with("misspells the \"://\" after redis; use redis://host:6391"), "{m}");
        assert!(err("rediss:/h:1").ends_with("use rediss://h:1"));
        assert!(err("unix:/tmp/r.sock").ends_with("use unix:///tmp/r.sock"));
        assert!(err("redis//:pw@h").ends_with("use redis://:***@h"));
        // A host named redis is not a scheme.
        assert!(err("redis:6379").contains("has no scheme; use redis://redis:6379"));
        let m = err("redis://a:1 redis://:pw@b:2");
        assert!(
            m.ends_with("holds 2 URLs: separate servers with commas, not spaces: redis://a:1,redis://:***@b:2"),
            "{m}"
        );
        assert!(!m.contains("pw"), "{m}");
    }

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
    fn redact_takes_lists_and_passwords_written_raw() {
        assert_eq!(
            redact("redis://:A@h1,redis://:B@h2, redis://u:C@h3"),
            "redis://:***@h1,redis://:***@h2, redis://u:***@h3"
        );
        assert_eq!(redact("redis://u:SEC/RET@127.0.0.1:7101"), "redis://u:***@127.0.0.1:7101");
        assert_eq!(redact("redis://u:a,b@h1,redis://h2"), "redis://u:***@h1,redis://h2");
        assert_eq!(
            redact("redis+sentinel://h1,h2/m?sentinel_password=sp,redis://:B@h2"),
            "redis+sentinel://h1,h2/m?sentinel_password=***,redis://:***@h2"
        );
        assert_eq!(
            redact("redis+sentinel://h1/m?sentinel_password=ab&cd&sentinel_user=u"),
            "redis+sentinel://h1/m?sentinel_password=***&sentinel_user=u"
        );
        // A user name that could hold part of a password is hidden too.
        assert_eq!(redact("redis://a/b:c@h"), "redis://***@h");
        assert_eq!(redact("u:pw@127.0.0.1:6379"), "u:***@127.0.0.1:6379");
        assert_eq!(redact("unix:///run/r@1.sock?pass=x"), "unix:///run/r@1.sock?pass=***");
    }

    #[test]
    fn lists_split_at_entries_not_at_every_comma() {
        assert_eq!(split_list("redis://a,,redis://b"), ["redis://a", "", "redis://b"]);
        assert_eq!(split_list("127.0.0.1:1,127.0.0.1:2"), ["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(
            split_list("redis+sentinel://u:p,q@h1,h2/s?sentinel_password=x,y,redis://b"),
            ["redis+sentinel://u:p,q@h1,h2/s?sentinel_password=x,y", "redis://b"]
        );
        assert_eq!(
            split_list("redis+cluster://h1,h2,redis://a"),
            ["redis+cluster://h1,h2", "redis://a"]
        );
    }

    #[test]
    fn passwords_written_raw_are_encoded_and_sentinel_values_run_to_a_known_name() {
        let u = ServerUrl::parse("redis://u:SEC/RET?x#y@127.0.0.1:7101/2").unwrap();
        assert_eq!(u.name(), "127.0.0.1:7101/2");
        assert_eq!(u.secret, "redis://u:SEC%2FRET%3Fx%23y@127.0.0.1:7101/2");
        let e = ServerUrl::parse("redis://u:a/b@127.0.0.1:99999").unwrap_err();
        assert!(e.contains("invalid port") && !e.contains("a/b"), "{e}");
        assert_eq!(decode_value("a+b%2F%zz%4"), "a b/%zz%4");
        let q = "sentinel_password=a&b?c&sentinel_user=u&db=1";
        let names: Vec<(&str, Option<&str>)> =
            params(q).iter().map(|p| (p.name, p.value)).collect();
        assert_eq!(
            names,
            [("sentinel_password", Some("a&b?c")), ("sentinel_user", Some("u")), ("db", Some("1"))]
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
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Every form of server URL, with `{u}` for the user, `{p}` for a
    /// password and `{q}` for a second one; `{r}` is `{p}` without `:`
    /// (in a user info without one, the part before a `:` is the user
    /// name, as the redis crate reads it).
    const FORMS: [&str; 9] = [
        "redis://{u}:{p}@127.0.0.1:6379/0",
        "rediss://:{p}@h.example:6380",
        "redis://{r}@h.example",
        "unix:///run/r.sock?db=1&pass={p}",
        "unix:///run/r.sock?pass={p}&db=2",
        "redis+sentinel://{u}:{p}@h1:26379,h2/svc/1?sentinel_user=s&sentinel_password={q}",
        "rediss+sentinel://h1,h2:1/svc?sentinel_password={q}",
        "redis+cluster://{u}:{p}@h1:7000,h2:7001",
        "{u}:x{p}@127.0.0.1:6379",
    ];

    /// A password: chunks (`Q` and three digits and a capital, which no
    /// other text of a URL or a message holds) between the characters that
    /// end a URL's parts. Two of them at most in a row, and no lower-case
    /// letter, so never `,SCHEME://` nor `&NAME=`: what [`redact`] says
    /// must be percent-encoded.
    fn password() -> impl Strategy<Value = (String, Vec<String>)> {
        let delims = "[/#?@:,&=]{0,2}";
        prop::collection::vec(("Q[0-9]{3}[A-Z]", delims), 1..4).prop_flat_map(move |pieces| {
            (delims, Just(pieces)).prop_map(|(lead, pieces)| {
                let mut text = lead;
                let mut chunks = Vec::new();
                for (chunk, delim) in pieces {
                    text.push_str(&chunk);
                    text.push_str(&delim);
                    chunks.push(chunk);
                }
                (text, chunks)
            })
        })
    }

    proptest! {
        /// No part of any password survives: not the redaction of any
        /// form or any list of them, nor a message or a name of any
        /// entry; and the list splits into the entries it was made of.
        #[test]
        fn no_password_survives_any_form_or_list(
            forms in prop::collection::vec(0..FORMS.len(), 1..4),
            (p, p_chunks) in password(),
            (q, q_chunks) in password(),
            user in "[a-z]{0,5}",
            spaced in any::<bool>(),
        ) {
            let entries: Vec<String> = forms
                .iter()
                .map(|&f| {
                    FORMS[f]
                        .replace("{u}", &user)
                        .replace("{p}", &p)
                        .replace("{q}", &q)
                        .replace("{r}", &p.replace(':', ""))
                })
                .collect();
            let list = entries.join(if spaced { ", " } else { "," });
            let chunks: Vec<&String> = p_chunks.iter().chain(&q_chunks).collect();
            let shown = redact(&list);
            for chunk in &chunks {
                prop_assert!(!shown.contains(chunk.as_str()), "{list} -> {shown}");
            }
            let split = split_list(&list);
            // A scheme-less entry after another is read as part of it
            // (its `@` is ahead of the comma): one entry, still without a
            // password shown.
            if !forms[1..].contains(&(FORMS.len() - 1)) {
                prop_assert_eq!(split.len(), entries.len(), "{:?}", split);
            }
            for entry in split {
                let said = match ServerUrl::parse(entry.trim()) {
                    Ok(url) => url.name().to_owned(),
                    Err(message) => message,
                };
                for chunk in &chunks {
                    prop_assert!(!said.contains(chunk.as_str()), "{entry}: {said}");
                }
            }
        }

        #[test]
        fn arbitrary_text_never_panics(raw in "\\PC{0,80}") {
            let _ = ServerUrl::parse(&raw);
            let _ = redact(&raw);
            let _ = split_list(&raw);
            let _ = decode_value(&raw);
        }
    }
}
