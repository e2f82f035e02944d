//! Redis Cluster as one member of the quorum: a `redis+cluster://` URL
//! names some nodes of a cluster (seeds); the member's vote is the master
//! that owns the lock's hash slot ([`key_slot`]).
//!
//! `redis+cluster://[user:pass@]h1:6379,h2:6379` (or `rediss+cluster://`
//! for TLS to every node). The user and password are every node's, as for
//! a plain server (`--password-file`/`REDLOCK_PASSWORD` fill in a missing
//! one); a cluster has database 0 only.
//!
//! Resolution, each time the server layer opens a connection for a slot
//! (the first call, every call after a failure, and once a node timeout
//! has passed since the owner was last confirmed): every seed is asked
//! `CLUSTER SLOTS` at once, and the slot's master is the node more than
//! half of the LISTED seeds name ([`Cluster::owner_named`]); two seeds
//! that share no node ID are of two clusters, and fail the member at once.
//! redlock connects to that master and to no other node for that
//! connection. No slot map is kept between resolutions: each is asked
//! afresh, so a redirect has no map to drop.
//!
//! The server keeps one connection, to the master of the slot of its calls:
//! a redlock process works on one lock, whose keys share one slot, so it
//! stays on one master; a call for a slot of another master moves it there
//! (one more resolution), and calls that name no key (`doctor`'s `PING`,
//! `INFO`) use whichever master it is on.
//!
//! # Why one slot per lock
//! Every key of one lock (the lock key, fence, queue, readers, places,
//! history) carries the same hash tag (`redlock:{KEY}...`, see
//! [`crate::lock::KeyLayout`]), so `key_slot(layout.lock_key(key))` names
//! the one node that must run each of the lock's scripts. With
//! `--raw-key` the key is the user's: its companions are put in its slot
//! by a hash tag, and the few keys for which that cannot work are refused
//! before any server is asked ([`crate::lock::KeyLayout::one_slot`]).
//!
//! # The safety argument routing keeps
//! - A cluster counts as ONE member of the quorum, however many masters it
//!   has: the vote is the master that owns the lock's slot.
//! - A failover inside the cluster can lose a fresh lock, because Redis
//!   replicates asynchronously: the promoted replica may not have the key.
//!   That is the cost of a plain server restarting without persistence,
//!   but the restart check cannot see it (the promoted replica has been up
//!   for long), and unlike a Sentinel group's ([`crate::server::sentinel`])
//!   no `WAIT` confirms a cluster's vote. The assumption that keeps the
//!   Redlock rule is the operator's: `cluster-node-timeout` above the
//!   longest TTL plus 1 s, so that no lock the old master held is still
//!   valid when its replica takes over; a shorter one breaks it.
//! - A master cut off from the rest of the cluster keeps accepting writes
//!   until `cluster-node-timeout` passes, while another node is promoted
//!   for its slots. That is a second vote of the same member only if
//!   redlock talks to two masters for one slot within one lock's life; a
//!   `MOVED`/`ASK`/`CLUSTERDOWN`/`TRYAGAIN` reply therefore counts as a
//!   broken connection ([`redirect`]; never a vote, never followed), and a
//!   connection stays bound to the node it was made for, with the slot
//!   owner re-confirmed by a majority of the seeds at most once per node
//!   timeout (the cut-off master names itself; the others, once they
//!   promoted its replica, name that one), as a Sentinel group's master is.
//! - A slot being migrated (`redis-cli --cluster reshard`) answers `ASK` or
//!   `TRYAGAIN` on its new node until the migration ends: redlock never
//!   sends `ASKING`, so it never writes to a node that does not own the
//!   slot yet; the lock's keys travel with their TTLs (`MIGRATE`).

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError, Value};

use crate::server::kept::{Kept, connect_failure};
use crate::server::{Failure, Tls, encode_password, group_parts, host_list, node_url, open_client};

/// The default Redis port, for seeds given without one.
pub const DEFAULT_PORT: u16 = 6379;

