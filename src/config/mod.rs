//! From the command line as typed ([`crate::cli::Cli`]) to a validated
//! [`Config`]: durations parsed, servers checked, quorum and timeouts
//! consistent. Every problem is a [`Error::Usage`] naming the flag, found
//! before anything is sent to a server. A command stops at the first;
//! `config` and `doctor` run the same checks on the global options and the
//! file's `ttl` and `wait` and report every problem ([`Error::Problems`]).
//!
//! This file assembles the [`Config`] (`Config::from_parsed`) and checks
//! settings against each other: the TTL within `--max-ttl` and the drift,
//! the node timeout within `-n`'s look-back, renewal within the TTL
//! (`timing`), a raw key through a cluster (`key_layout`); and, for
//! `config` and `doctor`, every problem at once (`check`) and the table
//! `config` shows. Its parts, each importing only the ones after it:
//! - `commands`: each command's settings ([`Command`], [`Run`], [`Hold`]),
//!   read from its arguments;
//! - `tick`: when a run may run: its schedule, zone and tick, and the
//!   jitter and the wait that the tick bounds;
//! - `fleet`: the servers and the lock's bounds, the same for every
//!   command, and where the file exposes a password;
//! - `values`: the parsers of one setting's value that the others share.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{self, Parsed};
use crate::config_file::{self, Origin};
use crate::error::Error;
use crate::lock::base_restart_window;
use crate::output::Log;
use crate::server::ServerUrl;

mod commands;
mod fleet;
#[cfg(test)]
mod tests;
mod tick;
mod values;

pub use crate::server::Tls;

pub use commands::{Command, Hold, MAX_DEFAULT_GRACE, MAX_FREEZE, Run};
use commands::{command, default_grace, kill_margin};

pub use fleet::{MAX_DEFAULT_NODE_TIMEOUT, NO_SERVERS};
use fleet::{
    drift_factor, exposed, host, max_ttl, node_timeout, password, quorum, servers, tls,
    validity_budget, within_max_ttl,
};
use tick::zone;

pub use values::{DEFAULT_TTL, MAX_DURATION, MAX_JITTER, MAX_TTL, OnLost, duration, split_servers};
use values::{ci_job, ttl_label, ttl_named, ttl_or_file, usage, wait_for};

/// Everything a subcommand needs, validated.
#[derive(Debug)]
pub struct Config {
    /// The servers, in the order given.
    pub servers: Vec<ServerUrl>,
    /// Servers that must agree.
    pub quorum: usize,
    /// Time limit of each server call.
    pub node_timeout: Duration,
    /// Clock drift allowance as a fraction of the TTL.
    pub drift_factor: f64,
    /// How long a restarted server counts towards no quorum (`--max-ttl`
    /// plus the fences' linger); `None` with `--trust-restarts`.
    pub restart_window: Option<Duration>,
    /// Where the lock's keys live (`--raw-key`: the key as given).
    pub key_layout: crate::lock::KeyLayout,
    /// Certificates for `rediss://` servers.
    pub tls: Tls,
    /// Where messages go.
    pub log: Log,
    /// `--host`: this host's name in tokens and history (`None`: the
    /// kernel's, [`crate::token::hostname`]).
    pub host: Option<String>,
    /// The subcommand and its settings.
    pub command: Command,
}

/// Whether a run's renewal, node timeout, drift and stop fit in its TTL
/// ([`crate::watchdog::Timing::check`]), as a usage error if not; `label`
/// names where the TTL came from.
fn fits(label: &str, timing: crate::watchdog::Timing) -> Result<(), Error> {
    timing.check().map_err(|why| {
        Error::Usage(format!(
            "{label} {}: --ttl, --renew-every, --kill-after, --node-timeout and --drift-factor do not fit: {why}",
            crate::text::fmt_duration(timing.ttl)
        ))
    })
}

/// Whether the renewal of the lock `command` keeps fits its `ttl`
/// ([`fits`]), for the commands that renew one.
fn renewal_fits(
    command: &Command,
    ttl: Duration,
    node_timeout: Duration,
    drift: Duration,
) -> Result<(), Error> {
    let timing = |renew_every, grace, margin| crate::watchdog::Timing {
        ttl,
        renew_every,
        node_timeout,
        grace,
        margin,
        drift,
    };
    match command {
        // With --on-lost ignore no stop is planned on a failing renewal.
        Command::Run(run) if run.on_lost != OnLost::Ignore => {
            fits("run --ttl", timing(run.renew_every, run.grace(), run.kill_margin()))
        }
        // A freeze stops no command, so no grace or margin: only renewal
        // must come before the validity ends.
        Command::Hold(hold) => {
            fits("hold: the TTL", timing(hold.renew_every, Duration::ZERO, Duration::ZERO))
        }
        _ => Ok(()),
    }
}

