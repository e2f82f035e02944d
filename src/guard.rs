//! The guard: a dead-man's switch that stops the command at the lock's
//! deadline even when redlock itself cannot.
//!
//! # Why a second process
//! redlock stops the command before the lock's validity ends, but only
//! while redlock runs. Frozen (SIGSTOP, a debugger, a cgroup that throttles
//! it alone), stopped by job control, or killed, it would leave the command
//! running after the servers let the key expire and someone else took it.
//! So before the command starts, redlock forks the guard: a small process
//! in a process group of its own (terminal and job-control signals for
//! the command's group never reach it) that holds nothing but the read end
//! of a pipe from redlock.
//!
//! # What it does
//! - It knows the instant to kill at (`kill_at`, on `CLOCK_BOOTTIME`, so a
//!   suspend counts) and arms a timerfd for it. After every successful
//!   renewal redlock sends it a later `kill_at` ([`Guard::send`]); a frozen
//!   redlock sends nothing, and the timer fires.
//! - It fires, too, when the pipe reaches end of file: redlock died.
//! - Firing SIGKILLs the command's process group and, while redlock is
//!   still alive (frozen, so the orphans it adopted as their reaper are
//!   still its children), every running child of redlock but itself,
//!   repeating the scan until nothing is left running; then it exits with
//!   [`FIRED`] (deadline) or 0 (redlock died).
//!
//! # The argument
//! - Assumption: redlock sends `kill_at = deadline - margin / 2`, where the
//!   deadline is the end of the validity of the last renewal that won a
//!   quorum. Before that instant the lock is held; the guard never kills a
//!   job whose lock is held and whose redlock keeps renewing (a renewal
//!   every `ttl/3` moves `kill_at` forward long before it is reached).
//! - Bound: the job is dead `margin / 2` (at least 2.5 ms, at most 500 ms)
//!   before the validity ends, and the validity ends at least the drift
//!   allowance before any server can expire the key. redlock's own stop
//!   plan (the `--on-lost` signal, a grace, SIGKILL at `deadline - margin`)
//!   comes first whenever redlock runs; the guard is the backstop.
//! - What breaks it: the guard and redlock both frozen by separate means
//!   (two SIGSTOPs; a freezer cgroup that holds the guard but not the
//!   command); the guard not scheduled for longer than `margin / 2` at the
//!   deadline (a machine so overloaded that no process runs); when redlock
//!   is killed, daemons that left the command's group (`setsid`): its death
//!   reparents them to pid 1, and nothing identifies them any more. redlock covers the guard's own failures
//!   where it can: it continues a stopped guard with every message, and
//!   starts a new guard when the old one died while the command runs.
//!
//! The forked guard runs in a copy of a threaded process, so it makes only
//! async-signal-safe calls and allocates nothing: everything it needs is
//! on its stack before the fork.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::time::Duration;

use crate::clock::{self, BootInstant};
use crate::procs;

/// The guard's exit code when it killed the job at its deadline.
pub const FIRED: i32 = 3;

/// One message to the guard: the command's process group (0 while it has
/// none) and the instant to kill at in nanoseconds since boot
/// ([`NEVER`]: no deadline). 16 bytes, below PIPE_BUF, so every write is
/// atomic and the pipe always holds whole messages.
type Message = [u8; 16];

/// `kill_at` for "no deadline" (`--on-lost ignore`, re-entry).
const NEVER: u64 = u64::MAX;

fn message(pgid: i32, kill_at: Option<BootInstant>) -> Message {
    let at =
        kill_at.map_or(NEVER, |at| u64::try_from(at.since_boot().as_nanos()).unwrap_or(NEVER - 1));
    let mut m = [0u8; 16];
    m[..8].copy_from_slice(&i64::from(pgid).to_ne_bytes());
    m[8..].copy_from_slice(&at.to_ne_bytes());
    m
}

