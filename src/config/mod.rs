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

mod commands;
mod fleet;
mod tick;
mod values;

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

pub use crate::server::Tls;

use crate::lock::base_restart_window;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::Wait;

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
