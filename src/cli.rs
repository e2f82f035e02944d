//! The command line as typed: clap definitions only, no validation beyond
//! what clap does itself. [`crate::config`] turns it into a checked
//! configuration; [`command`] feeds the man page and completion generators.

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use clap::{Args, CommandFactory, Parser, Subcommand, ValueHint};

/// Lock shell jobs, cron tasks and CI steps across machines with a Redlock
/// quorum over independent Redis servers.
#[derive(Debug, Parser)]
#[command(
    name = "redlock",
    version,
    long_version = LONG_VERSION,
    propagate_version = true,
    max_term_width = 100,
    long_about = LONG_ABOUT,
    after_help = "Run 'redlock <subcommand> --help' for details and examples."
)]
pub struct Cli {
    /// Options shared by every subcommand.
    #[command(flatten)]
    pub global: Global,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Options that may stand before or after the subcommand.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Redis server URLs, comma-separated.
    #[arg(
        long,
        help = "Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path; redis+sentinel://S1,S2/SERVICE and redis+cluster://NODE1,NODE2 are one member each. No default: name them here, in the environment or in the configuration file",
        env = "REDLOCK_SERVERS",
        global = true,
        value_name = "URL[,URL...]",
        value_hint = ValueHint::Other,
        hide_env_values = true
    )]
    pub servers: Option<String>,
    /// Read the configuration file FILE (it must exist) instead of $REDLOCK_CONFIG or the default files
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// The name this host goes by in tokens, status and history (letters, digits, `-`, `.`, `_`; at most 64) [default: the kernel's host name, the pod's name in Kubernetes]
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        env = "REDLOCK_HOST",
        value_hint = ValueHint::Hostname,
        hide_env_values = true
    )]
    pub host: Option<String>,
    /// Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]
    #[arg(long, global = true, value_name = "FILE")]
    pub password_file: Option<std::path::PathBuf>,
    /// PEM file of the CA that signed the servers' TLS certificates (rediss://) [default: the public web roots]
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "REDLOCK_TLS_CA",
        hide_env_values = true
    )]
    pub tls_ca: Option<std::path::PathBuf>,
    /// PEM client certificate, for servers that ask for one (with --tls-key)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "REDLOCK_TLS_CERT",
        hide_env_values = true
    )]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of --tls-cert
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "REDLOCK_TLS_KEY",
        hide_env_values = true
    )]
    pub tls_key: Option<std::path::PathBuf>,
    /// Servers that must agree [default: more than half of them]
    #[arg(long, global = true, value_name = "N", value_hint = ValueHint::Other)]
    pub quorum: Option<usize>,
    /// Time limit for each server call [default: a tenth of the TTL, at most 1s]
    #[arg(long, global = true, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub node_timeout: Option<String>,
    /// Clock drift allowance as a fraction of the TTL
    #[arg(long, global = true, value_name = "F", default_value = "0.01", value_hint = ValueHint::Other)]
    pub drift_factor: String,
    /// The longest TTL any holder on these servers uses (a longer --ttl is refused): a server restarted less than this (plus 1s) ago, which may have lost a holder's key, counts towards no quorum
    #[arg(long, global = true, value_name = "DUR", default_value = "1m", value_hint = ValueHint::Other)]
    pub max_ttl: String,
    /// Trust every restarted server to have kept its data: it votes at once (a server with appendonly yes and appendfsync always since its start is trusted without this)
    #[arg(
        long,
        global = true,
        env = "REDLOCK_TRUST_RESTARTS",
        hide_env_values = true,
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub trust_restarts: bool,
    /// Say more on stderr (repeat for more)
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Say nothing on stderr but errors (no busy message)
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Format of the messages on stderr
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Use the key as given on the servers, for interop with other Redlock clients (redsync, node-redlock, SET NX scripts) [default: redlock's namespace, redlock:{KEY}]
    #[arg(
        long,
        global = true,
        env = "REDLOCK_RAW_KEY",
        hide_env_values = true,
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub raw_key: bool,
}

pub use crate::output::LogFormat;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding the lock, renewing it until the command exits
    #[command(after_help = RUN_EXAMPLES)]
    Run(Lazy<Box<RunArgs>>),
    /// Take the lock and print its token on stdout
    #[command(after_help = ACQUIRE_EXAMPLES)]
    Acquire(Lazy<AcquireArgs>),
    /// Hold a lock as a freeze for --for: renewed, taken back after a loss, shown to every waiter; ends early on SIGTERM, SIGINT, SIGHUP or release --force
    #[command(after_help = HOLD_EXAMPLES)]
    Hold(Lazy<HoldArgs>),
    /// Make a lock held with a token last at least --ttl from now (never shortens it)
    #[command(after_help = EXTEND_EXAMPLES)]
    Extend(Lazy<ExtendArgs>),
    /// Give a lock back (with its token, or --force)
    #[command(after_help = RELEASE_EXAMPLES)]
    Release(Lazy<ReleaseArgs>),
    /// Show who holds a lock, on which servers, for how long (exit 0 held, 1 free)
    #[command(after_help = STATUS_EXAMPLES)]
    Status(Lazy<StatusArgs>),
    /// Show the last runs of a lock, fleet-wide: host, start, duration, outcome; and the skips
    #[command(after_help = HISTORY_EXAMPLES)]
    History(Lazy<HistoryArgs>),
    /// For monitoring: did a run start within --max-age, no tick missed, none failed or hung (exit 0 ok, 1 warning, 2 unknown)
    #[command(after_help = CHECK_EXAMPLES)]
    Check(Lazy<CheckArgs>),
    /// Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(Lazy<DoctorArgs>),
    /// Print the effective configuration and where each value came from (flag, environment, file, default)
    #[command(after_help = CONFIG_EXAMPLES)]
    Config(Lazy<ConfigArgs>),
}

