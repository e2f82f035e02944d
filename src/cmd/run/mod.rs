//! `redlock run`: take the lock, run the command under it, renew the lock
//! while the command runs, stop the command before anyone else could hold
//! the lock, and give the lock back (or keep it, `--keep`) when it ends.
//!
//! While the command runs, one pure step decides ([`state`]: its exit,
//! signals to forward, the watchdog's and the guard's reports, the stop
//! and kill deadlines); one `select!` loop ([`supervise`]) feeds it the
//! events and performs what it decides.

mod state;

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::sync::watch;

use crate::child::{self, Child};
use crate::clock::{BootInstant, Clock};
use crate::config::Run;
use crate::error::Error;
use crate::exit;
use crate::guard::Forker;
use crate::history::SkipKind;
use crate::lock::{Fleet, Holders, Lock, Tick, Wait};
use crate::output::{Level, Log};
use crate::ping::Rid;
use crate::procs;
use crate::signals::{self, Signals};
use crate::token::{Mode, Token};
use crate::watchdog::{self, Health};

use super::report;
use state::{Action, Event, Note, Now, Stop, Supervision, Terms};

/// How a stop ended, for the final line: `SIGTERM`, or `SIGTERM, then SIGKILL`.
fn signals_sent(signal: i32, killed: bool) -> String {
    match killed && signal != libc::SIGKILL {
        true => format!("{}, then SIGKILL", signals::name(signal)),
        false => signals::name(signal).to_owned(),
    }
}

