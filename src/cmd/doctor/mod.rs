//! `redlock doctor`: is this set of servers fit for Redlock? One job per
//! module:
//! - [`probe`]: each server probed in parallel (PINGs, INFO, TIME, CONFIG
//!   GET, a SUBSCRIBE), and the command path its status round took.
//! - [`sentinel`]: a Sentinel group's check: its Sentinels reachable, more
//!   than half of the listed naming one master, that master reachable, a
//!   master, and with a replica (without one, the group never votes:
//!   [`crate::server::sentinel`]).
//! - [`cluster`]: a cluster's check: its seeds reachable, its state ok,
//!   every slot served, the seeds agreeing on the slot map.
//! - [`assess`]: the pure judgement: errors (a member that can never vote
//!   as configured), warnings (things that break the algorithm's
//!   assumptions) and notes (advice), and the verdict.
//! - [`render`]: the report, as a table and lines, or as JSON.
//!
//! Exit 0 fit, 1 warnings, 64 for an error of the configuration (found
//! by the gate before any server is asked, or one server listed twice), 69
//! when fewer than a quorum of servers answer or a member cannot vote as
//! the servers are (a Sentinel group without a replica). A cluster's
//! row in the table is the master of the probe key's slot, where the
//! status round went.
//!
//! Which command path redlock takes with each server ([`probe::Path`]:
//! scripts, or WATCH/MULTI/EXEC on a server that refuses them) is not
//! guessed from the version or the ACL: doctor runs a read-only status
//! round of a probe key through the fleet, which takes the same
//! script/no-script dispatch as every lock operation, and reads what each
//! server did.

use std::io::Write;
use std::time::Duration;

use crate::error::Error;
use crate::exit;
use crate::lock::Fleet;
use crate::quorum::Failures;
use crate::server::{Failure, ServerError};

mod assess;
mod cluster;
mod probe;
mod render;
mod sentinel;

use assess::{Assessment, Verdict};
use cluster::ClusterCheck;
use probe::Probe;
use sentinel::GroupCheck;

/// The key whose release channel the probe subscribes to: doctor knows no
/// key, so an ACL that allows only some keys' channels may refuse this one.
const PROBE_KEY: &str = "doctor-probe";

/// Everything doctor found and concluded, for [`render`].
#[derive(Debug)]
struct Report {
    /// The servers that answered the probe.
    probes: Vec<Probe>,
    /// The servers that did not, and why.
    failures: Vec<ServerError>,
    /// Each Sentinel group's check.
    groups: Vec<GroupCheck>,
    /// Each cluster's check.
    clusters: Vec<ClusterCheck>,
    /// The errors, warnings and notes.
    assessment: Assessment,
    /// The fleet's quorum.
    quorum: usize,
    /// How many servers the fleet lists.
    total: usize,
    /// What it adds up to.
    verdict: Verdict,
}

/// `work` bounded by `timeout`; its failure, or the timeout, as the text
/// the report shows.
async fn within<T>(
    timeout: Duration,
    work: impl Future<Output = Result<T, Failure>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(failure)) => Err(failure.to_string()),
        Err(_) => Err(Failure::Timeout(timeout).to_string()),
    }
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
    let results =
        futures_util::future::join_all(fleet.servers().iter().map(|s| probe::probe(s))).await;
    let mut probes = Vec::new();
    let mut failures = Vec::new();
    for ((result, server), (_, view)) in
        results.into_iter().zip(fleet.servers()).zip(status.servers)
    {
        match result {
            Ok(mut p) => {
                (p.path, p.probe_key_refused) = probe::path(server, view);
                probes.push(p);
            }
            Err(e) => failures.push(e),
        }
    }
    let groups = futures_util::future::join_all(
        fleet.servers().iter().filter(|s| s.sentinel().is_some()).map(|s| sentinel::check_group(s)),
    )
    .await
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    let clusters = futures_util::future::join_all(
        fleet
            .servers()
            .iter()
            .filter(|s| s.cluster().is_some())
            .map(|s| cluster::check_cluster(fleet, s)),
    )
    .await
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    let mut a = assess::assess(&probes, &failures, ttl, drift_factor);
    assess::assess_votes(&probes, fleet.restart_window(), fleet.quorum(), &mut a);
    for g in &groups {
        assess::assess_group(g, &mut a);
    }
    for c in &clusters {
        assess::assess_cluster(c, &mut a);
    }
    let quorum = fleet.quorum();
    let members: Vec<&str> = fleet.servers().iter().map(|s| s.name()).collect();
    assess::assess_setup(&members, quorum, config_file.is_some(), &mut a);
    let report = Report {
        verdict: Verdict::of(probes.len(), quorum, &a),
        probes,
        failures,
        groups,
        clusters,
        assessment: a,
        quorum,
        total: fleet.servers().len(),
    };
    let text = if json { render::json(&report).to_string() } else { render::text(&report) };
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    let Report { verdict, probes, failures, assessment, total, .. } = report;
    match verdict {
        Verdict::Fit => Ok(exit::OK),
        Verdict::Warnings => Ok(exit::FREE_OR_WARNINGS),
        // No lock can be taken as the servers are (a member that can
        // never vote, or too few that can vote now): as unavailable as
        // servers that answer with errors, though they all answered; but
        // a server listed twice is the list's mistake, 64 as `run` says.
        Verdict::Errors => {
            let mut what = format!("doctor: {}", assessment.errors.join("; "));
            if !failures.is_empty() {
                what = format!("{what}: {}", Failures(failures));
            }
            Err(if assessment.misconfigured { Error::Usage(what) } else { Error::Unfit(what) })
        }
        Verdict::Unavailable => Err(Error::Unavailable {
            what: format!("doctor: {} of {total} servers answered, quorum {quorum}", probes.len()),
            config: false,
            failures: Failures(failures),
        }),
    }
}
