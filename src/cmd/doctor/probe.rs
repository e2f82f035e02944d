//! What doctor asks each server (PINGs, TIME, INFO, CONFIG GET, a
//! SUBSCRIBE), into a [`Probe`]; and the command path the status round of
//! the probe key took there ([`path`]).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;

use super::PROBE_KEY;
use crate::lock::ServerView;
use crate::server::{Failure, Op, Server, ServerError};

/// PINGs per server for the round-trip median.
const PINGS: usize = 5;

/// What one reachable server told us.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Probe {
    /// Display name.
    pub server: String,
    /// Median PING round trip.
    pub rtt: Duration,
    /// `redis_version` (on Valkey, the Redis version it is compatible with).
    pub version: String,
    /// `valkey_version`, on Valkey.
    pub valkey_version: Option<String>,
    /// `role` (master / slave).
    pub role: String,
    /// `run_id`: the same on two URLs means the same server.
    pub run_id: String,
    /// `uptime_in_seconds`: how long ago it started.
    pub uptime: Option<Duration>,
    /// Server clock minus ours, compensated by half the round trip, in ms.
    pub clock_offset_ms: f64,
    /// Half the round trip of the `TIME` call: how far off the offset may be.
    pub clock_uncertainty: Duration,
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory_policy`.
    pub policy: String,
    /// `aof_enabled`.
    pub appendonly: bool,
    /// `appendfsync`, when CONFIG GET is allowed.
    pub appendfsync: Option<String>,
    /// Why it may not have kept every write since it started, as `acquire`
    /// judges it ([`crate::server::unkept_writes`]); `None` when it did.
    pub unkept: Option<&'static str>,
    /// The `save` setting, when CONFIG GET is allowed.
    pub save: Option<String>,
    /// INFO's `cluster_enabled:1`: a Redis Cluster node.
    pub cluster_enabled: bool,
    /// The Sentinel service, for a `redis+sentinel://` group (the probe
    /// then reached the master the Sentinels name).
    pub sentinel: Option<String>,
    /// True for a `redis+cluster://` server (the probe then reached the
    /// master of the probe key's slot).
    pub cluster: bool,
    /// Whether this user may `SUBSCRIBE` to a release channel.
    pub pubsub: PubSub,
    /// The command path the status round took.
    pub path: Path,
    /// Why the status round's probe key was refused (NOPERM for the key:
    /// an ACL that grants only the user's own keys); the path is known
    /// all the same.
    pub probe_key_refused: Option<String>,
}

/// Whether waiters can hear releases on a server ([`crate::wait`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum PubSub {
    /// `SUBSCRIBE` to the probe's release channel worked.
    #[default]
    Allowed,
    /// The server refused it: NOPERM (for the command or the channel), or
    /// an unknown command (renamed away); the reason.
    Refused(String),
    /// It failed otherwise (a timeout, a lost connection): not known.
    Unknown(String),
}

impl PubSub {
    /// One word for the table and the JSON.
    pub fn word(&self) -> &'static str {
        match self {
            PubSub::Allowed => "allowed",
            PubSub::Refused(_) => "refused",
            PubSub::Unknown(_) => "unknown",
        }
    }

    /// Why it is not allowed, when it is not.
    pub fn why(&self) -> Option<&str> {
        match self {
            PubSub::Allowed => None,
            PubSub::Refused(why) | PubSub::Unknown(why) => Some(why),
        }
    }
}

/// How redlock's lock operations reach one server, as the status round
/// found it (not as the version or the ACL suggest).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Path {
    /// Lua scripts (`EVALSHA`), the default: one round trip each.
    #[default]
    Scripts,
    /// `WATCH`/`MULTI`/`EXEC` on a connection of its own: the server
    /// refused scripts ([`crate::lock::noscript`]).
    Transaction,
    /// The status round failed for another reason: the path is not known,
    /// and redlock gets no vote from this server. What failed.
    Unknown(String),
}

impl Path {
    /// One word for the table and the JSON.
    pub fn word(&self) -> &'static str {
        match self {
            Path::Scripts => "scripts",
            Path::Transaction => "transaction",
            Path::Unknown(_) => "unknown",
        }
    }
}

/// One command on `server`, bounded by its node timeout.
async fn query<T: redis::FromRedisValue>(server: &Server, args: &[&str]) -> Result<T, ServerError> {
    server
        .call(Op::Doctor, b"", async |c: &mut MultiplexedConnection| {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            cmd.query_async(c).await
        })
        .await
}