/// Runs the command under the lock; `Ok` is the command's own exit code.
pub async fn run(fleet: Arc<Fleet>, cfg: Run, log: &Log) -> Result<u8, Error> {
    child::ignore_terminal_stops();
    let mut signals = Signals::install().map_err(|e| Error::CannotRun {
        code: exit::CANNOT_EXECUTE,
        message: format!("cannot catch signals: {e}"),
    })?;
    if let Some(jitter) = cfg.jitter {
        sleep_jitter(jitter, &cfg.request.key, &mut signals, log).await?;
    }
    if reentry(&fleet, &cfg.request.key, &mut signals).await? {
        return run_reentered(&cfg, &mut signals, log).await;
    }

    let asked = BootInstant::now();
    let request = &cfg.request;
    // A run that may wait starts the guard's thread now, while it waits for
    // the servers or the lock, rather than between the lock and the command
    // (`guard::Forker`); `-n` (a cron fleet's skips) does not pay for it.
    let forker = (request.wait != Wait::Once).then(Forker::start).flatten();
    let acquired = crate::wait::acquire(&fleet, request, log, Some(&mut signals)).await;
    let lock = taken(&fleet, &cfg, acquired, asked, log).await?;
    let ping = ping_start(&cfg, log).await;
    if let Some(signal) = signals.try_recv() {
        release(&fleet, &lock, log).await;
        return Err(Error::Interrupted(signal, "before the command started".to_owned()));
    }
    let env = command_env(&cfg.request.key, &lock, cfg.request.tick);
    let env: Vec<(&str, &str)> = env.iter().map(|(name, value)| (*name, value.as_str())).collect();
    if BootInstant::now() + cfg.kill_margin() >= lock.deadline() {
        // Frozen or starved between the quorum and here: too late to start.
        release(&fleet, &lock, log).await;
        return Err(Error::Lost(format!(
            "the lock on {} ran out of validity before the command could start",
            crate::text::display_key(cfg.request.key.as_bytes())
        )));
    }
    let state = Supervision::new(terms(&cfg, &lock), lock.deadline());
    let mut child = match child::spawn(&cfg.argv, &env, state.guard_at(), forker) {
        Ok(child) => child,
        Err(e) => {
            release(&fleet, &lock, log).await;
            let result = Err(e);
            ping_end(ping, &result, &cfg.request.key, log).await;
            report::finished(&fleet, &cfg, &lock, asked, &result, false, log).await;
            return result;
        }
    };
    log.event(
        Level::Info,
        "child_started",
        &format!("started {:?} as pid {}", cfg.argv[0], child.pid()),
        json!({ "pid": child.pid(), "program": cfg.argv[0] }),
    );
    let clock = Arc::new(Clock::new());
    let (health, watchdog) =
        watchdog::start(Arc::clone(&fleet), lock.clone(), cfg.renew_every, Arc::clone(&clock));
    let validity = health.clone();
    let (status, stop, interrupted) =
        supervise(&mut child, &mut signals, health, state, &cfg.request.key, log, &clock).await;
    if let Ok(status) = &status {
        exited(log, child.pid(), *status, &lock);
    }
    // After a lost lock the validity is nearly over: no grace for leftovers.
    let grace = match stop {
        Some(Stop::Lost { .. }) => Duration::ZERO,
        _ => cfg.grace().min(Duration::from_secs(1)),
    };
    if child.stop_leftovers(grace).await {
        // After redlock stopped the job (a lost lock, --max-hold), what is
        // left is most often its group still dying of that signal: the
        // final error says the job was stopped.
        let level = if stop.is_some() { Level::Info } else { Level::Warn };
        log.event(
            level,
            "leftovers_stopped",
            "the command left processes running; stopped them, as they would run without the lock",
            json!({ "key": cfg.request.key }),
        );
    }
    // Renewal and the guard last until nothing of the job runs, leftovers
    // included; renewal never outlives the job.
    watchdog.abort();
    let guard = child.disarm_guard();
    let signaled = status.as_ref().is_ok_and(|s| s.signal().is_some());
    let lost = matches!(stop, Some(Stop::Lost { .. }));
    // A signal passed on is said once the lock is released, unless
    // redlock stopped the job itself (its error says why).
    let interrupted = interrupted.filter(|_| stop.is_none());
    let result = verdict(stop, status, &cfg);
    // Whether the lock should still be there for the release: its
    // validity, as the last renewal left it, has not ended.
    let valid = BootInstant::now() < validity.borrow().deadline();
    // The release goes first on every server's connection; the history
    // entry follows it in the same round trip instead of a round of its own.
    let (ended, ()) = tokio::join!(finish(&fleet, &cfg, &lock, lost, log), async {
        ping_end(ping, &result, &cfg.request.key, log).await;
        report::finished(&fleet, &cfg, &lock, asked, &result, signaled, log).await;
    });
    // Reaped only now: its exit went on while the release was on its way.
    if let Some(guard) = guard {
        guard.reap();
    }
    if let Some(signal) = interrupted {
        passed_on(log, signal, &cfg.request.key, &ended);
    }
    let gone = match ended {
        Ended::Gone(why) => Some(why),
        _ => None,
    };
    match (gone, result) {
        (Some(why), Ok(code)) if valid && cfg.on_lost != crate::config::OnLost::Ignore => {
            Err(taken_away(&cfg.request.key, code, &why))
        }
        (_, result) => result,
    }
}

/// `--ping`'s start, once the lock is taken and before the command starts:
/// at most until the first renewal is due (a ping that hangs must not eat
/// the lock's validity before anything renews it). The monitor and the
/// run id of the pings that follow.
async fn ping_start<'a>(cfg: &'a Run, log: &Log) -> Option<(&'a crate::ping::Ping, Rid)> {
    let ping = cfg.ping.as_ref()?;
    let rid = Rid::of_run(&cfg.request.key, cfg.request.tick);
    let outcome = ping.start_within(rid, ping.bound().min(cfg.renew_every)).await;
    ping_failed(log, &cfg.request.key, ping, &outcome);
    Some((ping, rid))
}

