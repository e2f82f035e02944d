//! `redlock doctor`: is this set of servers fit for Redlock?
//!
//! Each server is probed in parallel (PINGs, INFO, TIME, CONFIG GET, a
//! SUBSCRIBE); the pure [`assess`] turns the probes into errors (a member
//! that can never vote as configured), warnings (things that break the
//! algorithm's assumptions) and notes (advice). Exit 0 fit, 1 warnings, 69
//! when fewer than a quorum of servers answer or there is an error. A
//! Sentinel group is checked too ([`check_group`]): its Sentinels
//! reachable, more than half of the listed naming one master, that master
//! reachable, a master, and with a replica (without one, the group never
//! votes: [`crate::server::sentinel`]); and a
//! cluster ([`check_cluster`]): its seeds reachable, its state ok, every
//! slot served, the seeds agreeing on the slot map. A cluster's row in the
//! table is the master of the probe key's slot, where the status round
//! went.
//!
//! Which command path redlock takes with each server ([`Path`]: scripts,
//! or WATCH/MULTI/EXEC on a server that refuses them) is not guessed from
//! the version or the ACL: doctor runs a read-only status round of a probe
//! key through the fleet, which takes the same script/no-script dispatch
//! as every lock operation, and reads what each server did.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use serde_json::json;