/// A subcommand's arguments, put into clap's tree only when that subcommand
/// is parsed, or when help, man pages or completions need the whole tree
/// (`clap::Command::defer`). A run builds its own subcommand's arguments
/// alone instead of every subcommand's: every cron tick parses a command
/// line.
#[derive(Debug)]
pub struct Lazy<T>(pub T);

impl<T: clap::FromArgMatches> clap::FromArgMatches for Lazy<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Lazy)
    }

    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Lazy)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(
        &mut self,
        matches: &mut clap::ArgMatches,
    ) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

impl<T: Args> Args for Lazy<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| keep_about(cmd, T::augment_args))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| keep_about(cmd, T::augment_args_for_update))
    }

    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}

/// `augment` run on `cmd` as the derive runs it, before the subcommand's
/// own description: the arguments' struct describes itself too, and,
/// deferred, would otherwise have the last word. Then [`short_help`].
fn keep_about(cmd: clap::Command, augment: fn(clap::Command) -> clap::Command) -> clap::Command {
    use clap::builder::Resettable;
    let kept = |text: Option<&clap::builder::StyledStr>| {
        text.cloned().map_or(Resettable::Reset, Resettable::Value)
    };
    let (about, long) = (kept(cmd.get_about()), kept(cmd.get_long_about()));
    short_help(augment(cmd).about(about).long_about(long))
}

/// A subcommand's `-h` shows what the subcommand adds and points to
/// `redlock -h` for the global options, so that it fits a screen as
/// `flock -h` does; its `--help` and its man page stay complete. Runs
/// when the subcommand is built, after the root has propagated its global
/// options into it: they are hidden from the short help, with their help
/// as long help (which `--help` and the man page read).
fn short_help(cmd: clap::Command) -> clap::Command {
    let name = cmd.get_name().to_owned();
    let cmd = cmd.mut_args(|a| {
        if !a.is_global_set() {
            return a;
        }
        let a = match a.get_long_help().or(a.get_help()).cloned() {
            Some(help) => a.long_help(help),
            None => a,
        };
        a.hide_short_help(true)
    });
    let examples = cmd.get_after_help().map(ToString::to_string).unwrap_or_default();
    let pointer = format!(
        "Global options (--servers, --quorum, -v, -q, --log-format...): 'redlock -h'. \
         All options, with details: 'redlock {name} --help'."
    );
    let short = if examples.is_empty() { pointer } else { format!("{examples}\n\n{pointer}") };
    cmd.after_long_help(examples).after_help(short)
}

/// The lock key and TTL, shared by the subcommands that take a lock.
#[derive(Debug, Args)]
pub struct KeyTtl {
    /// The lock's key (stored as redlock:{KEY}, or as given with --raw-key)
    #[arg(long, short = 'k', allow_hyphen_values = true, value_hint = ValueHint::Other)]
    pub key: String,
    /// How long the lock lives on the servers without renewal [default: 30s, or the configuration file's ttl]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, default_value = "30s", hide_default_value = true, allow_hyphen_values = true)]
    pub ttl: String,
}

/// How long to wait for a busy lock.
#[derive(Debug, Args)]
pub struct Waiting {
    /// Do not wait: busy if held, or taken since this began
    ///
    /// Do not wait: busy when the lock is held, or was taken by anyone after this began, even if released since. Settling a tie with other contenders, a dead waiter's turn in the queue, or servers too slow to answer (timeouts, not refusals), takes at most 6s plus a node timeout.
    #[arg(short = 'n', long = "no-wait", conflicts_with = "wait")]
    pub no_wait: bool,
    /// Wait at most DUR for the lock; 0 tries once, a bare number is seconds, forever waits until acquired [default: forever, or the configuration file's wait]
    #[arg(short = 'w', long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub wait: Option<String>,
    /// Do not queue: attempt whenever woken, in no order (the behaviour before the wait queue) [default: first come, first served]
    #[arg(long, hide_short_help = true)]
    pub unordered: bool,
}

