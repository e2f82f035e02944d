//! A gated burst: many `redlock` processes released at the same instant, as
//! cron releases a fleet at the top of the minute, and what each one did.
//!
//! Every process is a shell that opens a FIFO (whose other end the harness
//! holds open), says it is ready, and blocks reading it; closing the
//! harness's end gives every reader EOF at once, and each shell `exec`s
//! redlock. The command a winner runs writes its `$REDLOCK_TOKEN` to a
//! ledger and then holds the lock until every other process has decided
//! (exited, or shown up in the ledger), so a late process can never find
//! the lock free merely because the tick's command was quick: one line in
//! the ledger means one run, whatever the timing.
//!
//! Used by the burst tests and by `benches/burst.rs` (through `#[path]`).

#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a tick may take before the harness calls it a hang.
const TICK_HANG: Duration = Duration::from_secs(120);

/// One process's part in a tick.
#[derive(Debug)]
pub struct Part {
    /// redlock's pid.
    pub pid: u32,
    /// Its exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// True when its command ran (its token is in the ledger).
    pub ran: bool,
    /// From the gate to the decision: the time of its last
    /// `acquire_attempt` event when it logs JSON (`--log-format json`),
    /// otherwise the command's start for the one that ran and the exit for
    /// the others.
    pub decided: Duration,
    /// From the gate to the exit.
    pub exited: Duration,
    /// Everything it wrote on stderr.
    pub stderr: String,
}

/// What a tick did.
#[derive(Debug)]
pub struct Tick {
    /// One entry per process.
    pub parts: Vec<Part>,
    /// Lines in the ledger: commands run.
    pub runs: usize,
}

impl Tick {
    /// Processes that exited with `code`.
    pub fn count(&self, code: i32) -> usize {
        self.parts.iter().filter(|p| p.code == Some(code)).count()
    }

    /// The slowest decision.
    pub fn slowest(&self) -> Duration {
        self.parts.iter().map(|p| p.decided).max().unwrap_or_default()
    }

    /// Exit codes and how many processes ended with each, for messages.
    pub fn codes(&self) -> Vec<(Option<i32>, usize)> {
        let mut codes: Vec<(Option<i32>, usize)> = Vec::new();
        for p in &self.parts {
            match codes.iter_mut().find(|(c, _)| *c == p.code) {
                Some((_, n)) => *n += 1,
                None => codes.push((p.code, 1)),
            }
        }
        codes.sort();
        codes
    }

    /// A summary for assertion messages: codes, runs, and the stderr of the
    /// first processes that did not exit 0.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} processes, {} runs, exit codes {:?}, slowest decision {:?}",
            self.parts.len(),
            self.runs,
            self.codes(),
            self.slowest()
        );
        for p in self.parts.iter().filter(|p| p.code != Some(0)).take(3) {
            s.push_str(&format!("\n--- pid {} exit {:?}:\n{}", p.pid, p.code, p.stderr));
        }
        s
    }
}

/// Creates a FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path has no NUL");
    // SAFETY: mkfifo(3) on a NUL-terminated path we own.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
}

/// A gate that many processes wait behind and one close releases.
pub struct Gate {
    /// The FIFO the shells read.
    fifo: PathBuf,
    /// Where each shell says it is waiting.
    ready: PathBuf,
    /// The harness's end; dropping it is the release.
    end: Option<File>,
    /// Processes started behind the gate.
    count: usize,
}

impl Gate {
    /// A closed gate in `dir`.
    pub fn new(dir: &Path) -> Gate {
        let fifo = dir.join("gate");
        let ready = dir.join("ready");
        std::fs::create_dir(&ready).expect("ready dir");
        mkfifo(&fifo);
        // Read and write: the open does not wait for a writer, and while this
        // end is open the shells' reads block; closing it is the release.
        let end =
            std::fs::OpenOptions::new().read(true).write(true).open(&fifo).expect("open the gate");
        Gate { fifo, ready, end: Some(end), count: 0 }
    }

