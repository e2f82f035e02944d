//! The command line as typed: clap definitions only, no validation beyond
//! what clap does itself. [`crate::config`] turns it into a checked
//! configuration; [`command`] feeds the man page and completion generators.

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum, ValueHint};

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
    /// Trust every restarted server to have kept its data: it votes at once (a server that says appendonly yes and appendfsync always is trusted without this)
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

/// How messages on stderr are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line of text per message.
    Text,
    /// One JSON object per line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding the lock, renewing it until the command exits
    #[command(after_help = RUN_EXAMPLES)]
    Run(Lazy<Box<RunArgs>>),
    /// Take the lock and print its token on stdout
    #[command(after_help = ACQUIRE_EXAMPLES)]
    Acquire(Lazy<AcquireArgs>),
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
    /// For monitoring: did a run start within --max-age (exit 0 ok, 1 stale or failed, 2 unknown)
    #[command(after_help = CHECK_EXAMPLES)]
    Check(Lazy<CheckArgs>),
    /// Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(Lazy<DoctorArgs>),
    /// Print the effective configuration and where each value came from (flag, environment, file, default)
    #[command(after_help = CONFIG_EXAMPLES)]
    Config,
}

/// A subcommand's arguments, put into clap's tree only when that subcommand
/// is parsed, or when help, man pages or completions need the whole tree
/// (`clap::Command::defer`). A run builds its own subcommand's arguments
/// alone instead of every subcommand's (issue 11: every cron tick parses
/// a command line).
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
/// deferred, would otherwise have the last word.
fn keep_about(cmd: clap::Command, augment: fn(clap::Command) -> clap::Command) -> clap::Command {
    use clap::builder::Resettable;
    let kept = |text: Option<&clap::builder::StyledStr>| {
        text.cloned().map_or(Resettable::Reset, Resettable::Value)
    };
    let (about, long) = (kept(cmd.get_about()), kept(cmd.get_long_about()));
    augment(cmd).about(about).long_about(long)
}

/// The lock key and TTL, shared by the subcommands that take a lock.
#[derive(Debug, Args)]
pub struct KeyTtl {
    /// The lock's key (stored as redlock:{KEY}, or as given with --raw-key)
    #[arg(long, short = 'k', allow_hyphen_values = true, value_hint = ValueHint::Other)]
    pub key: String,
    /// How long the lock lives on the servers without renewal
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, default_value = "30s", allow_hyphen_values = true)]
    pub ttl: String,
}

/// How long to wait for a busy lock.
#[derive(Debug, Args)]
pub struct Waiting {
    /// Try once; fail at once when the lock is busy (as --wait 0)
    #[arg(short = 'n', long = "no-wait", conflicts_with = "wait")]
    pub no_wait: bool,
    /// Wait at most DUR for the lock; 0 tries once, a bare number is seconds [default: wait until acquired]
    #[arg(short = 'w', long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub wait: Option<String>,
    /// Do not queue: attempt whenever woken, in no order (the behaviour before the wait queue) [default: first come, first served]
    #[arg(long)]
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
    /// Draw no fencing number (no REDLOCK_FENCE, no counter key on the servers)
    #[arg(long)]
    pub no_fence: bool,
    /// Hold the lock shared: any number of --shared holders at once, or one holder without it, never both
    #[arg(long)]
    pub shared: bool,
    /// At most N holders at once (N places; 1 is the ordinary lock). Every holder of the key must use the same N
    #[arg(long, value_name = "N", default_value_t = 1, value_hint = ValueHint::Other)]
    pub limit: u32,
    /// Exit code when the lock is busy; with 0 (cron) the busy message shows only with -v
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = crate::exit::BUSY, value_hint = ValueHint::Other)]
    pub conflict_exit_code: u8,
    /// Keep the lock until DUR after acquisition, even when the command ends sooner [default: release at exit]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub keep: Option<String>,
    /// Stop the command when it has held the lock this long, and exit 124 [default: no limit]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub max_hold: Option<String>,
    /// Sleep a random time up to DUR before the first attempt [default: no jitter]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub jitter: Option<String>,
    /// Renew the lock this often [default: a third of the TTL]
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
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
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, allow_hyphen_values = true)]
    pub kill_after: Option<String>,
    /// After the run (or skip), update this Prometheus textfile (for node_exporter), atomically
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub metrics_file: Option<std::path::PathBuf>,
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
    #[arg(long)]
    pub shared: bool,
    /// At most N holders at once (N places; 1 is the ordinary lock). Every holder of the key must use the same N
    #[arg(long, value_name = "N", default_value_t = 1, value_hint = ValueHint::Other)]
    pub limit: u32,
    /// Print {"token", "fence", "validity_ms", "slot"} instead of the token alone
    #[arg(long)]
    pub json: bool,
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
    /// Delete the lock whoever holds it (only a value redlock wrote)
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
    /// The last run must also have exited 0
    #[arg(long)]
    pub require_success: bool,
    /// Print one JSON object instead of the one-line verdict
    #[arg(long)]
    pub json: bool,
}