/// The number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The hash slot of `key`, as Redis Cluster computes it: CRC16 (XMODEM) of
/// the hash tag (the part between the first `{` and the next `}`, when that
/// part is not empty) or else of the whole key, modulo 16,384.
/// Source: the Redis Cluster specification, "Hash tags".
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The part of `key` that is hashed.
fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// CRC16/XMODEM: polynomial 0x1021, initial value 0, no reflection.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// A parsed `redis+cluster://` URL.
#[derive(Clone)]
pub struct ClusterUrl {
    /// TLS to every node (`rediss+cluster://`).
    pub tls: bool,
    /// The seeds, `host:port` (IPv6 hosts in brackets).
    pub seeds: Vec<String>,
    /// The user info as written in the URL (percent-encoded), if any.
    userinfo: Option<String>,
}

impl fmt::Debug for ClusterUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl ClusterUrl {
    /// Parses `redis+cluster://[user:pass@]h1[:p1],h2[:p2][/0]`; `shown` is
    /// the URL with its password hidden, for messages.
    pub fn parse(raw: &str, shown: &str) -> Result<ClusterUrl, String> {
        let bad = |why: &str| format!("server URL {shown:?}: {why}");
        let parts = group_parts(raw).ok_or_else(|| bad("no scheme"))?;
        let tls = match parts.scheme {
            "redis+cluster" => false,
            "rediss+cluster" => true,
            _ => return Err(bad("not a redis+cluster:// URL")),
        };
        if parts.query.is_some() || parts.path.contains('#') || parts.hosts.contains('#') {
            return Err(bad(
                "a cluster URL takes no parameters; the form is redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]",
            ));
        }
        let (userinfo, hosts, path) = (parts.userinfo, parts.hosts, parts.path);
        if !matches!(path, "" | "0") {
            return Err(bad(&format!(
                "database {path:?}: a cluster has database 0 only; drop the path"
            )));
        }
        if hosts.trim().is_empty() {
            return Err(bad(
                "no node; the form is redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]",
            ));
        }
        let seeds = host_list(hosts, DEFAULT_PORT, "node").map_err(|why| bad(&why))?;
        let url = ClusterUrl { tls, seeds, userinfo };
        // The nodes' URL must be one the redis crate reads (user info);
        // checked here, with a placeholder address.
        redis::IntoConnectionInfo::into_connection_info(url.node_url("127.0.0.1", 1).as_str())
            .map_err(|_| bad("the user or password is not valid"))?;
        Ok(url)
    }

    /// The display name: `cluster:h1:6379,h2:6379` (`rediss+cluster:` with
    /// TLS), never a password.
    pub fn name(&self) -> String {
        let tls = if self.tls { "rediss+" } else { "" };
        format!("{tls}cluster:{}", self.seeds.join(","))
    }

    /// True when the URL carries a password of its own.
    pub fn has_password(&self) -> bool {
        self.userinfo.as_deref().is_some_and(|u| !u.is_empty())
    }

    /// This URL with `password` when it gives none.
    pub fn with_default_password(&self, password: &str) -> ClusterUrl {
        if self.has_password() {
            return self.clone();
        }
        ClusterUrl { userinfo: Some(format!(":{}", encode_password(password))), ..self.clone() }
    }

    /// The URL of the node at `host:port`, with the URL's credentials.
    fn node_url(&self, host: &str, port: u16) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        node_url(scheme, self.userinfo.as_deref(), host, port, 0)
    }
}

/// Which master owns which slots, as one node's `CLUSTER SLOTS` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotMap {
    /// Slot ranges (first, last, inclusive) and their master's `host:port`.
    pub ranges: Vec<(u16, u16, String)>,
    /// How many replicas serve each range, in the order of `ranges`.
    pub replicas: Vec<usize>,
    /// The node IDs the map names (masters and replicas), sorted; empty
    /// from a server too old to give them (Redis before 4.0).
    pub ids: Vec<String>,
}

