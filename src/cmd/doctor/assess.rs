//! The pure judgement: probes, group and cluster checks and the
//! configuration in, errors, warnings and notes out ([`Assessment`]), and
//! the [`Verdict`] they add up to.

use std::time::Duration;

use super::PROBE_KEY;
use super::cluster::ClusterCheck;
use super::probe::{Path, Probe, PubSub};
use super::sentinel::{GroupCheck, shown_names};
use crate::fence;
use crate::quorum::drift_allowance;
use crate::server::cluster::{SLOTS, SlotMap};
use crate::server::{Failure, ServerError};

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
    /// Whether an error is the server list's own mistake (a server listed
    /// twice under two spellings): a usage error (64), as the lock's round
    /// says it; the other errors are the servers' state (69).
    pub misconfigured: bool,
    /// Problems that can break mutual exclusion or availability.
    pub warnings: Vec<String>,
    /// Advice that needs no change when followed.
    pub notes: Vec<String>,
    /// Largest minus smallest clock offset, in ms.
    pub clock_spread_ms: f64,
    /// The drift allowance of the TTL (`ttl * drift_factor + 2ms`), in ms.
    pub drift_budget_ms: f64,
}

/// What the assessment adds up to, most serious first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Fewer than a quorum of servers answered (exit 69).
    Unavailable,
    /// A member can never vote as configured (exit 69; 64 when the list
    /// is the mistake, [`Assessment::misconfigured`]).
    Errors,
    /// The servers work, with warnings (exit 1).
    Warnings,
    /// Fit for Redlock (exit 0).
    Fit,
}

impl Verdict {
    /// The verdict on `answered` servers of a fleet with `quorum`.
    pub fn of(answered: usize, quorum: usize, a: &Assessment) -> Verdict {
        if answered < quorum {
            Verdict::Unavailable
        } else if !a.errors.is_empty() {
            Verdict::Errors
        } else if a.warnings.is_empty() {
            Verdict::Fit
        } else {
            Verdict::Warnings
        }
    }

    /// One word for the JSON.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Unavailable => "unavailable",
            Verdict::Errors => "errors",
            Verdict::Warnings => "warnings",
            Verdict::Fit => "fit",
        }
    }
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

