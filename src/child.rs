//! The supervised command: spawn, signal, stop, job control, exit status
//! → exit code.
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
//! # Job control
//! redlock ignores SIGTTOU and SIGTTIN ([`ignore_terminal_stops`]): once
//! the command owns the terminal, redlock's own messages would otherwise
//! stop it (`stty tostop`) while the command runs on, unrenewed. The
//! command gets the default dispositions back before it starts. When the
//! command is stopped by job control (Ctrl-Z's SIGTSTP, or SIGTTIN/SIGTTOU
//! in the background), redlock stops itself with SIGTSTP, as every process
//! of a shell job does, so the shell gets its prompt back; on `fg` or `bg`
//! the shell continues redlock, which gives the terminal to the command
//! (on `fg` only) and continues it. While redlock is stopped it renews
//! nothing: the job keeps the lock only as long as its validity lasts, and
//! the guard kills the stopped command at the deadline; a `fg` after that
//! reports the lost lock (exit 70). A stop by a plain SIGSTOP (a debugger)
//! is not job control: redlock keeps renewing for the stopped command. In
//! an orphaned process group (no shell to continue it) the kernel discards
//! SIGTSTP, and redlock continues the command at once.
//!
//! # Parent death and freezing
//! The child gets a parent-death signal (SIGKILL), so that it never
//! outlives redlock (even `kill -9` of redlock), with the race against a
//! parent that died before the `prctl` closed by checking the parent pid.
//! That signal reaches the child alone, and nothing at all reaches it when
//! redlock is frozen rather than dead; so before the command starts,
//! redlock forks a guard ([`crate::guard`]), a dead-man's switch that kills
//! the whole job at the lock's deadline unless redlock has sent it a later
//! one, or as soon as redlock dies. redlock starts a new guard if the guard
//! dies while the command runs, and refuses to start the command without one.
//!
//! # Orphans
//! redlock is the reaper of the command's orphans (`PR_SET_CHILD_SUBREAPER`):
//! a process that left the group (a daemon calling `setsid`) is reparented
//! to redlock, not to pid 1, once its parent exits. A stop (lost lock,
//! `--max-hold`) signals the group and these adopted processes together
//! ([`Child::stop`]), and when the command exits whatever it left running,
//! in its group or adopted, is stopped: it would otherwise run without the
//! lock. redlock reaps the orphans it adopts, while the command runs (on
//! SIGCHLD) and after.
//!
//! # Nothing left
//! Finding what the command left running means reading every process of
//! the machine from `/proc` (`Child::job`), a cost of every `run` that
//! grows with the number of processes on the machine. Most commands leave nothing, and that is
//! known without the scan (`nothing_left`) when two things hold:
//! - the command's group is empty: `kill(-pgid, 0)` finds no process in it
//!   (a zombie counts as a process, so an unreaped member sends us to the
//!   scan, as does a group id already reused);
//! - redlock's main thread has no child: `waitid(P_ALL, __WNOTHREAD)`
//!   answers ECHILD.
//!
//! Why that is enough: a running descendant of redlock has an ancestor
//! chain that ends in a child of redlock. That child is the command
//! (reaped by then), the guard (which forks nothing), or an orphan that
//! redlock adopted as its reaper; the kernel gives orphans to a reaper's
//! first living thread, the main thread, at the moment their parent dies,
//! so before that parent can be reaped. The guard is forked on a thread of
//! its own ([`crate::guard`]) so that it is not the main thread's child.
//! What breaks it: a process forked by a thread other than the main one
//! and the guard's (redlock forks none), whose descendants would not show
//! in the main thread's children; and the check made on another thread
//! (which sees only its own children), so it runs only on the main thread.
//! Anything else only makes the check fail, and the scan runs.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind};

use crate::clock::BootInstant;
use crate::error::Error;
use crate::exit;
use crate::guard::{self, Guard};
use crate::procs;