/// `--ping`'s end, with the status redlock exits with for `result`.
async fn ping_end(
    ping: Option<(&crate::ping::Ping, Rid)>,
    result: &Result<u8, Error>,
    key: &str,
    log: &Log,
) {
    let Some((ping, rid)) = ping else { return };
    let code = match result {
        Ok(code) => *code,
        Err(e) => e.exit_code(),
    };
    ping_failed(log, key, ping, &ping.end(rid, code).await);
}

/// A failed ping's line: one warning, never the URL's secret; the run
/// goes on, and its exit status stays its own.
fn ping_failed(log: &Log, key: &str, ping: &crate::ping::Ping, outcome: &crate::ping::Outcome) {
    if let Some(line) = outcome.failure_line(ping) {
        log.event(Level::Warn, "ping_failed", &line, json!({ "key": key, "ping": outcome.json() }));
    }
}

/// How a run's hold ended ([`finish`]).
enum Ended {
    /// Released.
    Released,
    /// Kept for the rest of `--keep`.
    Kept,
    /// The release failed (said as a warning).
    Failed,
    /// The release found the lock gone ([`taken_away`]).
    Gone(Error),
}

/// The line of a signal redlock passed on to the command, which then
/// exited, once the hold ended: a cancelled job leaves a line (CI logs,
/// a terminal), even without `-v`.
fn passed_on(log: &Log, signal: i32, key: &str, ended: &Ended) {
    let shown = crate::text::display_key(key.as_bytes());
    let then = match ended {
        Ended::Released => format!("released {shown}"),
        Ended::Kept => format!("kept {shown} for the rest of --keep"),
        Ended::Failed => format!("could not release {shown}"),
        Ended::Gone(_) => format!("{shown} was no longer held"),
    };
    let name = signals::name(signal);
    log.event(
        Level::Warn,
        "interrupted",
        &format!("{name}: passed to the command; {then}"),
        json!({ "key": key, "signal": name }),
    );
}

/// The lock `acquired` gave, or its error, after recording a run that did
/// not take it as a skip: busy (with `-E`'s code), its tick ran elsewhere,
/// or an outage that a tick's record names as the reason it was missed.
async fn taken(
    fleet: &Fleet,
    cfg: &Run,
    acquired: Result<Lock, Error>,
    asked: BootInstant,
    log: &Log,
) -> Result<Lock, Error> {
    match acquired {
        Ok(lock) => Ok(lock),
        Err(Error::Busy { message, quiet, .. }) => {
            let kind = if quiet { SkipKind::Ran } else { SkipKind::Busy };
            report::skipped(fleet, cfg, &message, kind, asked, log).await;
            Err(Error::Busy { message, code: cfg.conflict_exit_code, quiet })
        }
        // A freeze pauses the job fleet-wide: the tick is recorded paused,
        // with the freeze's line, so that `check` does not call it missed.
        Err(Error::Paused { message, freeze, .. }) => {
            report::skipped(fleet, cfg, &freeze, SkipKind::Paused, asked, log).await;
            Err(Error::Paused { message, code: cfg.conflict_exit_code, freeze })
        }
        // Refused for another schedule: recorded for its tick, so that
        // `check` lists a changed line's ticks from the first refused. The
        // usual cause is one host's environment: the line says where this
        // host's zone came from.
        Err(Error::Schedules(message)) => {
            report::skipped(fleet, cfg, &message, SkipKind::Elsewhere, asked, log).await;
            Err(Error::Schedules(match &cfg.zone_from {
                Some(from) => format!("{message} (this host's zone comes from {from})"),
                None => message,
            }))
        }
        Err(e @ (Error::Unavailable { .. } | Error::Split(_))) => {
            report::skipped(fleet, cfg, &e.to_string(), SkipKind::Unavailable, asked, log).await;
            Err(e)
        }
        Err(e) => Err(e),
    }
}