impl SlotMap {
    /// The master of `slot`, if any node serves it.
    pub fn owner(&self, slot: u16) -> Option<&str> {
        self.ranges
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, owner)| owner.as_str())
    }

    /// How many slots have a master without a replica (a failure of that
    /// master leaves them unserved until it returns).
    pub fn unreplicated(&self) -> usize {
        self.ranges
            .iter()
            .zip(&self.replicas)
            .filter(|(_, n)| **n == 0)
            .map(|((first, last, _), _)| usize::from(last - first) + 1)
            .sum()
    }

    /// How many slots have a master.
    pub fn covered(&self) -> usize {
        self.ranges.iter().map(|(first, last, _)| usize::from(last - first) + 1).sum()
    }

    /// Whether this map and `other` can be of one cluster: they share a
    /// node ID (or one of them names none, so it cannot tell).
    pub fn overlaps(&self, other: &SlotMap) -> bool {
        self.ids.is_empty()
            || other.ids.is_empty()
            || self.ids.iter().any(|id| other.ids.binary_search(id).is_ok())
    }

    /// The distinct masters, in slot order.
    pub fn masters(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (_, _, owner) in &self.ranges {
            if !out.contains(&owner.as_str()) {
                out.push(owner);
            }
        }
        out
    }

    /// Reads a `CLUSTER SLOTS` reply; a node announced without an address
    /// (an empty host, or `?`) is at `seed_host`, the host that answered.
    pub(crate) fn parse(reply: &Value, seed_host: &str) -> Result<SlotMap, String> {
        let bad = || "unexpected CLUSTER SLOTS reply".to_owned();
        let Value::Array(entries) = reply else { return Err(bad()) };
        let mut ranges = Vec::with_capacity(entries.len());
        let mut ids: Vec<String> = Vec::new();
        for entry in entries {
            let Value::Array(fields) = entry else { return Err(bad()) };
            let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                return Err(bad());
            };
            let host = match master.first() {
                Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(Value::SimpleString(s)) => s.clone(),
                _ => return Err(bad()),
            };
            let Some(Value::Int(port)) = master.get(1) else { return Err(bad()) };
            for node in &fields[2..] {
                if let Value::Array(node) = node
                    && let Some(Value::BulkString(id)) = node.get(2)
                {
                    ids.push(String::from_utf8_lossy(id).into_owned());
                }
            }
            let host = if host.is_empty() || host == "?" { seed_host.to_owned() } else { host };
            let host = if host.contains(':') { format!("[{host}]") } else { host };
            let (first, last, port) = (
                u16::try_from(*first).map_err(|_| bad())?,
                u16::try_from(*last).map_err(|_| bad())?,
                u16::try_from(*port).map_err(|_| bad())?,
            );
            ranges.push(((first, last, format!("{host}:{port}")), fields.len() - 3));
        }
        ranges.sort();
        ids.sort();
        ids.dedup();
        let (ranges, replicas) = ranges.into_iter().unzip();
        Ok(SlotMap { ranges, replicas, ids })
    }
}

