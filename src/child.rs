//! The supervised command: spawn, signal, stop, exit status → exit code.
//!
//! # Process-group model
//! The child runs in a process group of its own, and redlock forwards the
//! signals it receives to that whole group. Chosen on purpose:
//! - stopping on a lost lock or `--max-hold` must reach grandchildren too
//!   (`sh -c` pipelines, scripts that start workers), which only a group
//!   signal does (`consul lock` signals only the pid and leaves them running,
//!   consul#2022);
//! - a signal sent to redlock alone (`kill`, a CI runner's cancel) must reach
//!   the command, so redlock forwards it;
//! - a terminal's Ctrl-C must reach the command exactly once. When one of
//!   stdin/stdout/stderr is a terminal whose foreground group is redlock's,
//!   the child's group is made the foreground group (as a shell does for a
//!   job): terminal signals then go to the command alone, and interactive
//!   programs can read the terminal. Otherwise terminal signals reach only
//!   redlock's group, and redlock forwards them once.
//!
//! The child also gets a parent-death signal (SIGKILL), so that it never
//! outlives redlock (even `kill -9` of redlock), with the race against a
//! parent that died before the `prctl` closed by checking the parent pid.
//! That signal reaches the child alone, so a guard process sits in the
//! child's group (`Guard`): when redlock dies, it SIGKILLs the whole group
//! (pipelines, workers), which would otherwise run on without the lock.
//!
//! redlock is the reaper of the command's orphans (`PR_SET_CHILD_SUBREAPER`):
//! a process that left the group (a daemon calling `setsid`) is reparented
//! to redlock, not to pid 1, once its parent exits. So when the command
//! exits, whatever it left running, in its group or adopted, is stopped:
//! it would otherwise run without the lock. redlock reaps the orphans it
//! adopts, while the command runs (on SIGCHLD) and after.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use tokio::signal::unix::{Signal, SignalKind};

use crate::error::Error;
use crate::exit;

/// A running command in its own process group.
pub struct Child {
    inner: tokio::process::Child,
    pgid: i32,
    /// The terminal handed to the child's group, to take back at the end.
    tty: Option<i32>,
    /// Set once the child has been reaped: its group id may then be reused.
    reaped: bool,
    /// SIGCHLD, to reap adopted orphans while the child runs (None when
    /// it cannot be caught: they are then reaped when the child exits).
    sigchld: Option<Signal>,
    /// Kills the group if redlock dies; disarmed once the child exited.
    guard: Option<Guard>,
}

/// A process in the child's group that kills the group when redlock dies:
/// it blocks reading a pipe whose only writer is redlock, and end of file
/// means redlock died: it sends SIGKILL to the group (itself included).
/// Once the child exited, redlock kills the guard instead (and takes care
/// of the leftovers itself). It ignores the signals redlock forwards to the
/// group, holds no other file descriptor (no terminal, no output pipe), and
/// costs one fork. Only redlock reaps it, so its pid stays ours to kill.
struct Guard {
    pid: i32,
    /// The write end: closed only when redlock exits or dies.
    _pipe: OwnedFd,
}

impl Guard {
    /// Forks the guard into group `pgid`; `None` when that fails (the
    /// parent-death signal still covers the child itself).
    fn start(pgid: i32) -> Option<Guard> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two fds it creates.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: each fd was just created and is owned once.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fork in a threaded process; the child runs only
        // async-signal-safe calls (see guard_main) and never returns.
        match unsafe { libc::fork() } {
            -1 => None,
            0 => unsafe { guard_main(read.as_raw_fd(), pgid) },
            pid => Some(Guard { pid, _pipe: write }),
        }
    }

    /// Ends the guard (the child exited) and reaps it.
    fn disarm(self) {
        // SAFETY: kill and reap our own child, which nothing else reaps
        // (reap_orphans spares it), so the pid is still the guard's. SIGKILL
        // also ends a stopped guard, so the wait returns at once.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// The guard process: see [`Guard`].
///
/// # Safety
/// Call only in the child of a fork: it makes only async-signal-safe calls
/// and ends in `_exit`.
unsafe fn guard_main(read: i32, pgid: i32) -> ! {
    // SAFETY: async-signal-safe syscalls on this process only, then kill
    // of the group it guards.
    unsafe {
        if libc::setpgid(0, pgid) != 0 {
            // The group is gone already: nothing to guard.
            libc::_exit(0);
        }
        // What `ps` shows for it in the command's group.
        libc::prctl(libc::PR_SET_NAME, c"redlock-guard".as_ptr());
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        for signal in IGNORED_BY_GUARD {
            libc::sigaction(signal, &ignore, std::ptr::null_mut());
        }
        // Hold nothing but the pipe: no terminal, no output, no sockets.
        libc::syscall(libc::SYS_close_range, 0, read - 1, 0);
        libc::syscall(libc::SYS_close_range, read + 1, u32::MAX, 0);
        let mut byte = 0u8;
        // Nobody writes: read returns only at end of file (or on an error).
        while libc::read(read, (&raw mut byte).cast(), 1) == -1
            && *libc::__errno_location() == libc::EINTR
        {}
        libc::kill(-pgid, libc::SIGKILL);
        libc::_exit(0)
    }
}

/// Signals the guard ignores: those redlock forwards to the group, and job
/// control, so that it neither dies nor stops with the command.
const IGNORED_BY_GUARD: [i32; 10] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
];