fn read_message(m: &[u8]) -> Option<(i32, u64)> {
    let pgid = i64::from_ne_bytes(m.get(..8)?.try_into().ok()?);
    let at = u64::from_ne_bytes(m.get(8..16)?.try_into().ok()?);
    Some((i32::try_from(pgid).unwrap_or(0), at))
}

/// A running guard, redlock's side.
#[derive(Debug)]
pub struct Guard {
    pid: i32,
    /// The write end of the pipe: non-blocking, closed only when redlock
    /// exits or dies (end of file fires the guard).
    pipe: OwnedFd,
}

impl Guard {
    /// Forks a guard for the job of redlock (this process), group `pgid`
    /// (0 before the command exists), to kill at `kill_at`, on `forker`'s
    /// thread when one was started ahead, or on a thread started now.
    pub fn start(
        pgid: i32,
        kill_at: Option<BootInstant>,
        forker: Option<Forker>,
    ) -> io::Result<Guard> {
        let argv = argv_area();
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two fds it creates.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: each fd was just created and is owned once.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on our own new fd. A write never blocks redlock: a
        // guard that stopped reading is continued instead (see `send`).
        unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let first = message(pgid, kill_at);
        // SAFETY: getpid has no preconditions.
        let redlock = unsafe { libc::getpid() };
        let fork = Fork { read: read.as_raw_fd(), redlock, first, argv };
        // `read` stays open here until the fork is done, then closes.
        let pid = match forker.or_else(Forker::start) {
            Some(forker) => forker.fork(fork)?,
            None => fork.fork()?,
        };
        drop(read);
        Ok(Guard { pid, pipe: write })
    }

    /// The guard's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Tells the guard the command's group and the instant to kill at, and
    /// continues it in case it was stopped (a stopped guard guards nothing).
    pub fn send(&self, pgid: i32, kill_at: Option<BootInstant>) {
        let m = message(pgid, kill_at);
        // SAFETY: a non-blocking write of a whole message to our pipe, and
        // a signal to our own child (which only we reap, so the pid is ours).
        unsafe {
            libc::write(self.pipe.as_raw_fd(), m.as_ptr().cast(), m.len());
            libc::kill(self.pid, libc::SIGCONT);
        }
    }

    /// The guard's exit status if it has exited (and is now reaped).
    pub fn exited(&self) -> Option<i32> {
        let mut status = 0;
        // SAFETY: waitpid on our own child, which nothing else reaps.
        (unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid)
            .then_some(status)
    }

    /// Ends the guard (the command exited) and reaps it; returns true when
    /// it had fired (killed the job at its deadline) before.
    pub fn disarm(self) -> bool {
        self.end().reap()
    }

    /// Ends the guard without waiting for it to be gone: SIGKILL, which
    /// also ends a stopped guard. A guard running on another CPU may run a
    /// few more instructions before the signal lands; call this only once
    /// the command has exited and been reaped, when the guard has nothing
    /// left to kill.
    ///
    /// Why not wait here: the guard is a fork of redlock, and tearing down
    /// its copy of the address space takes time on the path of every `run`;
    /// [`Ended::reap`] after the release lets that overlap the release's
    /// round trip.
    pub fn end(self) -> Ended {
        // SAFETY: a signal to our own child, which only we reap, so the pid
        // is ours.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        Ended { pid: self.pid }
    }
}

/// A guard that was sent SIGKILL and is not reaped yet.
#[derive(Debug)]
#[must_use = "reap the guard, or it stays a zombie until redlock exits"]
pub struct Ended {
    pid: i32,
}

impl Ended {
    /// Waits for the guard to be gone and reaps it; returns true when it had
    /// fired (killed the job at its deadline) before it was ended.
    pub fn reap(self) -> bool {
        let mut status = 0;
        // SAFETY: waitpid on our own child, which nothing else reaps; it was
        // sent SIGKILL, so the wait ends.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
        fired(status)
    }
}