/// A running command in its own process group.
pub struct Child {
    /// The command's pid, which is also its group's id.
    pgid: i32,
    /// The terminal handed to the child's group, to take back at the end.
    tty: Option<i32>,
    /// Set once the child has been reaped: its group id may then be reused.
    reaped: bool,
    /// Its exit status, once reaped.
    status: Option<ExitStatus>,
    /// SIGCHLD, to reap adopted orphans, notice job-control stops and a
    /// dead guard while the child runs (None when it cannot be caught:
    /// orphans are then reaped when the child exits).
    sigchld: Option<Signal>,
    /// The dead-man's switch; ended once the child exited.
    guard: Option<Guard>,
    /// The instant the guard kills at (None: never).
    kill_at: Option<BootInstant>,
    /// Set when a guard killed the job at its deadline.
    fired: bool,
}

/// Makes redlock immune to the terminal's job-control stops for output and
/// input (see the module documentation); the command gets them back.
pub fn ignore_terminal_stops() {
    // SAFETY: setting two signals of this process to SIG_IGN.
    unsafe {
        libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        libc::signal(libc::SIGTTIN, libc::SIG_IGN);
    }
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

/// Environment variables of redlock's that the command never sees: the
/// servers' password: the command's environment gets no secret of
/// redlock's. A command that calls redlock itself reads the password
/// from `--password-file` instead.
const WITHHELD: [&str; 1] = ["REDLOCK_PASSWORD"];

/// Starts `argv` with extra environment variables under a guard that kills
/// it at `kill_at` (None: only if redlock dies); stdio and the terminal are
/// inherited. A command that is not found is exit 127, one that cannot be
/// executed 126, as a shell reports them. Without a guard the command is
/// not started at all. The guard is forked on `forker` when one was started
/// ahead ([`guard::Forker`]).
pub fn spawn(
    argv: &[String],
    env: &[(&str, &str)],
    kill_at: Option<BootInstant>,
    forker: Option<guard::Forker>,
) -> Result<Child, Error> {
    let program = argv.first().ok_or_else(|| Error::Usage("run: no command given".into()))?;
    let tty = foreground_tty();
    // SAFETY: getpid has no preconditions; prctl sets a flag of this
    // process. Best effort: without it (Linux before 3.4) orphans go to
    // pid 1 and escape, as with any supervisor.
    let parent = unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::getpid()
    };
    let sigchld = tokio::signal::unix::signal(SignalKind::child()).ok();
    // The guard first: armed before the command exists, so that no instant
    // of the command's life is unguarded.
    let guard = Guard::start(0, kill_at, forker).map_err(|e| Error::CannotRun {
        code: exit::CANNOT_EXECUTE,
        message: format!("cannot start the guard process for {program}: {e}"),
    })?;
    match Exec::new(argv, env).and_then(|exec| exec.start(tty, parent)) {
        Ok(pgid) => {
            guard.send(pgid, kill_at);
            Ok(Child {
                pgid,
                tty,
                reaped: false,
                status: None,
                sigchld,
                guard: Some(guard),
                kill_at,
                fired: false,
            })
        }
        Err(e) => {
            guard.disarm();
            if let Some(fd) = tty {
                // SAFETY: taking our own terminal back; see set_foreground.
                unsafe { set_foreground(fd, libc::getpgrp()) };
            }
            let code = match e.kind() {
                io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            };
            let what = if code == exit::NOT_FOUND { "command not found" } else { "cannot execute" };
            Err(Error::CannotRun { code, message: format!("{what}: {program}: {e}") })
        }
    }
}