/// `redlock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Key and TTL.
    #[command(flatten)]
    pub lock: KeyTtl,
    /// Busy handling.
    #[command(flatten)]
    pub waiting: Waiting,
    /// Draw no fencing number (no REDLOCK_FENCE, no counter key)
    #[arg(long)]
    pub no_fence: bool,
    /// Hold the lock shared: any number of --shared holders at once, or one holder without it, never both
    #[arg(long, short = 's')]
    pub shared: bool,
    /// Hold the lock exclusive, the default: one holder and no --shared one (as flock's -x)
    #[arg(long, short = 'x', conflicts_with = "shared", hide_short_help = true)]
    pub exclusive: bool,
    /// At most N holders at once (N places; 1 is the ordinary lock). Every holder of the key must use the same N
    #[arg(long, value_name = "N", default_value_t = 1, value_hint = ValueHint::Other)]
    pub limit: u32,
    /// Say where this holder runs (waiters, status and history show it)
    ///
    /// Say where this holder runs: waiters, status and history show it, with the CI job it runs in (read from GitHub Actions' GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_RUN_ID, or GitLab's CI_JOB_URL; no other variable). At most 200 bytes, no control characters.
    #[arg(long, value_name = "TEXT", value_hint = ValueHint::Other, allow_hyphen_values = true, hide_short_help = true)]
    pub note: Option<String>,
    /// Exit code when the lock is busy; with 0 (cron) the busy message shows only with -v
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = crate::exit::BUSY, value_hint = ValueHint::Other)]
    pub conflict_exit_code: u8,
    /// Keep the lock until DUR after acquisition, even when the command ends sooner [default: release at exit]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub keep: Option<String>,
    /// Run at most once per tick of DUR (below a day, or whole days in --tz's zone)
    ///
    /// Run at most once per tick of DUR. Below a day the tick is floor(clock at start / DUR), from the Unix epoch; a whole number of days counts calendar days in --tz's zone (midnight to midnight; 7d or 1w from Monday); anything else, and any month, is refused: use --cron. The servers record the tick with the lock, and a later host in the same tick skips, however late it fires and however short the job was. Without -n, a host waits at most until its tick ends.
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true, conflicts_with = "cron")]
    pub once_per: Option<String>,
    /// Run at most once per tick of the crontab line EXPR, read in --tz's zone
    ///
    /// Run at most once per tick of the crontab line EXPR: its five fields (minute, hour, day of month, month, day of week; lists, ranges, steps, names) or @hourly, @daily, @weekly, @monthly, @yearly, as the crontab has them. The tick is from the latest scheduled instant at or before the start to the next, in --tz's zone; across a clock change as cron runs a job: a repeated local time is one tick, a skipped one belongs to its day. Every host of a key must give the same line and zone: the servers record them, and refuse another (exit 64).
    #[arg(long, value_name = "EXPR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub cron: Option<String>,
    /// The IANA time zone --cron and --once-per of a day or more are read in [default: $CRON_TZ, $TZ, /etc/localtime, UTC]
    #[arg(long, value_name = "ZONE", value_hint = ValueHint::Other)]
    pub tz: Option<String>,
    /// Stop the command when it has held the lock this long, and exit 124 [default: no limit]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub max_hold: Option<String>,
    /// Sleep a random time up to DUR (at most 1d) before the first attempt [default: no jitter]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub jitter: Option<String>,
    /// Renew the lock this often [default: a third of the TTL]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true, hide_short_help = true)]
    pub renew_every: Option<String>,
    /// What to do when the lock is lost: a signal (TERM, SIGINT, 9...), kill, or ignore
    #[arg(
        long,
        value_name = "ACTION",
        default_value = "TERM",
        value_parser = SignalNames,
        hide_possible_values = true
    )]
    pub on_lost: String,
    /// Grace between the --on-lost (or --max-hold) signal and SIGKILL [default: a third of the TTL, at most 10s]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true, hide_short_help = true)]
    pub kill_after: Option<String>,
    /// After the run (or skip), update this Prometheus textfile (for node_exporter), atomically
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub metrics_file: Option<std::path::PathBuf>,
    /// Ping this cron monitor from the host that runs the tick (healthchecks.io's protocol) [env: REDLOCK_PING]
    ///
    /// Ping this cron monitor from the host that runs (healthchecks.io's protocol, which Cronitor and others accept): URL/start before the command, URL when it exits 0, URL/N with its exit status otherwise, each with a run id (rid) derived from the key and the tick, the same on every host. A host that skips never pings. Each ping is bounded (5s a try, one retry), never holds the command's start past the first renewal and never changes the exit status; a failed ping is one line on stderr. The URL is never printed: give it here, in REDLOCK_PING or in a file (--ping-file).
    #[arg(long, value_name = "URL", value_hint = ValueHint::Url, conflicts_with = "ping_file", hide_short_help = true)]
    pub ping: Option<String>,
    /// Read the --ping URL from FILE (keeps its secret out of ps and the crontab)
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath, hide_short_help = true)]
    pub ping_file: Option<std::path::PathBuf>,
    /// Run this shell command through $SHELL -c (or /bin/sh -c)
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL CMD",
        conflicts_with = "argv",
        value_hint = ValueHint::Other
    )]
    pub shell: Option<String>,
    /// The command and its arguments, after --
    #[arg(last = true, value_name = "CMD", value_hint = ValueHint::CommandWithArguments)]
    pub argv: Vec<String>,
}

/// `--on-lost`'s value: any text (config checks it: `TERM`, `SIGTERM`, `15`,
/// `kill`, `ignore`), with the common ones offered to shell completion.
#[derive(Clone, Copy, Debug)]
struct SignalNames;

impl TypedValueParser for SignalNames {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let names = ["TERM", "INT", "HUP", "QUIT", "USR1", "USR2", "kill", "ignore"];
        Some(Box::new(names.into_iter().map(PossibleValue::new)))
    }
}

/// `redlock acquire`.
#[derive(Debug, Args)]
pub struct AcquireArgs {
    /// Key and TTL.
    #[command(flatten)]
    pub lock: KeyTtl,
    /// Busy handling.
    #[command(flatten)]
    pub waiting: Waiting,
    /// Draw no fencing number (no counter key on the servers)
    #[arg(long)]
    pub no_fence: bool,
    /// Hold the lock shared: any number of --shared holders at once, or one holder without it, never both
    #[arg(long, short = 's')]
    pub shared: bool,
    /// Hold the lock exclusive, the default: one holder and no --shared one (as flock's -x)
    #[arg(long, short = 'x', conflicts_with = "shared", hide_short_help = true)]
    pub exclusive: bool,
    /// At most N holders at once (N places; 1 is the ordinary lock). Every holder of the key must use the same N
    #[arg(long, value_name = "N", default_value_t = 1, value_hint = ValueHint::Other)]
    pub limit: u32,
    /// Say where this holder runs (waiters, status and history show it)
    ///
    /// Say where this holder runs: waiters, status and history show it, with the CI job it runs in (read from GitHub Actions' GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_RUN_ID, or GitLab's CI_JOB_URL; no other variable). At most 200 bytes, no control characters.
    #[arg(long, value_name = "TEXT", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub note: Option<String>,
    /// Print {"token", "fence", "validity_ms", "slot"} instead of the token alone
    #[arg(long)]
    pub json: bool,
}

/// `redlock hold`.
#[derive(Debug, Args)]
pub struct HoldArgs {
    /// The lock's key (stored as redlock:{KEY}, or as given with --raw-key)
    #[arg(long, short = 'k', allow_hyphen_values = true, value_hint = ValueHint::Other)]
    pub key: String,
    /// How long the freeze lasts, from now (at most 31 days); its end is shown to every waiter
    #[arg(long = "for", value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub for_: String,
    /// Why the freeze: waiters, status and history show it (at most 200 bytes, no control characters)
    #[arg(long, value_name = "TEXT", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub note: Option<String>,
    /// Wait at most DUR for the lock when someone holds it at the start; 0 tries once [default: the whole --for]
    #[arg(short = 'w', long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub wait: Option<String>,
}