use crate::error::Error;
use crate::exit;
use crate::fence;
use crate::lock::{Fleet, ServerView};
use crate::quorum::Failures;
use crate::server::cluster::{SLOTS, SlotMap, key_slot};
use crate::server::sentinel::Answer;
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
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory_policy`.
    pub policy: String,
    /// `aof_enabled`.
    pub appendonly: bool,
    /// `appendfsync`, when CONFIG GET is allowed.
    pub appendfsync: Option<String>,
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
    fn word(&self) -> &'static str {
        match self {
            PubSub::Allowed => "allowed",
            PubSub::Refused(_) => "refused",
            PubSub::Unknown(_) => "unknown",
        }
    }

    /// Why it is not allowed, when it is not.
    fn why(&self) -> Option<&str> {
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
    /// refused scripts ([`crate::noscript`]).
    Transaction,
    /// The status round failed for another reason: the path is not known,
    /// and redlock gets no vote from this server. What failed.
    Unknown(String),
}

impl Path {
    /// One word for the table and the JSON.
    fn word(&self) -> &'static str {
        match self {
            Path::Scripts => "scripts",
            Path::Transaction => "transaction",
            Path::Unknown(_) => "unknown",
        }
    }
}

/// The key whose release channel the probe subscribes to: doctor knows no
/// key, so an ACL that allows only some keys' channels may refuse this one.
const PROBE_KEY: &str = "doctor-probe";

/// What a refused `SUBSCRIBE` costs ([`crate::wait`]): waiters still take
/// the lock, but hear of a release only at their next backoff step.
const PUBSUB_COST: &str = "waiters are not woken by releases and retry on backoff alone \
                           (up to 1s late after each release, about one attempt a second)";

/// The verdict for the set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assessment {
    /// Members that can never vote as configured: a Sentinel group whose
    /// Sentinels do not agree, or without a replica; seeds of two clusters.
    pub errors: Vec<String>,
    /// Problems that can break mutual exclusion or availability.
    pub warnings: Vec<String>,
    /// Advice that needs no change when followed.
    pub notes: Vec<String>,
    /// Largest minus smallest clock offset, in ms.
    pub clock_spread_ms: f64,
    /// The drift allowance of the TTL (`ttl * drift_factor + 2ms`), in ms.
    pub drift_budget_ms: f64,
}

/// Checks the servers and prints a report (or JSON) on stdout.
pub async fn doctor(
    fleet: &Fleet,
    ttl: Duration,
    drift_factor: f64,
    config_file: Option<&std::path::Path>,
    json: bool,
) -> Result<u8, Error> {
    // The status round first: through a cluster, it opens the connection
    // to the master of the probe key's slot, which the probes' keyless
    // commands (PING, INFO, TIME...) then use, so that a cluster's row
    // describes one node.
    let status = fleet.status(PROBE_KEY).await;
    let results = futures_util::future::join_all(fleet.servers().iter().map(|s| probe(s))).await;
    let mut probes = Vec::new();
    let mut failures = Vec::new();
    for ((result, server), (_, view)) in
        results.into_iter().zip(fleet.servers()).zip(status.servers)
    {
        match result {
            Ok(mut p) => {
                (p.path, p.probe_key_refused) = path(server, view);
                probes.push(p);
            }
            Err(e) => failures.push(e),
        }
    }
    let groups = futures_util::future::join_all(
        fleet.servers().iter().filter(|s| s.sentinel().is_some()).map(|s| check_group(s)),
    )
    .await
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    let clusters = futures_util::future::join_all(
        fleet.servers().iter().filter(|s| s.cluster().is_some()).map(|s| check_cluster(fleet, s)),
    )
    .await
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    let mut a = assess(&probes, &failures, ttl, drift_factor);
    assess_restarts(&probes, fleet.restart_window(), &mut a);
    for g in &groups {
        assess_group(g, &mut a);
    }
    for c in &clusters {
        assess_cluster(c, &mut a);
    }
    let quorum = fleet.quorum();
    let members: Vec<&str> = fleet.servers().iter().map(|s| s.name()).collect();
    assess_setup(&members, quorum, config_file.is_some(), &mut a);
    let verdict = if probes.len() < quorum {
        "unavailable"
    } else if !a.errors.is_empty() {
        "errors"
    } else if a.warnings.is_empty() {
        "fit"
    } else {
        "warnings"
    };
    let text = if json {
        let mut json = render_json(&probes, &failures, &a, quorum, verdict);
        json["sentinels"] = groups.iter().map(GroupCheck::json).collect();
        json["clusters"] = clusters.iter().map(ClusterCheck::json).collect();
        json.to_string()
    } else {
        let lines: String = groups
            .iter()
            .map(|g| format!("{}\n", g.line()))
            .chain(clusters.iter().map(|c| format!("{}\n", c.line())))
            .collect();
        let text = render_text(&probes, &failures, &a, quorum, fleet.servers().len(), verdict);
        // The group lines go after the table, before the warnings.
        match text.find("clock spread") {
            Some(at) => format!("{}{lines}{}", &text[..at], &text[at..]),
            None => text,
        }
    };
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    match verdict {
        "fit" => Ok(exit::OK),
        "warnings" => Ok(exit::FREE_OR_WARNINGS),
        // A member that can never vote as configured: as unavailable as
        // a server that answers with errors.
        "errors" => Err(Error::Unavailable {
            what: format!("doctor: {}", a.errors.join("; ")),
            config: true,
            failures: Failures(failures),
        }),
        _ => Err(Error::Unavailable {
            what: format!(
                "doctor: {} of {} servers answered, quorum {quorum}",
                probes.len(),
                fleet.servers().len()
            ),
            config: false,
            failures: Failures(failures),
        }),
    }
}

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

async fn probe(server: &Server) -> Result<Probe, ServerError> {
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

    let info: String = query(server, &["INFO"]).await?;
    let info: HashMap<&str, &str> =
        info.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim(), v.trim())).collect();
    let field = |k: &str| info.get(k).map(|v| (*v).to_owned()).unwrap_or_default();
    // CONFIG may be renamed or denied by ACL; then these stay unknown.
    let config = async |name: &str| {
        query::<Vec<String>>(server, &["CONFIG", "GET", name])
            .await
            .ok()
            .and_then(|v| v.get(1).cloned())
    };
    Ok(Probe {
        server: server.name().to_owned(),
        rtt,
        version: field("redis_version"),
        valkey_version: info.get("valkey_version").map(|v| (*v).to_owned()),
        role: field("role"),
        run_id: field("run_id"),
        uptime: field("uptime_in_seconds").parse().ok().map(Duration::from_secs),
        clock_offset_ms: (server_us - local_us) / 1000.0,
        maxmemory: field("maxmemory").parse().unwrap_or(0),
        policy: field("maxmemory_policy"),
        appendonly: field("aof_enabled") == "1",
        appendfsync: config("appendfsync").await,
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
fn path(server: &Server, view: ServerView) -> (Path, Option<String>) {
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

/// What one Sentinel said: the master's `host:port` and how many replicas
/// it sees up, `None` when it does not monitor the service, or the error.
pub type SentinelAnswer = Result<Option<(String, usize)>, String>;

/// What the Sentinels of one group said, and what their master is.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupCheck {
    /// The group's display name.
    pub group: String,
    /// The service name.
    pub service: String,
    /// Each Sentinel's address and answer.
    pub answers: Vec<(String, SentinelAnswer)>,
    /// The master more than half of the listed Sentinels name, if one is.
    pub master: Option<String>,
    /// That master's `ROLE` and online replicas, or why it could not be read.
    pub master_role: Result<(String, usize), String>,
}

impl GroupCheck {
    /// The Sentinels' distinct answers (addresses), in order, with how
    /// many name each.
    fn named(&self) -> Vec<(&str, usize)> {
        let mut named: Vec<(&str, usize)> = Vec::new();
        for (_, answer) in &self.answers {
            if let Ok(Some((m, _))) = answer {
                match named.iter_mut().find(|(n, _)| n == m) {
                    Some((_, count)) => *count += 1,
                    None => named.push((m, 1)),
                }
            }
        }
        named
    }

    fn answered(&self) -> usize {
        self.answers.iter().filter(|(_, a)| a.is_ok()).count()
    }

    /// The most replicas a Sentinel that names the master sees up.
    fn replicas_seen(&self) -> usize {
        self.answers
            .iter()
            .filter_map(|(_, a)| match a {
                Ok(Some((m, n))) if Some(m) == self.master.as_ref() => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// One line for the text report.
    fn line(&self) -> String {
        let head = format!(
            "sentinel {}: {} of {} Sentinels answer",
            self.service,
            self.answered(),
            self.answers.len()
        );
        let named = self.named();
        let master = match (&self.master, &self.master_role) {
            (Some(m), Ok((role, replicas))) => {
                format!("master {m} (role {role}, {replicas} replica(s) online)")
            }
            (Some(m), Err(e)) => format!("master {m} ({e})"),
            (None, _) => String::new(),
        };
        match (named.as_slice(), &self.master) {
            ([], _) => format!("{head}, none names a master"),
            ([_], Some(_)) => format!("{head}, agree on {master}"),
            (many, Some(_)) => {
                format!("{head}, a majority names {master}; they disagree: {}", shown_names(many))
            }
            (many, None) => {
                format!("{head}, no majority names a master: {}", shown_names(many))
            }
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "group": self.group,
            "service": self.service,
            "sentinels": self.answers.iter().map(|(address, answer)| match answer {
                Ok(Some((master, replicas))) => json!({
                    "sentinel": address, "master": master, "replicas_up": replicas,
                    "error": null
                }),
                Ok(None) => json!({ "sentinel": address, "master": null, "error": null }),
                Err(e) => json!({ "sentinel": address, "master": null, "error": e }),
            }).collect::<Vec<_>>(),
            "master": self.master,
            "master_role": self.master_role.as_ref().ok().map(|(role, _)| role),
            "master_replicas": self.master_role.as_ref().ok().map(|(_, n)| n),
            "master_error": self.master_role.as_ref().err(),
        })
    }
}

/// `a:1 (2), b:2 (1)`: addresses and how many Sentinels name each.
fn shown_names(named: &[(&str, usize)]) -> String {
    named.iter().map(|(m, n)| format!("{m} ({n})")).collect::<Vec<_>>().join(", ")
}

/// Asks each Sentinel of `server`'s group for the master and the replicas
/// it sees, and the master more than half of them name for its `ROLE`;
/// each call bounded by the node timeout.
pub async fn check_group(server: &Server) -> Option<GroupCheck> {
    let group = server.sentinel()?;
    let config = server.connection_config();
    let timeout = server.timeout();
    let asks = group.sentinels().enumerate().map(|(i, address)| {
        let config = &config;
        async move {
            let answer = match tokio::time::timeout(timeout, group.ask(i, config)).await {
                Ok(Ok(Answer::Master { address, replicas })) => Ok(Some((address, replicas))),
                Ok(Ok(Answer::Unknown)) => Ok(None),
                Ok(Err(failure)) => Err(failure.to_string()),
                Err(_) => Err(Failure::Timeout(timeout).to_string()),
            };
            (address.to_owned(), answer)
        }
    });
    let answers = futures_util::future::join_all(asks).await;
    let mut check = GroupCheck {
        group: server.name().to_owned(),
        service: group.service().to_owned(),
        answers,
        master: None,
        master_role: Err("no master named by a majority of the Sentinels".to_owned()),
    };
    // The same rule as a lock operation's (`Group::named`): more than half
    // of the listed Sentinels.
    let need = check.answers.len() / 2 + 1;
    let master = check.named().into_iter().find(|(_, n)| *n >= need).map(|(m, _)| (*m).to_owned());
    if let Some(master) = master {
        check.master_role =
            match tokio::time::timeout(timeout, group.role_of(&master, &config)).await {
                Ok(Ok((_, _, role))) => Ok((role.role, role.replicas)),
                Ok(Err(failure)) => Err(failure.to_string()),
                Err(_) => Err(Failure::Timeout(timeout).to_string()),
            };
        check.master = Some(master);
    }
    Some(check)
}

/// What one seed said: its `cluster_state` and slot map, or the error.
pub type SeedAnswer = Result<(String, SlotMap), String>;

/// What the seeds of one cluster said.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterCheck {
    /// The cluster's display name.
    pub group: String,
    /// Each seed's address and answer: its `cluster_state` and slot map,
    /// or the error.
    pub seeds: Vec<(String, SeedAnswer)>,
    /// The probe key's hash slot (where the status round went).
    pub probe_slot: u16,
}

impl ClusterCheck {
    /// The first slot map a seed gave.
    fn map(&self) -> Option<&SlotMap> {
        self.seeds.iter().find_map(|(_, a)| a.as_ref().ok().map(|(_, map)| map))
    }

    fn answered(&self) -> usize {
        self.seeds.iter().filter(|(_, a)| a.is_ok()).count()
    }

    /// True when every seed that answered gave the same slot map.
    fn agreed(&self) -> bool {
        let maps: Vec<&SlotMap> =
            self.seeds.iter().filter_map(|(_, a)| a.as_ref().ok().map(|(_, m)| m)).collect();
        maps.windows(2).all(|w| w[0].ranges == w[1].ranges)
    }

    /// One line for the text report.
    fn line(&self) -> String {
        let name = self.group.strip_prefix("cluster:").unwrap_or(&self.group);
        let head =
            format!("cluster {name}: {} of {} seeds answer", self.answered(), self.seeds.len());
        let Some(map) = self.map() else {
            return format!("{head}, no slot map");
        };
        let states: Vec<&str> = self
            .seeds
            .iter()
            .filter_map(|(_, a)| a.as_ref().ok().map(|(state, _)| state.as_str()))
            .collect();
        let state = if states.iter().all(|s| *s == "ok") { "ok" } else { "not ok" };
        format!(
            "{head}, state {state}, {} of {SLOTS} slots on {} masters{}; the probe key's slot {} \
             on {}",
            map.covered(),
            map.masters().len(),
            if self.agreed() { "" } else { " (the seeds disagree)" },
            self.probe_slot,
            map.owner(self.probe_slot).unwrap_or("no master"),
        )
    }

    fn json(&self) -> serde_json::Value {
        let map = self.map();
        json!({
            "group": self.group,
            "seeds": self.seeds.iter().map(|(seed, answer)| match answer {
                Ok((state, _)) => json!({ "seed": seed, "state": state, "error": null }),
                Err(e) => json!({ "seed": seed, "state": null, "error": e }),
            }).collect::<Vec<_>>(),
            "masters": map.map(|m| m.masters().len()),
            "slots_covered": map.map(SlotMap::covered),
            "slots_without_replica": map.map(SlotMap::unreplicated),
            "seeds_agree": self.agreed(),
            "probe_slot": self.probe_slot,
            "probe_master": map.and_then(|m| m.owner(self.probe_slot)),
        })
    }
}

/// Asks each seed of `server`'s cluster for its state and slot map, each
/// call bounded by the node timeout.
pub async fn check_cluster(fleet: &Fleet, server: &Server) -> Option<ClusterCheck> {
    let cluster = server.cluster()?;
    let config = server.connection_config();
    let timeout = server.timeout();
    let asks = cluster.seeds().enumerate().map(|(i, seed)| {
        let config = &config;
        async move {
            let work = async {
                let info: String =
                    cluster.ask(i, redis::cmd("CLUSTER").arg("INFO"), config).await?;
                let state = info
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("cluster_state:"))
                    .unwrap_or("unknown")
                    .to_owned();
                Ok::<_, Failure>((state, cluster.slots(i, config).await?))
            };
            let answer = match tokio::time::timeout(timeout, work).await {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(failure)) => Err(failure.to_string()),
                Err(_) => Err(Failure::Timeout(timeout).to_string()),
            };
            (seed.to_owned(), answer)
        }
    });
    let probe_key = fleet.key_layout().lock_key(PROBE_KEY);
    Some(ClusterCheck {
        group: server.name().to_owned(),
        seeds: futures_util::future::join_all(asks).await,
        probe_slot: key_slot(probe_key.as_bytes()),
    })
}

/// Adds a cluster's problems to the assessment.
pub fn assess_cluster(c: &ClusterCheck, a: &mut Assessment) {
    for (seed, answer) in &c.seeds {
        match answer {
            Err(e) => a.warnings.push(format!("{}: seed {seed}: {e}", c.group)),
            Ok((state, _)) if state != "ok" => a.warnings.push(format!(
                "{}: seed {seed} says cluster_state:{state}: locks fail there (CLUSTERDOWN) \
                 until the cluster is whole",
                c.group
            )),
            Ok(_) => {}
        }
    }
    let maps: Vec<(&String, &SlotMap)> =
        c.seeds.iter().filter_map(|(seed, a)| a.as_ref().ok().map(|(_, m)| (seed, m))).collect();
    let apart = maps.iter().enumerate().find_map(|(i, (s1, m1))| {
        maps[i + 1..].iter().find(|(_, m2)| !m1.overlaps(m2)).map(|(s2, _)| (*s1, *s2))
    });
    if let Some((s1, s2)) = apart {
        a.errors.push(format!(
            "{}: seeds {s1} and {s2} are in different clusters (no node ID in common): the \
             member fails every call; list nodes of one cluster only",
            c.group
        ));
    } else if !c.agreed() {
        a.warnings.push(format!(
            "{}: the seeds disagree on the slot map: a failover or a migration in progress",
            c.group
        ));
    }
    if let Some(map) = c.map() {
        let covered = map.covered();
        if covered < usize::from(SLOTS) {
            a.warnings.push(format!(
                "{}: {} of {SLOTS} slots have no master: locks whose slot is one of them fail",
                c.group,
                usize::from(SLOTS) - covered
            ));
        }
        if map.unreplicated() > 0 {
            a.notes.push(format!(
                "{}: {} slots have a master without a replica: when it fails, the locks of those \
                 slots get no vote from the cluster until it returns",
                c.group,
                map.unreplicated()
            ));
        }
    }
    if c.seeds.len() < 3 {
        a.notes.push(format!(
            "{}: {} seed(s) listed: list three or more, so that a majority of them names the \
             slot's master with one down",
            c.group,
            c.seeds.len()
        ));
    }
}

/// Adds a Sentinel group's problems to the assessment. Errors are what
/// keeps the group from ever voting as it stands: no majority of its
/// Sentinels naming one master, or a master without a replica (a vote
/// through a group counts only once a replica has the write:
/// [`crate::server::sentinel`]).
pub fn assess_group(g: &GroupCheck, a: &mut Assessment) {
    for (address, answer) in &g.answers {
        match answer {
            Err(e) => a.warnings.push(format!("{}: Sentinel {address}: {e}", g.group)),
            Ok(None) => a
                .warnings
                .push(format!("{}: Sentinel {address} does not monitor {:?}", g.group, g.service)),
            Ok(Some(_)) => {}
        }
    }
    let named = g.named();
    match &g.master {
        None => a.errors.push(format!(
            "{}: no master is named by more than half of the {} listed Sentinels ({}): the group \
             gets no vote until a majority agrees",
            g.group,
            g.answers.len(),
            if named.is_empty() { "none names one".to_owned() } else { shown_names(&named) }
        )),
        Some(_) if named.len() > 1 => a.warnings.push(format!(
            "{}: the Sentinels disagree on the master ({}): a failover in progress, a stale \
             Sentinel or a split; the group votes while a majority agrees",
            g.group,
            shown_names(&named)
        )),
        Some(_) => {}
    }
    match (&g.master, &g.master_role) {
        (Some(m), Ok((role, _))) if role != "master" => a.errors.push(format!(
            "{}: {m}, which the Sentinels name as master, has role {role}: redlock will not use it",
            g.group
        )),
        (Some(m), Ok((_, online))) => {
            let seen = g.replicas_seen();
            if *online == 0 && seen == 0 {
                a.errors.push(format!(
                    "{}: master {m} has no replica: a Sentinel group's vote counts only once a \
                     replica has the write (so that a failover keeps it), so this group can \
                     never vote; give it a replica",
                    g.group
                ));
            } else if *online < seen.max(1) {
                a.warnings.push(format!(
                    "{}: master {m} has {online} replica(s) online, the Sentinels see {seen} up: \
                     the group's votes fail until every replica follows it",
                    g.group
                ));
            }
        }
        (Some(m), Err(e)) => a.warnings.push(format!("{}: master {m}: {e}", g.group)),
        (None, _) => {}
    }
    if g.answers.len() < 3 {
        a.notes.push(format!(
            "{}: {} Sentinel(s) listed: list at least 3, so that a majority names the master \
             with one down",
            g.group,
            g.answers.len()
        ));
    }
}

/// A warning for each server up for less than `window` (`--max-ttl` plus
/// 1 s; `None` with `--trust-restarts`) that does not keep every write: it
/// may have forgotten a holder's key in a restart, so its grants count
/// towards no quorum until then (`lock::acquire`'s `restarted`).
pub fn assess_restarts(probes: &[Probe], window: Option<Duration>, a: &mut Assessment) {
    let Some(window) = window else { return };
    for p in probes {
        let keeps_data = p.appendonly && p.appendfsync.as_deref() == Some("always");
        match p.uptime {
            Some(up) if up < window && !keeps_data => a.warnings.push(format!(
                "{}: up {} only: a server without appendfsync always may have lost a holder's \
                 key in a restart, so it gets no vote until {} after its start (in {})",
                p.server,
                crate::fmt_duration(up),
                crate::fmt_duration(window),
                crate::fmt_duration(window - up)
            )),
            None => a.notes.push(format!(
                "{}: no uptime in its INFO: a restart is not seen, and it is assumed to have \
                 restarted long ago",
                p.server
            )),
            _ => {}
        }
    }
}

/// Turns probes into warnings and notes.
pub fn assess(
    probes: &[Probe],
    failures: &[ServerError],
    ttl: Duration,
    drift_factor: f64,
) -> Assessment {
    let mut a = Assessment {
        drift_budget_ms: ttl.as_secs_f64() * 1000.0 * drift_factor + 2.0,
        ..Assessment::default()
    };
    for e in failures {
        a.warnings.push(format!("{}: {e}", failure_role(&e.failure)));
    }
    for (i, p) in probes.iter().enumerate() {
        if let Some(first) =
            probes[..i].iter().find(|q| !p.run_id.is_empty() && q.run_id == p.run_id)
        {
            a.warnings.push(format!(
                "{} and {} are the same server (run_id {}): the servers are not independent",
                first.server, p.server, p.run_id
            ));
        }
        if p.role != "master" {
            a.warnings.push(format!(
                "{}: role {} (a replica): it refuses writes (READONLY), so redlock gets no vote \
                 there, and replication is asynchronous; list masters only",
                p.server, p.role
            ));
        }
        // A cluster node given as a plain server answers only for the hash
        // slots it owns: every lock whose slot another node owns ends with
        // exit 69 at the first redirect (crate::server, `Failure::from_redis`).
        if p.cluster_enabled && !p.cluster {
            a.warnings.push(format!(
                "{}: a Redis Cluster node (cluster_enabled:1) listed as a plain server: locks \
                 whose slot another node owns fail there (exit 69); list the cluster as one \
                 server, redis+cluster://HOST:PORT[,HOST:PORT...], so that redlock routes by slot",
                p.server
            ));
        }
        match &p.path {
            Path::Scripts => {}
            // What crate::noscript does not do (README, "Servers without
            // scripting"): works, so a note.
            Path::Transaction => a.notes.push(format!(
                "{}: refuses scripts: redlock locks there with WATCH/MULTI/EXEC (a connection \
                 and two or three round trips per operation); `--shared` and the run history \
                 (`history`, `check`) need scripts and fail there, and its waiters go unordered \
                 (no wait queue)",
                p.server
            )),
            // A cluster node's status fails with the redirect: said above.
            Path::Unknown(_) if p.cluster_enabled && !p.cluster => {}
            Path::Unknown(e) => a.warnings.push(format!(
                "{}: a lock operation failed there ({e}): redlock gets no vote from it",
                p.server
            )),
        }
        if let Some(why) = &p.probe_key_refused {
            a.notes.push(format!(
                "{}: the ACL refuses this user the probe key ({why}): unless it allows the keys \
                 of your locks (README, \"The smallest ACL\"), every lock operation fails there",
                p.server
            ));
        }
        let evicting = p.policy.starts_with("allkeys-") || p.policy.starts_with("volatile-");
        if evicting && p.maxmemory > 0 {
            a.warnings.push(format!(
                "{}: maxmemory-policy {} with maxmemory {} can evict lock keys; use noeviction",
                p.server, p.policy, p.maxmemory
            ));
        }
        if !version_at_least(&p.version, (2, 6, 12)) {
            a.warnings.push(format!(
                "{}: Redis {} lacks SET NX PX; 2.6.12 or later is needed",
                p.server, p.version
            ));
        } else if !version_at_least(&p.version, (3, 2, 0)) {
            // The fence draw reads TIME and then writes, which a script may
            // do only with effects replication (redis.replicate_commands).
            a.warnings.push(format!(
                "{}: Redis {} cannot draw fencing numbers (TIME in scripts needs 3.2); use --no-fence",
                p.server, p.version
            ));
        }
        // The client's proposal is taken as it is only within half the
        // window of a server's clock (crate::fence); beyond, the servers
        // draw different numbers and each fenced acquisition writes back.
        if p.clock_offset_ms.abs() * 1000.0 > fence::WINDOW.as_micros() as f64 / 2.0 {
            a.notes.push(format!(
                "{}: clock {:+.1}ms from this machine's, more than half the {} fencing window: \
                 each fenced acquisition takes one more round trip",
                p.server,
                p.clock_offset_ms,
                crate::fmt_duration(fence::WINDOW)
            ));
        }
        if let PubSub::Refused(why) = &p.pubsub {
            if why.contains("unknown command") {
                a.warnings.push(format!(
                    "{}: SUBSCRIBE is not a command there ({why}): {PUBSUB_COST}",
                    p.server
                ));
            } else if why.contains("command") {
                a.warnings.push(format!(
                    "{}: SUBSCRIBE refused for this user ({why}): {PUBSUB_COST}; grant +subscribe",
                    p.server
                ));
            } else {
                a.notes.push(format!(
                    "{}: SUBSCRIBE to {} refused for this user ({why}): unless the ACL allows the \
                     channels redlock:released:KEY* of your keys (each release's, and each \
                     waiter's own), {PUBSUB_COST}",
                    p.server,
                    crate::lock::release_channel(PROBE_KEY)
                ));
            }
        }
        if let PubSub::Unknown(why) = &p.pubsub {
            a.notes.push(format!("{}: SUBSCRIBE could not be checked ({why})", p.server));
        }
        let rdb = p.save.as_deref().is_some_and(|s| !s.trim().is_empty());
        match (p.appendonly, p.appendfsync.as_deref(), rdb) {
            (true, Some("always"), _) => {}
            (true, fsync, _) => a.notes.push(format!(
                "{}: appendonly yes with appendfsync {}: a power loss can drop the last second of locks; \
                 restart it only after the longest TTL has passed, or use appendfsync always",
                p.server,
                fsync.unwrap_or("unknown")
            )),
            (false, _, _) => a.notes.push(format!(
                "{}: no AOF{}: after a crash, restart it only after the longest TTL in use has passed (delayed restart)",
                p.server,
                if rdb { " (RDB snapshots lose recent locks)" } else { "" }
            )),
        }
    }
    let offsets = probes.iter().map(|p| p.clock_offset_ms);
    let (lo, hi) = offsets.fold((f64::MAX, f64::MIN), |(lo, hi), o| (lo.min(o), hi.max(o)));
    a.clock_spread_ms = if probes.is_empty() { 0.0 } else { hi - lo };
    // Fences increase only while the servers' clocks agree within the
    // linger minus the window (the argument in crate::fence).
    let fence_margin = fence::LINGER.saturating_sub(fence::WINDOW);
    if a.clock_spread_ms >= fence_margin.as_secs_f64() * 1000.0 {
        a.warnings.push(format!(
            "server clocks differ by {:.1}ms, {} or more: fencing numbers can go backwards once a \
             counter expires or a server restarts empty (fix the clocks, or do not rely on REDLOCK_FENCE)",
            a.clock_spread_ms,
            crate::fmt_duration(fence_margin)
        ));
    }
    if a.clock_spread_ms > a.drift_budget_ms {
        a.warnings.push(format!(
            "server clocks differ by {:.1}ms, more than the drift allowance of {:.1}ms for a {} TTL: \
             check NTP (clocks that jump or run at different rates break Redlock's timing)",
            a.clock_spread_ms,
            a.drift_budget_ms,
            crate::fmt_duration(ttl)
        ));
    }
    a
}

/// Judges the configuration itself, whatever the servers answer: how many
/// failures the members and quorum tolerate, whether they share one host,
/// and whether a configuration file keeps the hosts of a fleet alike.
/// `members` are the servers' display names ([`Server::name`]).
pub fn assess_setup(members: &[&str], quorum: usize, config_file: bool, a: &mut Assessment) {
    let n = members.len();
    let spare = n.saturating_sub(quorum);
    match (n, spare) {
        (1, _) => a.notes.push(
            "one server: no failure is tolerated (while it is down, or after a restart until \
             --max-ttl has passed, no lock can be taken); 3 or 5 independent servers tolerate \
             1 or 2"
                .to_owned(),
        ),
        (2, _) => a.warnings.push(format!(
            "2 servers (quorum {quorum}) tolerate no failure: no better than 1, and twice as \
             likely to stop every lock, as either one down does; use 3 (or 5)"
        )),
        (_, 0) => a.warnings.push(format!(
            "{n} servers with quorum {quorum} tolerate no failure: any one down stops every lock; \
             the default quorum ({}) tolerates {}",
            n / 2 + 1,
            n - (n / 2 + 1)
        )),
        _ => {}
    }
    let mut hosts: Vec<String> = members.iter().flat_map(|m| member_hosts(m)).collect();
    hosts.sort();
    hosts.dedup();
    if let (true, [host]) = (n > 1, hosts.as_slice()) {
        if host == THIS_MACHINE {
            a.notes.push(
                "every server is on this machine: only jobs on this host can share these \
                 locks, and its failure stops all of them (fine for trying redlock; a fleet \
                 needs servers on independent machines)"
                    .to_owned(),
            );
        } else {
            a.warnings.push(format!(
                "every server is on {host}: one machine's failure stops every lock; put them \
                 on independent machines"
            ));
        }
    }
    if !config_file {
        a.notes.push(format!(
            "no configuration file ($REDLOCK_CONFIG, ~/.config/redlock/config.toml or {}): \
             every host must be given the same servers, quorum and max-ttl by hand; one file \
             deployed to every host keeps them alike (`redlock config` shows where each \
             value comes from)",
            crate::config_file::SYSTEM_FILE
        ));
    }
}

/// How [`member_hosts`] names this machine: loopback addresses and unix sockets.
const THIS_MACHINE: &str = "localhost";

/// The hosts a member's display name lists: `h:6379`, `rediss://h:6379/1`,
/// `unix:/path` (this machine), `sentinel:SERVICE@h1:26379,h2:26379`,
/// `cluster:h1:7000,h2:7001`. Loopback addresses are [`THIS_MACHINE`].
fn member_hosts(name: &str) -> Vec<String> {
    if name.starts_with("unix:") {
        return vec![THIS_MACHINE.to_owned()];
    }
    let list = name
        .strip_prefix("cluster:")
        .or_else(|| name.strip_prefix("sentinel:").and_then(|s| s.split_once('@')).map(|(_, l)| l))
        .unwrap_or(name);
    let list = list.strip_prefix("rediss://").unwrap_or(list);
    list.split(',')
        .map(|node| {
            let node = node.split('/').next().unwrap_or(node);
            let host = node.rsplit_once(':').map_or(node, |(host, _)| host).to_ascii_lowercase();
            let loopback = host == "localhost"
                || host == "[::1]"
                || host.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
            if loopback { THIS_MACHINE.to_owned() } else { host }
        })
        .collect()
}