/// The line of the command's exit, by itself or by a signal.
fn exited(log: &Log, pid: i32, status: std::process::ExitStatus, lock: &Lock) {
    log.event(
        Level::Info,
        "child_exited",
        &format!(
            "the command exited with {} after holding the lock for {}",
            child::exit_code(status),
            crate::text::fmt_duration(lock.since.elapsed())
        ),
        json!({
            "pid": pid,
            "code": status.code(),
            "signal": status.signal(),
            "exit_code": child::exit_code(status),
            "held_ms": crate::text::millis(lock.since.elapsed()),
        }),
    );
}

/// The error of a run whose lock was gone when its command exited by
/// itself with `code`, though its validity had not ended: deleted by
/// `release --force`, or lost by servers (a clock stepped forward, a
/// restart without data). Another holder may have run beside the command,
/// so the run is not the success its command says: 70, the lost lock's
/// code, with the command's own status in the line for a wrapper that
/// wants it. A lock found gone after its validity ended (redlock frozen
/// past it, after its command ended) expired: the command's status
/// stands.
fn taken_away(key: &str, code: u8, why: &Error) -> Error {
    Error::Lost(format!(
        "{}: the lock was gone when the command exited with {code} (released by force, or \
         expired): another holder may have run beside it; {why}",
        crate::text::display_key(key.as_bytes())
    ))
}

/// `--jitter`: sleeps a random part of it; a signal ends the run.
async fn sleep_jitter(
    jitter: Duration,
    key: &str,
    signals: &mut Signals,
    log: &Log,
) -> Result<(), Error> {
    let pause = jitter.mul_f64(fastrand::f64());
    log.event(
        Level::Info,
        "jitter",
        &format!("--jitter: sleeping {}", crate::text::fmt_duration(pause)),
        json!({ "key": key, "sleep_ms": crate::text::millis(pause) }),
    );
    tokio::select! {
        () = tokio::time::sleep(pause) => Ok(()),
        signal = signals.recv() => Err(Error::Interrupted(signal, "during --jitter".to_owned())),
    }
}

/// A run inside the job that already holds the lock ([`reentry`]): the
/// command runs directly, under the holder's lock.
async fn run_reentered(cfg: &Run, signals: &mut Signals, log: &Log) -> Result<u8, Error> {
    // Inside a shared hold, an exclusive run would wait on its own
    // holder for ever (and running it directly would not be exclusive).
    let shared = std::env::var("REDLOCK_TOKEN").is_ok_and(|t| Mode::of(&t) == Mode::Shared);
    if shared && cfg.request.holders != Holders::Shared {
        return Err(Error::Usage(format!(
            "{}: this job holds it --shared; an exclusive run inside it would wait on itself",
            crate::text::display_key(cfg.request.key.as_bytes())
        )));
    }
    log.event(
        Level::Info,
        "reentry",
        &format!(
            "{} is already held by this job (REDLOCK_TOKEN); running the command directly",
            crate::text::display_key(cfg.request.key.as_bytes())
        ),
        json!({ "key": cfg.request.key }),
    );
    // The holder's own redlock renews and guards the lock; this guard
    // only follows redlock's death.
    let mut child = child::spawn(&cfg.argv, &[], None, None)?;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            signal = signals.recv() => forward(&child, signal, log),
        }
    };
    if let Some(guard) = child.disarm_guard() {
        guard.reap();
    }
    exit_status(status, &cfg.argv)
}

/// What the command finds in its environment besides what it inherits.
fn command_env(key: &str, lock: &Lock, tick: Option<Tick>) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("REDLOCK_KEY", key.to_owned()),
        ("REDLOCK_TOKEN", lock.token.clone()),
        // Which of the `--limit` places the command holds, 1-based (1 for
        // an ordinary lock): a job can pick its share of the work by it.
        ("REDLOCK_SLOT", lock.mode.slot().to_string()),
    ];
    if let Some(fence) = lock.fence {
        env.push(("REDLOCK_FENCE", fence.to_string()));
    }
    // The tick the command runs for (`--once-per`, `--cron`): its
    // scheduled instant with its zone's offset (RFC 3339), so that a
    // report can name the period it covers.
    if let Some(tick) = tick {
        env.push(("REDLOCK_TICK", tick.describe()));
    }
    // The servers' passwords stay with redlock; a command that calls
    // redlock itself passes --password-file. `redact` reads the variable
    // as the list it is, so every entry's passwords are hidden and every
    // member is kept, however the URLs are spelled.
    if let Ok(servers) = std::env::var("REDLOCK_SERVERS") {
        env.push(("REDLOCK_SERVERS", crate::server::redact(&servers)));
    }
    env
}