/// `redlock extend`.
#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// Key and TTL.
    #[command(flatten)]
    pub lock: KeyTtl,
    /// The token printed by `acquire`
    #[arg(
        long,
        short = 't',
        value_hint = ValueHint::Other,
        env = "REDLOCK_TOKEN",
        hide_env_values = true,
        allow_hyphen_values = true
    )]
    pub token: String,
}

/// `redlock release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The lock's key
    #[arg(long, short = 'k', allow_hyphen_values = true, value_hint = ValueHint::Other)]
    pub key: String,
    /// The token printed by `acquire`
    #[arg(
        long,
        short = 't',
        value_hint = ValueHint::Other,
        required_unless_present_any = ["force", "force_any_value"],
        conflicts_with_all = ["force", "force_any_value"],
        allow_hyphen_values = true
    )]
    pub token: Option<String>,
    /// Delete the lock whoever holds it (only a value redlock wrote), and say whose it was
    #[arg(long)]
    pub force: bool,
    /// Like --force, and delete a value that is not a redlock lock too (another client's, with --raw-key)
    #[arg(long)]
    pub force_any_value: bool,
    /// The places to look at, for a key taken with --limit N [default: as many as the holders' tokens say]
    #[arg(long, value_name = "N", value_hint = ValueHint::Other)]
    pub limit: Option<u32>,
}

/// `redlock status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The lock's key
    #[arg(long, short = 'k', allow_hyphen_values = true, value_hint = ValueHint::Other)]
    pub key: String,
    /// The places to look at, for a key taken with --limit N [default: as many as the holders' tokens say]
    #[arg(long, value_name = "N", value_hint = ValueHint::Other)]
    pub limit: Option<u32>,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `redlock history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The lock's key
    #[arg(long, short = 'k', allow_hyphen_values = true, value_hint = ValueHint::Other)]
    pub key: String,
    /// How many runs to show, newest first (at most 100, the runs kept per key)
    #[arg(short = 'n', long = "count", value_name = "N", default_value_t = 20)]
    pub count: usize,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `redlock check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The lock's key
    #[arg(long, short = 'k', allow_hyphen_values = true, value_hint = ValueHint::Other)]
    pub key: String,
    /// The last run must have started within DUR (e.g. 25h for a daily job)
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub max_age: String,
    /// Every run in the window (--since) must also have exited 0
    #[arg(long)]
    pub require_success: bool,
    /// For a key run with --once-per: more than N ticks of the window with no run is a warning [default: 0]
    #[arg(long, value_name = "N")]
    pub max_missed: Option<u64>,
    /// The window that --max-missed and --require-success look at: the last DUR [default: since the oldest run kept]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub since: Option<String>,
    /// A run still holding the lock for longer than DUR is a warning (a hung job)
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub max_runtime: Option<String>,
    /// Print one JSON object instead of the one-line verdict
    #[arg(long)]
    pub json: bool,
}

/// `redlock config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print nothing but the problems, each on a line of its own (exit 64 if any): a gate for configuration management
    #[arg(long)]
    pub check: bool,
}

/// `redlock doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The TTL whose drift budget the servers' clocks are checked against [default: 30s, or the configuration file's ttl]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, default_value = "30s", hide_default_value = true, allow_hyphen_values = true)]
    pub ttl: String,
    /// Print one JSON object instead of a report
    #[arg(long)]
    pub json: bool,
}

/// `--version`: the version, the commit it was built from and the build's
/// cargo features (from build.rs); TLS is always built in (rustls).
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("REDLOCK_COMMIT"),
    ", features: ",
    env!("REDLOCK_FEATURES"),
    ", TLS: rustls)"
);

const LONG_ABOUT: &str = "\
Lock shell jobs, cron tasks and CI steps across machines with a Redlock quorum \
over independent Redis servers.

'redlock run' takes the lock on a quorum of the servers (--servers or \
REDLOCK_SERVERS), runs the command, renews the lock while it runs, and releases \
it when the command exits; if the lock is lost, the command is stopped before \
anyone else can take it. 'acquire', 'extend', 'release' and 'status' serve \
scripts and humans; 'doctor' checks the servers.

Global options come from flags, then the environment, then the configuration \
file (--config FILE, $REDLOCK_CONFIG, ~/.config/redlock/config.toml or \
/etc/redlock/config.toml); \
'config' shows the result and where each value came from. Durations are 500ms, \
30s, 1h30m, or a bare number of seconds.";

const DOCTOR_EXAMPLES: &str = "\
Examples:
  redlock doctor --servers redis://a:6379,redis://b:6379,redis://c:6379
  redlock doctor --ttl 5s --json";

const CONFIG_EXAMPLES: &str = "\
The configuration file is --config FILE, else $REDLOCK_CONFIG, else \
~/.config/redlock/config.toml, else \
/etc/redlock/config.toml: TOML with one key per global option, named as the flag \
(servers, quorum, node-timeout, drift-factor, max-ttl, trust-restarts, raw-key, host, \
password-file, tls-ca, tls-cert, tls-key, log-format, verbose, quiet), the zone --cron \
reads (tz), and the fleet's default ttl and wait (for run, acquire, extend and doctor, and \
hold's ttl, within --max-ttl; their --ttl, --wait and -n win). \
Flags win over the \
environment, the environment over the file.

Examples:
  redlock config
  redlock --config /etc/redlock/ci.toml config --check";

const RUN_EXAMPLES: &str = "\
Examples:
  redlock run --cron '30 2 * * *' -E 0 --key nightly-report -- /usr/local/bin/report
  redlock run --key deploy-prod --wait 15m -- ./deploy.sh
  redlock run --key backup --ttl 1m -c 'pg_dump app | gzip > /backup/app.gz'";

