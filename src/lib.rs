//! redlock: lock shell jobs, cron tasks and CI steps across machines with
//! the Redlock algorithm over several independent Redis servers.
//!
//! # Layout
//! Three subsystems and the modules they all use; within each, lower
//! layers come first. The tree stays flat on purpose: the groups are not
//! layers (the wait loop logs and watches signals, a lock checks its
//! token's process), so folders by subsystem would import across one
//! another. The one-way rule holds between modules (below).
//!
//! ## Used by all three
//! - [`clock`]: `CLOCK_BOOTTIME` instants and timers, so that suspended
//!   time counts against a lock's validity.
//! - [`text`]: durations, milliseconds and keys for messages.
//! - [`error`], [`exit`]: the error type and the exit codes it maps to.
//! - [`failure`]: why one server call failed, naming the server and the
//!   operation ([`failure::ServerError`]), and a round's failures together.
//! - [`output`]: messages on stderr, text or JSON.
//! - [`signals`]: OS signals as typed events (the handler only enqueues; no thread).
//! - [`procs`]: the process table read from `/proc` without allocating.
//! - [`schedule`]: `--cron` and `--once-per` read in a time zone: the tick
//!   a run belongs to, the scheduled instants between two moments, and why
//!   every host computes the same tick across a clock change; the zone
//!   (`schedule::zone`: `--tz`, `CRON_TZ`, `TZ`, `/etc/localtime`) and
//!   the crontab line (`schedule::cron`: its fields, cronie's instants).
//!
//! ## The lock algorithm
//! - [`server`]: one Redis server: URL (password never shown), lazy
//!   connection, calls bounded by the node timeout (failing with the
//!   errors of [`failure`]), what the
//!   server said of itself at connect ([`server::Facts`]: run id, uptime,
//!   persistence, from which a restart that may have lost locks is told);
//!   and the connection kinds it owns, each of which finds the node a connection
//!   goes to and says how long it may be trusted (`server::target`):
//!   - [`server::sentinel`]: `redis+sentinel://` groups: the Sentinels asked
//!     for the master, its `ROLE` checked, asked again after a failure, a
//!     `READONLY` reply, or once a node timeout has passed.
//!   - [`server::cluster`]: `redis+cluster://` clusters, one member each:
//!     the lock's hash slot ([`server::cluster::key_slot`]), its master
//!     found by asking the seeds, a redirect counted as a failure (never
//!     a vote), the master confirmed again once a node timeout has passed;
//!     and the safety argument behind it. Both ask their nodes (Sentinels,
//!     seeds) on connections kept between questions (`server::kept`).
//! - `scripts/*.lua`: the atomic acquire (with the fence draw), withdraw,
//!   compare-and-extend (never shortening), set-TTL (`--keep`),
//!   compare-and-delete, raise-fence, status and history scripts.
//! - [`quorum`]: the pure tally and validity arithmetic, and the parallel
//!   fan-out that stops as soon as the verdict is settled.
//! - [`fence`]: fencing numbers: the rule the servers draw them by, and why
//!   they increase from one holder to the next without persistence.
//! - [`queue`]: the wait queue on the servers (kept by the acquire script), so
//!   waiters go in arrival order.
//! - [`token`]: the lock token (128 random bits + host, pid, time; the
//!   pid of the caller for `acquire`; where the holder runs: `--note` and
//!   the CI job; when a freeze ends).
//! - [`lock`]: the Redlock operations over a [`lock::Fleet`] of servers and
//!   the lock a command asks for ([`lock::Request`]): the acquire round and
//!   its verdict (`lock::acquire`; who holds how many servers:
//!   `lock::tally`), one server's part in it from the attempt to the
//!   withdrawal (`lock::contend`; its reply: `lock::granted`), who may vote
//!   (`lock::vote`: a server's clock, a restart, a twin, an evicting
//!   policy), `-n`'s steps in a round (`lock::untaken`; the rule, with the
//!   tick's: [`lock::record`]), extend/release (`lock::hold`), status,
//!   where a lock's keys live ([`lock::KeyLayout`]); each server operation
//!   is a typed value (`lock::ops`) that runs as a script or, through
//!   [`lock::noscript`], as plain commands (`WATCH`/`MULTI`/`EXEC` on a
//!   connection of its own) for servers that refuse scripts.
//! - [`shared`]: `--shared`: many shared holders or one exclusive, and why
//!   a shared quorum and an exclusive one are never both granted.
//! - [`slots`]: `--limit N`: N places, each an ordinary lock, and why that
//!   bounds the holders at exactly N where per-server sets do not.
//! - [`wait`]: retries with jittered backoff until acquired or the deadline;
//!   every decision of the wait loop is one pure transition
//!   (`wait::state`), the driver only performs it.
//! - [`metrics`]: `run --metrics-file`, a Prometheus textfile written atomically,
//!   one series per key, updated under a lock on a sidecar file.
//! - [`history`]: the run history and skip counter kept beside each lock
//!   (`scripts/record.lua`, `skip.lua`, `history.lua`), written, read and
//!   merged across servers there; by job, an entry and how its run ended
//!   (`history::entry`), the skips and what each tick's skips saw
//!   (`history::skips`), and why each missed tick did not run
//!   (`history::missed`).
//!
//! ## The process supervisor
//! - [`watchdog`]: renewal every `ttl/3` and the validity deadline; reports
//!   the lock's health, runs no process logic.
//! - [`child`]: the supervised command in its own process group; signals,
//!   job control, parent-death signal, leftovers, exit status to exit code.
//! - [`guard`]: the dead-man's switch that kills the job at the lock's
//!   deadline even while redlock is frozen, stopped or dead.
//! - [`ping`]: `run --ping URL`: the start and end pings to a cron monitor
//!   (healthchecks.io's protocol), a run id per tick the same on every
//!   host, each try bounded, never failing the run; the URL never shown.
//!
//! ## The command-line shell
//! - [`cli`]: the command line as typed (clap derive); [`cli::command`] feeds
//!   the man page and completions.
//! - [`config`]: the command line validated into a [`config::Config`] of
//!   plain values (the servers' URLs, the quorum, the durations); every
//!   bad input is a usage error (exit 64) before any server is contacted.
//!   By job: the assembly and the checks across settings (`config`), each
//!   command's settings (`config::commands`), when a run may run
//!   (`config::tick`: its schedule, zone and tick), the fleet's settings
//!   (`config::fleet`), and the parsers of one value they share
//!   (`config::values`).
//! - [`config_file`]: the configuration file, and the layering of flags over
//!   the environment over the file over the defaults, each value with its origin.
//! - [`cmd`]: the [`lock::Fleet`] built from the configuration, and one
//!   module per subcommand over it (`doctor` in a folder of its own:
//!   probe, assess, render; `check` in one too: `cmd::check::assess`,
//!   the pure judgement, and `cmd::check::render`, the line or the JSON;
//!   `run` with its supervisor, whose decisions are one pure transition,
//!   `cmd::run::state`, that its loop only performs;
//!   `hold`, a freeze kept by the watchdog's renewal and taken back after
//!   a loss, its gaps recorded in the history).
//! - [`run()`]: the whole program from its arguments to its exit code
//!   (parse, configure, run the subcommand, report a failure); `main.rs`
//!   only sets up the process and calls it.
//! - [`docs`]: man pages and shell completions generated from [`cli`].
//!
//! Dependencies run one way. From the bottom up, each module imports only
//! modules before it in this list (`.ci/layers` checks it in CI, and that
//! the files of one folder import each other without a circle):
//!
//! ```text
//! text, exit, clock, procs, signals, schedule      the bottom
//! failure, error, output                            errors and messages
//! server                                            one Redis server
//! quorum, token, fence, queue                       rounds, tokens, fences, the queue
//! lock                                              the Redlock operations
//! shared, slots, history, metrics                   modes and records over lock
//! wait, watchdog                                    taking and keeping a lock
//! guard, child                                      the supervised command
//! ping                                              the cron monitor's pings
//! cli, config_file, config                          the command line, validated
//! docs, cmd, run                                    the commands
//! ```
//!
//! # Theory of operation
//! A lock is a key set on N independent servers. To acquire it, redlock
//! sends `SET key token NX PX ttl` (inside a script that also reports the
//! current holder) to every server at once, each call bounded by the node
//! timeout (default a tenth of the TTL, at most 1 s). The lock is held when a
//! quorum (N/2+1 unless set) said yes and time is left:
//! `validity = ttl - elapsed - (ttl * drift_factor + 2ms)`, measured on the
//! boot clock (suspended time counts) from before the first request. The round ends as soon as
//! the answer cannot change, so a hung server costs nothing once a quorum has
//! answered. If the lock was not won, the token is withdrawn on every server
//! that may hold it, on the connection of its attempt and after it, so a
//! SET still in flight cannot land after its withdrawal. Extending and releasing are compare-and-set scripts: they touch the
//! key only while it still holds this token, so an expired lock taken by
//! someone else is never extended or deleted. Outcomes are three, never a
//! bool: won (a quorum said yes), refused (so many said no that no quorum is
//! possible: busy, or not ours), unreachable (too many failed to answer).
//!
//! `run` starts the command only once the lock is held, in its own process
//! group with a parent-death signal and a guard (a second process) that
//! kills the job at the lock's deadline unless redlock renewed it, or when
//! redlock dies, and gives it `REDLOCK_KEY`, `REDLOCK_TOKEN` and
//! `REDLOCK_FENCE`. A watchdog renews every `ttl/3` and keeps the validity
//! deadline; failed renewals are retried at once with backoff. If the lock
//! is lost (a quorum says the token no longer holds it) or renewals keep
//! failing until `grace + margin` before the deadline, the `--on-lost` signal
//! goes to the command's whole group, then SIGKILL at the latest `margin`
//! before the deadline: the command is dead before anyone else can take the
//! lock, and redlock exits 70. Signals sent to redlock are forwarded to the
//! command once. When the command exits, whatever it left running (in its
//! group, or adopted by redlock as their reaper) is stopped, the lock is
//! released (or, with `--keep`, its TTL shortened to the rest of the keep
//! time), and redlock exits with the command's status (128+N for a signal
//! N).

pub mod child;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod config_file;
pub mod docs;
pub mod error;
pub mod exit;
pub mod failure;
pub mod fence;
pub mod guard;
pub mod history;
pub mod lock;
pub mod metrics;
pub mod output;
pub mod ping;
pub mod procs;
pub mod queue;
pub mod quorum;
mod run;
pub mod schedule;
pub mod server;
pub mod shared;
pub mod signals;
pub mod slots;
pub mod text;
pub mod token;
pub mod wait;
pub mod watchdog;

pub use run::run;
