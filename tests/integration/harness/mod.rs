//! The shared test harness: real Redis servers ([`redis`]) and a builder
//! that runs the real `redlock` binary and, on any failed expectation,
//! panics with the command, its exit status, stdout and stderr.

#![allow(dead_code, unused_imports)]

pub mod burst;
pub mod cluster;
pub mod ledger;
pub mod netns;
pub mod proxy;
pub mod pty;
pub mod redis;
pub mod sentinel;
pub mod tls;

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use self::redis::{Fleet, RedisServer};

/// A generous bound that only catches a hang.
pub const HANG: Duration = Duration::from_secs(60);

/// The repository's root: the README, `docs/`, `man/` and the sources.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `redlock` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_redlock")
}

/// The text of `path`, or an empty string while it does not exist.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A key unique to this test run and call site.
pub fn unique_key(name: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("test-{name}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// The name under which the servers store the lock `key`: tests that read
/// or plant a lock directly on a server go through this one function, so
/// that they follow redlock's key layout (its own namespace, the key in a
/// Cluster hash tag with `%`, `{` and `}` percent-encoded). Written here
/// from the README, not taken from the library, so that a change of layout
/// shows up as a failing test.
pub fn lock_key(key: &str) -> String {
    let escaped = key.replace('%', "%25").replace('{', "%7B").replace('}', "%7D");
    format!("redlock:{{{escaped}}}")
}

/// The name under which the servers store the fencing counter of the lock
/// `key` (see [`lock_key`]).
pub fn fence_key(key: &str) -> String {
    format!("{}:fence", lock_key(key))
}

/// The wait queue's sorted sets of the lock `key` (order, deadlines), as
/// the README names them (see [`lock_key`]).
pub fn queue_keys(key: &str) -> [String; 2] {
    let lock = lock_key(key);
    [format!("{lock}:queue"), format!("{lock}:queue-deadlines")]
}

/// Overwrites the lock `key` with another client's value on `servers`
/// (a majority, for the lock to be lost), then waits until the process
/// `child` is gone, at most 10 s: how long it outlived the takeover.
pub fn take_over(servers: &[RedisServer], key: &str, child: i32) -> Duration {
    let taken = Instant::now();
    for s in servers {
        let _: String = s.cmd(&["SET", &lock_key(key), "someone-else", "PX", "60000"]);
    }
    while process_alive(child) {
        assert!(taken.elapsed() < Duration::from_secs(10), "child {child} still runs");
        std::thread::sleep(Duration::from_millis(2));
    }
    taken.elapsed()
}

/// Waits until `path` exists (the event a test synchronises on), at most [`HANG`].
pub fn wait_for_file(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < HANG, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The pid a command wrote to `path` (`echo $$ > path`), once the file
/// exists and holds a whole number, at most [`HANG`].
pub fn pid_in(path: &Path) -> i32 {
    wait_for_file(path);
    let start = Instant::now();
    loop {
        if let Ok(pid) = std::fs::read_to_string(path).unwrap_or_default().trim().parse() {
            return pid;
        }
        assert!(start.elapsed() < HANG, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// True while process `pid` exists and is not a zombie.
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until process `pid` is gone, at most `limit`; false if it is not.
pub fn wait_gone(pid: i32, limit: Duration) -> bool {
    let start = Instant::now();
    while process_alive(pid) {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Sends `signal` to `pid` (negative: a process group).
pub fn send_signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) on a process this test started.
    unsafe { libc::kill(pid, signal) };
}

/// Keeps the caller's configuration away from `cmd` (redlock, or a shell
/// that runs it): no `REDLOCK_*` variable of the caller's, no
/// configuration file of the developer's or the machine's, and no zone of
/// theirs.
///
/// And `REDLOCK_TRUST_RESTARTS=1`: every test starts its servers afresh,
/// and a server up for less than `--max-ttl` (plus 1 s) may have lost
/// a holder's key in a restart, so by default it gets no vote for a
/// minute. The tests of that rule (`restart`, the campaign) take it away
/// ([`Redlock::distrust_restarts`]).
pub fn isolate(cmd: &mut Command) -> &mut Command {
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("REDLOCK_") {
            cmd.env_remove(var);
        }
    }
    // The CI job redlock records in its tokens: a test run in CI must
    // read as one on a laptop.
    for var in ["GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID", "CI_JOB_URL"] {
        cmd.env_remove(var);
    }
    // The zone `--cron` and day periods read: UTC, never the caller's
    // `CRON_TZ`, `TZ` or the machine's /etc/localtime (a copied file is
    // refused); a test of another zone says it (`--tz`, `.env("TZ", ..)`).
    cmd.env_remove("CRON_TZ").env("TZ", "UTC");
    cmd.env("REDLOCK_CONFIG", "/dev/null").env("REDLOCK_TRUST_RESTARTS", "1")
}

/// A `redlock` invocation being built.
pub struct Redlock {
    cmd: Command,
    shown: Vec<String>,
}

impl Redlock {
    /// `redlock` with `--servers` set to `servers` (through the environment,
    /// as a crontab would), no inherited redlock variables, and `-c`
    /// commands run by `/bin/sh` whatever the developer's `$SHELL` is (bash
    /// execs a script's last command, dash does not: which process is the
    /// child must not depend on the machine).
    pub fn new(servers: &str) -> Redlock {
        let mut cmd = Command::new(bin());
        isolate(&mut cmd);
        cmd.env("SHELL", "/bin/sh");
        cmd.env("REDLOCK_SERVERS", servers);
        Redlock { cmd, shown: vec![format!("REDLOCK_SERVERS={servers} redlock")] }
    }

    /// `redlock` against a fleet.
    pub fn on(fleet: &Fleet) -> Redlock {
        Redlock::new(&fleet.urls())
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Redlock
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self.shown.push(a.as_ref().to_string_lossy().into_owned());
            self.cmd.arg(a);
        }
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Redlock {
        self.shown.insert(0, format!("{key}={value}"));
        self.cmd.env(key, value);
        self
    }

    /// Under the wall clock of libfaketime's timestamp file `stamp`
    /// ([`redis::faketime`]).
    pub fn faked(self, stamp: &std::path::Path) -> Redlock {
        redis::faketime(stamp).iter().fold(self, |r, (k, v)| r.env(k, v))
    }

    /// Treats restarted servers as redlock does by default: no vote until
    /// `--max-ttl` plus 1 s have passed since they started ([`isolate`]).
    pub fn distrust_restarts(mut self) -> Redlock {
        self.shown.insert(0, "REDLOCK_TRUST_RESTARTS=".to_owned());
        self.cmd.env_remove("REDLOCK_TRUST_RESTARTS");
        self
    }

    /// `acquire -n --json --ttl TTL --key KEY`, which must succeed: the
    /// token and the fence.
    pub fn acquire(self, key: &str, ttl: &str) -> (String, u64) {
        let out = self.args(["acquire", "-n", "--json", "--ttl", ttl, "--key", key]).run();
        out.expect(0);
        let json = out.json();
        let fence = json["fence"].as_u64().unwrap_or_else(|| out.fail("no fence"));
        (json["token"].as_str().unwrap_or_else(|| out.fail("no token")).to_owned(), fence)
    }

    /// Puts redlock in a process group of its own, so a test can signal
    /// the group as a terminal's Ctrl-C would.
    pub fn own_group(mut self) -> Redlock {
        use std::os::unix::process::CommandExt;
        self.cmd.process_group(0);
        self
    }

    /// Starts the process with piped stdout/stderr.
    pub fn spawn(mut self) -> Running {
        self.cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = self.cmd.spawn().expect("spawn redlock");
        Running { child, shown: self.shown.join(" "), started: Instant::now() }
    }

    /// Runs to completion (at most [`HANG`]).
    pub fn run(self) -> Output {
        self.spawn().wait()
    }
}

/// A running `redlock`.
pub struct Running {
    /// The process.
    pub child: Child,
    shown: String,
    started: Instant,
}

impl Running {
    /// redlock's pid.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits i32")
    }

    /// Waits for the exit (at most [`HANG`], then kills and panics).
    pub fn wait(mut self) -> Output {
        let mut out_pipe = self.child.stdout.take().expect("stdout piped");
        let mut err_pipe = self.child.stderr.take().expect("stderr piped");
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out_pipe.read_to_string(&mut s);
            s
        });
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err_pipe.read_to_string(&mut s);
            s
        });
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for redlock") {
                break status;
            }
            if self.started.elapsed() > HANG {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("hang: `{}` still running after {HANG:?}", self.shown);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        Output {
            status,
            stdout: out.join().expect("stdout reader"),
            stderr: err.join().expect("stderr reader"),
            elapsed,
            shown: std::mem::take(&mut self.shown),
        }
    }
}