const ACQUIRE_EXAMPLES: &str = "\
Examples:
  TOKEN=$(redlock acquire --key maint --ttl 1h)
  redlock acquire -n --key maint || echo 'someone else is in maintenance'
  redlock acquire --key maint --json | jq .fence";

const HOLD_EXAMPLES: &str = "\
The lock's TTL is the configuration's ttl, at most --max-ttl: the freeze \
renews it, so no host's --max-ttl changes. After a loss (a quorum that could \
not renew in time) it is taken back as soon as a quorum can vote, and the \
gap is recorded in the history, naming whoever held the key meanwhile. A \
--cron or --once-per run of the key skips its tick while the freeze outlasts \
it ('check' reports the tick paused). Exit 0 at the end, or on SIGTERM, \
SIGINT or SIGHUP (released at once); 70 when 'release --force' deleted it; \
75 when it is still held elsewhere after --wait.

Examples:
  redlock hold --key deploy-prod --for 2h --note 'Black Friday, ask alice'
  nohup redlock hold --key deploy-prod --for 2h --note 'release freeze' >>freeze.log 2>&1 &
  systemd-run --unit freeze-deploy-prod redlock hold --key deploy-prod --for 2h --note 'incident 42'
  systemctl stop freeze-deploy-prod    # ends it early";

const EXTEND_EXAMPLES: &str = "\
Examples:
  redlock extend --key maint --token \"$TOKEN\" --ttl 1h";

const RELEASE_EXAMPLES: &str = "\
Examples:
  redlock release --key maint --token \"$TOKEN\"
  redlock release --key maint --force";

const STATUS_EXAMPLES: &str = "\
Examples:
  redlock status --key maint
  redlock status --key maint --json | jq .holder";

const HISTORY_EXAMPLES: &str = "\
Examples:
  redlock history --key nightly-report
  redlock history --key nightly-report -n 5 --json | jq '.entries[0]'";

const CHECK_EXAMPLES: &str = "\
Examples:
  redlock check --key nightly-report --max-age 25h --require-success
  # prints e.g.: OK - nightly-report ran 3h ago on web-3, exit 0
  redlock check --key nightly --max-age 15m --since 1h --max-missed 1 --max-runtime 30m";

/// The clap command, for the man page and completion generators.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Where clap found a global option's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Given {
    /// On the command line.
    Flag,
    /// In this environment variable.
    Env(String),
    /// Nowhere: clap's default (or nothing), so a config file may set it.
    No,
}

/// The command line as typed, with where each global option came from.
#[derive(Debug)]
pub struct Parsed {
    /// The parsed command line.
    pub cli: Cli,
    /// Global option id (`servers`, `node_timeout`...) to where clap found
    /// it; also `ttl`, `wait` and `no_wait` when the subcommand's were on
    /// the command line (the file's `ttl` and `wait` default them).
    pub given: std::collections::HashMap<String, Given>,
    /// `REDLOCK_PASSWORD`, the password for servers whose URL has none
    /// (unset when empty).
    pub password: Option<String>,
    /// The URL of the CI job this runs in ([`ci_job`]), as the environment
    /// says it.
    pub ci_job: Option<String>,
    /// `REDLOCK_PING`, the cron monitor's URL (unset when empty).
    pub ping: Option<String>,
}

/// The URL of the CI job `env` describes: GitHub Actions' run
/// (`$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID`) or
/// GitLab's job (`$CI_JOB_URL`). Only those variables are read: a token
/// carries this URL to every server and every waiter's terminal, and
/// nothing else of the environment may reach it. Of the URL only the
/// scheme (http or https), the host, the port and the path are kept: a
/// query, a fragment or user info may hold a secret whatever it is named
/// (`?private_token=`, `#access_token=`, `user:pass@`). The path comes out
/// percent-encoded, ASCII. No URL (`None`) when the variables hold no
/// http(s) URL with a host, or hold a control or formatting character
/// ([`crate::text::is_unsafe`]).
pub fn ci_job(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<String> {
    let var = |name: &str| {
        env(name).map(|v| v.to_string_lossy().into_owned()).filter(|v| !v.trim().is_empty())
    };
    let raw = match (var("GITHUB_SERVER_URL"), var("GITHUB_REPOSITORY"), var("GITHUB_RUN_ID")) {
        (Some(server), Some(repo), Some(run)) => {
            format!("{}/{repo}/actions/runs/{run}", server.trim_end_matches('/'))
        }
        _ => var("CI_JOB_URL")?,
    };
    if raw.chars().any(crate::text::is_unsafe) {
        return None;
    }
    let url = url::Url::parse(raw.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let port = url.port().map_or_else(String::new, |p| format!(":{p}"));
    Some(format!("{}://{}{port}{}", url.scheme(), url.host_str()?, url.path()))
}

/// Parses `args` (the program name first) with the process environment,
/// recording for each global option whether it came from a flag, the
/// environment or nowhere.
pub fn parse_from<I, T>(args: I) -> Result<Parsed, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    parse_with_env(args, |var| std::env::var_os(var))
}

/// [`parse_from`] with `env` standing for the environment, which it may
/// only narrow: a variable that `env` does not give as the process's
/// environment holds it (or gives empty) is unset. Tests pass `|_| None`,
/// so that no `REDLOCK_*` of the caller's changes what they parse.
pub fn parse_with_env<I, T>(
    args: I,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Parsed, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    use clap::parser::ValueSource;
    // The command is built once and parsed in place: building (or cloning)
    // clap's tree is paid on every cron tick; the subcommands' options are
    // built only for the one parsed (`Lazy`).
    let mut command = command();
    // An empty variable counts as unset (`REDLOCK_SERVERS=` in a crontab),
    // so that the file or the default applies; clap reads only the
    // variables `env` gives.
    let unset: Vec<String> = command
        .get_arguments()
        .filter(|a| {
            a.get_env().is_some_and(|var| {
                std::env::var_os(var).is_some_and(|set| {
                    set.is_empty() || env(&var.to_string_lossy()).as_ref() != Some(&set)
                })
            })
        })
        .map(|a| a.get_id().to_string())
        .collect();
    for id in &unset {
        command = command.mut_arg(id, |a| a.env(None));
    }
    let password =
        env("REDLOCK_PASSWORD").map(|p| p.to_string_lossy().into_owned()).filter(|p| !p.is_empty());
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let parsed = command.try_get_matches_from_mut(&args);
    // The subcommand is built now (by the parse, in place): its options
    // are known to the checks below.
    let typed: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    if let Some(e) = single_dash_long(&command, &typed) {
        return Err(e);
    }
    let matches = parsed.map_err(|e| refine(&command, &typed, e))?;
    let cli = Cli::from_arg_matches(&matches)?;
    // Global options given after the subcommand are recorded there.
    let mut levels = vec![&matches];
    if let Some((_, sub)) = matches.subcommand() {
        levels.push(sub);
    }
    let mut given: std::collections::HashMap<String, Given> = command
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|arg| {
            let id = arg.get_id().as_str();
            let source = levels.iter().filter_map(|m| m.value_source(id)).max();
            let given = match source {
                Some(ValueSource::CommandLine) => Given::Flag,
                Some(ValueSource::EnvVariable) => Given::Env(
                    arg.get_env().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default(),
                ),
                _ => Given::No,
            };
            (id.to_owned(), given)
        })
        .collect();
    // The subcommand's --ttl and --wait (-n), which the file may default.
    if let Some((_, sub)) = matches.subcommand() {
        for id in ["ttl", "wait", "no_wait"] {
            if sub.try_contains_id(id).is_ok()
                && sub.value_source(id) == Some(ValueSource::CommandLine)
            {
                given.insert(id.to_owned(), Given::Flag);
            }
        }
    }
    let ping =
        env("REDLOCK_PING").map(|p| p.to_string_lossy().into_owned()).filter(|p| !p.is_empty());
    Ok(Parsed { cli, given, password, ci_job: ci_job(env), ping })
}