/// The run's result once the command is gone: its own exit code, or why
/// redlock stopped it. This is the last of at most two lines a lost lock
/// prints (the first said so when the command was stopped); it alone
/// shows with -q, so it names the cause again. The reason names the key
/// (`extend K: ...`).
fn verdict(stop: Option<Stop>, status: io::Result<ExitStatus>, cfg: &Run) -> Result<u8, Error> {
    match stop {
        Some(Stop::Lost { reason, at, signal, killed }) => Err(Error::Lost(format!(
            "lost the lock at {}: {reason}; stopped the command with {}",
            humantime::format_rfc3339_seconds(at),
            signals_sent(signal, killed)
        ))),
        Some(Stop::MaxHold { signal, killed }) => Err(Error::MaxHold(format!(
            "--max-hold {} ran out on {}; stopped the command with {}",
            crate::text::fmt_duration(cfg.max_hold.unwrap_or_default()),
            crate::text::display_key(cfg.request.key.as_bytes()),
            signals_sent(signal, killed)
        ))),
        None => exit_status(status, &cfg.argv),
    }
}

/// True when this process runs inside the `redlock run` that holds `key`:
/// its `REDLOCK_KEY` is `key`, its `REDLOCK_TOKEN` is a redlock token made
/// on this host by one of this process's ancestors (a process outside the
/// holder's tree that learnt the token, say from `status --json`, must not
/// run unsupervised), and a quorum says that token still holds the lock.
/// Waiting would then be waiting on ourselves. A signal during the check
/// ends redlock (128+N); servers that cannot say are an error, not a wait.
async fn reentry(fleet: &Fleet, key: &str, signals: &mut Signals) -> Result<bool, Error> {
    let (Ok(held_key), Ok(token)) = (std::env::var("REDLOCK_KEY"), std::env::var("REDLOCK_TOKEN"))
    else {
        return Ok(false);
    };
    // A token of `redlock acquire` names the script that holds it, an
    // ancestor too: but no redlock renews or guards that lock, so a run
    // inside it is no re-entry.
    let ours = token.parse::<Token>().is_ok_and(|t| {
        !t.caller
            && t.host == crate::token::hostname()
            && i32::try_from(t.pid).is_ok_and(is_ancestor)
    });
    if held_key != key || !ours {
        return Ok(false);
    }
    let mode = Mode::of(&token);
    let status = tokio::select! {
        status = fleet.status_of(key, mode.slot()) => status,
        signal = signals.recv() => {
            return Err(Error::Interrupted(signal, "while checking the lock held by this job".into()));
        }
    };
    if status.holder.is_none() && !status.known {
        return Err(status.unknown(format!(
            "re-entry on {}: cannot tell whether this job still holds the lock",
            crate::text::display_key(key.as_bytes())
        )));
    }
    if mode == Mode::Shared {
        // A shared holder's token is an entry beside the key, not its value.
        let held = status.holder.is_some_and(|(value, _)| crate::shared::is_marker(&value));
        return Ok(
            held && crate::shared::holders(fleet, key).await.iter().any(|h| h.token == token)
        );
    }
    Ok(status.holder.is_some_and(|(value, _)| value == token))
}