/// What the guard is forked with: all of it plain values, so that the fork
/// can be made on another thread.
struct Fork {
    /// The read end of the pipe from redlock.
    read: i32,
    /// redlock's pid.
    redlock: i32,
    /// The first message (group and deadline).
    first: Message,
    /// redlock's command line, to blank in the guard.
    argv: Option<(usize, usize)>,
}

impl Fork {
    /// Forks the guard; returns its pid.
    fn fork(self) -> io::Result<i32> {
        // SAFETY: fork in a threaded process; the child runs only
        // async-signal-safe calls (see guard_main) and never returns.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => unsafe { guard_main(self.read, self.redlock, self.first, self.argv) },
            pid => {
                // Both sides set the group, so it is set before either goes
                // on (a shell's job-control idiom): the guard is never in
                // redlock's group, even if it is stopped before it runs.
                // SAFETY: setpgid on our own child.
                unsafe { libc::setpgid(pid, pid) };
                Ok(pid)
            }
        }
    }
}

/// A thread of redlock's own that forks a guard when asked, and then stays
/// until that guard exits.
///
/// Why a thread: redlock's main thread must have no children but the
/// command and the orphans it adopts, so that one `waitid` can tell that
/// nothing of the job is left when the command exits, instead of a scan of
/// every process on the machine (`crate::child`, "Nothing left"). A child
/// belongs to the thread that forked it, and stays that thread's while the
/// thread lives: hence the thread waits (without reaping: redlock's main
/// thread reaps the guard) until the guard has exited. Should the thread
/// end sooner, the guard becomes the main thread's child, and the check
/// only falls back to the scan. When no thread can be started, the guard
/// is forked on the calling thread, with the same fallback.
///
/// Why ahead of time ([`Forker::start`] before the lock is taken, as `run`
/// does unless `-n`): starting a thread on the way from the lock to the
/// command delays the command; started while redlock waits for the
/// servers or for the lock, it costs nothing there.
/// Dropped unused (the lock was busy), the thread ends.
#[derive(Debug)]
pub struct Forker {
    /// Where the fork is asked for.
    ask: std::sync::mpsc::SyncSender<Fork>,
    /// Where its pid (or error) comes back.
    forked: std::sync::mpsc::Receiver<io::Result<i32>>,
}

impl Forker {
    /// Starts the thread; `None` when no thread can be started.
    pub fn start() -> Option<Forker> {
        let (ask, asked) = std::sync::mpsc::sync_channel::<Fork>(1);
        let (answer, forked) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("guard-parent".to_owned())
            .stack_size(256 * 1024)
            .spawn(move || {
                // The sender dropped: the Forker went unused.
                let Ok(fork) = asked.recv() else { return };
                let result = fork.fork();
                let pid = result.as_ref().ok().copied();
                let _ = answer.send(result);
                if let Some(pid) = pid {
                    wait_without_reaping(pid);
                }
            })
            .ok()?;
        Some(Forker { ask, forked })
    }

    /// Forks the guard on the thread; returns its pid.
    fn fork(self, fork: Fork) -> io::Result<i32> {
        let ended = || io::Error::other("the guard's thread ended");
        self.ask.send(fork).map_err(|_| ended())?;
        self.forked.recv().unwrap_or_else(|_| Err(ended()))
    }
}

/// Blocks until child `pid` has exited (or is gone), leaving it to be reaped.
fn wait_without_reaping(pid: i32) {
    let Ok(id) = libc::id_t::try_from(pid) else { return };
    loop {
        // SAFETY: waitid on our own child with WNOWAIT consumes nothing; the
        // zeroed siginfo_t is a valid out-parameter.
        let done = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) == 0
                || *libc::__errno_location() != libc::EINTR
        };
        if done {
            return;
        }
    }
}

/// True for the wait status of a guard that killed the job at its deadline.
pub fn fired(status: i32) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == FIRED
}

