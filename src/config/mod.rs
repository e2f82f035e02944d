//! From the command line as typed ([`crate::cli::Cli`]) to a validated
//! [`Config`]: durations parsed, servers checked, quorum and timeouts
//! consistent. Every problem is a [`Error::Usage`] naming the flag, found
//! before anything is sent to a server. A command stops at the first;
//! `config` and `doctor` run the same checks on the global options and the
//! file's `ttl` and `wait` and report every problem ([`Error::Problems`]).
//!
//! By job: `fleet`, the settings of the servers and the lock's bounds,
//! the same for every command; `tick`, when a run may run (its schedule,
//! zone and tick, and the jitter and wait the tick bounds); `values`, the
//! parsers of one setting's value each part shares.

use std::time::Duration;

use std::path::PathBuf;

use crate::cli::{self, Parsed};
use crate::config_file::{self, Origin};
use crate::error::Error;
use crate::output::Log;
use crate::server::ServerUrl;

mod fleet;
mod tick;
mod values;

pub use fleet::{MAX_DEFAULT_NODE_TIMEOUT, NO_SERVERS};
use fleet::{
    drift_factor, exposed, host, max_ttl, node_timeout, password, quorum, servers, tls,
    validity_budget, within_max_ttl,
};
use tick::{schedule, tick_jitter, tick_now, tick_wait, zone};

pub use values::{DEFAULT_TTL, MAX_DURATION, MAX_JITTER, MAX_TTL, OnLost, duration, split_servers};
use values::{
    ci_job, jitter, nonempty, note, on_lost, optional, token_arg, ttl_label, ttl_named,
    ttl_or_file, usage, wait, wait_for,
};

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

pub use crate::server::Tls;

use crate::lock::{Holders, Request, Wait, base_restart_window};

/// `run`'s settings.
#[derive(Debug)]
pub struct Run {
    /// The lock to take: key, TTL, wait, mode, the tick and its schedule,
    /// where the holder runs.
    pub request: Request,
    /// Exit code when busy.
    pub conflict_exit_code: u8,
    /// Minimum hold after acquisition.
    pub keep: Option<Duration>,
    /// The cron monitor to ping from the host that runs (`--ping`).
    pub ping: Option<Box<crate::ping::Ping>>,
    /// Maximum hold.
    pub max_hold: Option<Duration>,
    /// Random delay before the first attempt, up to this.
    pub jitter: Option<Duration>,
    /// Renewal period.
    pub renew_every: Duration,
    /// Lost-lock action.
    pub on_lost: OnLost,
    /// Grace between the lost-lock signal and SIGKILL; `None`: derived from the validity.
    pub kill_after: Option<Duration>,
    /// Where to write the Prometheus textfile after the run (`--metrics-file`).
    pub metrics_file: Option<std::path::PathBuf>,
    /// The program and its arguments (`-c` already turned into `$SHELL -c`).
    pub argv: Vec<String>,
}

/// `hold`'s settings: a freeze of `key` for `length`.
#[derive(Debug)]
pub struct Hold {
    /// The lock key.
    pub key: String,
    /// The lock's TTL: the configuration's `ttl`, at most `--max-ttl`, so
    /// that no host's restart window changes; renewal keeps it alive.
    pub ttl: Duration,
    /// How long the freeze lasts from its start (`--for`).
    pub length: Duration,
    /// How long the first take may wait for another holder (`--wait`,
    /// at most `length`).
    pub wait: Wait,
    /// Renewal period: a third of the TTL.
    pub renew_every: Duration,
    /// Why the freeze (`--note`).
    pub note: Option<String>,
    /// The CI job it runs in.
    pub job: Option<String>,
}

/// The longest `hold --for`: a freeze longer than a month is more likely
/// a typo (`--for 2000h`) than a plan, and would block every deploy and
/// cron job of the key unseen.
pub const MAX_FREEZE: Duration = Duration::from_secs(31 * 24 * 3600);

impl Hold {
    /// The lock a take of the freeze asks for: wait `wait`, for a freeze
    /// that ends at `until_ms` (ms since the Unix epoch), in the queue.
    pub fn request(&self, wait: Wait, until_ms: u64) -> Request {
        Request {
            key: self.key.clone(),
            ttl: self.ttl,
            wait,
            fence: true,
            ordered: true,
            holders: Holders::One,
            tick: None,
            schedule: None,
            note: self.note.clone(),
            job: self.job.clone(),
            until: Some(until_ms),
            began: None,
        }
    }
}

/// The longest default grace between the lost-lock signal and SIGKILL.
pub const MAX_DEFAULT_GRACE: Duration = Duration::from_secs(10);

impl Run {
    /// Time the command gets between the `--on-lost` (or `--max-hold`)
    /// signal and SIGKILL: `--kill-after`, or a third of the TTL, at most 10 s.
    pub fn grace(&self) -> Duration {
        self.kill_after.unwrap_or(default_grace(self.request.ttl))
    }