/// `redlock doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The TTL whose drift budget the servers' clocks are checked against
    #[arg(long, value_name = "DUR", value_hint = ValueHint::Other, default_value = "30s", allow_hyphen_values = true)]
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
file ($REDLOCK_CONFIG, ~/.config/redlock/config.toml or /etc/redlock/config.toml); \
'config' shows the result and where each value came from. Durations are 500ms, \
30s, 1h30m, or a bare number of seconds.";

const DOCTOR_EXAMPLES: &str = "\
Examples:
  redlock doctor --servers redis://a:6379,redis://b:6379,redis://c:6379
  redlock doctor --ttl 5s --json";

const CONFIG_EXAMPLES: &str = "\
The configuration file is $REDLOCK_CONFIG, else ~/.config/redlock/config.toml, else \
/etc/redlock/config.toml: TOML with one key per global option, named as the flag \
(servers, quorum, node-timeout, drift-factor, password-file, tls-ca, tls-cert, tls-key, \
log-format, verbose, quiet). Flags win over the environment, the environment over the file.

Examples:
  redlock config
  REDLOCK_CONFIG=/etc/redlock/ci.toml redlock config";

const RUN_EXAMPLES: &str = "\
Examples:
  redlock run -n -E 0 --key nightly-report -- /usr/local/bin/report
  redlock run --key deploy-prod --wait 15m -- ./deploy.sh
  redlock run --key backup --ttl 1m -c 'pg_dump app | gzip > /backup/app.gz'";

const ACQUIRE_EXAMPLES: &str = "\
Examples:
  TOKEN=$(redlock acquire --key maint --ttl 1h)
  redlock acquire -n --key maint || echo 'someone else is in maintenance'
  redlock acquire --key maint --json | jq .fence";

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
  # prints e.g.: OK - nightly-report ran 3h ago on web-3, exit 0";

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
    /// Global option id (`servers`, `node_timeout`...) to where clap found it.
    pub given: std::collections::HashMap<String, Given>,
    /// `REDLOCK_PASSWORD`, the password for servers whose URL has none
    /// (unset when empty).
    pub password: Option<String>,
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
    // clap's tree costs each run about 0.1 ms (issue 11, the cost of every
    // cron tick); the subcommands' options are built only for the one
    // parsed (`Lazy`).
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
    let matches = command.try_get_matches_from_mut(args)?;
    let cli = Cli::from_arg_matches(&matches)?;
    // Global options given after the subcommand are recorded there.
    let mut levels = vec![&matches];
    if let Some((_, sub)) = matches.subcommand() {
        levels.push(sub);
    }
    let given = command
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
    Ok(Parsed { cli, given, password })
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

    fn line(args: &[&str]) -> String {
        match Cli::try_parse_from(std::iter::once("redlock").chain(args.iter().copied())) {
            Ok(cli) => panic!("{args:?} parsed: {cli:?}"),
            Err(e) => error_line(&e),
        }
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
            (&["runn"], "'run'"),
            (&["run", "-k", "a", "-n", "--wait", "5", "--", "true"], "'--wait <DUR>'"),
            (&["status"], "--key <KEY>"),
        ] {
            let l = line(args);
            assert!(l.contains(expect), "{args:?}: {l}");
            assert!(!l.contains('\n') && !l.contains("Usage"), "{args:?}: {l}");
        }
    }
}