fn unix_micros(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// Probes one server; the command path is left for [`path`] to fill in.
pub async fn probe(server: &Server) -> Result<Probe, ServerError> {
    // The first PING also opens the connection; it does not count.
    query::<String>(server, &["PING"]).await?;
    let mut rtts = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let start = Instant::now();
        query::<String>(server, &["PING"]).await?;
        rtts.push(start.elapsed());
    }
    rtts.sort();
    let rtt = rtts[PINGS / 2];

    let before = SystemTime::now();
    let start = Instant::now();
    let (secs, micros): (String, String) = query(server, &["TIME"]).await?;
    let round_trip = start.elapsed();
    let server_us = secs.parse::<f64>().unwrap_or(0.0) * 1e6 + micros.parse::<f64>().unwrap_or(0.0);
    let local_us = unix_micros(before) + round_trip.as_secs_f64() * 1e6 / 2.0;

    let text: String = query(server, &["INFO"]).await?;
    let info: HashMap<&str, &str> =
        text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim(), v.trim())).collect();
    let field = |k: &str| info.get(k).map(|v| (*v).to_owned()).unwrap_or_default();
    // CONFIG may be renamed or denied by ACL; then these stay unknown.
    let config = async |name: &str| {
        query::<Vec<String>>(server, &["CONFIG", "GET", name])
            .await
            .ok()
            .and_then(|v| v.get(1).cloned())
    };
    let appendfsync = config("appendfsync").await;
    Ok(Probe {
        server: server.name().to_owned(),
        rtt,
        version: field("redis_version"),
        valkey_version: info.get("valkey_version").map(|v| (*v).to_owned()),
        role: field("role"),
        run_id: field("run_id"),
        uptime: field("uptime_in_seconds").parse().ok().map(Duration::from_secs),
        clock_offset_ms: (server_us - local_us) / 1000.0,
        clock_uncertainty: round_trip / 2,
        maxmemory: field("maxmemory").parse().unwrap_or(0),
        policy: field("maxmemory_policy"),
        appendonly: field("aof_enabled") == "1",
        unkept: crate::server::unkept_writes(&text, appendfsync.as_deref()),
        appendfsync,
        save: config("save").await,
        cluster_enabled: field("cluster_enabled") == "1",
        sentinel: server.sentinel().map(|g| g.service().to_owned()),
        cluster: server.cluster().is_some(),
        pubsub: pubsub(server).await,
        // Filled in from the status round.
        path: Path::Scripts,
        probe_key_refused: None,
    })
}

/// Whether the server lets this user `SUBSCRIBE` (Redis 7 ACL users get
/// no channels by default; a configuration can rename the command away).
async fn pubsub(server: &Server) -> PubSub {
    match server.subscribe(&crate::lock::release_channel(PROBE_KEY)).await {
        Ok(_) => PubSub::Allowed,
        Err(ServerError { failure: Failure::NoPerm(why), .. }) => PubSub::Refused(why),
        Err(ServerError { failure: Failure::Unfit(why), .. })
            if why.contains("unknown command") =>
        {
            PubSub::Refused(why)
        }
        Err(e) => PubSub::Unknown(e.failure.to_string()),
    }
}

/// The command path `server` took in the status round, from its answer
/// there and whether it refused scripts on the way
/// ([`Server::scripts_refused`], set by the same dispatch every lock
/// operation goes through); and why the probe key was refused, when the
/// ACL refused it (NOPERM for the key: the path taken is known all the
/// same, the user's own keys may be allowed).
pub fn path(server: &Server, view: ServerView) -> (Path, Option<String>) {
    let taken = || if server.scripts_refused() { Path::Transaction } else { Path::Scripts };
    match view {
        ServerView::Error(ServerError { failure: Failure::NoPerm(why), .. })
            if why.contains("key") && !why.contains("command") =>
        {
            (taken(), Some(why))
        }
        ServerView::Error(e) => {
            // A refusal of scripts that the transaction then failed too
            // (an ACL without +watch or +multi) says so.
            let how = if server.scripts_refused() { "without scripts, " } else { "" };
            (Path::Unknown(format!("{how}{}: {}", e.op, e.failure)), None)
        }
        _ => (taken(), None),
    }
}