/// Where this process's command line lives in its memory (`arg_start`,
/// `arg_end` of `/proc/self/stat`), so the guard can blank it: `ps` must
/// not show redlock's arguments (a password in a URL) twice.
fn argv_area() -> Option<(usize, usize)> {
    static AREA: OnceLock<Option<(usize, usize)>> = OnceLock::new();
    *AREA.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let (_, rest) = stat.rsplit_once(')')?;
        // Fields 48 and 49 of proc(5); `rest` starts at field 3.
        let mut fields = rest.split_ascii_whitespace().skip(45);
        let start = fields.next()?.parse().ok()?;
        let end = fields.next()?.parse().ok()?;
        (start < end).then_some((start, end))
    })
}

/// Signals the guard ignores: those redlock forwards to the command, and
/// job control, so that it neither dies nor stops with the command.
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

/// The guard process: see the module documentation.
///
/// # Safety
/// Call only in the child of a fork: it makes only async-signal-safe calls
/// and ends in `_exit`.
unsafe fn guard_main(read: i32, redlock: i32, first: Message, argv: Option<(usize, usize)>) -> ! {
    // SAFETY: async-signal-safe syscalls on this process's own state and
    // descriptors; the argv area is this process's own memory (a copy).
    unsafe {
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_NAME, c"redlock-guard".as_ptr());
        if let Some((start, end)) = argv {
            let area = std::slice::from_raw_parts_mut(start as *mut u8, end - start);
            area.fill(0);
            let name = b"redlock-guard";
            let n = name.len().min(area.len().saturating_sub(1));
            area[..n].copy_from_slice(&name[..n]);
        }
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        for signal in IGNORED_BY_GUARD {
            libc::sigaction(signal, &ignore, std::ptr::null_mut());
        }
        // Hold nothing but the pipe: no terminal, no output, no sockets, no
        // write end of the pipe (so redlock's death is seen as end of file).
        libc::syscall(libc::SYS_close_range, 0, read - 1, 0);
        libc::syscall(libc::SYS_close_range, read + 1, u32::MAX, 0);
        let timer = clock::boot_timerfd().map_or(-1, |fd| {
            let raw = fd.as_raw_fd();
            std::mem::forget(fd);
            raw
        });
        let (mut pgid, mut kill_at) = read_message(&first).unwrap_or((0, NEVER));
        let mut buf = [0u8; 16 * 64];
        loop {
            // (Re-)arm for the current instant: after a message, and after a
            // wake that came early by the clock (see clock::arm_timerfd).
            // Re-arming also clears an expiry of an old instant.
            if timer >= 0 && kill_at == NEVER {
                disarm_timerfd(timer);
            } else if timer >= 0 {
                let _ = clock::arm_timerfd(timer, Duration::from_nanos(kill_at));
            }
            let mut fds = [
                libc::pollfd { fd: read, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: timer, events: libc::POLLIN, revents: 0 },
            ];
            // Without a timerfd, wake at least every second to look at the
            // boot clock: a suspend is then noticed within a second.
            let timeout = if timer >= 0 || kill_at == NEVER { -1 } else { 1000 };
            let n = libc::poll(fds.as_mut_ptr(), 2, timeout);
            if n < 0 && *libc::__errno_location() != libc::EINTR {
                fire(redlock, pgid, 0);
            }
            if fds[0].revents != 0 {
                let got = libc::read(read, buf.as_mut_ptr().cast(), buf.len());
                match usize::try_from(got) {
                    // End of file: redlock died.
                    Ok(0) => fire(redlock, pgid, 0),
                    Ok(len) => {
                        let last = (len / 16).saturating_sub(1) * 16;
                        if let Some((group, at)) = buf.get(last..last + 16).and_then(read_message) {
                            pgid = if group > 0 { group } else { pgid };
                            kill_at = at;
                        }
                    }
                    Err(_) => {
                        let errno = *libc::__errno_location();
                        if errno != libc::EINTR && errno != libc::EAGAIN {
                            fire(redlock, pgid, 0);
                        }
                    }
                }
            }
            if kill_at != NEVER && BootInstant::now().since_boot() >= Duration::from_nanos(kill_at)
            {
                fire(redlock, pgid, FIRED);
            }
        }
    }
}