impl Config {
    /// Validates the command line layered over the configuration file.
    pub fn from_parsed(parsed: Parsed, file: Option<&config_file::File>) -> Result<Config, Error> {
        let (g, mut problems) = config_file::layer_all(&parsed, file);
        let env_password = parsed.password.clone();
        let log = Log::new(g.verbose.value, g.quiet.value, g.log_format.value);
        // `config` and `doctor` report every problem at once; `config`
        // shows the rest of the configuration all the same.
        if let cli::Command::Config(_) | cli::Command::Doctor(_) = &parsed.cli.command {
            // `doctor --ttl` is the TTL it checks the servers for.
            let ttl = match &parsed.cli.command {
                cli::Command::Doctor(cli::Lazy(a)) => Some(a.ttl.as_str()),
                _ => None,
            };
            let checked = check(&g, env_password.as_deref(), ttl);
            problems.extend(checked.problems);
            let problems: Vec<String> = problems.iter().map(Error::to_string).collect();
            if let cli::Command::Config(cli::Lazy(a)) = parsed.cli.command {
                let rows = shown(&g, checked.quorum, checked.node_timeout, env_password);
                let check = a.check;
                let warnings = checked.warnings;
                let shown = Command::ShowConfig { rows, problems, warnings, check };
                return Ok(Config::shown(log, shown));
            }
            if !problems.is_empty() {
                return Err(Error::Problems(problems));
            }
        }
        if let Some(first) = problems.into_iter().next() {
            return Err(first);
        }
        let password = password(&g, env_password.as_deref())?;
        let servers = servers(&g, password.as_deref())?;
        let tls = tls(&g)?;
        let quorum = quorum(&g, servers.len())?;
        let drift_factor = drift_factor(&g)?;
        let host = host(&g)?;
        let job = parsed.ci_job.as_deref().and_then(ci_job);
        let (command, ttl) = command(parsed.cli.command, &g, job, parsed.ping)?;
        let (node_timeout, restart_window) = timing(&g, &command, ttl, drift_factor)?;
        let command = match command {
            Command::Doctor { ttl, json, .. } => {
                Command::Doctor { ttl, json, config_file: g.file.clone() }
            }
            other => other,
        };
        let key_layout = key_layout(&g, &command, &servers)?;
        if servers.is_empty() {
            return usage(NO_SERVERS.to_owned());
        }
        Ok(Config {
            servers,
            quorum,
            node_timeout,
            drift_factor,
            restart_window,
            key_layout,
            tls,
            log,
            host,
            command,
        })
    }

    /// `config`'s configuration: what it shows; no server is contacted.
    fn shown(log: Log, command: Command) -> Config {
        Config {
            servers: Vec::new(),
            quorum: 1,
            node_timeout: MAX_DEFAULT_NODE_TIMEOUT,
            drift_factor: 0.0,
            restart_window: None,
            key_layout: crate::lock::KeyLayout::Native,
            tls: Tls::default(),
            log,
            host: None,
            command,
        }
    }
}

/// The command's timing against the configuration: its TTL (and
/// `--keep`) within `--max-ttl`, a positive validity after the drift, a
/// node timeout `-n`'s look-back fits, renewals that fit the TTL; the node
/// timeout and the restart window it implies.
fn timing(
    g: &config_file::Globals,
    command: &Command,
    ttl: Duration,
    drift_factor: f64,
) -> Result<(Duration, Option<Duration>), Error> {
    let max_ttl = max_ttl(g)?;
    let holds = matches!(
        command,
        Command::Run(_) | Command::Hold(_) | Command::Acquire { .. } | Command::Extend { .. }
    );
    if holds {
        within_max_ttl(&ttl_label(g), ttl, g, max_ttl)?;
    }
    // `--keep` leaves the lock on the servers for that long after the
    // run: a TTL like any other, so the same bound holds for it.
    if let Command::Run(Run { keep: Some(keep), .. }) = &command {
        within_max_ttl("--keep", *keep, g, max_ttl)?;
    }
    // How long a restarted server gets no vote: the longest TTL a
    // holder may have plus the fences' linger (src/fence.rs).
    let restart_window = (!g.trust_restarts.value).then_some(base_restart_window(max_ttl));
    let drift = crate::quorum::drift_allowance(ttl, drift_factor);
    validity_budget(ttl, drift)?;
    let node_timeout = node_timeout(g, ttl)?;
    let request = match command {
        Command::Run(Run { request, .. }) | Command::Acquire { request, .. } => Some(request),
        _ => None,
    };
    if request.is_some_and(|r| r.looks_back()) && node_timeout > crate::lock::LOOK_BACK_NODE_TIMEOUT
    {
        return usage(format!(
            "{} {}: -n looks back over grant records that live {}, so its node timeout may \
             be at most {}",
            g.node_timeout.label("--node-timeout"),
            crate::text::fmt_duration(node_timeout),
            crate::text::fmt_duration(crate::lock::RECORD_LIFE),
            crate::text::fmt_duration(crate::lock::LOOK_BACK_NODE_TIMEOUT),
        ));
    }
    renewal_fits(command, ttl, node_timeout, drift)?;
    Ok((node_timeout, restart_window))
}