/// True when process `pid` is an ancestor of this one (its parent, the
/// parent's parent, ...). Orphans that redlock adopted count too: redlock
/// is their parent then.
fn is_ancestor(pid: i32) -> bool {
    // SAFETY: getppid has no preconditions.
    let mut at = unsafe { libc::getppid() };
    // Process trees are shallow; the bound only guards against a loop.
    for _ in 0..4096 {
        if at == pid {
            return true;
        }
        match procs::stat(at) {
            Some(p) if at > 1 => at = p.ppid,
            _ => return false,
        }
    }
    false
}

/// What the run asks of its supervisor.
fn terms(cfg: &Run, lock: &Lock) -> Terms {
    Terms {
        on_lost: cfg.on_lost,
        grace: cfg.grace(),
        margin: cfg.kill_margin(),
        max_hold_at: cfg.max_hold.map(|d| lock.since + d),
        shown: crate::text::display_key(cfg.request.key.as_bytes()),
    }
}

fn forward(child: &Child, signal: i32, log: &Log) {
    log.event(
        Level::Info,
        "signal_forwarded",
        &format!("forwarding {} to the command", signals::name(signal)),
        json!({ "signal": signals::name(signal), "pid": child.pid() }),
    );
    child.signal(signal);
    // A stopped command would hold the signal pending, and redlock the lock,
    // forever: continue it after a signal meant to end it, as a shell's
    // `kill` and timeout(1) do.
    if signal != libc::SIGUSR1 && signal != libc::SIGUSR2 {
        child.signal(libc::SIGCONT);
    }
}

fn exit_status(status: io::Result<ExitStatus>, argv: &[String]) -> Result<u8, Error> {
    status.map(child::exit_code).map_err(|e| Error::CannotRun {
        code: exit::CANNOT_EXECUTE,
        message: format!("lost track of {:?}: {e}", argv[0]),
    })
}

/// Watches the command until it exits; returns its status and whether
/// redlock stopped it. Every decision is `state`'s ([`Supervision::step`]);
/// this loop only turns the world into its events and performs its actions.
async fn supervise(
    child: &mut Child,
    signals: &mut Signals,
    mut health: watch::Receiver<Health>,
    mut state: Supervision,
    key: &str,
    log: &Log,
    clock: &Clock,
) -> (io::Result<ExitStatus>, Option<Stop>, Option<i32>) {
    let now = || Now { boot: clock.now(), wall: SystemTime::now() };
    let mut watching = true;
    // The first signal passed on that asks the job to end (not USR1/USR2).
    let mut interrupted = None;
    loop {
        // Back from a freeze or a job-control stop that outlasted the
        // validity: the guard has killed the job.
        guard_report(child, &mut state, now(), key, log);
        let timers = state.timers(clock.now());
        // A timer that never fires stands in for "no deadline".
        let never = clock.now() + Duration::from_secs(365 * 24 * 3600);
        let event = tokio::select! {
            status = child.wait() => {
                guard_report(child, &mut state, now(), key, log);
                let sigkill = status.as_ref().is_ok_and(|s| s.signal() == Some(libc::SIGKILL));
                perform(child, state.step(now(), Event::Exited { sigkill }), key, log);
                return (status, state.finish(), interrupted);
            }
            signal = signals.recv() => {
                if signal != libc::SIGUSR1 && signal != libc::SIGUSR2 {
                    interrupted.get_or_insert(signal);
                }
                Event::Signal(signal)
            }
            changed = health.changed(), if watching => {
                if changed.is_err() {
                    watching = false;
                    continue;
                }
                Event::Health(health.borrow().clone())
            }
            () = clock.sleep_until(timers.stop.unwrap_or(never)), if timers.stop.is_some() => {
                guard_report(child, &mut state, now(), key, log);
                Event::StopDue { ended_by_itself: child.exited_by_itself() }
            }
            () = clock.sleep_until(timers.kill.unwrap_or(never)), if timers.kill.is_some() => {
                Event::KillDue
            }
        };
        perform(child, state.step(now(), event), key, log);
    }
}