/// The words of a reply that says the node does not serve the slot (now):
/// `MOVED`, `ASK`, `TRYAGAIN` (a migration), `CLUSTERDOWN`; `None` for any
/// other error. Through a `redis+cluster://` server it counts as a broken
/// connection, never as a vote, and is never followed (module doc).
pub fn redirect(e: &RedisError) -> Option<String> {
    let text = e.to_string();
    let redirected = matches!(e.code(), Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN"))
        || ["Moved:", "Ask:", "TryAgain:", "ClusterDown:"].iter().any(|t| text.contains(t));
    redirected.then(|| {
        let code = e.code().unwrap_or("redirect");
        let said = match e.detail().filter(|d| !d.is_empty()) {
            Some(detail) => format!("{code} {detail}"),
            None => code.to_owned(),
        };
        format!(
            "{said}: the lock's slot is not served there now (a migration or a failover); \
             not counted, the cluster is asked again"
        )
    })
}

/// A cluster, ready to resolve the master of a slot.
pub struct Cluster {
    url: ClusterUrl,
    tls: Tls,
    /// The node timeout.
    timeout: Duration,
    /// The seeds, in URL order.
    seeds: Kept,
}

/// The master of a slot, with a connection to it.
pub struct Owner {
    /// `host:port`.
    pub address: String,
    /// A client for it (pub/sub connections).
    pub client: Client,
    /// The connection.
    pub conn: MultiplexedConnection,
}

impl Cluster {
    /// Prepares clients for the seeds; nothing is connected yet.
    /// `timeout`: the node timeout, which bounds each connect.
    pub fn new(url: ClusterUrl, tls: &Tls, timeout: Duration) -> Result<Cluster, String> {
        let name = url.name();
        let seeds = url
            .seeds
            .iter()
            .map(|address| {
                let (host, port) = split_address(address)
                    .ok_or_else(|| format!("{name}: bad node address {address:?}"))?;
                open_client(&url.node_url(host, port), tls)
                    .map(|client| (address.clone(), client))
                    .map_err(|e| format!("{name}: {address}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let over_tls = url.tls.then_some(timeout);
        Ok(Cluster { url, tls: tls.clone(), timeout, seeds: Kept::new(seeds, over_tls) })
    }

    /// The seeds' addresses.
    pub fn seeds(&self) -> impl Iterator<Item = &str> {
        self.seeds.addresses()
    }

    /// A client for the node at `address` (`host:port`).
    pub fn client(&self, address: &str) -> Result<Client, Failure> {
        let (host, port) = split_address(address)
            .ok_or_else(|| Failure::Reply(format!("not a node address: {address}")))?;
        open_client(&self.url.node_url(host, port), &self.tls).map_err(Failure::Reply)
    }

    /// Runs `command` on seed `index` (its kept connection, or a new one).
    pub async fn ask<T: redis::FromRedisValue>(
        &self,
        index: usize,
        command: &redis::Cmd,
        config: &AsyncConnectionConfig,
    ) -> Result<T, Failure> {
        self.seeds.ask(index, command, config, seed_failure).await
    }

    /// Seed `index`'s slot map.
    pub async fn slots(
        &self,
        index: usize,
        config: &AsyncConnectionConfig,
    ) -> Result<SlotMap, Failure> {
        let ask = redis::cmd("CLUSTER").arg("SLOTS").clone();
        let reply: Value = self.ask(index, &ask, config).await?;
        let host = split_address(self.seeds.address(index)).map_or("", |(host, _)| host);
        SlotMap::parse(&reply, host).map_err(Failure::Reply)
    }

    /// The master of `slot` as more than half of the LISTED seeds name it,
    /// asking all at once and ending as soon as one address has that many
    /// or none can. An error when no majority agrees (a failover or a
    /// migration on its way, seeds cut off), and at once when two seeds
    /// that answered share no node ID: they are of two clusters, which
    /// waiting cannot cure. The caller bounds the whole by its deadline.
    ///
    /// Why a majority: two processes that hear different seeds (one seed
    /// down for one, another for the other) must never take the slot's
    /// master from two clusters, nor, in one cluster, from a cut-off master
    /// that still names itself and the nodes that replaced it. Any two
    /// majorities of one list share a seed, and a seed names one master
    /// for a slot at a time. With no majority answering, the member has no
    /// vote: list three seeds or more, so that one may be down.
    pub async fn owner_named(
        &self,
        slot: u16,
        config: &AsyncConnectionConfig,
    ) -> Result<String, Failure> {
        let listed = self.seeds.len();
        let need = listed / 2 + 1;
        let mut asks: FuturesUnordered<_> =
            (0..listed).map(|i| async move { (i, self.slots(i, config).await) }).collect();
        let mut pending = listed;
        let mut maps: Vec<(&str, SlotMap)> = Vec::new();
        // Each master named for the slot, and by how many seeds.
        let mut votes: Vec<(String, usize)> = Vec::new();
        let mut problems: Vec<String> = Vec::new();
        let mut config_failure: Option<(&str, Failure)> = None;
        while let Some((i, answer)) = asks.next().await {
            pending -= 1;
            let seed = self.seeds.address(i);
            match answer {
                Ok(map) => {
                    if let Some((other, _)) = maps.iter().find(|(_, m)| !m.overlaps(&map)) {
                        return Err(Failure::Unfit(format!(
                            "seeds {other} and {seed} are in different clusters (no node ID in \
                             common): list nodes of one cluster only"
                        )));
                    }
                    match map.owner(slot) {
                        Some(owner) => match votes.iter_mut().find(|(o, _)| o == owner) {
                            Some((_, n)) => *n += 1,
                            None => votes.push((owner.to_owned(), 1)),
                        },
                        None => problems.push(format!("{seed}: no master serves slot {slot}")),
                    }
                    maps.push((seed, map));
                    if let Some((owner, _)) = votes.iter().find(|(_, n)| *n >= need) {
                        return Ok(owner.clone());
                    }
                }
                Err(failure) => {
                    if failure.is_config() && config_failure.is_none() {
                        config_failure = Some((seed, failure.clone()));
                    }
                    problems.push(format!("{seed}: {failure}"));
                }
            }
            if votes.iter().map(|(_, n)| *n).max().unwrap_or(0) + pending < need {
                break;
            }
        }
        // Waiting cannot cure a password, an ACL or a node that is not in
        // cluster mode: the first such failure, with the seed that said it.
        if let Some((seed, failure)) = config_failure {
            return Err(match failure {
                Failure::Auth(why) => Failure::Auth(format!("{seed}: {why}")),
                Failure::NoPerm(why) => Failure::NoPerm(format!("{seed}: {why}")),
                Failure::Tls(why) => Failure::Tls(format!("{seed}: {why}")),
                Failure::Unfit(why) => Failure::Unfit(format!("{seed}: {why}")),
                other => Failure::Unfit(format!("{seed}: {other}")),
            });
        }
        let named: Vec<String> =
            votes.iter().map(|(o, n)| format!("{o} by {n} of {listed}")).collect();
        let said = if named.is_empty() {
            format!("no slot map from a majority ({need} of {listed} seeds)")
        } else {
            format!(
                "the master of slot {slot} is named {}: more than half of the listed seeds \
                 must name the same one",
                named.join(", ")
            )
        };
        Err(Failure::Connection(if problems.is_empty() {
            said
        } else {
            format!("{said}; {}", problems.join("; "))
        }))
    }

    /// Finds the master of `slot` and connects to it.
    pub async fn owner(&self, slot: u16, config: &AsyncConnectionConfig) -> Result<Owner, Failure> {
        let address = self.owner_named(slot, config).await?;
        let client = self.client(&address)?;
        let tls = self.url.tls.then_some(self.timeout);
        let conn =
            client.get_multiplexed_async_connection_with_config(config).await.map_err(|e| {
                if let Some(failure) = connect_failure(&e, tls) {
                    return failure;
                }
                match Failure::from_redis(&e) {
                    Failure::Connection(why) => {
                        Failure::Connection(format!("master {address} of slot {slot}: {why}"))
                    }
                    Failure::Refused => Failure::Connection(format!(
                        "master {address} of slot {slot}: connection refused"
                    )),
                    other => other,
                }
            })?;
        Ok(Owner { address, client, conn })
    }
}

/// A seed's failure; a node without cluster mode says so in words that
/// tell what to do.
fn seed_failure(e: &RedisError) -> Failure {
    if e.to_string().contains("cluster support disabled") {
        return Failure::Unfit(
            "not a cluster node (cluster support disabled): use redis:// for a single server"
                .to_owned(),
        );
    }
    match Failure::from_redis(e) {
        Failure::NoPerm(why) if why.contains("cluster") => Failure::NoPerm(format!(
            "{why} (redlock reads the slot map with CLUSTER SLOTS: grant +cluster|slots)"
        )),
        other => other,
    }
}

/// `host:port` as its host (IPv6 in brackets) and port.
fn split_address(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    Some((host, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<ClusterUrl, String> {
        ClusterUrl::parse(raw, &crate::server::redact(raw))
    }

    #[test]
    fn parses_nodes_and_credentials() {
        let u = parse("redis+cluster://u:p%40ss@h1,h2:7001,[::1]:7002/0").unwrap();
        assert_eq!(u.seeds, ["h1:6379", "h2:7001", "[::1]:7002"]);
        assert_eq!(u.name(), "cluster:h1:6379,h2:7001,[::1]:7002");
        assert_eq!(u.node_url("10.0.0.1", 7000), "redis://u:p%40ss@10.0.0.1:7000/0");
        assert_eq!(u.node_url("[::1]", 7002), "redis://u:p%40ss@[::1]:7002/0");
        let u = parse("rediss+cluster://h1").unwrap();
        assert!(u.tls && u.name() == "rediss+cluster:h1:6379");
        assert_eq!(u.with_default_password("p w").node_url("h", 1), "rediss://:p%20w@h:1/0");
        let own = parse("redis+cluster://:mine@h1").unwrap().with_default_password("other");
        assert_eq!(own.node_url("h", 1), "redis://:mine@h:1/0");
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        for (raw, expect) in [
            ("redis+cluster://:secret@", "no node"),
            ("redis+cluster://:secret@h1:0", "bad node address"),
            ("redis+cluster://:secret@h1,,h2", "bad node address"),
            ("redis+cluster://:secret@h1/1", "database 0 only"),
            ("redis+cluster://:secret@h1?password=x", "no parameters"),
        ] {
            let e = parse(raw).unwrap_err();
            assert!(e.contains(expect) && !e.contains("secret"), "{raw}: {e}");
        }
    }

    #[test]
    fn slot_maps_name_each_slots_master() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(10923), Value::Int(16383), node("", 7001)]),
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
                node("10.0.0.2", 7003),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(10922), node("::1", 7002)]),
        ]);
        let map = SlotMap::parse(&reply, "seed").unwrap();
        assert_eq!(map.owner(0), Some("10.0.0.1:7000"));
        // A node announced without an address is where the seed is.
        assert_eq!(map.owner(16383), Some("seed:7001"));
        assert_eq!(map.owner(5461), Some("[::1]:7002"));
        assert_eq!(map.masters(), ["10.0.0.1:7000", "[::1]:7002", "seed:7001"]);
        assert_eq!(map.covered(), 16384);
        assert_eq!(map.unreplicated(), 16384 - 5461);
        assert_eq!(map.ids, ["id"]);
        let other = SlotMap { ids: vec!["other".into()], ..map.clone() };
        assert!(!map.overlaps(&other) && map.overlaps(&map));
        assert!(map.overlaps(&SlotMap::default()), "no IDs: cannot tell");
        assert!(SlotMap::parse(&Value::Int(1), "seed").is_err());
        assert_eq!(SlotMap::parse(&Value::Array(vec![]), "seed").unwrap().owner(0), None);
    }

    #[test]
    fn crc16_is_xmodem() {
        // The check value of CRC-16/XMODEM.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_match_cluster_keyslot() {
        // Each expected value is what `CLUSTER KEYSLOT` answered on Redis 7.
        for (key, slot) in [
            ("foo", 12182),
            ("bar", 5061),
            ("", 0),
            ("{user1000}.following", 3443),
            ("{}x", 10595),
            ("a{}{b}", 15033),
            ("redlock:{nightly}", 4416),
            ("redlock:{nightly}:fence", 4416),
            ("x{y", 2740),
            ("{{a}}", 10276),
            ("123456789", 12739),
        ] {
            assert_eq!(key_slot(key.as_bytes()), slot, "{key:?}");
        }
    }
}