/// Where the command's keys live (`--raw-key`, or redlock's namespace),
/// refused where a Cluster would put a raw key's fence and queue keys in
/// another hash slot.
fn key_layout(
    g: &config_file::Globals,
    command: &Command,
    servers: &[ServerUrl],
) -> Result<crate::lock::KeyLayout, Error> {
    let key_layout =
        if g.raw_key.value { crate::lock::KeyLayout::Raw } else { crate::lock::KeyLayout::Native };
    // A cluster runs a script only on keys of one hash slot.
    if let Some(key) = command.key()
        && servers.iter().any(ServerUrl::is_cluster)
        && !key_layout.one_slot(key)
    {
        return usage(format!(
            "--raw-key {:?}: through a Redis Cluster its fence and queue keys would hash to \
             another slot (a `}}` without a hash tag before it); drop --raw-key, or use a key \
             without that `}}`",
            crate::text::display_key(key.as_bytes()),
        ));
    }
    Ok(key_layout)
}

/// `redlock config`'s rows: setting, effective value (passwords redacted),
/// and where it came from.
fn shown(
    g: &config_file::Globals,
    quorum: usize,
    node_timeout: Duration,
    env_password: Option<String>,
) -> Vec<[String; 3]> {
    let row = |name: &str, value: String, origin: &Origin, default: &str| {
        let origin = match origin {
            Origin::Default if !default.is_empty() => format!("default ({default})"),
            other => other.to_string(),
        };
        [name.to_owned(), value, origin]
    };
    let path = |p: &Option<PathBuf>| p.as_ref().map_or("-".to_owned(), |p| p.display().to_string());
    let servers = crate::server::redact(&g.servers.value);
    let password = match (&g.password_file.value, env_password) {
        (Some(p), _) => row("password-file", p.display().to_string(), &g.password_file.origin, ""),
        (None, Some(_)) => {
            row("password", "***".into(), &Origin::Env("REDLOCK_PASSWORD".into()), "")
        }
        (None, _) => row("password-file", "-".into(), &Origin::Default, "none"),
    };
    vec![
        [
            "config-file".to_owned(),
            path(&g.file),
            if g.file.is_some() { "read" } else { "none found" }.to_owned(),
        ],
        if g.servers.value.is_empty() {
            [
                "servers".to_owned(),
                "-".to_owned(),
                "none configured (there is no default)".to_owned(),
            ]
        } else {
            row("servers", servers, &g.servers.origin, "")
        },
        row("quorum", quorum.to_string(), &g.quorum.origin, "more than half of the servers"),
        row(
            "node-timeout",
            crate::text::fmt_duration(node_timeout),
            &g.node_timeout.origin,
            "a tenth of the TTL, at most 1s",
        ),
        row("drift-factor", g.drift_factor.value.clone(), &g.drift_factor.origin, ""),
        password,
        row("tls-ca", path(&g.tls_ca.value), &g.tls_ca.origin, "the public web roots"),
        row("tls-cert", path(&g.tls_cert.value), &g.tls_cert.origin, "none"),
        row("tls-key", path(&g.tls_key.value), &g.tls_key.origin, "none"),
        row(
            "log-format",
            format!("{:?}", g.log_format.value).to_lowercase(),
            &g.log_format.origin,
            "",
        ),
        row("verbose", g.verbose.value.to_string(), &g.verbose.origin, ""),
        row("quiet", g.quiet.value.to_string(), &g.quiet.origin, ""),
        row("raw-key", g.raw_key.value.to_string(), &g.raw_key.origin, ""),
        row("max-ttl", g.max_ttl.value.clone(), &g.max_ttl.origin, ""),
        row("trust-restarts", g.trust_restarts.value.to_string(), &g.trust_restarts.origin, ""),
        match &g.host.value {
            Some(host) => {
                row("host", crate::text::printable(host).into_owned(), &g.host.origin, "")
            }
            None => {
                row("host", crate::token::hostname(), &Origin::Default, "the kernel's host name")
            }
        },
        match &g.ttl.value {
            Some(ttl) => row("ttl", ttl.clone(), &g.ttl.origin, ""),
            None => row("ttl", "30s".into(), &Origin::Default, "run, acquire, extend, doctor"),
        },
        match &g.wait.value {
            Some(wait) => row("wait", wait.clone(), &g.wait.origin, ""),
            None => row("wait", "forever".into(), &Origin::Default, "until acquired: run, acquire"),
        },
        // The zone `--cron` reads where no `--tz` is given (a bad one is
        // a problem or a warning of `check`).
        match zone(None, g) {
            Ok((zone, from)) => ["tz".to_owned(), zone.name().to_owned(), from.to_string()],
            Err(_) => ["tz".to_owned(), "-".to_owned(), "unknown (see above)".to_owned()],
        },
    ]
}