/// What a failed server is, in a word for the ROLE column: a server that
/// answered with an error is not "unreachable".
fn failure_role(failure: &Failure) -> &'static str {
    match failure {
        Failure::Auth(_) => "auth error",
        Failure::NoPerm(_) => "no permission",
        Failure::Tls(_) => "TLS error",
        Failure::Timeout(_)
        | Failure::TlsTimeout(_)
        | Failure::Refused
        | Failure::NoSocket
        | Failure::Connection(_) => "unreachable",
        Failure::WrongType | Failure::Unfit(_) | Failure::Reply(_) => "error",
        Failure::NoVote(_) => "no vote",
    }
}

fn version_at_least(version: &str, min: (u64, u64, u64)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let v = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    v >= min
}

fn persistence(p: &Probe) -> String {
    match (p.appendonly, p.appendfsync.as_deref()) {
        (true, Some(fsync)) => format!("aof/{fsync}"),
        (true, None) => "aof".to_owned(),
        (false, _) if p.save.as_deref().is_some_and(|s| !s.trim().is_empty()) => "rdb".to_owned(),
        (false, _) => "none".to_owned(),
    }
}

/// `Redis 7.0.15`, or `Valkey 8.1.8` (whose `redis_version` is the Redis
/// version it is compatible with).
fn engine(p: &Probe) -> String {
    match &p.valkey_version {
        Some(v) => format!("Valkey {v}"),
        None => format!("Redis {}", p.version),
    }
}