    /// How long before the end of validity SIGKILL must be sent at the
    /// latest: a twentieth of the TTL, between 5 ms and 1 s.
    pub fn kill_margin(&self) -> Duration {
        kill_margin(self.request.ttl)
    }
}

/// The grace a run of `ttl` gets without `--kill-after`: a third of the
/// TTL, at most [`MAX_DEFAULT_GRACE`].
fn default_grace(ttl: Duration) -> Duration {
    (ttl / 3).min(MAX_DEFAULT_GRACE)
}

/// How long before the end of validity SIGKILL must be sent at the
/// latest: a twentieth of the TTL, between 5 ms and 1 s, covering timer
/// lateness and the time the kernel takes to end the processes.
fn kill_margin(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_millis(5), Duration::from_secs(1))
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

/// The subcommands, validated.
#[derive(Debug)]
pub enum Command {
    /// `run`.
    Run(Run),
    /// `hold`.
    Hold(Hold),
    /// `acquire`.
    Acquire {
        /// What to take.
        request: Request,
        /// JSON output.
        json: bool,
    },
    /// `extend`.
    Extend {
        /// The lock key.
        key: String,
        /// The holder's token.
        token: String,
        /// The new TTL.
        ttl: Duration,
    },
    /// `release`; `token: None` is `--force`.
    Release {
        /// The lock key.
        key: String,
        /// The holder's token, or `None` to force.
        token: Option<String>,
        /// `--force-any-value`: force even a value redlock did not write.
        any_value: bool,
        /// `--limit`: the places to free with `--force` (`None`: as the
        /// holders' tokens say).
        limit: Option<u32>,
    },
    /// `status`.
    Status {
        /// The lock key.
        key: String,
        /// JSON output.
        json: bool,
        /// `--limit`: the places to read (`None`: as the holders' tokens say).
        limit: Option<u32>,
    },
    /// `history`.
    History {
        /// The lock key.
        key: String,
        /// How many entries to show.
        count: usize,
        /// JSON output.
        json: bool,
    },
    /// `check`.
    Check {
        /// The lock key.
        key: String,
        /// How recently the last run must have started.
        max_age: Duration,
        /// Whether every run in the window must have succeeded.
        require_success: bool,
        /// How many ticks the window may miss (`None`: 0).
        max_missed: Option<u64>,
        /// How far back the window reaches (`None`: the oldest entry).
        since: Option<Duration>,
        /// How long a run may hold the lock before it counts as hung.
        max_runtime: Option<Duration>,
        /// JSON output.
        json: bool,
    },
    /// `doctor`.
    Doctor {
        /// The TTL for the drift budget.
        ttl: Duration,
        /// JSON output.
        json: bool,
        /// The configuration file read, if any (doctor says when none was).
        config_file: Option<PathBuf>,
    },
    /// `config`: what it found.
    ShowConfig {
        /// Rows of setting, effective value (passwords redacted), source.
        rows: Vec<[String; 3]>,
        /// Every problem a command would find ([`Error::Usage`] messages).
        problems: Vec<String>,
        /// What is allowed but unwise (a password in a private file).
        warnings: Vec<String>,
        /// `--check`: the problems alone, no table.
        check: bool,
    },
}

impl Command {
    /// The lock key the command is about, if it names one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Command::Run(run) => Some(&run.request.key),
            Command::Hold(hold) => Some(&hold.key),
            Command::Acquire { request, .. } => Some(&request.key),
            Command::Extend { key, .. }
            | Command::Release { key, .. }
            | Command::Status { key, .. }
            | Command::History { key, .. }
            | Command::Check { key, .. } => Some(key),
            Command::Doctor { .. } | Command::ShowConfig { .. } => None,
        }
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