/// Tells `state` that the guard killed the job, if it did and that can
/// still matter (redlock had not begun stopping the job itself).
fn guard_report(child: &mut Child, state: &mut Supervision, now: Now, key: &str, log: &Log) {
    if !state.stopping() && child.guard_fired() {
        let ended_by_itself = child.exited_by_itself();
        perform(child, state.step(now, Event::GuardFired { ended_by_itself }), key, log);
    }
}

/// Does what the step decided.
fn perform(child: &mut Child, actions: Vec<Action>, key: &str, log: &Log) {
    for action in actions {
        match action {
            Action::Forward(signal) => forward(child, signal, log),
            Action::Guard(kill_at) => child.set_kill_at(kill_at),
            Action::Stop(signal) => child.stop(signal),
            Action::Say(level, note) => say(level, note, child.pid(), key, log),
        }
    }
}

/// Writes one of the supervisor's messages.
fn say(level: Level, note: Note, pid: i32, key: &str, log: &Log) {
    let shown = crate::text::display_key(key.as_bytes());
    match note {
        Note::Renewed { left, recovered } => {
            let recovered = if recovered { " (recovered)" } else { "" };
            log.event(
                level,
                "renewed",
                &format!(
                    "renewed {shown}, valid for {}{recovered}",
                    crate::text::fmt_duration(left)
                ),
                json!({ "key": key, "validity_ms": crate::text::millis(left) }),
            );
        }
        Note::RenewalFailed { left, error } => log.event(
            level,
            "renewal_failed",
            &format!(
                "renewal failed, retrying with {} of validity left: {error}",
                crate::text::fmt_duration(left)
            ),
            json!({ "key": key, "error": error, "validity_left_ms": crate::text::millis(left) }),
        ),
        Note::Lost { reason, ignored } => {
            let then = if ignored {
                "; --on-lost ignore keeps the command running"
            } else {
                "; stopping the command"
            };
            log.event(
                level,
                "lost",
                &format!("lost the lock: {reason}{then}"),
                json!({ "key": key, "reason": reason, "ignored": ignored }),
            );
        }
        Note::Stopping { why, signal, kill_in } => log.event(
            level,
            "stopping",
            &format!(
                "{why}; sent {} to the command, SIGKILL in {}",
                signals::name(signal),
                crate::text::fmt_duration(kill_in)
            ),
            json!({
                "pid": pid,
                "reason": why,
                "signal": signals::name(signal),
                "kill_in_ms": crate::text::millis(kill_in),
            }),
        ),
        Note::Killed => log.event(
            level,
            "killed",
            "the command is still running; sent SIGKILL",
            json!({ "pid": pid }),
        ),
    }
}

/// Ends the hold: with `--keep`, shortens the lock's TTL to what is left of
/// the keep time instead of deleting it; otherwise releases it everywhere.
/// Failures are warnings, but for a release that found the lock gone,
/// which it returns ([`taken_away`]). After a `lost` lock there is nothing
/// to keep, and a release that finds the lock gone (or the servers still
/// failing) is expected: said with -v only, as the final error already
/// says why the lock was lost.
async fn finish(fleet: &Fleet, cfg: &Run, lock: &Lock, lost: bool, log: &Log) -> Ended {
    if lost {
        release_quietly(fleet, lock, log).await;
        return Ended::Failed;
    }
    if let Some(keep) = cfg.keep {
        // A renewal the aborted watchdog left in flight must land before
        // the shortening, or it would stretch the lock back to a full TTL.
        fleet.drain().await;
        let left = (lock.since + keep).saturating_duration_since(BootInstant::now());
        if left >= Duration::from_millis(1) {
            match fleet.set_ttl(&lock.key, lock.held(), left).await {
                Ok(_) => {
                    log.event(
                        Level::Info,
                        "kept",
                        &format!(
                            "--keep: the lock stays for another {}",
                            crate::text::fmt_duration(left)
                        ),
                        json!({ "key": lock.key, "kept_ms": crate::text::millis(left) }),
                    );
                    return Ended::Kept;
                }
                Err(e) => log.event(
                    Level::Warn,
                    "keep_failed",
                    &format!("--keep: {e}; releasing instead"),
                    json!({ "key": lock.key, "error": e.to_string() }),
                ),
            }
        }
    }
    match fleet.release(&lock.key, lock.held()).await {
        Err(gone @ Error::Lost(_)) => Ended::Gone(gone),
        other => {
            let released = other.is_ok();
            said(other, lock, fleet.quorum(), Level::Warn, log);
            if released { Ended::Released } else { Ended::Failed }
        }
    }
}