/// Which servers count towards no quorum now, by `acquire`'s own rules:
/// a warning for each server up for less than `window` (`--max-ttl` plus
/// 1 s; `None` with `--trust-restarts`) that does not keep every write
/// ([`crate::lock::votes_again_in`]), and for each whose clock is further
/// from this machine's than the locks allow ([`crate::lock::clock_too_far`];
/// every server off means this machine's clock is); an error when fewer
/// than `quorum` are left to vote: no lock can be taken.
pub fn assess_votes(probes: &[Probe], window: Option<Duration>, quorum: usize, a: &mut Assessment) {
    let mut voters = probes.len();
    // When each server without a vote only for its start gets one.
    let mut soon: Vec<Duration> = Vec::new();
    for p in probes {
        let rest =
            p.uptime.and_then(|up| crate::lock::votes_again_in(up, p.unkept.is_none(), window));
        let restarted = match (window, p.uptime) {
            (_, Some(up)) => rest.map(|rest| {
                format!(
                    "{}: started {} ago, and {}: it may have lost a holder's key if that was a \
                     restart, so it gets no vote until {} after its start: it can vote in {}; \
                     to make it vote at once, start it with appendonly yes and appendfsync \
                     always (from its start, its append-only file written without error), or \
                     pass --trust-restarts",
                    p.server,
                    crate::text::fmt_duration(up),
                    p.unkept.unwrap_or("it may not keep every write"),
                    crate::text::fmt_duration(window.unwrap_or_default()),
                    crate::text::fmt_duration(rest)
                )
            }),
            (Some(_), None) => {
                a.notes.push(format!(
                    "{}: no uptime in its INFO: a restart is not seen, and it is assumed to have \
                     restarted long ago",
                    p.server
                ));
                None
            }
            (None, None) => None,
        };
        let off =
            Duration::try_from_secs_f64(p.clock_offset_ms.abs() / 1000.0).unwrap_or(Duration::MAX);
        let skewed = crate::lock::clock_too_far(off, p.clock_uncertainty).then(|| {
            format!(
                "{}: clock {} {} this machine's, more than the {} the locks allow: it gets no \
                 vote (check NTP, here and there)",
                p.server,
                crate::text::fmt_duration(off),
                if p.clock_offset_ms > 0.0 { "ahead of" } else { "behind" },
                crate::text::fmt_duration(crate::lock::CLOCK_ALLOWANCE)
            )
        });
        if restarted.is_some() || skewed.is_some() {
            voters -= 1;
        }
        if let (Some(rest), None) = (rest, &skewed) {
            soon.push(rest);
        }
        a.warnings.extend(restarted.into_iter().chain(skewed));
    }
    if !probes.is_empty() && voters < quorum {
        // The servers waiting out their start vote in turn: a quorum can
        // once the (quorum - voters)-th of them does. Clocks give no date.
        soon.sort();
        let until = match soon.get(quorum - voters - 1) {
            Some(rest) => format!(
                "for {}, until enough of them can vote (see the warnings: how to make them vote \
                 at once)",
                crate::text::fmt_duration(*rest)
            ),
            None => "until more can".to_owned(),
        };
        a.errors.push(format!(
            "{voters} of the {} server(s) that answered can vote now, quorum {quorum}: no lock can \
             be taken {until}",
            probes.len()
        ));
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
        drift_budget_ms: drift_allowance(ttl, drift_factor).as_secs_f64() * 1000.0,
        ..Assessment::default()
    };
    for e in failures {
        a.warnings.push(format!("{}: {e}", failure_role(&e.failure)));
    }
    for (i, p) in probes.iter().enumerate() {
        assess_voter(&probes[..i], p, &mut a);
        assess_keys(p, &mut a);
        assess_pubsub(p, &mut a);
        assess_persistence(p, &mut a);
    }
    assess_clocks(probes, ttl, &mut a);
    a
}

/// Whether redlock gets a vote from server `p`, and how: the same server
/// as one `earlier` in the list, a replica, a cluster node listed plainly,
/// scripts refused, the probe key refused by its ACL.
fn assess_voter(earlier: &[Probe], p: &Probe, a: &mut Assessment) {
    if let Some(first) = earlier.iter().find(|q| !p.run_id.is_empty() && q.run_id == p.run_id) {
        // The same verdict as a lock's round: a fleet that lists a
        // server twice counts one server's votes twice, and renewals
        // can then hold a lock on a minority (`lock::Fleet::twins`).
        a.errors.push(format!(
            "{} and {} are the same server (run_id {}): list each server once (the servers \
             are not independent, and renewals would count it twice)",
            first.server, p.server, p.run_id
        ));
        a.misconfigured = true;
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
        // What crate::lock::noscript does not do (README, "Servers without
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
}

/// Whether server `p` keeps the lock's keys and can serve their
/// operations: eviction, the version, a clock too far for the fences'
/// window.
fn assess_keys(p: &Probe, a: &mut Assessment) {
    if crate::server::evicts(&p.policy, p.maxmemory) {
        a.errors.push(format!(
            "{}: maxmemory-policy {} with maxmemory {} can evict lock keys and the records of \
             ticks and takes: it gets no vote for --once-per or -n; use noeviction",
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
            crate::text::fmt_duration(fence::WINDOW)
        ));
    }
}

/// Whether waiters hear releases from server `p` (`SUBSCRIBE`).
fn assess_pubsub(p: &Probe, a: &mut Assessment) {
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
}

/// What server `p` keeps of its locks across a crash (AOF, RDB).
fn assess_persistence(p: &Probe, a: &mut Assessment) {
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

/// The servers' clocks against each other: the fences' margin and the
/// drift allowance of a `ttl`.
fn assess_clocks(probes: &[Probe], ttl: Duration, a: &mut Assessment) {
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
            crate::text::fmt_duration(fence_margin)
        ));
    }
    if a.clock_spread_ms > a.drift_budget_ms {
        a.warnings.push(format!(
            "server clocks differ by {:.1}ms, more than the drift allowance of {:.1}ms for a {} TTL: \
             check NTP (clocks that jump or run at different rates break Redlock's timing)",
            a.clock_spread_ms,
            a.drift_budget_ms,
            crate::text::fmt_duration(ttl)
        ));
    }
}

