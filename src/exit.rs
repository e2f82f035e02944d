//! The exit codes (the README's and the man pages' table), one documented
//! constant each.
//!
//! `run` also exits with its child's own status, or 128+N when a signal N
//! ended the child; those are computed in `child`, not listed here.

/// Success; for `status`, the lock is held; for `doctor`, the servers are fit.
pub const OK: u8 = 0;
/// `status`: the lock is free. `doctor`: the servers work but have warnings.
pub const FREE_OR_WARNINGS: u8 = 1;
/// Bad flag, duration, URL, key, or no command: nothing was sent to a server.
pub const USAGE: u8 = 64;
/// A quorum of servers could not be reached, refused auth, or answered
/// errors; or no holder had a quorum and the votes stayed split.
pub const UNAVAILABLE: u8 = 69;
/// The lock was lost (`run`), or is not held by the given token (`extend`, `release`).
pub const LOST: u8 = 70;
/// The lock is held elsewhere and `-n` or `--wait` ran out.
pub const BUSY: u8 = 75;
/// `run`: the child was stopped because `--max-hold` ran out.
pub const MAX_HOLD: u8 = 124;
/// `run`: the command was found but could not be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// `run`: the command was not found.
pub const NOT_FOUND: u8 = 127;
/// `run`: the child was ended by signal N and redlock exits 128+N.
pub const SIGNAL_BASE: u8 = 128;
/// `check` (WARNING): the newest run started longer ago than `--max-age`,
/// a run of the window did not succeed (`--require-success`), more ticks
/// were missed than `--max-missed`, or a run holds the lock past
/// `--max-runtime`.
pub const CHECK_STALE: u8 = 1;
/// `check`: no run is known, or too few servers answered to say.
pub const CHECK_UNKNOWN: u8 = 2;