/// The options `command` takes at the top and in the subcommand that
/// `args` (the program name first) name before any `--` (a built one:
/// after a parse).
fn options<'c>(command: &'c clap::Command, args: &[String]) -> Vec<&'c clap::Arg> {
    let sub =
        args.iter().skip(1).take_while(|a| *a != "--").find_map(|a| command.find_subcommand(a));
    command
        .get_arguments()
        .chain(sub.into_iter().flat_map(clap::Command::get_arguments))
        .filter(|a| !a.is_positional())
        .collect()
}

/// The error for a short option run together with letters that spell a
/// long one: `-key=deploy` (Go tools and consul take single-dash long
/// flags) reads as `-k` with the value `ey=deploy`, and would lock the key
/// `ey=deploy`; `-ttl 5s` fails on `-t`. Refused before anything runs,
/// with the long form. A word that is the value of the option before it
/// (`--key -wait`) is left alone.
fn single_dash_long(command: &clap::Command, args: &[String]) -> Option<clap::Error> {
    // `-name` or `-name=value`, name of 3 or more lowercase letters and dashes.
    let spelled = |arg: &str| -> Option<String> {
        let body = arg.strip_prefix('-').filter(|b| !b.starts_with('-'))?;
        let name = body.split('=').next().unwrap_or(body);
        let word = name.len() >= 3 && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-');
        word.then(|| name.to_owned())
    };
    let before: Vec<&str> =
        args.iter().skip(1).map(String::as_str).take_while(|a| *a != "--").collect();
    if !before.iter().any(|a| spelled(a).is_some()) {
        return None;
    }
    let options = options(command, args);
    let takes_value = |arg: &str| {
        let (long, short) = match arg.strip_prefix("--") {
            Some(long) if !long.contains('=') => (Some(long), None),
            Some(_) => return false,
            None => match arg.strip_prefix('-').map(|s| (s.chars().next(), s.chars().count())) {
                Some((Some(c), 1)) => (None, Some(c)),
                _ => return false,
            },
        };
        options.iter().any(|o| {
            (long.is_some() && o.get_long() == long || short.is_some() && o.get_short() == short)
                && o.get_action().takes_values()
        })
    };
    for (i, arg) in before.iter().enumerate() {
        let Some(name) = spelled(arg) else { continue };
        if i > 0 && takes_value(before[i - 1]) {
            continue;
        }
        if !options.iter().any(|o| o.get_long() == Some(name.as_str())) {
            continue;
        }
        // A server list's passwords are never shown.
        let arg = match arg.split_once('=') {
            Some((flag, value)) if value.contains("://") => {
                format!("{flag}={}", crate::server::redact(value))
            }
            _ => (*arg).to_owned(),
        };
        let first = arg.chars().nth(1).unwrap_or('-');
        let as_read = match options.iter().find(|o| o.get_short() == Some(first)) {
            Some(o) if o.get_action().takes_values() => {
                format!("it reads as -{first} with the value '{}'", &arg[2..])
            }
            _ => "a single dash takes one letter".to_owned(),
        };
        return Some(clap::Error::raw(
            clap::error::ErrorKind::UnknownArgument,
            format!("'{arg}': {as_read}; did you mean '-{arg}'? (long options take two dashes)\n"),
        ));
    }
    None
}