/// What [`check`] found: every problem, and the quorum and node timeout as
/// far as they could be worked out (their defaults where they could not).
struct Checked {
    problems: Vec<Error>,
    warnings: Vec<String>,
    quorum: usize,
    node_timeout: Duration,
}

/// Every problem any command would find in the layered global options and
/// the file's `ttl` and `wait` (or `doctor`'s `--ttl`, `flag_ttl`), each
/// from the validator that command runs, instead of only the first: what
/// `config` and `doctor` report.
fn check(g: &config_file::Globals, env_password: Option<&str>, flag_ttl: Option<&str>) -> Checked {
    let mut problems = Vec::new();
    let mut ok = Collect(&mut problems);
    let password = ok.take(password(g, env_password)).flatten();
    let servers = ok.take(servers(g, password.as_deref())).unwrap_or_default();
    ok.take(tls(g));
    let quorum = ok.take(quorum(g, servers.len()));
    let drift_factor = ok.take(drift_factor(g));
    ok.take(host(g));
    let mut warnings = exposed(g, ok.0);
    // The file's `tz` is checked as `run` checks it; a zone from the
    // environment or the host matters only to a schedule that reads it,
    // so a bad one there is a warning.
    match zone(None, g) {
        Err(e) if g.tz.value.is_some() => ok.0.push(e),
        Err(e) => warnings.push(format!("{e} (the zone --cron reads)")),
        Ok(_) => {}
    }
    let max_ttl = ok.take(max_ttl(g));
    // The file's `ttl` is every holding command's TTL where no flag gives one.
    let ttl = match (flag_ttl, &g.ttl.value) {
        (Some(raw), _) => ok.take(ttl_or_file(raw, g)),
        (None, Some(raw)) => ok.take(ttl_named(&ttl_label(g), raw)),
        (None, None) => Some(DEFAULT_TTL),
    };
    if let (Some(ttl), Some(max_ttl)) = (ttl, max_ttl) {
        ok.take(within_max_ttl(&ttl_label(g), ttl, g, max_ttl));
    }
    if let (Some(ttl), Some(drift_factor)) = (ttl, drift_factor) {
        ok.take(validity_budget(ttl, crate::quorum::drift_allowance(ttl, drift_factor)));
    }
    if let Some(raw) = &g.wait.value {
        ok.take(wait_for(&g.wait.label("--wait"), raw));
    }
    let node_timeout = ok.take(node_timeout(g, ttl.unwrap_or(DEFAULT_TTL)));
    // A `run` with this TTL and no flag of its own must fit it too.
    if let (Some(ttl), Some(drift_factor), Some(node_timeout)) = (ttl, drift_factor, node_timeout) {
        ok.take(fits(
            &ttl_label(g),
            crate::watchdog::Timing {
                ttl,
                renew_every: ttl / 3,
                node_timeout,
                grace: default_grace(ttl),
                margin: kill_margin(ttl),
                drift: crate::quorum::drift_allowance(ttl, drift_factor),
            },
        ));
    }
    Checked {
        warnings,
        quorum: quorum.unwrap_or(servers.len() / 2 + 1),
        node_timeout: node_timeout.unwrap_or(MAX_DEFAULT_NODE_TIMEOUT),
        problems,
    }
}

/// Results whose errors are kept, not returned.
struct Collect<'a>(&'a mut Vec<Error>);

impl Collect<'_> {
    /// The value, or `None` with the error kept.
    fn take<T>(&mut self, result: Result<T, Error>) -> Option<T> {
        result.map_err(|e| self.0.push(e)).ok()
    }
}