/// A terminal fd (0, 1 or 2) whose foreground process group is ours.
fn foreground_tty() -> Option<i32> {
    // SAFETY: isatty, tcgetpgrp and getpgrp only read process state.
    (0..=2).find(|&fd| unsafe { libc::isatty(fd) == 1 && libc::tcgetpgrp(fd) == libc::getpgrp() })
}

/// Makes `pgid` the foreground group of `fd`. SIGTTOU is blocked around the
/// call: a process outside the foreground group would otherwise be stopped.
///
/// # Safety
/// Only async-signal-safe calls, so it may run between fork and exec.
unsafe fn set_foreground(fd: i32, pgid: i32) {
    // SAFETY: plain syscalls on this process's own signal mask and terminal.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::sigprocmask(libc::SIG_BLOCK, &block, &mut old);
        libc::tcsetpgrp(fd, pgid);
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Starts `argv` with extra environment variables; stdio and the terminal
/// are inherited. A command that is not found is exit 127, one that cannot
/// be executed 126, as a shell reports them.
pub fn spawn(argv: &[String], env: &[(&str, &str)]) -> Result<Child, Error> {
    let (program, args) =
        argv.split_first().ok_or_else(|| Error::Usage("run: no command given".into()))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let tty = foreground_tty();
    // SAFETY: getpid has no preconditions; prctl sets a flag of this
    // process. Best effort: without it (Linux before 3.4) orphans go to
    // pid 1 and escape, as with any supervisor.
    let parent = unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::getpid()
    };
    let sigchld = tokio::signal::unix::signal(SignalKind::child()).ok();
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe calls (setpgid, sigprocmask, tcsetpgrp, prctl,
    // getppid, getpid); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(fd) = tty {
                set_foreground(fd, libc::getpid());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // redlock died before prctl took effect: no death signal will
            // ever come, so do not start the command at all.
            if libc::getppid() != parent {
                return Err(io::Error::other("redlock exited before the command started"));
            }
            Ok(())
        });
    }
    let inner = tokio::process::Command::from(cmd).spawn().map_err(|e| {
        if let Some(fd) = tty {
            // SAFETY: taking our own terminal back; see set_foreground.
            unsafe { set_foreground(fd, libc::getpgrp()) };
        }
        let code = match e.kind() {
            io::ErrorKind::NotFound => exit::NOT_FOUND,
            _ => exit::CANNOT_EXECUTE,
        };
        let what = if code == exit::NOT_FOUND { "command not found" } else { "cannot execute" };
        Error::CannotRun { code, message: format!("{what}: {program}: {e}") }
    })?;
    let pid = inner.id().ok_or_else(|| Error::CannotRun {
        code: exit::CANNOT_EXECUTE,
        message: format!("{program}: exited before it could be supervised"),
    })?;
    let pgid = i32::try_from(pid).map_err(|_| Error::CannotRun {
        code: exit::CANNOT_EXECUTE,
        message: format!("{program}: pid {pid} out of range"),
    })?;
    let guard = Guard::start(pgid);
    Ok(Child { inner, pgid, tty, reaped: false, sigchld, guard })
}

impl Child {
    /// The child's pid (= its process group id).
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// Sends `signal` to the child's whole process group.
    pub fn signal(&self, signal: i32) {
        if !self.reaped {
            // SAFETY: kill(2) on our own child's process group. ESRCH (group
            // already gone) is fine to ignore.
            unsafe { libc::kill(-self.pgid, signal) };
        }
    }