/// clap's error, with suggestions a user would give: the nearest option
/// or subcommand by edit distance, a swap of two letters counting as one
/// (`--kye` is `--key`, not `--keep`; `rn` is `run`), and without the tip
/// to pass an unknown option as a value after `--`, which for `run` would
/// run it as the command.
fn refine(command: &clap::Command, args: &[String], e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            // A word without a dash is the forgotten `--` of `run`
            // ([`error_line`] gives the tip).
            let Some(arg) = context(ContextKind::InvalidArg).filter(|a| a.starts_with('-')) else {
                return e;
            };
            if let Some(sub) = before_its_subcommand(command, args, &arg) {
                return clap::Error::raw(
                    e.kind(),
                    format!(
                        "unexpected argument '{arg}' before the subcommand: '{arg}' is an option \
                         of '{sub}': put it after '{sub}' (redlock {sub} {arg} ...); only the \
                         global options may stand before it\n"
                    ),
                );
            }
            let options = options(command, args);
            let hint = arg.strip_prefix("--").and_then(|typed| {
                let typed = typed.split('=').next().unwrap_or(typed);
                did_you_mean(typed, options.iter().filter_map(|o| o.get_long()))
            });
            let hint = hint.map(|l| format!("; did you mean '--{l}'?")).unwrap_or_default();
            clap::Error::raw(e.kind(), format!("unexpected argument '{arg}'{hint}\n"))
        }
        ErrorKind::InvalidSubcommand => {
            let Some(typed) = context(ContextKind::InvalidSubcommand) else { return e };
            let names = command.get_subcommands().map(clap::Command::get_name);
            match did_you_mean(&typed, names.filter(|n| *n != "help")) {
                Some(name) => clap::Error::raw(
                    e.kind(),
                    format!("unrecognized subcommand '{typed}'; did you mean '{name}'?\n"),
                ),
                None => e,
            }
        }
        _ => e,
    }
}

/// The subcommand named in `args` after `arg` when `arg` (`-n`, `--no-wait`,
/// `-E`) is one of its own options: `redlock -n run ...`, where only the
/// global options may stand before the subcommand.
fn before_its_subcommand(command: &clap::Command, args: &[String], arg: &str) -> Option<String> {
    let typed = args.iter().skip(1).take_while(|a| *a != "--");
    let at = typed.clone().position(|a| a == arg || a.split('=').next() == Some(arg))?;
    let sub = typed.skip(at + 1).find_map(|a| command.find_subcommand(a))?;
    // The subcommand's options are built (`Lazy`) only when it is parsed.
    let mut sub = sub.clone();
    sub.build();
    let (long, short) = match arg.strip_prefix("--") {
        Some(long) => (Some(long.split('=').next().unwrap_or(long)), None),
        None => (None, arg.strip_prefix('-').and_then(|s| s.chars().next())),
    };
    let own = sub.get_arguments().any(|o| {
        !o.is_global_set()
            && (long.is_some() && o.get_long() == long || short.is_some() && o.get_short() == short)
    });
    own.then(|| sub.get_name().to_owned())
}