    /// Starts `program ARGS` behind the gate, stderr to `stderr`, stdout
    /// discarded, with `envs` and no inherited redlock variables.
    pub fn spawn(
        &mut self,
        program: &str,
        args: &[&str],
        envs: &[(&str, &str)],
        stderr: File,
    ) -> Child {
        let wrapper =
            r#"g=$1; r=$2; shift 2; exec 3<"$g"; : > "$r"; read x <&3; exec 3<&-; exec "$@""#;
        let mut cmd = Command::new("sh");
        // No REDLOCK_* of the caller's, and no configuration file.
        for (var, _) in std::env::vars_os() {
            if var.to_string_lossy().starts_with("REDLOCK_") {
                cmd.env_remove(var);
            }
        }
        cmd.env("REDLOCK_CONFIG", "/dev/null");
        // Servers started a moment ago: trusted (see `isolate`).
        cmd.env("REDLOCK_TRUST_RESTARTS", "1");
        cmd.args(["-c", wrapper, "sh"])
            .arg(&self.fifo)
            .arg(self.ready.join(self.count.to_string()))
            .arg(program)
            .args(args)
            .env_remove("REDLOCK_TOKEN")
            .env_remove("REDLOCK_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        self.count += 1;
        cmd.spawn().expect("spawn a process behind the gate")
    }

    /// Waits until every process started is at the gate (it may not be
    /// blocked in its read yet, but it holds the FIFO open, so it cannot
    /// miss the release).
    pub fn wait_ready(&self) {
        let start = Instant::now();
        while std::fs::read_dir(&self.ready).map_or(0, Iterator::count) < self.count {
            assert!(start.elapsed() < TICK_HANG, "the processes never all reached the gate");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until every process started is at the gate, then
    /// releases them all at once; returns the instant of the release.
    pub fn release(&mut self) -> Instant {
        self.wait_ready();
        let released = Instant::now();
        self.end = None;
        released
    }
}

/// Runs one tick: `n` processes, each `redlock ARGS -- sh -c JOB` with
/// `envs` set, released together. `before_release` runs once every process
/// is blocked at the gate.
pub fn tick(
    redlock: &str,
    n: usize,
    args: &[&str],
    envs: &[(&str, &str)],
    before_release: impl FnOnce(),
) -> Tick {
    let dir = tempfile::tempdir().expect("temp dir for the tick");
    let ledger = dir.path().join("ledger");
    let done = dir.path().join("done");
    let mut gate = Gate::new(dir.path());
    let job = format!(
        "echo \"$REDLOCK_TOKEN\" >> {}; while [ ! -e {} ]; do sleep 0.01; done",
        ledger.display(),
        done.display()
    );
    let mut argv: Vec<&str> = args.to_vec();
    argv.extend(["--", "sh", "-c", &job]);
    let mut children: Vec<Child> = (0..n)
        .map(|i| {
            let err = File::create(dir.path().join(format!("err.{i}"))).expect("stderr file");
            gate.spawn(redlock, &argv, envs, err)
        })
        .collect();
    gate.wait_ready();
    before_release();
    let released = gate.release();
    let released_wall = SystemTime::now();

    let mut exited: Vec<Option<(Option<i32>, Duration)>> = vec![None; n];
    let mut started: Vec<(u32, Duration)> = Vec::new();
    let mut done_made = false;
    // Polling a thousand children every 2ms would take the CPU the
    // contenders need; decision times come from their logs anyway.
    let poll = Duration::from_micros(20 * n as u64)
        .clamp(Duration::from_millis(2), Duration::from_millis(20));
    loop {
        let now = released.elapsed();
        assert!(now < TICK_HANG, "tick still running after {TICK_HANG:?}");
        for (i, child) in children.iter_mut().enumerate() {
            if exited[i].is_none()
                && let Some(status) = child.try_wait().expect("wait for a contender")
            {
                exited[i] = Some((status.code(), released.elapsed()));
            }
        }
        for pid in ledger_pids(&ledger) {
            if !started.iter().any(|(p, _)| *p == pid) {
                started.push((pid, now));
            }
        }
        let gone = exited.iter().filter(|e| e.is_some()).count();
        if gone == n {
            break;
        }
        // Everyone has decided: the runners are the ones still going.
        if !done_made && gone + started.len() >= n {
            File::create(&done).expect("done file");
            done_made = true;
        }
        std::thread::sleep(poll);
    }
    let parts = children
        .iter()
        .zip(exited)
        .enumerate()
        .map(|(i, (child, exit))| {
            let (code, exited) = exit.expect("every contender exited");
            let pid = child.id();
            let run = started.iter().find(|(p, _)| *p == pid);
            let stderr =
                std::fs::read_to_string(dir.path().join(format!("err.{i}"))).unwrap_or_default();
            let logged = last_attempt_at(&stderr)
                .map(|at| at.duration_since(released_wall).unwrap_or_default());
            Part {
                pid,
                code,
                ran: run.is_some(),
                decided: logged.unwrap_or_else(|| run.map_or(exited, |(_, at)| *at)),
                exited,
                stderr,
            }
        })
        .collect();
    Tick { parts, runs: ledger_pids(&ledger).len() }
}

/// When the last `acquire_attempt` event in a JSON log was written.
fn last_attempt_at(stderr: &str) -> Option<SystemTime> {
    stderr
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "acquire_attempt")
        .find_map(|e| e["ts_ms"].as_u64())
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
}

/// The pids in the tokens written to the ledger (`RANDOM.PID.MILLIS.HOST`).
fn ledger_pids(ledger: &Path) -> Vec<u32> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .filter_map(|token| token.split('.').nth(1)?.parse().ok())
        .collect()
}