/// Disarms a timerfd (an all-zero setting).
///
/// # Safety
/// Async-signal-safe; `fd` must be a timerfd.
unsafe fn disarm_timerfd(fd: i32) {
    // SAFETY: an all-zero itimerspec disarms the timer.
    unsafe {
        let off: libc::itimerspec = std::mem::zeroed();
        libc::timerfd_settime(fd, 0, &off, std::ptr::null_mut());
    }
}

/// Kills the job and exits with `code`.
///
/// # Safety
/// Async-signal-safe; call only in the guard.
unsafe fn fire(redlock: i32, pgid: i32, code: i32) -> ! {
    // SAFETY: see kill_job; _exit ends the guard.
    unsafe {
        kill_job(redlock, pgid);
        libc::_exit(code)
    }
}

/// SIGKILLs group `pgid` and, while redlock is alive (our parent is still
/// `redlock`, so its pid has not been reused), every running child of
/// redlock but this guard: the command and the daemons redlock adopted.
/// Their own orphans are reparented to redlock (its reaper) as they die,
/// so the scan repeats until it finds nothing running (at most ~2 s).
///
/// # Safety
/// Async-signal-safe: kill, getppid, getpid, nanosleep and [`procs::scan`].
unsafe fn kill_job(redlock: i32, pgid: i32) {
    // SAFETY: plain system calls; the pids come from a scan of running
    // processes that are our group's members or redlock's children.
    unsafe {
        let me = libc::getpid();
        let parent_alive = libc::getppid() == redlock;
        for _ in 0..2000 {
            if pgid > 0 {
                libc::kill(-pgid, libc::SIGKILL);
            }
            let mut left = false;
            procs::scan(|p| {
                let ours = (pgid > 0 && p.pgrp == pgid) || (parent_alive && p.ppid == redlock);
                if p.running && p.pid != me && ours {
                    libc::kill(p.pid, libc::SIGKILL);
                    left = true;
                }
            });
            if !left {
                return;
            }
            let pause = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let at = BootInstant::from_since_boot(Duration::from_nanos(123_456_789));
        assert_eq!(read_message(&message(4242, Some(at))), Some((4242, 123_456_789)));
        assert_eq!(read_message(&message(0, None)), Some((0, NEVER)));
    }

    #[test]
    fn the_guard_is_not_a_child_of_the_thread_that_starts_it() {
        // What `child::nothing_left` relies on: the thread that starts the
        // guard (redlock's main thread) has no child afterwards.
        let own_children = || {
            // SAFETY: waitid with WNOHANG|WNOWAIT consumes nothing.
            unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let flags = libc::WEXITED
                    | libc::WNOHANG
                    | libc::WNOWAIT
                    | libc::__WALL
                    | libc::__WNOTHREAD;
                libc::waitid(libc::P_ALL, 0, &mut info, flags) == 0
            }
        };
        assert!(!own_children(), "this test thread has children of its own already");
        // On a thread started now, and on one started ahead of time (`run`
        // unless `-n`); an unused one ends with its Forker.
        drop(Forker::start());
        for forker in [None, Forker::start()] {
            let ahead = forker.is_some();
            let guard = Guard::start(0, None, forker).unwrap();
            let pid = guard.pid();
            assert!(procs::stat(pid).is_some_and(|p| p.running), "the guard {pid} does not run");
            assert!(!own_children(), "the guard is this thread's child (ahead: {ahead})");
            assert!(!guard.disarm(), "a guard without a deadline fired");
            assert!(procs::stat(pid).is_none(), "the disarmed guard {pid} was not reaped");
        }
    }

    #[test]
    fn the_argv_area_is_found() {
        let (start, end) = argv_area().expect("arg_start and arg_end in /proc/self/stat");
        assert!(end > start);
    }
}