/// The command as `execvpe` takes it, built before the clone (the child
/// may not allocate): its name, its arguments and its environment, which is
/// redlock's without [`WITHHELD`] and with the run's variables.
struct Exec {
    program: CString,
    /// Own the strings `argv` and `envp` point into.
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl Exec {
    fn new(argv: &[String], env: &[(&str, &str)]) -> io::Result<Exec> {
        let nul = |e: std::ffi::NulError| io::Error::new(io::ErrorKind::InvalidInput, e);
        let args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(nul)?;
        // One value per name, the last one given, as std's `Command` has it.
        let mut map: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = std::env::vars_os()
            .map(|(name, value)| (name.as_bytes().to_vec(), value.as_bytes().to_vec()))
            .collect();
        for name in WITHHELD {
            map.remove(name.as_bytes());
        }
        for (name, value) in env {
            map.insert(name.as_bytes().to_vec(), value.as_bytes().to_vec());
        }
        let vars: Vec<CString> = map
            .into_iter()
            .map(|(name, value)| CString::new([&name[..], b"=", &value[..]].concat()))
            .collect::<Result<_, _>>()
            .map_err(nul)?;
        let program = args.first().cloned().ok_or_else(|| io::Error::other("no command"))?;
        let pointers = |v: &[CString]| {
            v.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
        };
        let (argv, envp) = (pointers(&args), pointers(&vars));
        let mut strings = args;
        strings.extend(vars);
        Ok(Exec { program, _strings: strings, argv, envp })
    }

    /// Starts the command: see [`start_child`]. Returns its pid.
    ///
    /// Why not `fork`: a fork copies redlock's page tables and makes
    /// every page it writes afterwards a copy-on-write fault, a few hundred
    /// microseconds of every `run` on the way to the command.
    /// `clone(CLONE_VM | CLONE_VFORK)` shares the memory instead, as
    /// glibc's `posix_spawn` does; `posix_spawn` itself cannot set the
    /// parent-death signal or make the child the terminal's foreground.
    /// The child runs on a stack of its own in redlock's memory while the
    /// calling thread waits (the other threads run on), until it has
    /// replaced itself with the command (`execve`) or exited.
    fn start(self, tty: Option<i32>, parent: i32) -> io::Result<i32> {
        let stack = Stack::new(self.argv.len())?;
        let mut args = ChildArgs {
            program: self.program.as_ptr(),
            argv: self.argv.as_ptr(),
            envp: self.envp.as_ptr(),
            tty: tty.unwrap_or(-1),
            parent,
            errno: 0,
        };
        // SAFETY: all signals are blocked around the clone, so that no
        // handler of redlock's runs in the child, which shares redlock's
        // memory (it resets them before it unblocks); `stack` and `args`
        // outlive the child's use of them, since CLONE_VFORK returns only
        // once the child has exec'd or exited.
        let pid = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
            let pid = libc::clone(start_child, stack.top(), flags, (&raw mut args).cast());
            let error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid == -1 {
                return Err(error);
            }
            pid
        };
        if args.errno != 0 {
            // It exited without running the command: reap it, and say why.
            // SAFETY: waitpid on our own child, which has exited.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            return Err(io::Error::from_raw_os_error(args.errno));
        }
        Ok(pid)
    }
}

