//! The one error type of the library and its mapping to exit codes.
//!
//! "Held elsewhere", "servers unavailable" and "lost" are different variants
//! with different messages and codes, so no caller has to guess from a string.

use crate::exit;
use crate::failure::Failures;

/// Everything that can end a redlock command early.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad flag, value or combination; nothing was sent to any server.
    #[error("{0}")]
    Usage(String),
    /// The key's record names another schedule than this host's (`--cron`,
    /// `--once-per`, `--tz`): a usage error (64) found at the servers, which
    /// a run records for its tick ([`crate::history::SkipKind::Elsewhere`]).
    #[error("{0}")]
    Schedules(String),
    /// Several usage errors found at once (`config`, `doctor`): each its own
    /// line; nothing was sent to any server.
    #[error("{}", .0.join("; "))]
    Problems(Vec<String>),
    /// The lock is held by someone else.
    #[error("{message}")]
    Busy {
        /// Who holds it and for how long, in one line.
        message: String,
        /// The exit code (75, or `-E/--conflict-exit-code`).
        code: u8,
        /// A skip that needs nobody's attention, said only with `-v`: the
        /// run's tick ran, or is running, elsewhere (`--once-per`).
        quiet: bool,
    },
    /// A run of a tick (`--once-per`, `--cron`) found its key held by a
    /// freeze (`redlock hold`) that outlasts the tick: the job is paused
    /// on purpose, so the skip is said only with `-v`.
    #[error("{message}")]
    Paused {
        /// The skip, naming the freeze and the tick.
        message: String,
        /// The exit code (75, or `-E/--conflict-exit-code`).
        code: u8,
        /// The freeze's holder, one line ([`crate::lock::describe_freeze`]).
        freeze: String,
    },
    /// Not enough servers answered usefully to reach or deny a quorum.
    #[error("{what}: {failures}")]
    Unavailable {
        /// What was being done and how the servers took part, e.g. "acquire
        /// nightly-report: 1 of 3 servers answered (quorum 2), 2 failed".
        what: String,
        /// The per-server errors behind it.
        failures: Failures,
        /// True when retrying cannot help (auth, TLS, a key of the wrong type).
        config: bool,
    },
    /// The servers answered, but no lock can be taken with them as they
    /// are (`doctor`: a member that can never vote, or too few that can
    /// vote now); the message says why. Exit 69, as unavailable.
    #[error("{0}")]
    Unfit(String),
    /// Nobody holds the lock, yet the votes stayed split among tokens, none
    /// on a quorum, until the settling bound (`wait::SETTLE_BOUND`) passed:
    /// e.g. a crashed contender's minority votes that only expire with
    /// their TTL. Exit 69, not busy: a tick that nobody ran is never
    /// reported as skipped, and `-E 0` never silences it.
    #[error("{0}")]
    Split(String),
    /// The lock is not (or no longer) held by this token.
    #[error("{0}")]
    Lost(String),
    /// `run`: the command could not be started (126) or was not found (127).
    #[error("{message}")]
    CannotRun {
        /// 126 or 127.
        code: u8,
        /// What failed, naming the command.
        message: String,
    },
    /// `run`: `--max-hold` ran out and the command was stopped.
    #[error("{0}")]
    MaxHold(String),
    /// A signal ended redlock before the command started (exit 128+N).
    #[error("interrupted by {name} {1}", name = crate::signals::name(*.0))]
    Interrupted(i32, String),
}

impl Error {
    /// A word for what went wrong, for the JSON `error` event: `usage`,
    /// `busy`, `paused`, `unavailable`, `split`, `lost`, `cannot_run`, `max_hold`,
    /// `interrupted`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Usage(_) | Error::Problems(_) | Error::Schedules(_) => "usage",
            Error::Busy { .. } => "busy",
            Error::Paused { .. } => "paused",
            Error::Unavailable { .. } | Error::Unfit(_) => "unavailable",
            Error::Split(_) => "split",
            Error::Lost(_) => "lost",
            Error::CannotRun { .. } => "cannot_run",
            Error::MaxHold(_) => "max_hold",
            Error::Interrupted(..) => "interrupted",
        }
    }

    /// The process exit code for this error ([`crate::exit`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Problems(_) | Error::Schedules(_) => exit::USAGE,
            Error::Busy { code, .. } | Error::Paused { code, .. } => *code,
            Error::Unavailable { .. } | Error::Unfit(_) | Error::Split(_) => exit::UNAVAILABLE,
            Error::Lost(_) => exit::LOST,
            Error::CannotRun { code, .. } => *code,
            Error::MaxHold(_) => exit::MAX_HOLD,
            Error::Interrupted(signal, _) => {
                exit::SIGNAL_BASE.saturating_add(u8::try_from(*signal).unwrap_or(0))
            }
        }
    }
}

/// Shorthand for the library's results.
pub type Result<T> = std::result::Result<T, Error>;