/// The subcommand's settings and the TTL that sizes the node timeout; `g`
/// gives the file's `ttl` and `wait` where no flag gave them.
fn command(
    command: cli::Command,
    g: &config_file::Globals,
    job: Option<String>,
    ping_env: Option<String>,
) -> Result<(Command, Duration), Error> {
    Ok(match command {
        cli::Command::Run(cli::Lazy(a)) => {
            let (run, ttl) = run(*a, g, job, ping_env)?;
            (Command::Run(run), ttl)
        }
        cli::Command::Acquire(cli::Lazy(a)) => {
            let (key, ttl) = key_ttl(&a.lock, g)?;
            let request = Request {
                key,
                ttl,
                wait: wait(&a.waiting, g)?,
                fence: !a.no_fence,
                ordered: !a.waiting.unordered,
                holders: holders(a.limit, a.shared)?,
                tick: None,
                schedule: None,
                note: note(a.note)?,
                job,
                until: None,
                began: crate::clock::BootInstant::process_start(),
            };
            (Command::Acquire { request, json: a.json }, ttl)
        }
        cli::Command::Hold(cli::Lazy(a)) => {
            let hold = hold(a, g, job)?;
            let ttl = hold.ttl;
            (Command::Hold(hold), ttl)
        }
        cli::Command::Extend(cli::Lazy(a)) => {
            let (key, ttl) = key_ttl(&a.lock, g)?;
            let token = token_arg(a.token)?;
            (Command::Extend { key, token, ttl }, ttl)
        }
        cli::Command::Release(cli::Lazy(a)) => {
            let key = nonempty("--key", a.key)?;
            let token = a.token.map(token_arg).transpose()?;
            let limit = a.limit.map(limit).transpose()?;
            (Command::Release { key, token, any_value: a.force_any_value, limit }, DEFAULT_TTL)
        }
        cli::Command::Status(cli::Lazy(a)) => {
            let limit = a.limit.map(limit).transpose()?;
            (Command::Status { key: nonempty("--key", a.key)?, json: a.json, limit }, DEFAULT_TTL)
        }
        cli::Command::History(cli::Lazy(a)) => {
            if a.count == 0 || a.count > crate::history::MAX_ENTRIES {
                return usage(format!(
                    "-n {}: must be between 1 and {} (the entries kept per key)",
                    a.count,
                    crate::history::MAX_ENTRIES
                ));
            }
            let key = nonempty("--key", a.key)?;
            (Command::History { key, count: a.count, json: a.json }, DEFAULT_TTL)
        }
        cli::Command::Check(cli::Lazy(a)) => {
            let key = nonempty("--key", a.key)?;
            let max_age = duration("--max-age", &a.max_age)?;
            let (since, max_runtime) =
                (optional("--since", &a.since)?, optional("--max-runtime", &a.max_runtime)?);
            let check = Command::Check {
                key,
                max_age,
                require_success: a.require_success,
                max_missed: a.max_missed,
                since,
                max_runtime,
                json: a.json,
            };
            (check, DEFAULT_TTL)
        }
        cli::Command::Doctor(cli::Lazy(a)) => {
            let ttl = ttl_or_file(&a.ttl, g)?;
            // The file is known once the global options are layered.
            (Command::Doctor { ttl, json: a.json, config_file: None }, ttl)
        }
        // Checked and shown before any subcommand (`Config::from_parsed`).
        cli::Command::Config(_) => {
            let shown = Command::ShowConfig {
                rows: Vec::new(),
                problems: Vec::new(),
                warnings: Vec::new(),
                check: false,
            };
            (shown, DEFAULT_TTL)
        }
    })
}

/// `run`'s settings and the TTL that sizes the node timeout (see
/// [`command`]).
fn run(
    a: cli::RunArgs,
    g: &config_file::Globals,
    job: Option<String>,
    ping_env: Option<String>,
) -> Result<(Run, Duration), Error> {
    let (key, ttl) = key_ttl(&a.lock, g)?;
    let renew_every = match &a.renew_every {
        Some(raw) => {
            let d = duration("--renew-every", raw)?;
            if d >= ttl {
                return usage(format!("--renew-every {raw}: must be shorter than the TTL"));
            }
            d
        }
        None => ttl / 3,
    };
    let schedule = schedule(&a, g)?;
    let argv = match (a.shell, a.argv.is_empty()) {
        (Some(script), _) => {
            let shell = std::env::var("SHELL")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/bin/sh".to_owned());
            vec![shell, "-c".to_owned(), script]
        }
        (None, false) => a.argv,
        (None, true) => {
            return usage("run: no command given (put it after --, or use -c)".to_owned());
        }
    };
    let tick = match &schedule {
        Some(schedule) => Some(tick_now(schedule)?),
        None => None,
    };
    let jitter = match (jitter(&a.jitter)?, &schedule, tick) {
        (Some(j), Some(schedule), Some(tick)) => Some(tick_jitter(
            j,
            schedule,
            tick,
            if a.cron.is_some() { "--cron" } else { "--once-per" },
        )?),
        (j, ..) => j,
    };
    let request = Request {
        key,
        ttl,
        wait: tick_wait(wait(&a.waiting, g)?, tick),
        fence: !a.no_fence,
        ordered: !a.waiting.unordered,
        holders: holders(a.limit, a.shared)?,
        tick,
        schedule: schedule.map(|s| s.identity()),
        note: note(a.note)?,
        job,
        until: None,
        began: crate::clock::BootInstant::process_start(),
    };
    let run = Run {
        request,
        conflict_exit_code: a.conflict_exit_code,
        keep: optional("--keep", &a.keep)?,
        ping: ping(a.ping, a.ping_file, ping_env)?.map(Box::new),
        max_hold: optional("--max-hold", &a.max_hold)?,
        jitter,
        renew_every,
        on_lost: on_lost(&a.on_lost)?,
        kill_after: optional("--kill-after", &a.kill_after)?,
        metrics_file: match a.metrics_file {
            Some(p) if p.file_name().is_none() => {
                return usage(format!("--metrics-file {}: not a file name", p.display()));
            }
            Some(p) => Some(crate::metrics::check_dir(&p).map(|()| p).or_else(usage)?),
            None => None,
        },
        argv,
    };
    Ok((run, ttl))
}