    /// Waits for the child to exit and takes the terminal back; reaps the
    /// orphans that exit meanwhile. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = loop {
            let Some(sigchld) = self.sigchld.as_mut() else {
                break self.inner.wait().await?;
            };
            tokio::select! {
                status = self.inner.wait() => break status?,
                _ = sigchld.recv() => {
                    let guard = self.guard.as_ref().map_or(self.pgid, |g| g.pid);
                    reap_orphans(&[self.pgid, guard]);
                }
            }
        };
        self.reaped = true;
        if let Some(guard) = self.guard.take() {
            guard.disarm();
        }
        if let Some(fd) = self.tty.take() {
            // SAFETY: see set_foreground; giving the terminal back to redlock's group.
            unsafe { set_foreground(fd, libc::getpgrp()) };
        }
        Ok(status)
    }

    /// What the command left running after it exited: whether its process
    /// group still has a running member, and the running orphans redlock
    /// adopted (its children now). Zombies do not count: they run nothing,
    /// and under a pid 1 that reaps late (a container) a group can hold
    /// zombies for long.
    fn leftovers(&self) -> (bool, Vec<i32>) {
        let adopted = reap_orphans(&[]);
        // SAFETY: signal 0 only checks for existence.
        let group = unsafe { libc::kill(-self.pgid, 0) } == 0;
        if !adopted && !group {
            return (false, Vec::new());
        }
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return (group, Vec::new());
        };
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let (mut group_runs, mut orphans) = (false, Vec::new());
        for entry in procs.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            if let Some(Proc { ppid, pgrp }) = running(&stat) {
                group_runs |= pgrp == self.pgid;
                if ppid == me {
                    orphans.push(pid);
                }
            }
        }
        (group_runs, orphans)
    }

    /// Stops whatever the child left running, in its group or adopted:
    /// SIGTERM, then SIGKILL after `grace` (at once when `grace` is zero),
    /// following the orphans of what it stops. Returns true when something
    /// was left. Such processes would otherwise go on without the lock.
    /// Call only after [`Child::wait`] returned: it reaps every exited
    /// child, which must not take the command's status from tokio.
    pub async fn stop_leftovers(&self, grace: Duration) -> bool {
        let (mut group, mut orphans) = self.leftovers();
        if !group && orphans.is_empty() {
            return false;
        }
        let start = Instant::now();
        let mut termed = HashSet::new();
        while group || !orphans.is_empty() {
            let kill = start.elapsed() >= grace;
            if start.elapsed() > grace + KILL_WAIT {
                break;
            }
            let signal = if kill { libc::SIGKILL } else { libc::SIGTERM };
            // SAFETY: kill(2) on the group the child led (the id stays
            // reserved while members remain) and on our own children, which
            // keep their pids until we reap them.
            unsafe {
                if group && (kill || termed.insert(-self.pgid)) {
                    libc::kill(-self.pgid, signal);
                }
                for &pid in &orphans {
                    if kill || termed.insert(pid) {
                        libc::kill(pid, signal);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            (group, orphans) = self.leftovers();
        }
        true
    }
}

/// How long [`Child::stop_leftovers`] keeps killing after the grace.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// Reaps the orphans redlock adopted that have exited, leaving the pids in
/// `spare` alone (the command, which tokio reaps; the guard). Returns true
/// while children remain.
fn reap_orphans(spare: &[i32]) -> bool {
    loop {
        // SAFETY: waitid with WNOWAIT only looks at our own children; the
        // zeroed siginfo_t is a valid out-parameter.
        let (found, pid) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            let found = libc::waitid(libc::P_ALL, 0, &mut info, flags) == 0;
            (found, info.si_pid())
        };
        if !found {
            return false;
        }
        if pid == 0 || spare.contains(&pid) {
            return true;
        }
        // SAFETY: reaping our own exited child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

/// The parent and process group of a process that is running.
#[derive(Debug, PartialEq, Eq)]
struct Proc {
    ppid: i32,
    pgrp: i32,
}

/// Reads `stat`, the text of a `/proc/PID/stat`: `None` for a zombie (or
/// unreadable text). The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from its last `)`.
fn running(stat: &str) -> Option<Proc> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    (state != "Z" && state != "X").then_some(Proc { ppid, pgrp })
}

/// The exit code redlock reports for a child's exit status: its code, or
/// 128+N when signal N ended it (never 0 for a killed child).
pub fn exit_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(u8::MAX);
    }
    let signal = status.signal().unwrap_or(0);
    exit::SIGNAL_BASE.saturating_add(u8::try_from(signal).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_parent_and_group_of_running_processes() {
        let stat = |name: &str, state: &str| {
            format!("4242 ({name}) {state} 12 77 77 0 -1 4194560 97 0 0 0")
        };
        assert_eq!(running(&stat("sleep", "S")), Some(Proc { ppid: 12, pgrp: 77 }));
        assert_eq!(running(&stat("a) R 1 5 (b", "R")), Some(Proc { ppid: 12, pgrp: 77 }));
        assert_eq!(running(&stat("sleep", "Z")), None);
        assert_eq!(running(""), None);
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(255 << 8)), 255);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 128 + 15);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
    }
}