async fn release(fleet: &Fleet, lock: &Lock, log: &Log) {
    let release = fleet.release(&lock.key, lock.held()).await;
    said(release, lock, fleet.quorum(), Level::Warn, log);
}

/// [`release`] of a lock already lost: a failure is said with -v only.
async fn release_quietly(fleet: &Fleet, lock: &Lock, log: &Log) {
    let release = fleet.release(&lock.key, lock.held()).await;
    said(release, lock, fleet.quorum(), Level::Info, log);
}

/// A release's line: the servers that released, or its `failure`.
fn said(
    release: Result<Vec<crate::lock::ServerResult>, Error>,
    lock: &Lock,
    quorum: usize,
    failure: Level,
    log: &Log,
) {
    match release {
        Ok(servers) => super::released(log, &lock.key, quorum, &servers),
        // The error names the operation and the key (`release K: ...`).
        Err(e) => log.event(
            failure,
            "release_failed",
            &e.to_string(),
            json!({ "key": lock.key, "error": e.to_string() }),
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::cli::LogFormat;
    use crate::config::OnLost;
    use crate::lock::{Request, Wait};

    /// Scenario 4 of "Never unguarded": the machine suspends for longer than
    /// the lock's validity (the clock jumps; nothing ran meanwhile), and on
    /// resume the supervisor stops the command at once instead of waiting
    /// for its monotonic timers.
    #[tokio::test]
    async fn a_resume_past_the_deadline_stops_the_command_at_once() {
        let ttl = Duration::from_secs(30);
        let cfg = Run {
            request: Request::new("suspend", ttl, Wait::Once),
            conflict_exit_code: exit::BUSY,
            keep: None,
            ping: None,
            max_hold: None,
            jitter: None,
            renew_every: ttl / 3,
            on_lost: OnLost::Signal(libc::SIGTERM),
            kill_after: None,
            metrics_file: None,
            argv: vec!["sleep".into(), "60".into()],
            zone_from: None,
        };
        let lock = Lock {
            key: cfg.request.key.clone(),
            token: "t".into(),
            mode: Mode::Exclusive,
            ttl,
            since: BootInstant::now(),
            validity: ttl - Duration::from_secs(1),
            granted: (1, 1),
            fence: None,
        };
        let (_tx, health) = watch::channel(Health::Held { deadline: lock.deadline() });
        let state = Supervision::new(terms(&cfg, &lock), lock.deadline());
        let mut child = child::spawn(&cfg.argv, &[], state.guard_at(), None).unwrap();
        let mut signals = Signals::install().unwrap();
        let clock = Arc::new(Clock::new());
        let log = Log::new(0, true, LogFormat::Text);
        let suspend = {
            let clock = Arc::clone(&clock);
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                clock.advance(2 * ttl);
                std::future::pending::<()>().await
            }
        };
        let started = std::time::Instant::now();
        let (status, stop, _) = tokio::select! {
            done = supervise(&mut child, &mut signals, health, state, &cfg.request.key, &log, &clock) => done,
            () = suspend => unreachable!(),
        };
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "stopped only after {:?}",
            started.elapsed()
        );
        assert!(matches!(stop, Some(Stop::Lost { .. })));
        assert!(status.unwrap().signal().is_some(), "the command was stopped by a signal");
    }
}