/// Judges the configuration itself, whatever the servers answer: how many
/// failures the members and quorum tolerate, whether they share one host,
/// and whether a configuration file keeps the hosts of a fleet alike.
/// `members` are the servers' display names ([`crate::server::Server::name`]).
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
            "no configuration file (--config, $REDLOCK_CONFIG, ~/.config/redlock/config.toml \
             or {}): every host must be given the same servers, quorum and max-ttl by hand; one file \
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
pub fn failure_role(failure: &Failure) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::super::{Report, render};
    use super::*;
    use crate::server::Op;

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

    /// The text report of these findings.
    fn text(
        probes: &[Probe],
        failures: &[ServerError],
        assessment: Assessment,
        quorum: usize,
        total: usize,
        verdict: Verdict,
    ) -> String {
        render::text(&Report {
            probes: probes.to_vec(),
            failures: failures.to_vec(),
            groups: Vec::new(),
            clusters: Vec::new(),
            assessment,
            quorum,
            total,
            verdict,
        })
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
        assess_votes(&[young.clone()], window, 1, &mut a);
        assert!(a.warnings.is_empty() && a.errors.is_empty(), "appendfsync always: {a:?}");
        young.appendfsync = Some("everysec".into());
        young.unkept = Some("appendfsync is not always");
        assess_votes(&[young.clone()], window, 1, &mut a);
        assert!(
            a.warnings[0].contains("no vote until 1m 1s") && a.warnings[0].contains("in 56.0s")
        );
        assert!(a.warnings[0].contains("appendfsync is not always"), "{a:?}");
        assert!(a.errors[0].contains("0 of the 1 server(s) that answered can vote"), "{a:?}");
        let mut trusted = Assessment::default();
        assess_votes(&[young], None, 1, &mut trusted);
        assert!(trusted.warnings.is_empty() && trusted.errors.is_empty());
    }

    /// `acquire` refuses the vote of a server whose clock is off by more
    /// than the allowance; doctor says so, and says when no quorum is left.
    #[test]
    fn a_server_whose_clock_is_off_gets_no_vote() {
        let mut fast = healthy("a", "1");
        fast.clock_offset_ms = 5000.0;
        let close = {
            let mut p = healthy("b", "2");
            p.clock_offset_ms = -300.0;
            p
        };
        let mut a = Assessment::default();
        assess_votes(&[fast.clone(), close.clone(), healthy("c", "3")], None, 2, &mut a);
        assert_eq!(a.warnings.len(), 1, "{a:?}");
        assert!(a.warnings[0].contains("clock 5.0s ahead of this machine's"), "{a:?}");
        assert!(a.warnings[0].contains("no vote"), "{a:?}");
        assert!(a.errors.is_empty(), "2 of 3 still vote: {a:?}");
        let mut slow = close;
        slow.clock_offset_ms = -2000.0;
        let mut a = Assessment::default();
        assess_votes(&[fast, slow, healthy("c", "3")], None, 2, &mut a);
        assert!(a.warnings[1].contains("2.0s behind"), "{a:?}");
        assert!(a.errors[0].contains("1 of the 3 server(s) that answered can vote now, quorum 2"));
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
        let errors = a.errors.join("\n");
        assert!(errors.contains("a and b are the same server"), "{errors}");
        assert!(errors.contains("c: maxmemory-policy allkeys-lru"), "{errors}");
        assert!(errors.contains("no vote for --once-per or -n"), "{errors}");
        let all = a.warnings.join("\n");
        assert!(all.contains("d: role slave"), "{all}");
        assert!(all.contains("clocks differ by 500.0ms"), "{all}");
        assert_eq!((a.errors.len(), a.warnings.len()), (2, 2));
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
        let text = text(&[], &failures, a, 1, 2, Verdict::Unavailable);
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
        let text = text(&[healthy("d", "4"), tx, failed], &[], a, 1, 3, Verdict::Warnings);
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
