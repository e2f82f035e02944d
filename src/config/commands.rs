//! Each command's settings, read from its arguments and, where no flag
//! gives them, the file's `ttl` and `wait`: [`Command`], one variant a
//! subcommand; `run`'s in [`Run`] (the lock it takes, the command line,
//! renewal, what it does when the lock is lost, its pings and metrics) and
//! `hold`'s in [`Hold`].

use std::path::PathBuf;
use std::time::Duration;

use crate::cli;
use crate::config_file;
use crate::error::Error;
use crate::lock::{Holders, Request, Wait};
use crate::schedule::ZoneFrom;

use super::fleet::max_ttl;
use super::tick::{schedule, tick_jitter, tick_now, tick_wait};
use super::values::{
    DEFAULT_TTL, OnLost, duration, jitter, nonempty, note, on_lost, optional, token_arg, ttl_label,
    ttl_named, ttl_or_file, usage, wait, wait_for,
};

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
    /// Where the zone of the tick's schedule came from, where the
    /// schedule reads one: a refusal for another schedule names it.
    pub zone_from: Option<ZoneFrom>,
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
            note: self.note.clone(),
            job: self.job.clone(),
            until: Some(until_ms),
            ..Request::new(&self.key, self.ttl, wait)
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
pub(super) fn default_grace(ttl: Duration) -> Duration {
    (ttl / 3).min(MAX_DEFAULT_GRACE)
}

/// How long before the end of validity SIGKILL must be sent at the
/// latest: a twentieth of the TTL, between 5 ms and 1 s, covering timer
/// lateness and the time the kernel takes to end the processes.
pub(super) fn kill_margin(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

/// The subcommand's settings and the TTL that sizes the node timeout; `g`
/// gives the file's `ttl` and `wait` where no flag gave them.
pub(super) fn command(
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
    let (schedule, zone_from) = schedule(&a, g)?.unzip();
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
        zone_from: zone_from.flatten(),
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