/// `hold`'s settings. `--for` is required, above zero and at most
/// [`MAX_FREEZE`]; `--wait` (default and at most the whole `--for`: a
/// wait past the freeze's end would take a freeze that is over). The TTL
/// is the file's `ttl` (or the default), at most `--max-ttl`: renewal
/// keeps the freeze, not a long TTL, so a restarted server still votes
/// again after `--max-ttl`.
fn hold(a: cli::HoldArgs, g: &config_file::Globals, job: Option<String>) -> Result<Hold, Error> {
    let key = nonempty("--key", a.key)?;
    let length = duration("--for", &a.for_)?;
    if length > MAX_FREEZE {
        return usage(format!(
            "--for {}: longer than the {} days a freeze may last",
            a.for_,
            MAX_FREEZE.as_secs() / 86_400
        ));
    }
    let note = note(a.note)?;
    let wait = match a.wait.as_deref().map(|raw| wait_for("--wait", raw)).transpose()? {
        None | Some(Wait::Forever) => Wait::For(length),
        Some(Wait::For(d)) => Wait::For(d.min(length)),
        Some(Wait::Once) => Wait::Once,
    };
    let ttl = match &g.ttl.value {
        Some(file) => ttl_named(&ttl_label(g), file)?,
        None => DEFAULT_TTL,
    };
    let ttl = ttl.min(max_ttl(g)?);
    Ok(Hold { key, ttl, length, wait, renew_every: ttl / 3, note, job })
}

/// `--limit N`: 1 to [`crate::slots::MAX_LIMIT`].
fn limit(n: u32) -> Result<u32, Error> {
    if n == 0 || n > crate::slots::MAX_LIMIT {
        return usage(format!(
            "--limit {n}: must be between 1 and {} (1 is the ordinary lock)",
            crate::slots::MAX_LIMIT
        ));
    }
    Ok(n)
}

/// `--limit N` of a lock that may be `--shared`: the two do not mix (a
/// shared lock has any number of shared holders or one exclusive; a
/// bounded number of shared holders would be `--limit` on its own).
fn holders(n: u32, shared: bool) -> Result<Holders, Error> {
    if shared && n != 1 {
        return usage(format!(
            "--limit {n} with --shared: a shared lock has any number of shared holders; \
             use one or the other"
        ));
    }
    Ok(Holders::of(limit(n)?, shared))
}

/// `--ping URL`, or the URL in `--ping-file`, or `REDLOCK_PING`.
fn ping(
    flag: Option<String>,
    file: Option<std::path::PathBuf>,
    env: Option<String>,
) -> Result<Option<crate::ping::Ping>, Error> {
    use crate::ping::{Ping, Source};
    let ping = match (flag, file, env) {
        (Some(url), _, _) => Ping::parse(&url, Source::Flag),
        (None, Some(path), _) => Ping::from_file(&path),
        (None, None, Some(url)) => Ping::parse(&url, Source::Env("REDLOCK_PING".to_owned())),
        (None, None, None) => return Ok(None),
    };
    ping.map(Some).map_err(Error::Usage)
}