/// The child's stack, mapped for the clone and unmapped after it, with an
/// inaccessible page below it: a child that outgrew it would otherwise
/// write over redlock's own memory, which it shares. Its size: the few
/// calls before `execve`, and `execvpe`'s, which builds each candidate path
/// on the stack and, for a script without `#!`, a copy of the argument
/// vector for `/bin/sh` (8 bytes an argument, without limit: glibc's
/// `posix_spawn` sizes its child's stack the same way). What breaks it: a
/// C library whose `execvpe` needs more than that; the child then faults on
/// the guard page before the command runs, and the run reports the command
/// killed by SIGSEGV (139), with redlock's memory untouched.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    fn new(args: usize) -> io::Result<Stack> {
        const PAGE: usize = 4096;
        let len = (64 * 1024 + (args + 2) * std::mem::size_of::<usize>()).div_ceil(PAGE) * PAGE;
        let len = len + PAGE;
        // SAFETY: a fresh private anonymous mapping, owned by the Stack;
        // its lowest page made inaccessible as the guard.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = Stack { base, len };
            if libc::mprotect(base, PAGE, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// The top, where a stack that grows down starts (page-aligned).
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping, which is not read.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in Stack::new, no longer used.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// What the child of [`Exec::start`] reads, and where it says why it
/// could not run the command.
#[repr(C)]
struct ChildArgs {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    tty: i32,
    parent: i32,
    /// Set by the child when it exits instead of running the command.
    errno: i32,
}

/// The child of [`Exec::start`], in redlock's memory, before `execve`:
/// no handler of redlock's may run (its signal dispositions go back to
/// the defaults first, while every signal is still blocked), then the
/// command's process group, the terminal, the dispositions redlock
/// changed (SIGTTOU, SIGTTIN: see [`ignore_terminal_stops`]; SIGPIPE, which
/// the Rust runtime ignores), the parent-death signal, an empty signal
/// mask, and the command. Only async-signal-safe calls; it allocates
/// nothing and writes no memory of redlock's but `errno` in its
/// [`ChildArgs`] (and the calling thread's C `errno`, which waits).
extern "C" fn start_child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the ChildArgs of Exec::start, alive until we exec or
    // exit; the calls are plain system calls on this new process.
    unsafe {
        let args = &mut *arg.cast::<ChildArgs>();
        let fail = |args: &mut ChildArgs, errno: i32| -> ! {
            args.errno = if errno == 0 { libc::ECHILD } else { errno };
            libc::_exit(127)
        };
        let errno = || *libc::__errno_location();
        let mut action: libc::sigaction = std::mem::zeroed();
        for signal in 1..=libc::SIGRTMAX() {
            if libc::sigaction(signal, std::ptr::null(), &mut action) == 0
                && action.sa_sigaction != libc::SIG_IGN
                && action.sa_sigaction != libc::SIG_DFL
            {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        for signal in [libc::SIGTTOU, libc::SIGTTIN, libc::SIGPIPE] {
            libc::signal(signal, libc::SIG_DFL);
        }
        if libc::setpgid(0, 0) != 0 {
            fail(args, errno());
        }
        if args.tty >= 0 {
            set_foreground(args.tty, libc::getpid());
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            fail(args, errno());
        }
        // redlock died before prctl took effect (killed while it waited
        // for this child): no death signal will ever come, so do not start
        // the command at all.
        if libc::getppid() != args.parent {
            fail(args, libc::ESRCH);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execvpe(args.program, args.argv, args.envp);
        fail(args, errno())
    }
}

impl Child {
    /// The child's pid (= its process group id).
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// Sends `signal` to the child's whole process group (a forwarded
    /// signal: the command's group only, exactly once).
    pub fn signal(&self, signal: i32) {
        if !self.reaped {
            // SAFETY: kill(2) on our own child's process group. ESRCH (group
            // already gone) is fine to ignore.
            unsafe { libc::kill(-self.pgid, signal) };
        }
    }

    /// Stops the whole job with `signal` at once: the command's group and
    /// every other running process descended from redlock (daemons that
    /// left the group, adopted or not yet), so that all of it ends inside
    /// the same kill margin.
    pub fn stop(&self, signal: i32) {
        let (group, others) = self.job();
        if group || !self.reaped {
            // SAFETY: kill(2) on the command's group: before the command
            // was reaped its pid reserves the id; after, the running members
            // found just now do.
            unsafe { libc::kill(-self.pgid, signal) };
        }
        for pid in others {
            // SAFETY: kill(2) on a running descendant found just now.
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// What runs of the job: whether the command's group has a running
    /// member, and the running descendants of redlock outside that group
    /// (but the guard). Zombies do not count: they run nothing, and under a
    /// pid 1 that reaps late (a container) a group can hold zombies for long.
    fn job(&self) -> (bool, Vec<i32>) {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let guard = self.guard.as_ref().map(Guard::pid);
        let mut procs = Vec::new();
        procs::scan(|p| procs.push(p));
        let group = procs.iter().any(|p| p.running && p.pgrp == self.pgid);
        // Descendants of redlock but the guard, generation by generation.
        let mut tree = vec![me];
        let mut at = 0;
        while let Some(&parent) = tree.get(at) {
            let children = procs.iter().filter(|p| p.ppid == parent && Some(p.pid) != guard);
            tree.extend(children.map(|p| p.pid));
            at += 1;
        }
        let others = procs
            .iter()
            .filter(|p| p.running && p.pgrp != self.pgid && p.pid != me && tree.contains(&p.pid))
            .map(|p| p.pid)
            .collect();
        (group, others)
    }

    /// The pids that the orphan reaper and [`Child::stop`] leave alone: the
    /// command (reaped by [`Child::try_wait`]) and the guard.
    fn spare(&self) -> [i32; 2] {
        [self.pgid, self.guard.as_ref().map_or(self.pgid, Guard::pid)]
    }

    /// Moves the guard's deadline: it kills the job at `kill_at` unless it
    /// hears again (None: never).
    pub fn set_kill_at(&mut self, kill_at: Option<BootInstant>) {
        self.kill_at = kill_at;
        if let Some(guard) = &self.guard {
            guard.send(self.pgid, kill_at);
        }
    }

    /// True when the guard killed the job at its deadline (redlock was
    /// frozen or stopped past the lock's validity).
    pub fn guard_fired(&mut self) -> bool {
        self.check_guard();
        self.fired
    }

    /// True when the command has already ended with an exit code of its
    /// own, not by a signal (reaped now if so; [`Child::wait`] still
    /// returns its status). Such a command ended before anyone stopped it:
    /// had it still run when redlock's signal or the guard's SIGKILL came,
    /// it would have died of it (or, trapping SIGTERM, after it).
    pub fn exited_by_itself(&mut self) -> bool {
        matches!(self.try_wait(), Ok(Some(status)) if status.code().is_some())
    }

    /// The command's exit status, reaped now, if it has exited; the same
    /// status again once reaped.
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            let mut status = 0;
            // SAFETY: waitpid on our own child, which only this code reaps
            // (`reap_orphans` spares it).
            match unsafe { libc::waitpid(self.pgid, &mut status, libc::WNOHANG) } {
                0 => {}
                -1 if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                -1 => return Err(io::Error::last_os_error()),
                _ => {
                    self.status = Some(ExitStatus::from_raw(status));
                    // Its group id may now be reused.
                    self.reaped = true;
                }
            }
        }
        Ok(self.status)
    }

    /// Waits for the child to exit and takes the terminal back; meanwhile
    /// reaps the orphans that exit, follows job-control stops, and replaces
    /// a guard that died. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = loop {
            if let Some(status) = self.try_wait()? {
                break status;
            }
            // Every change of a child's state comes with a SIGCHLD, and
            // the stream keeps one that came since the look above. Without
            // it (it could not be caught), look again every 10 ms.
            match self.sigchld.as_mut() {
                Some(sigchld) => {
                    if sigchld.recv().await.is_none() {
                        self.sigchld = None;
                    }
                }
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            }
            reap_orphans(&self.spare());
            self.check_guard();
            self.follow_job_control();
        };
        self.reaped = true;
        if let Some(fd) = self.tty.take() {
            // Only what redlock handed out goes back: after `bg` the shell
            // owns the terminal, and giving it to redlock's background group
            // would make the shell's next read fail (and the shell exit).
            // SAFETY: see set_foreground; tcgetpgrp only reads.
            unsafe {
                if libc::tcgetpgrp(fd) == self.pgid {
                    set_foreground(fd, libc::getpgrp());
                }
            }
        }
        Ok(status)
    }

    /// Ends the guard once nothing of the job runs any more: call after
    /// [`Child::wait`] and [`Child::stop_leftovers`], so that the clean-up
    /// of leftovers is guarded too (a redlock frozen during it still has
    /// them killed at the deadline). The guard is sent SIGKILL here and
    /// reaped by [`guard::Ended::reap`], which the caller calls once it has
    /// released the lock, so that the guard's exit overlaps the release.
    pub fn disarm_guard(&mut self) -> Option<guard::Ended> {
        self.guard.take().map(Guard::end)
    }

    /// Notices a guard that exited: one that fired is recorded; one that
    /// died otherwise (killed, out of memory) is replaced, so that the
    /// command is never left without a dead-man's switch.
    fn check_guard(&mut self) {
        let Some(status) = self.guard.as_ref().and_then(Guard::exited) else {
            return;
        };
        self.guard = None;
        if guard::fired(status) {
            self.fired = true;
            return;
        }
        // If no new guard can start, the command stays guarded by redlock
        // itself (and the parent-death signal) for as long as redlock runs.
        self.guard = Guard::start(self.pgid, self.kill_at, None).ok();
    }

    /// When job control stopped the command (Ctrl-Z, or terminal I/O in
    /// the background), stops redlock too and, once continued, continues
    /// the command: see "Job control" in the module documentation.
    fn follow_job_control(&mut self) {
        // SAFETY: waitid with WSTOPPED|WNOHANG on our own child only
        // consumes a stop report (never an exit, which try_wait reaps); the
        // zeroed siginfo_t is a valid out-parameter.
        let stop = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WSTOPPED | libc::WNOHANG;
            let id = libc::id_t::try_from(self.pgid).unwrap_or(0);
            let found = libc::waitid(libc::P_PID, id, &mut info, flags) == 0
                && info.si_pid() == self.pgid
                && info.si_code == libc::CLD_STOPPED;
            found.then(|| info.si_status())
        };
        let Some(signal) = stop else {
            return;
        };
        if ![libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU].contains(&signal) {
            return;
        }
        // The whole of redlock's group stops, as the terminal would have
        // stopped it had it been in the foreground: a shell that runs
        // redlock inside a wrapper (`bash -c`, make, an outer redlock) sees
        // its job stop only when the wrapper stops too. Once continued, the
        // terminal goes back to the command only if the shell made us the
        // foreground job (`fg`), and the command is continued.
        // SAFETY: kill(0) stops this process's group (default SIGTSTP
        // disposition) until a SIGCONT; the kernel discards it in an
        // orphaned group. tcgetpgrp only reads.
        unsafe {
            libc::kill(0, libc::SIGTSTP);
            if let Some(fd) = self.tty
                && libc::tcgetpgrp(fd) == libc::getpgrp()
            {
                set_foreground(fd, self.pgid);
            }
        }
        self.signal(libc::SIGCONT);
    }

    /// What the command left running after it exited (see [`Child::job`]),
    /// once the orphans that already exited are reaped.
    fn leftovers(&self) -> (bool, Vec<i32>) {
        reap_orphans(&self.spare());
        if self.reaped && nothing_left(self.pgid) {
            return (false, Vec::new());
        }
        self.job()
    }

    /// Stops whatever the child left running, in its group or adopted:
    /// SIGTERM, then SIGKILL after `grace` (at once when `grace` is zero),
    /// following the orphans of what it stops. Returns true when something
    /// was left. Such processes would otherwise go on without the lock.
    /// Call only after [`Child::wait`] returned: it reaps every exited
    /// child, which must not take the command's status before [`Child::wait`] did.
    pub async fn stop_leftovers(&self, grace: Duration) -> bool {
        let (mut group, mut orphans) = self.leftovers();
        if !group && orphans.is_empty() {
            return false;
        }
        let start = std::time::Instant::now();
        let mut termed = false;
        while group || !orphans.is_empty() {
            let kill = start.elapsed() >= grace;
            if start.elapsed() > grace + KILL_WAIT {
                break;
            }
            if kill || !termed {
                self.stop(if kill { libc::SIGKILL } else { libc::SIGTERM });
                termed = true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            (group, orphans) = self.leftovers();
        }
        true
    }
}

/// True when nothing of the job can be running: see "Nothing left" in the
/// module documentation. Call only once the command was reaped. False
/// means "look" ([`Child::job`]), never "something is left".
fn nothing_left(pgid: i32) -> bool {
    // SAFETY: getpid, the gettid system call (glibc's gettid() wrapper is
    // 2.30's, above the portable build's 2.28 floor), kill with signal 0
    // (which sends nothing) and waitid with WNOHANG|WNOWAIT (which consumes
    // nothing) only read state; the zeroed siginfo_t is a valid out-parameter.
    unsafe {
        let errno = || *libc::__errno_location();
        // A thread id is a pid_t: the system call's long holds it whole.
        #[allow(clippy::cast_possible_truncation)]
        let leader = libc::syscall(libc::SYS_gettid) as libc::pid_t == libc::getpid();
        let group_gone = libc::kill(-pgid, 0) == -1 && errno() == libc::ESRCH;
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags =
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL | libc::__WNOTHREAD;
        leader
            && group_gone
            && libc::waitid(libc::P_ALL, 0, &mut info, flags) == -1
            && errno() == libc::ECHILD
    }
}

/// How long [`Child::stop_leftovers`] keeps killing after the grace.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// Reaps the orphans redlock adopted that have exited, leaving the pids in
/// `spare` alone (the command, reaped by [`Child::try_wait`]; the guard). Returns true
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
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(255 << 8)), 255);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 128 + 15);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
    }
}