/// A test that panics before it waits for a `redlock` it started leaves no
/// process behind: one left waiting (forever, by default) on servers the
/// test has stopped would retry for as long as the machine runs.
impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A finished `redlock`.
pub struct Output {
    /// Exit status.
    pub status: ExitStatus,
    /// Everything on stdout.
    pub stdout: String,
    /// Everything on stderr.
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
    shown: String,
}

impl Output {
    /// The exit code (panics when killed by a signal).
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or_else(|| self.fail("was killed by a signal"))
    }

    /// Panics with everything known about the run.
    pub fn fail(&self, why: &str) -> ! {
        panic!(
            "`{}` {why}\nstatus: {}\nelapsed: {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.shown, self.status, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Asserts the exit code.
    pub fn expect(&self, code: i32) -> &Output {
        if self.status.code() != Some(code) {
            self.fail(&format!("should exit {code}"));
        }
        self
    }

    /// Asserts that stderr contains `text`.
    pub fn stderr_has(&self, text: &str) -> &Output {
        if !self.stderr.contains(text) {
            self.fail(&format!("stderr should contain {text:?}"));
        }
        self
    }

    /// Asserts that stderr does not contain `text`.
    pub fn stderr_lacks(&self, text: &str) -> &Output {
        if self.stderr.contains(text) {
            self.fail(&format!("stderr should not contain {text:?}"));
        }
        self
    }

    /// Asserts that the run took less than `limit`.
    pub fn within(&self, limit: Duration) -> &Output {
        if self.elapsed >= limit {
            self.fail(&format!("should finish within {limit:?}"));
        }
        self
    }

    /// stdout without its trailing newline.
    pub fn line(&self) -> &str {
        self.stdout.trim_end()
    }

    /// stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| self.fail(&format!("should print JSON ({e})")))
    }
}