fn key_ttl(a: &cli::KeyTtl, g: &config_file::Globals) -> Result<(String, Duration), Error> {
    Ok((nonempty("--key", a.key.clone())?, ttl_or_file(&a.ttl, g)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration of `args`, with one server unless they name some.
    fn config(args: &[&str]) -> Result<Config, Error> {
        let servers = if args.contains(&"--servers") { None } else { Some("--servers=redis://h") };
        bare_config(&servers.into_iter().chain(args.iter().copied()).collect::<Vec<_>>())
    }

    #[test]
    fn a_note_is_bounded_and_the_ci_job_carries_no_credentials() {
        let run = |note: &str| config(&["run", "-k", "k", "--note", note, "--", "true"]);
        let Command::Run(r) = run("deploy").unwrap().command else { panic!("not run") };
        assert_eq!((r.request.note.as_deref(), r.request.job), (Some("deploy"), None));
        let Command::Run(r) = run("").unwrap().command else { panic!("not run") };
        assert_eq!(r.request.note, None, "an empty note is none");
        assert!(run(&"é".repeat(100)).is_ok(), "200 bytes");
        assert!(matches!(run(&"é".repeat(101)), Err(Error::Usage(m)) if m.contains("202 bytes")));
        assert!(matches!(run("a\tb"), Err(Error::Usage(m)) if m.contains("control character")));
        assert_eq!(
            ci_job("https://ci:s3cret@git.example/o/r/-/jobs/1").as_deref(),
            Some("https://ci:***@git.example/o/r/-/jobs/1")
        );
        assert_eq!(ci_job(&format!("https://x/{}", "a".repeat(200))), None, "too long: left out");
        assert_eq!(ci_job("https://x/\u{7}y"), None);
    }

    /// The configuration of exactly `args`, in an empty environment.
    fn bare_config(args: &[&str]) -> Result<Config, Error> {
        let parsed =
            cli::parse_with_env(std::iter::once("redlock").chain(args.iter().copied()), |_| None)
                .map_err(|e| Error::Usage(e.to_string()))?;
        Config::from_parsed(parsed, None)
    }

    /// The configuration of `args` (one server) with `text` as the file.
    /// `config` runs every check a command would on the file's values
    /// and keeps going after the first; `doctor` refuses with the same.
    #[test]
    fn config_and_doctor_find_every_problem_a_command_would() {
        let text = "ttl = \"5m\"\nwait = \"15mn\"\nquorum = 2\nnode-timeout = \"10m\"\n";
        let Command::ShowConfig { rows, problems, check, .. } =
            file_config(&["config", "--check"], text).unwrap().command
        else {
            panic!("not config")
        };
        assert!(check && !rows.is_empty());
        let expected = [
            "/etc/r.toml:3: quorum 2: must be more than half of the 1 server(s)",
            "/etc/r.toml:1: ttl 5m: above --max-ttl 1m",
            "/etc/r.toml:2: wait \"15mn\": not a duration",
            "/etc/r.toml:4: node-timeout 10m: must be shorter than the TTL (5m)",
        ];
        assert_eq!(problems.len(), expected.len(), "{problems:?}");
        for (problem, expected) in problems.iter().zip(expected) {
            assert!(problem.starts_with(expected), "{problem}");
        }
        match file_config(&["doctor"], text) {
            Err(Error::Problems(found)) => assert_eq!(found, problems),
            other => panic!("{other:?}"),
        }
        // A command stops at its first problem, as before.
        let m = usage_of(file_config(&["run", "-k", "k", "--", "true"], text));
        assert!(m.contains("quorum 2"), "{m}");
    }

    fn usage_of(result: Result<Config, Error>) -> String {
        match result {
            Err(Error::Usage(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    fn file_config(args: &[&str], text: &str) -> Result<Config, Error> {
        let args = ["redlock", "--servers=redis://h"].into_iter().chain(args.iter().copied());
        let parsed =
            cli::parse_with_env(args, |_| None).map_err(|e| Error::Usage(e.to_string()))?;
        let file = config_file::File::parse(std::path::Path::new("/etc/r.toml"), text.to_owned());
        Config::from_parsed(parsed, Some(&file))
    }

    /// A zone given by `--tz` or the file is looked up whatever the
    /// schedule, and `config` shows the zone and where it came from.
    #[test]
    fn a_given_zone_is_checked_and_shown() {
        let run = |extra: &[&str], text: &str| {
            let args = [&["run", "-k", "k"], extra, &["--", "true"]].concat();
            file_config(&args, text)
        };
        assert_eq!(
            usage_of(run(&["--once-per", "5m", "--tz", "Mars/Olympus"], "")),
            "--tz Mars/Olympus: no such time zone"
        );
        assert_eq!(
            usage_of(run(&[], "tz = \"Europe/Lndon\"\n")),
            "/etc/r.toml:1: tz Europe/Lndon: no such time zone"
        );
        assert!(usage_of(run(&["--tz", "localtime"], "")).contains("each host's own zone"));
        assert!(run(&["--once-per", "5m", "--tz", "Etc/UTC"], "").is_ok());
        let config = |text: &str| match file_config(&["config"], text).unwrap().command {
            Command::ShowConfig { rows, problems, .. } => {
                (rows.into_iter().find(|r| r[0] == "tz").unwrap(), problems)
            }
            other => panic!("{other:?}"),
        };
        let (row, problems) = config("tz = \"Etc/UTC\"\n");
        assert_eq!(row, ["tz", "UTC", "/etc/r.toml:1: tz"]);
        assert!(problems.is_empty(), "{problems:?}");
        let (row, problems) = config("tz = \"Europe/Lndon\"\n");
        assert_eq!(row[1], "-");
        assert_eq!(problems, ["/etc/r.toml:1: tz Europe/Lndon: no such time zone"]);
    }

    /// A `--cron` line and its `--jitter` are judged by the schedule, the
    /// same at every start; the jitter is then cut to the tick's end.
    #[test]
    fn cron_and_jitter_are_judged_by_the_schedule() {
        let run = |extra: &[&str]| {
            let args = [&["run", "-k", "k"], extra, &["--", "true"]].concat();
            file_config(&args, "")
        };
        assert_eq!(
            usage_of(run(&["--cron", "0 0 29 2 *", "--tz", "UTC"])),
            "--cron '0 0 29 2 *': 2921 days between two of its instants; a tick is at most a \
             year (366 days)"
        );
        assert!(run(&["--cron", "@yearly"]).is_ok());
        assert_eq!(
            usage_of(run(&["--cron", "* * * * *", "--limit", "2"])),
            "--cron '* * * * *': one run per tick, so it takes neither --limit nor --shared"
        );
        assert_eq!(
            usage_of(run(&["--cron", "0,1 * * * *", "--jitter", "59m"])),
            "--jitter 59m: must be shorter than the tick (--cron's longest: 59m)"
        );
        let Command::Run(r) = run(&["--cron", "0,1 * * * *", "--jitter", "58m"]).unwrap().command
        else {
            panic!("not run")
        };
        let (jitter, tick) = (r.jitter.unwrap(), r.request.tick.unwrap());
        assert!(jitter <= Duration::from_secs(58 * 60), "{jitter:?}");
        assert!(jitter <= Duration::from_millis(tick.end_ms - tick.start_ms), "{jitter:?}");
        assert!(usage_of(run(&["--once-per", "5s", "--jitter", "5s"])).contains("shorter than"));
    }

    #[test]
    fn the_file_defaults_ttl_and_wait_and_flags_win() {
        let request = |args: &[&str], text: &str| match file_config(args, text).unwrap().command {
            Command::Acquire { request, .. } => (request.ttl, request.wait),
            other => panic!("{other:?}"),
        };
        let secs = Duration::from_secs;
        let text = "ttl = \"45s\"\nwait = \"5m\"\n";
        assert_eq!(request(&["acquire", "-k", "k"], text), (secs(45), Wait::For(secs(300))));
        assert_eq!(request(&["acquire", "-k", "k", "--ttl", "10s"], text).0, secs(10));
        assert_eq!(request(&["acquire", "-k", "k", "-n"], text).1, Wait::Once);
        assert_eq!(request(&["acquire", "-k", "k", "-w", "0"], text).1, Wait::Once);
        assert_eq!(request(&["acquire", "-k", "k", "--wait", "forever"], text).1, Wait::Forever);
        assert_eq!(request(&["acquire", "-k", "k"], "wait = 0\n").1, Wait::Once);
        assert_eq!(request(&["acquire", "-k", "k"], "").1, Wait::Forever);
        match file_config(&["acquire", "-k", "k"], "ttl = \"2m\"\n") {
            Err(Error::Usage(m)) => {
                assert!(m.starts_with("/etc/r.toml:1: ttl 2m: above --max-ttl 1m"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        let Command::Doctor { ttl, config_file, .. } =
            file_config(&["doctor"], text).unwrap().command
        else {
            panic!("doctor is not doctor")
        };
        assert_eq!((ttl, config_file), (secs(45), Some("/etc/r.toml".into())));
        let Command::ShowConfig { rows, .. } = file_config(&["config"], text).unwrap().command
        else {
            panic!("config is not config")
        };
        let row = |name: &str| rows.iter().find(|r| r[0] == name).cloned().unwrap();
        assert_eq!(row("ttl"), ["ttl".to_owned(), "45s".into(), "/etc/r.toml:1".into()]);
        assert_eq!(row("wait")[1..], ["5m".to_owned(), "/etc/r.toml:2".into()]);
        let Command::ShowConfig { rows, .. } = file_config(&["config"], "").unwrap().command else {
            panic!("config is not config")
        };
        assert!(rows.iter().any(|r| r[0] == "wait" && r[1] == "forever"), "{rows:?}");
    }

    #[test]
    fn a_ttl_above_max_ttl_is_refused_and_sets_the_restart_window() {
        let c = config(&["acquire", "-k", "k", "--ttl", "1m"]).unwrap();
        assert_eq!(c.restart_window, Some(Duration::from_secs(61)));
        let m = usage_message(&["run", "-k", "k", "--ttl", "90s", "--", "true"]);
        assert!(m.contains("--ttl 1m 30s: above --max-ttl 1m") && m.contains("max-ttl"), "{m}");
        let c = config(&["--max-ttl", "2h", "acquire", "-k", "k", "--ttl", "1h"]).unwrap();
        assert_eq!(c.restart_window, Some(Duration::from_secs(7201)));
        // --keep is a TTL too.
        let m = usage_message(&["run", "-k", "k", "--keep", "1h", "--", "true"]);
        assert!(m.contains("--keep 1h: above --max-ttl 1m"), "{m}");
        assert!(
            config(&["--max-ttl", "2h", "run", "-k", "k", "--keep", "1h", "--", "true"]).is_ok()
        );
        let c = config(&["--trust-restarts", "extend", "-k", "k", "--token", "t"]).unwrap();
        assert_eq!(c.restart_window, None);
        // status and release take no TTL of their own.
        assert!(config(&["--max-ttl", "1s", "status", "-k", "k"]).is_ok());
        assert!(
            usage_message(&["--max-ttl", "0", "status", "-k", "k"]).contains("longer than zero")
        );
    }

    #[test]
    fn no_server_named_anywhere_is_a_usage_error_but_for_config() {
        for args in [&["run", "-k", "k", "--", "true"][..], &["status", "-k", "k"], &["doctor"]] {
            match bare_config(args) {
                Err(Error::Usage(m)) => assert_eq!(m, NO_SERVERS, "{args:?}"),
                other => panic!("{args:?}: {other:?}"),
            }
        }
        let Command::ShowConfig { rows, .. } = bare_config(&["config"]).unwrap().command else {
            panic!("config is not config")
        };
        let servers = rows.iter().find(|r| r[0] == "servers").unwrap();
        assert!(servers[2].contains("none configured"), "{servers:?}");
        // Named, but empty: the list is wrong, not missing.
        match bare_config(&["--servers", "", "status", "-k", "k"]) {
            Err(Error::Usage(m)) => assert!(m.contains("no server given"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    fn usage_message(args: &[&str]) -> String {
        match config(args) {
            Err(Error::Usage(m)) => m,
            other => panic!("expected a usage error for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let c = config(&["--servers", "redis://a,redis://b,redis://c", "acquire", "--key", "k"])
            .unwrap();
        assert_eq!(c.quorum, 2);
        assert_eq!(c.node_timeout, Duration::from_secs(1));
        let c = config(&["acquire", "--key", "k", "--ttl", "2s"]).unwrap();
        assert_eq!(c.node_timeout, Duration::from_millis(200));
        assert!(matches!(
            &c.command,
            Command::Acquire { request, .. } if request.wait == Wait::Forever && request.fence
        ));
    }

    #[test]
    fn flock_habits_bare_seconds_and_wait_zero() {
        let waits = |args: &[&str]| match config(args).unwrap().command {
            Command::Acquire { request, .. } => (request.wait, request.ttl),
            other => panic!("{other:?}"),
        };
        let secs = Duration::from_secs;
        assert_eq!(waits(&["acquire", "-k", "k", "--wait", "5"]).0, Wait::For(secs(5)));
        assert_eq!(waits(&["acquire", "-k", "k", "-w", "5"]).0, Wait::For(secs(5)));
        assert_eq!(waits(&["acquire", "-k", "k", "-w", "0.5"]).0, Wait::For(secs(1) / 2));
        assert_eq!(waits(&["acquire", "-k", "k", "--ttl", "30"]).1, secs(30));
        for zero in ["0", "0s", "0.0"] {
            assert_eq!(waits(&["acquire", "-k", "k", "--wait", zero]).0, Wait::Once, "{zero}");
        }
        assert_eq!(waits(&["acquire", "-k", "k", "-n"]).0, Wait::Once);
        let m = usage_message(&["acquire", "-k", "k", "-n", "-w", "5"]);
        assert!(m.contains("--no-wait") && m.contains("--wait"), "{m}");
    }

    #[test]
    fn a_cluster_url_is_one_member() {
        let c = config(&[
            "--servers",
            "redis+cluster://:pw@h1:7000,h2:7001,h3:7002,redis://b,redis://c",
            "--quorum",
            "2",
            "status",
            "-k",
            "k",
        ])
        .unwrap();
        assert_eq!((c.servers.len(), c.quorum), (3, 2));
        assert!(c.servers[0].is_cluster() && !c.servers[1].is_cluster());
        assert_eq!(c.servers[0].name(), "cluster:h1:7000,h2:7001,h3:7002");
        for (url, expect) in [
            ("redis+cluster://", "no node"),
            ("redis+cluster://h1:x", "bad node address"),
            ("redis+cluster://h1,,h2", "bad node address"),
            ("redis+cluster://h1/2", "database 0 only"),
            ("redis+cluster://h1?db=1", "no parameters"),
            ("redis+clusters://h1", "scheme"),
        ] {
            let m = usage_message(&["--servers", url, "status", "-k", "k"]);
            assert!(m.contains(expect), "{url}: {m}");
        }
        let m = usage_message(&["--servers", "redis+cluster://:secret@h1:0", "status", "-k", "k"]);
        assert!(!m.contains("secret"), "{m}");
        // --raw-key through a cluster: refused only where the companions
        // cannot share the key's slot.
        let raw = |key: &str| {
            config(&["--servers", "redis+cluster://h1", "--raw-key", "status", "-k", key])
        };
        assert!(raw("job").is_ok() && raw("{user1}.job").is_ok());
        let m =
            usage_message(&["--servers", "redis+cluster://h1", "--raw-key", "status", "-k", "a}b"]);
        assert!(m.contains("--raw-key \"a}b\"") && m.contains("another slot"), "{m}");
        assert!(config(&["--servers", "redis://h1", "--raw-key", "status", "-k", "a}b"]).is_ok());
    }

    #[test]
    fn sentinel_urls_keep_their_commas() {
        assert_eq!(
            split_servers("redis://a,redis+sentinel://u:p@h1:1,h2:2/svc/1,redis://b"),
            ["redis://a", "redis+sentinel://u:p@h1:1,h2:2/svc/1", "redis://b"]
        );
        assert_eq!(split_servers("redis+sentinel://h1,h2"), ["redis+sentinel://h1,h2"]);
        assert_eq!(
            split_servers(
                "redis+cluster://u:p@h1:1,h2:2,redis://a,rediss+cluster://h3,h4/0,redis://b"
            ),
            ["redis+cluster://u:p@h1:1,h2:2", "redis://a", "rediss+cluster://h3,h4/0", "redis://b"]
        );
        assert_eq!(
            split_servers("redis://a,redis+cluster://h1,h2"),
            ["redis://a", "redis+cluster://h1,h2"]
        );
        assert_eq!(split_servers("redis://a,,redis://b"), ["redis://a", "", "redis://b"]);
        let c = config(&[
            "--servers",
            "redis+sentinel://h1:26379,h2:26379,h3/mymaster,redis://b,redis://c",
            "status",
            "-k",
            "k",
        ])
        .unwrap();
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.quorum, 2);
        assert_eq!(c.servers[0].name(), "sentinel:mymaster@h1:26379,h2:26379,h3:26379");
        for (url, expect) in [
            ("redis+sentinel://h1:26379", "no service name"),
            ("redis+sentinel://h1:x/svc", "bad Sentinel address"),
            ("redis+sentinel://h1/svc/x", "database"),
            ("redis+sentinel://h1/svc?password=x", "unknown parameter"),
        ] {
            let m = usage_message(&["--servers", url, "status", "-k", "k"]);
            assert!(m.contains(expect), "{url}: {m}");
        }
        let m = usage_message(&[
            "--servers",
            "redis+sentinel://:secret1@h1/svc?sentinel_password=secret2&db=1",
            "status",
            "-k",
            "k",
        ]);
        assert!(!m.contains("secret1") && !m.contains("secret2"), "{m}");
    }

    #[test]
    fn bad_inputs_name_the_flag() {
        let servers3 = "redis://a,redis://b,redis://c";
        for (args, expect) in [
            (vec!["acquire", "--key", ""], "--key"),
            (vec!["acquire", "--key", "k", "--ttl", "0s"], "--ttl"),
            (vec!["acquire", "--key", "k", "--ttl", "-1s"], "--ttl"),
            (vec!["acquire", "--key", "k", "--ttl", "soon"], "--ttl"),
            (vec!["acquire", "--key", "k", "--ttl", "1000y"], "--ttl"),
            (
                vec!["acquire", "--key", "k", "--wait", "-10s"],
                "--wait \"-10s\": must not be negative",
            ),
            (vec!["acquire", "--key", "k", "--wait", "-1"], "--wait \"-1\": must not be negative"),
            (vec!["run", "-k", "k", "--keep", "-1m", "--", "true"], "--keep \"-1m\""),
            (vec!["--node-timeout", "-5s", "status", "-k", "k"], "--node-timeout \"-5s\""),
            (vec!["acquire", "--key", "k", "--wait", "1.2.3"], "--wait \"1.2.3\""),
            (vec!["--servers", servers3, "--quorum", "4", "status", "-k", "k"], "--quorum"),
            (vec!["--servers", servers3, "--quorum", "1", "status", "-k", "k"], "--quorum"),
            (vec!["--servers", "http://x", "status", "-k", "k"], "scheme"),
            (vec!["--servers", "", "status", "-k", "k"], "--servers"),
            (vec!["--servers", "redis://a,,redis://b", "status", "-k", "k"], "--servers"),
            (vec!["--node-timeout", "5s", "acquire", "-k", "k", "--ttl", "5s"], "--node-timeout"),
            (vec!["--drift-factor", "2", "status", "-k", "k"], "--drift-factor"),
            (vec!["run", "-k", "k"], "no command"),
            (vec!["run", "-k", "k", "--on-lost", "SIGNOPE", "--", "true"], "--on-lost"),
        ] {
            let m = usage_message(&args);
            assert!(m.contains(expect), "{args:?}: {m}");
        }
    }
}