/// How the server is deployed: `standalone`, `sentinel` (a
/// `redis+sentinel://` group) or `cluster` (INFO's `cluster_enabled:1`).
fn mode(p: &Probe) -> &'static str {
    if p.cluster_enabled {
        "cluster"
    } else if p.sentinel.is_some() {
        "sentinel"
    } else {
        "standalone"
    }
}

/// The ROLE cell: `master` or `replica` (INFO says `slave`), with the
/// deployment when it is not a plain server.
fn role(p: &Probe) -> String {
    let role = if p.role == "slave" { "replica" } else { p.role.as_str() };
    match mode(p) {
        "standalone" => role.to_owned(),
        mode => format!("{role} ({mode})"),
    }
}

/// The PUB/SUB cell, with what a refusal costs.
fn pubsub_cell(p: &Probe) -> String {
    match &p.pubsub {
        PubSub::Refused(_) => "refused (waiters poll)".to_owned(),
        other => other.word().to_owned(),
    }
}

/// The text table's columns.
const COLUMNS: usize = 9;

fn render_text(
    probes: &[Probe],
    failures: &[ServerError],
    a: &Assessment,
    quorum: usize,
    total: usize,
    verdict: &str,
) -> String {
    let header =
        ["SERVER", "RTT", "VERSION", "ROLE", "PATH", "PUB/SUB", "CLOCK", "EVICTION", "PERSISTENCE"]
            .map(str::to_owned);
    let mut rows: Vec<[String; COLUMNS]> = probes
        .iter()
        .map(|p| {
            [
                p.server.clone(),
                format!("{:.2}ms", p.rtt.as_secs_f64() * 1000.0),
                engine(p),
                role(p),
                p.path.word().to_owned(),
                pubsub_cell(p),
                format!("{:+.1}ms", p.clock_offset_ms),
                if p.maxmemory > 0 {
                    p.policy.clone()
                } else {
                    format!("{} (no maxmemory)", p.policy)
                },
                persistence(p),
            ]
        })
        .collect();
    for e in failures {
        let mut row: [String; COLUMNS] = std::array::from_fn(|_| "-".to_owned());
        row[0] = e.server.clone();
        row[3] = failure_role(&e.failure).into();
        rows.push(row);
    }
    let mut widths = [0usize; COLUMNS];
    for r in std::iter::once(&header).chain(&rows) {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = r.iter().zip(widths).map(|(c, w)| format!("{c:w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "clock spread {:.1}ms, drift allowance {:.1}ms\n",
        a.clock_spread_ms, a.drift_budget_ms
    ));
    for e in &a.errors {
        out.push_str(&format!("error: {e}\n"));
    }
    for w in &a.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    for n in &a.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&match verdict {
        "fit" => format!("verdict: fit for Redlock ({total} server(s), quorum {quorum})"),
        "warnings" => format!(
            "verdict: works, with {} warning(s) ({total} server(s), quorum {quorum})",
            a.warnings.len()
        ),
        "errors" => format!(
            "verdict: not fit: {} error(s), {} warning(s): a member can never vote as it is \
             ({total} server(s), quorum {quorum})",
            a.errors.len(),
            a.warnings.len()
        ),
        _ => format!(
            "verdict: unavailable: {} of {total} servers answered, quorum {quorum}",
            probes.len()
        ),
    });
    out
}

