//! The doctor's report, as text (a table and lines) or as JSON.

use serde_json::json;

use super::Report;
use super::assess::{Verdict, failure_role};
use super::cluster::ClusterCheck;
use super::probe::{Path, Probe, PubSub};
use super::sentinel::{GroupCheck, shown_names};
use crate::cmd::table;
use crate::server::cluster::{SLOTS, SlotMap};

/// The text report: the table (a row per server), a line per Sentinel
/// group and cluster, the clocks, the errors, warnings and notes, and the
/// verdict.
pub fn text(r: &Report) -> String {
    let a = &r.assessment;
    let (quorum, total) = (r.quorum, r.total);
    let mut rows: Vec<[String; 9]> = r
        .probes
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
    for e in &r.failures {
        let mut row: [String; 9] = std::array::from_fn(|_| "-".to_owned());
        row[0] = e.server.clone();
        row[3] = failure_role(&e.failure).into();
        rows.push(row);
    }
    let header =
        ["SERVER", "RTT", "VERSION", "ROLE", "PATH", "PUB/SUB", "CLOCK", "EVICTION", "PERSISTENCE"];
    let mut out = table::render(header, &rows);
    for line in r.groups.iter().map(group_line).chain(r.clusters.iter().map(cluster_line)) {
        out.push_str(&line);
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
    out.push_str(&match r.verdict {
        Verdict::Fit => format!("verdict: fit for Redlock ({total} server(s), quorum {quorum})"),
        Verdict::Warnings => format!(
            "verdict: works, with {} warning(s) ({total} server(s), quorum {quorum})",
            a.warnings.len()
        ),
        Verdict::Errors => format!(
            "verdict: not fit: {} error(s), {} warning(s) ({total} server(s), quorum {quorum})",
            a.errors.len(),
            a.warnings.len()
        ),
        Verdict::Unavailable => format!(
            "verdict: unavailable: {} of {total} servers answered, quorum {quorum}",
            r.probes.len()
        ),
    });
    out
}

/// The JSON report: the same facts as [`text`], one object.
pub fn json(r: &Report) -> serde_json::Value {
    let a = &r.assessment;
    let mut servers: Vec<serde_json::Value> = r
        .probes
        .iter()
        .map(|p| {
            json!({
                "server": p.server, "reachable": true, "error": null,
                "rtt_ms": crate::text::ms_f64(p.rtt), "engine": engine(p),
                "version": p.version, "valkey_version": p.valkey_version, "role": p.role,
                "mode": mode(p), "sentinel_service": p.sentinel,
                "path": p.path.word(),
                "path_error": match &p.path { Path::Unknown(e) => Some(e), _ => None },
                "probe_key_refused": p.probe_key_refused,
                "pubsub": p.pubsub.word(), "pubsub_error": p.pubsub.why(),
                "run_id": p.run_id, "clock_offset_ms": crate::text::round_ms(p.clock_offset_ms),
                "maxmemory": p.maxmemory, "maxmemory_policy": p.policy,
                "appendonly": p.appendonly, "appendfsync": p.appendfsync, "save": p.save,
            })
        })
        .collect();
    servers.extend(r.failures.iter().map(
        |e| json!({ "server": e.server, "reachable": false, "error": e.failure.to_string() }),
    ));
    json!({
        "verdict": r.verdict.word(),
        "quorum": r.quorum,
        "clock_spread_ms": crate::text::round_ms(a.clock_spread_ms),
        "drift_budget_ms": crate::text::round_ms(a.drift_budget_ms),
        "errors": a.errors,
        "warnings": a.warnings,
        "notes": a.notes,
        "servers": servers,
        "sentinels": r.groups.iter().map(group_json).collect::<Vec<_>>(),
        "clusters": r.clusters.iter().map(cluster_json).collect::<Vec<_>>(),
    })
}

/// A Sentinel group's line in the text report.
fn group_line(g: &GroupCheck) -> String {
    let head =
        format!("sentinel {}: {} of {} Sentinels answer", g.service, g.answered(), g.answers.len());
    let named = g.named();
    let master = match (&g.master, &g.master_role) {
        (Some(m), Ok((role, replicas))) => {
            format!("master {m} (role {role}, {replicas} replica(s) online)")
        }
        (Some(m), Err(e)) => format!("master {m} ({e})"),
        (None, _) => String::new(),
    };
    match (named.as_slice(), &g.master) {
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

/// A Sentinel group in the JSON report.
fn group_json(g: &GroupCheck) -> serde_json::Value {
    json!({
        "group": g.group,
        "service": g.service,
        "sentinels": g.answers.iter().map(|(address, answer)| match answer {
            Ok(Some((master, replicas))) => json!({
                "sentinel": address, "master": master, "replicas_up": replicas,
                "error": null
            }),
            Ok(None) => json!({ "sentinel": address, "master": null, "error": null }),
            Err(e) => json!({ "sentinel": address, "master": null, "error": e }),
        }).collect::<Vec<_>>(),
        "master": g.master,
        "master_role": g.master_role.as_ref().ok().map(|(role, _)| role),
        "master_replicas": g.master_role.as_ref().ok().map(|(_, n)| n),
        "master_error": g.master_role.as_ref().err(),
    })
}

/// A cluster's line in the text report.
fn cluster_line(c: &ClusterCheck) -> String {
    let name = c.group.strip_prefix("cluster:").unwrap_or(&c.group);
    let head = format!("cluster {name}: {} of {} seeds answer", c.answered(), c.seeds.len());
    let Some(map) = c.map() else {
        return format!("{head}, no slot map");
    };
    let states: Vec<&str> = c
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
        if c.agreed() { "" } else { " (the seeds disagree)" },
        c.probe_slot,
        map.owner(c.probe_slot).unwrap_or("no master"),
    )
}

/// A cluster in the JSON report.
fn cluster_json(c: &ClusterCheck) -> serde_json::Value {
    let map = c.map();
    json!({
        "group": c.group,
        "seeds": c.seeds.iter().map(|(seed, answer)| match answer {
            Ok((state, _)) => json!({ "seed": seed, "state": state, "error": null }),
            Err(e) => json!({ "seed": seed, "state": null, "error": e }),
        }).collect::<Vec<_>>(),
        "masters": map.map(|m| m.masters().len()),
        "slots_covered": map.map(SlotMap::covered),
        "slots_without_replica": map.map(SlotMap::unreplicated),
        "seeds_agree": c.agreed(),
        "probe_slot": c.probe_slot,
        "probe_master": map.and_then(|m| m.owner(c.probe_slot)),
    })
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
