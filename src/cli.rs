//! The command line as typed: clap definitions only, no validation beyond
//! what clap does itself. [`crate::config`] turns it into a checked
//! configuration; [`command`] feeds the man page and completion generators.

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// Lock shell jobs, cron tasks and CI steps across machines with a Redlock
/// quorum over independent Redis servers.
#[derive(Debug, Parser)]
#[command(
    name = "redlock",
    version,
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
        help = "Redis servers, comma-separated: redis://[user:pass@]host[:port][/db], rediss://... (TLS), unix:///path",
        env = "REDLOCK_SERVERS",
        global = true,
        value_name = "URL[,URL...]",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub servers: String,
    /// Read the password for servers whose URL has none from FILE [env: REDLOCK_PASSWORD holds it directly]
    #[arg(long, global = true, value_name = "FILE")]
    pub password_file: Option<std::path::PathBuf>,
    /// PEM file of the CA that signed the servers' TLS certificates (rediss://) [default: the public web roots]
    #[arg(long, global = true, value_name = "FILE", env = "REDLOCK_TLS_CA")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// PEM client certificate, for servers that ask for one (with --tls-key)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "REDLOCK_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of --tls-cert
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "REDLOCK_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<std::path::PathBuf>,
    /// Servers that must agree [default: more than half of them]
    #[arg(long, global = true, value_name = "N")]
    pub quorum: Option<usize>,
    /// Time limit for each server call [default: a tenth of the TTL, at most 1s]
    #[arg(long, global = true, value_name = "DUR")]
    pub node_timeout: Option<String>,
    /// Clock drift allowance as a fraction of the TTL
    #[arg(long, global = true, value_name = "F", default_value = "0.01")]
    pub drift_factor: String,
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
    Run(RunArgs),
    /// Take the lock and print its token on stdout
    #[command(after_help = ACQUIRE_EXAMPLES)]
    Acquire(AcquireArgs),
    /// Reset the TTL of a lock held with a token
    #[command(after_help = EXTEND_EXAMPLES)]
    Extend(ExtendArgs),
    /// Give a lock back (with its token, or --force)
    #[command(after_help = RELEASE_EXAMPLES)]
    Release(ReleaseArgs),
    /// Show who holds a lock, on which servers, for how long (exit 0 held, 1 free)
    #[command(after_help = STATUS_EXAMPLES)]
    Status(StatusArgs),
    /// Check that the servers are fit for Redlock (exit 0 fit, 1 warnings)
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(DoctorArgs),
}

/// The lock key and TTL, shared by the subcommands that take a lock.
#[derive(Debug, Args)]
pub struct KeyTtl {
    /// The lock's key (stored as redlock:{KEY}, or as given with --raw-key)
    #[arg(long, short = 'k', allow_hyphen_values = true)]
    pub key: String,
    /// How long the lock lives on the servers without renewal
    #[arg(long, value_name = "DUR", default_value = "30s", allow_hyphen_values = true)]
    pub ttl: String,
}

/// How long to wait for a busy lock.
#[derive(Debug, Args)]
pub struct Waiting {
    /// Try once; fail at once when the lock is busy
    #[arg(short = 'n', long = "no-wait", conflicts_with = "wait")]
    pub no_wait: bool,
    /// Wait at most DUR for the lock [default: wait until acquired]
    #[arg(long, value_name = "DUR")]
    pub wait: Option<String>,
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
    /// Exit code when the lock is busy; with 0 (cron) the busy message shows only with -v
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = crate::exit::BUSY)]
    pub conflict_exit_code: u8,
    /// Keep the lock until DUR after acquisition, even when the command ends sooner [default: release at exit]
    #[arg(long, value_name = "DUR")]
    pub keep: Option<String>,
    /// Stop the command when it has held the lock this long, and exit 124 [default: no limit]
    #[arg(long, value_name = "DUR")]
    pub max_hold: Option<String>,
    /// Sleep a random time up to DUR before the first attempt [default: no jitter]
    #[arg(long, value_name = "DUR")]
    pub jitter: Option<String>,
    /// Renew the lock this often [default: a third of the TTL]
    #[arg(long, value_name = "DUR")]
    pub renew_every: Option<String>,
    /// What to do when the lock is lost: a signal (TERM, SIGINT, 9...), kill, or ignore
    #[arg(long, value_name = "ACTION", default_value = "TERM")]
    pub on_lost: String,
    /// Grace between the --on-lost (or --max-hold) signal and SIGKILL [default: a third of the TTL, at most 10s]
    #[arg(long, value_name = "DUR")]
    pub kill_after: Option<String>,
    /// Run this shell command through $SHELL -c (or /bin/sh -c)
    #[arg(short = 'c', long = "command", value_name = "SHELL CMD", conflicts_with = "argv")]
    pub shell: Option<String>,
    /// The command and its arguments, after --
    #[arg(last = true, value_name = "CMD")]
    pub argv: Vec<String>,
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
    /// Print {"token", "fence", "validity_ms"} instead of the token alone
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
    #[arg(long, short = 'k', allow_hyphen_values = true)]
    pub key: String,
    /// The token printed by `acquire`
    #[arg(
        long,
        short = 't',
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
}

/// `redlock status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The lock's key
    #[arg(long, short = 'k', allow_hyphen_values = true)]
    pub key: String,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `redlock doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The TTL whose drift budget the servers' clocks are checked against
    #[arg(long, value_name = "DUR", default_value = "30s")]
    pub ttl: String,
    /// Print one JSON object instead of a report
    #[arg(long)]
    pub json: bool,
}

const LONG_ABOUT: &str = "\
Lock shell jobs, cron tasks and CI steps across machines with a Redlock quorum \
over independent Redis servers.

'redlock run' takes the lock on a quorum of the servers (--servers or \
REDLOCK_SERVERS), runs the command, renews the lock while it runs, and releases \
it when the command exits; if the lock is lost, the command is stopped before \
anyone else can take it. 'acquire', 'extend', 'release' and 'status' serve \
scripts and humans; 'doctor' checks the servers.";

const DOCTOR_EXAMPLES: &str = "\
Examples:
  redlock doctor --servers redis://a:6379,redis://b:6379,redis://c:6379
  redlock doctor --ttl 5s --json";

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

/// The clap command, for the man page and completion generators.
pub fn command() -> clap::Command {
    Cli::command()
}