fn render_json(
    probes: &[Probe],
    failures: &[ServerError],
    a: &Assessment,
    quorum: usize,
    verdict: &str,
) -> serde_json::Value {
    let mut servers: Vec<serde_json::Value> = probes
        .iter()
        .map(|p| {
            json!({
                "server": p.server, "reachable": true, "error": null,
                "rtt_ms": p.rtt.as_secs_f64() * 1000.0, "engine": engine(p),
                "version": p.version, "valkey_version": p.valkey_version, "role": p.role,
                "mode": mode(p), "sentinel_service": p.sentinel,
                "path": p.path.word(),
                "path_error": match &p.path { Path::Unknown(e) => Some(e), _ => None },
                "probe_key_refused": p.probe_key_refused,
                "pubsub": p.pubsub.word(), "pubsub_error": p.pubsub.why(),
                "run_id": p.run_id, "clock_offset_ms": p.clock_offset_ms,
                "maxmemory": p.maxmemory, "maxmemory_policy": p.policy,
                "appendonly": p.appendonly, "appendfsync": p.appendfsync, "save": p.save,
            })
        })
        .collect();
    servers.extend(failures.iter().map(
        |e| json!({ "server": e.server, "reachable": false, "error": e.failure.to_string() }),
    ));
    json!({
        "verdict": verdict,
        "quorum": quorum,
        "clock_spread_ms": a.clock_spread_ms,
        "drift_budget_ms": a.drift_budget_ms,
        "errors": a.errors,
        "warnings": a.warnings,
        "notes": a.notes,
        "servers": servers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy(name: &str, run_id: &str) -> Probe {
        Probe {
            server: name.into(),
            version: "7.0.15".into(),
            role: "master".into(),
            run_id: run_id.into(),
            policy: "noeviction".into(),
            appendonly: true,
            appendfsync: Some("always".into()),
            ..Probe::default()
        }
    }

    #[test]
    fn a_refused_subscribe_is_a_warning_or_a_note_with_its_cost() {
        let mut p = healthy("a", "1");
        p.pubsub =
            PubSub::Refused("User u has no permissions to run the 'subscribe' command".into());
        let a = assess(&[p.clone()], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings[0].contains("not woken by releases"), "{a:?}");
        p.pubsub =
            PubSub::Refused("User u has no permissions to access one of the channels".into());
        let a = assess(&[p], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings.is_empty() && a.notes[0].contains("not woken by releases"), "{a:?}");
    }

    #[test]
    fn a_server_restarted_within_the_window_gets_a_warning_unless_it_keeps_its_data() {
        let window = Some(Duration::from_secs(61));
        let mut young = healthy("a", "1");
        young.uptime = Some(Duration::from_secs(5));
        let mut a = Assessment::default();
        assess_restarts(&[young.clone()], window, &mut a);
        assert!(a.warnings.is_empty(), "appendfsync always keeps its data: {a:?}");
        young.appendfsync = Some("everysec".into());
        assess_restarts(&[young.clone()], window, &mut a);
        assert!(
            a.warnings[0].contains("no vote until 1m 1s") && a.warnings[0].contains("in 56.0s")
        );
        let mut trusted = Assessment::default();
        assess_restarts(&[young], None, &mut trusted);
        assert!(trusted.warnings.is_empty());
    }

    #[test]
    fn healthy_servers_have_no_warnings() {
        let a = assess(&[healthy("a", "1"), healthy("b", "2")], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings.is_empty() && a.notes.is_empty(), "{a:?}");
        assert!((a.drift_budget_ms - 302.0).abs() < 1e-9);
    }

    #[test]
    fn flags_duplicates_replicas_eviction_and_clock_spread() {
        let mut lru = healthy("c", "3");
        lru.policy = "allkeys-lru".into();
        lru.maxmemory = 1 << 20;
        let mut replica = healthy("d", "4");
        replica.role = "slave".into();
        let mut skewed = healthy("e", "5");
        skewed.clock_offset_ms = 500.0;
        let probes = [healthy("a", "1"), healthy("b", "1"), lru, replica, skewed];
        let a = assess(&probes, &[], Duration::from_secs(30), 0.01);
        let all = a.warnings.join("\n");
        assert!(all.contains("a and b are the same server"), "{all}");
        assert!(all.contains("c: maxmemory-policy allkeys-lru"), "{all}");
        assert!(all.contains("d: role slave"), "{all}");
        assert!(all.contains("clocks differ by 500.0ms"), "{all}");
        assert_eq!(a.warnings.len(), 4);
    }

    #[test]
    fn a_server_that_answered_with_an_error_is_not_unreachable() {
        let e = |failure| ServerError {
            server: "a:1".into(),
            op: Op::Doctor,
            key: String::new(),
            failure,
        };
        let failures = [e(Failure::Auth("NOAUTH".into())), e(Failure::NoPerm("NOPERM".into()))];
        let a = assess(&[], &failures, Duration::from_secs(30), 0.01);
        assert!(a.warnings[0].starts_with("auth error: a:1"), "{:?}", a.warnings);
        assert!(a.warnings[1].starts_with("no permission: a:1"), "{:?}", a.warnings);
        let text = render_text(&[], &failures, &a, 1, 2, "unavailable");
        assert!(text.contains("auth error") && !text.contains("unreachable"), "{text}");
    }

    #[test]
    fn flags_clocks_that_break_fencing_and_old_servers() {
        let mut far = healthy("b", "2");
        far.clock_offset_ms = 950.0;
        let a = assess(&[healthy("a", "1"), far], &[], Duration::from_secs(3600), 0.01);
        assert!(a.warnings.iter().any(|w| w.contains("fencing numbers can go backwards")), "{a:?}");
        assert!(a.notes.iter().any(|n| n.starts_with("b: clock +950.0ms")), "{a:?}");
        let mut near = healthy("c", "3");
        near.clock_offset_ms = 30.0;
        let a = assess(&[healthy("a", "1"), near], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings.is_empty() && a.notes.is_empty(), "{a:?}");
        let mut old = healthy("d", "4");
        old.version = "3.0.7".into();
        let a = assess(&[old], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings[0].contains("cannot draw fencing numbers"), "{a:?}");
    }

    #[test]
    fn the_path_a_cluster_node_and_a_refused_key_are_said_with_their_cost() {
        let mut tx = healthy("a", "1");
        tx.path = Path::Transaction;
        let a = assess(&[tx.clone()], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings.is_empty(), "{a:?}");
        assert!(a.notes[0].starts_with("a: refuses scripts") && a.notes[0].contains("--shared"));
        let mut failed = healthy("b", "2");
        failed.path = Path::Unknown("status: no permission: NOPERM 'watch'".into());
        let a = assess(&[failed.clone()], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings[0].contains("b: a lock operation failed there (status"), "{a:?}");
        // A cluster node's status fails with the redirect: one warning.
        failed.cluster_enabled = true;
        let a = assess(&[failed.clone()], &[], Duration::from_secs(30), 0.01);
        assert_eq!(a.warnings.len(), 1, "{a:?}");
        assert!(a.warnings[0].contains("b: a Redis Cluster node"), "{a:?}");
        let mut keys = healthy("c", "3");
        keys.probe_key_refused = Some("No permissions to access a key".into());
        let a = assess(&[keys], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings.is_empty() && a.notes[0].contains("refuses this user the probe key"));
        let text = render_text(&[healthy("d", "4"), tx, failed], &[], &a, 1, 3, "warnings");
        // A row's cells, one space apart.
        let row = |name: &str| {
            let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_default();
            line.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        assert!(row("d ").contains("Redis 7.0.15 master scripts allowed"), "{text}");
        assert!(row("a ").contains("master transaction allowed"), "{text}");
        assert!(row("b ").contains("master (cluster) unknown"), "{text}");
    }

    #[test]
    fn the_setup_says_what_failures_it_tolerates_and_where_the_servers_are() {
        let setup = |members: &[&str], quorum, file| {
            let mut a = Assessment::default();
            assess_setup(members, quorum, file, &mut a);
            a
        };
        let a = setup(&["a:1", "b:1", "c:1"], 2, true);
        assert!(a.warnings.is_empty() && a.notes.is_empty(), "{a:?}");
        let a = setup(&["a:1"], 1, true);
        assert!(a.warnings.is_empty() && a.notes[0].starts_with("one server"), "{a:?}");
        let a = setup(&["a:1", "b:1"], 2, true);
        assert!(a.warnings[0].starts_with("2 servers (quorum 2) tolerate no failure"), "{a:?}");
        let a = setup(&["a:1", "b:1", "c:1"], 3, true);
        assert!(a.warnings[0].starts_with("3 servers with quorum 3 tolerate no failure"), "{a:?}");
        let a = setup(&["redis.lan:7001", "rediss://REDIS.lan:7002/1", "redis.lan:7003"], 2, true);
        assert!(a.warnings[0].starts_with("every server is on redis.lan"), "{a:?}");
        let local = ["127.0.0.1:7001", "localhost:7002", "unix:/run/r.sock", "[::1]:7004"];
        let a = setup(&local, 3, true);
        assert!(a.warnings.is_empty(), "{a:?}");
        assert!(a.notes[0].starts_with("every server is on this machine"), "{a:?}");
        let a = setup(&["sentinel:m@h1:26379,h2:26379", "cluster:h1:7000", "h1:6379"], 2, true);
        assert!(a.warnings.is_empty(), "a group's other hosts count: {a:?}");
        let a = setup(&["cluster:h1:7000,h1:7001", "h1:6379", "sentinel:m@h1:1"], 2, true);
        assert!(a.warnings[0].starts_with("every server is on h1"), "{a:?}");
        let a = setup(&["a:1", "b:1", "c:1"], 2, false);
        assert!(a.notes[0].starts_with("no configuration file"), "{a:?}");
    }

    #[test]
    fn no_persistence_is_a_note_about_delayed_restarts() {
        let mut p = healthy("a", "1");
        p.appendonly = false;
        p.save = Some(String::new());
        let a = assess(&[p], &[], Duration::from_secs(30), 0.01);
        assert!(a.warnings.is_empty());
        assert!(a.notes[0].contains("delayed restart"), "{:?}", a.notes);
    }
}
