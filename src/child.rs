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

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

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
}

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
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
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
    Ok(Child { inner, pgid, tty, reaped: false })
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

    /// Waits for the child to exit and takes the terminal back.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.inner.wait().await?;
        self.reaped = true;
        if let Some(fd) = self.tty.take() {
            // SAFETY: see set_foreground; giving the terminal back to redlock's group.
            unsafe { set_foreground(fd, libc::getpgrp()) };
        }
        Ok(status)
    }

    /// True while processes of the child's group still run (after the
    /// child itself exited: what it left behind). Zombies do not count:
    /// orphans are reparented to pid 1, which in a container may reap them
    /// late or never, and a zombie runs nothing.
    fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks for existence.
        if unsafe { libc::kill(-self.pgid, 0) } != 0 {
            return false;
        }
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return true;
        };
        procs.flatten().any(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            running_in_group(&stat, self.pgid)
        })
    }

    /// Stops whatever the child left running in its process group: SIGTERM,
    /// then SIGKILL after `grace`. Returns true when something was left.
    /// Such processes would otherwise go on without the lock.
    pub async fn stop_leftovers(&self, grace: Duration) -> bool {
        if !self.group_alive() {
            return false;
        }
        // SAFETY: kill(2) on the group the child led; its leader is reaped
        // but the group id stays reserved while members remain.
        unsafe { libc::kill(-self.pgid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while self.group_alive() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if self.group_alive() {
            // SAFETY: as above.
            unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        }
        true
    }
}

/// True when `stat`, the text of a `/proc/PID/stat`, is a process of group
/// `pgid` that is not a zombie. The command name (field 2) may hold spaces
/// and parentheses, so the fields are counted from its last `)`.
fn running_in_group(stat: &str, pgid: i32) -> bool {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = rest.split_ascii_whitespace();
    let (state, pgrp) = (fields.next(), fields.nth(1));
    state.is_some_and(|s| s != "Z" && s != "X") && pgrp.and_then(|g| g.parse().ok()) == Some(pgid)
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
    fn zombies_and_other_groups_do_not_count_as_running() {
        let stat = |name: &str, state: &str, pgrp: i32| {
            format!("4242 ({name}) {state} 1 {pgrp} {pgrp} 0 -1 4194560 97 0 0 0")
        };
        assert!(running_in_group(&stat("sleep", "S", 77), 77));
        assert!(running_in_group(&stat("a) R 1 5 (b", "R", 77), 77));
        assert!(!running_in_group(&stat("sleep", "Z", 77), 77));
        assert!(!running_in_group(&stat("sleep", "S", 78), 77));
        assert!(!running_in_group("", 77));
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(255 << 8)), 255);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 128 + 15);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
    }
}