/// The candidate nearest to `typed`, if near enough to be what was meant:
/// at most one edit for names of up to 4 letters, two beyond; a swap of
/// two neighbouring letters is one edit, and `typed` that begins exactly
/// one candidate (3 letters or more) is that candidate. Ties go to the
/// first candidate.
pub fn did_you_mean<'a>(typed: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = if typed.chars().count() <= 4 { 1 } else { 2 };
    let candidates: Vec<&str> = candidates.collect();
    let prefixed: Vec<&str> =
        candidates.iter().copied().filter(|c| typed.len() >= 3 && c.starts_with(typed)).collect();
    if let [only] = prefixed.as_slice() {
        return Some(only);
    }
    candidates
        .into_iter()
        .map(|c| (edits(typed, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The optimal string alignment distance of `a` and `b`: insertions,
/// deletions, substitutions and swaps of two neighbouring characters.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// True when `args` (the program name first) ask for `--log-format json`
/// before any `--`: for the error of a command line that did not parse.
pub fn asks_for_json<I, T>(args: I) -> bool
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    let args: Vec<String> =
        args.into_iter().map(|a| a.into().to_string_lossy().into_owned()).collect();
    let before = args.iter().take_while(|a| *a != "--");
    let mut json = false;
    let mut format_next = false;
    for a in before {
        if format_next {
            json = a == "json";
        }
        format_next = a == "--log-format";
        if let Some(value) = a.strip_prefix("--log-format=") {
            json = value == "json";
        }
    }
    json
}

/// A parse error as one line: clap's message with everything it names (the
/// missing arguments, the offending value) and its tips ("a similar
/// subcommand exists", "use '-- echo'"), without the usage block, which
/// `--help` shows in full.
pub fn error_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut parts: Vec<&str> = Vec::new();
    let mut in_usage = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("Usage:") {
            in_usage = true;
        } else if line.is_empty() {
            in_usage = false;
        } else if !in_usage && !line.starts_with("For more information") {
            parts.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    let mut line = String::new();
    for part in parts {
        if !line.is_empty() {
            // "...were not provided:" continues with the list; a tip is a new clause.
            line.push_str(if line.ends_with(':') || line.ends_with(',') { " " } else { "; " });
        }
        line.push_str(part);
    }
    if line.is_empty() {
        line.push_str("bad command line");
    }
    // `redlock run --key a echo hello`: the forgotten `--` (clap offers this
    // tip only for positionals that are not `last`).
    if let Some(clap::error::ContextValue::String(arg)) =
        e.get(clap::error::ContextKind::InvalidArg)
        && e.kind() == clap::error::ErrorKind::UnknownArgument
        && !arg.starts_with('-')
        && text.contains("Usage: redlock run ")
        && !line.contains("'--")
    {
        line.push_str(&format!("; tip: to run '{arg}', put it after '--': -- {arg} ..."));
    }
    format!("{line} (see --help)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ci_job_comes_from_its_variables_only() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter().find(|(n, _)| *n == name).map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        static GITHUB: [(&str, &str); 4] = [
            ("GITHUB_SERVER_URL", "https://github.com/"),
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_RUN_ID", "7"),
            ("CI_JOB_URL", "https://gitlab.com/o/r/-/jobs/1"),
        ];
        assert_eq!(ci_job(env(&GITHUB)).as_deref(), Some("https://github.com/o/r/actions/runs/7"));
        assert_eq!(ci_job(env(&GITHUB[1..])).as_deref(), Some("https://gitlab.com/o/r/-/jobs/1"));
        assert_eq!(ci_job(env(&[("GITHUB_RUN_ID", "7"), ("CI_JOB_URL", " ")])), None);
        // Only scheme, host, port and path: whatever else may be a secret.
        let job =
            |url: &'static str| ci_job(move |n: &str| (n == "CI_JOB_URL").then(|| url.into()));
        for (url, kept) in [
            (
                "https://gitlab.example/o/r/-/jobs/1?private_token=s",
                "https://gitlab.example/o/r/-/jobs/1",
            ),
            ("https://u:p@ci.example:8443/j/1#access_token=s", "https://ci.example:8443/j/1"),
            ("http://ci.example/a b/é?PASSWORD=s&token=s", "http://ci.example/a%20b/%C3%A9"),
            ("HTTPS://CI.example", "https://ci.example/"),
        ] {
            assert_eq!(job(url).as_deref(), Some(kept), "{url}");
        }
        for url in [
            "ftp://ci.example/j",
            "javascript:alert(1)",
            "ci.example/j",
            "https://x/\u{202e}j",
            "https://x/\u{1b}[2J",
            "https://x/a\nb",
        ] {
            assert_eq!(job(url), None, "{url:?}");
        }
    }

    fn line(args: &[&str]) -> String {
        let args = std::iter::once("redlock").chain(args.iter().copied());
        match parse_with_env(args, |_| None) {
            Ok(p) => panic!("parsed: {:?}", p.cli),
            Err(e) => error_line(&e),
        }
    }

    #[test]
    fn suggestions_count_a_swap_as_one_edit() {
        let longs = ["key", "keep", "ttl", "wait", "metrics-file", "max-hold", "max-ttl"];
        let best = |typed| did_you_mean(typed, longs.iter().copied());
        assert_eq!(best("kye"), Some("key"));
        assert_eq!(best("kep"), Some("key"), "ties go to the first");
        assert_eq!(best("wiat"), Some("wait"));
        assert_eq!(best("metrics"), Some("metrics-file"), "a prefix of one");
        assert_eq!(best("max"), None, "a prefix of two, and far from both");
        assert_eq!(best("flock"), None);
        assert_eq!(edits("rn", "run"), 1);
        assert_eq!(edits("ab", "ba"), 1);
    }

    #[test]
    fn records_where_global_options_came_from() {
        let p = parse_from(["redlock", "status", "-k", "k", "--quorum", "2", "-v"]).unwrap();
        assert_eq!(p.given["quorum"], Given::Flag);
        assert_eq!(p.given["verbose"], Given::Flag);
        assert_eq!(p.given["drift_factor"], Given::No);
        assert_eq!(p.given["log_format"], Given::No);
        let p = parse_from(["redlock", "--drift-factor", "0.1", "status", "-k", "k"]).unwrap();
        assert_eq!(p.given["drift_factor"], Given::Flag);
    }

    #[test]
    fn parse_errors_keep_their_content_on_one_line() {
        for (args, expect) in [
            (&["release", "--key", "m2"][..], "--token <TOKEN>"),
            (&["run", "--key", "a", "echo", "hello"], "after '--': -- echo"),
            (&["runn"], "did you mean 'run'?"),
            (&["rn"], "did you mean 'run'?"),
            (&["run", "--kye", "a"], "did you mean '--key'?"),
            (&["run", "-key=a", "--", "true"], "did you mean '--key=a'?"),
            (&["run", "-k", "a", "-n", "--wait", "5", "--", "true"], "'--wait <DUR>'"),
            (&["status"], "--key <KEY>"),
        ] {
            let l = line(args);
            assert!(l.contains(expect), "{args:?}: {l}");
            assert!(!l.contains('\n') && !l.contains("Usage"), "{args:?}: {l}");
        }
    }

    /// flock(1)'s habits: `-s` shared and `-x` exclusive (the default) are
    /// taken where a lock is taken; a subcommand's option typed before the
    /// subcommand (`redlock -n run ...`) is told to go after it.
    #[test]
    fn flock_habits_shared_exclusive_and_a_run_flag_before_run() {
        let run = |args: &[&str]| {
            let args = ["redlock", "run", "-k", "k"].into_iter().chain(args.iter().copied());
            match parse_with_env(args.chain(["--", "true"]), |_| None) {
                Ok(Parsed { cli: Cli { command: Command::Run(Lazy(a)), .. }, .. }) => Ok(a),
                Ok(other) => panic!("parsed: {:?}", other.cli),
                Err(e) => Err(error_line(&e)),
            }
        };
        assert!(run(&["-s"]).unwrap().shared);
        assert!(!run(&["-x"]).unwrap().shared);
        assert!(run(&["-s", "-x"]).unwrap_err().contains("cannot be used with"));
        let acquire = parse_with_env(["redlock", "acquire", "-k", "k", "-s"], |_| None).unwrap();
        assert!(matches!(acquire.cli.command, Command::Acquire(Lazy(a)) if a.shared));
        for (args, flag) in [
            (&["-n", "run", "-k", "k", "--", "true"][..], "-n"),
            (&["-E", "0", "run", "-k", "k", "--", "true"], "-E"),
            (&["--no-wait", "run", "-k", "k", "--", "true"], "--no-wait"),
            (&["-s", "acquire", "-k", "k"], "-s"),
        ] {
            let l = line(args);
            let sub = args.iter().find(|a| ["run", "acquire"].contains(a)).unwrap();
            let expect = format!("'{flag}' is an option of '{sub}': put it after '{sub}'");
            assert!(l.contains(&expect), "{args:?}: {l}");
            assert!(!l.contains("did you mean"), "{args:?}: {l}");
        }
    }
}
