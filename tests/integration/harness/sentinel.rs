//! A Sentinel-managed pair for tests: a master and a replica (Debian's
//! `redis-server`, through [`RedisServer`]) and three `redis-sentinel`
//! processes monitoring them, all on free loopback ports, killed on drop.
//! Sentinels are Debian's `/usr/bin/redis-sentinel`, named by absolute path.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::redis::{Build, RedisServer, connections_in};

/// Debian's Sentinel (`apt-get install redis-sentinel`).
pub const SENTINEL_BINARY: &str = "/usr/bin/redis-sentinel";

/// The service name the Sentinels monitor.
pub const SERVICE: &str = "redlock-test";

/// How long the Sentinels take to notice a dead master.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// One `redis-sentinel` process.
pub struct Sentinel {
    /// Its loopback port.
    pub port: u16,
    /// Its `requirepass`, if it has one.
    password: Option<String>,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Sentinel {
    /// Starts a Sentinel monitoring the master at `master_port` with
    /// quorum 2, on a free port (a new one if the port was taken meanwhile).
    pub fn start(master_port: u16) -> Sentinel {
        Sentinel::start_with(master_port, &[])
    }

    /// [`Sentinel::start`] with more lines of configuration (`requirepass
    /// PW` makes the Sentinel want a password, which the harness then
    /// sends too).
    pub fn start_with(master_port: u16, extra: &[&str]) -> Sentinel {
        let password = extra
            .iter()
            .find_map(|l| l.strip_prefix("requirepass "))
            .map(|pw| pw.trim().to_owned());
        assert!(
            Command::new(SENTINEL_BINARY)
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            "{SENTINEL_BINARY} is missing; the Sentinel tests need it: apt-get install -y redis-sentinel"
        );
        let mut dir = tempfile::tempdir().expect("temp dir for redis-sentinel");
        for _ in 0..5 {
            let port = super::redis::free_port();
            assert_ne!(port, 26379);
            let conf = dir.path().join("sentinel.conf");
            // Sentinel rewrites its configuration file: it must be writable.
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile {dir}/sentinel.log\n\
                     sentinel monitor {SERVICE} 127.0.0.1 {master_port} 2\n\
                     sentinel down-after-milliseconds {SERVICE} {down}\n\
                     sentinel failover-timeout {SERVICE} 5000\n\
                     sentinel parallel-syncs {SERVICE} 1\n{extra}",
                    dir = dir.path().display(),
                    down = DOWN_AFTER.as_millis(),
                    extra = extra.iter().map(|l| format!("{l}\n")).collect::<String>(),
                ),
            )
            .expect("write sentinel.conf");
            let mut cmd = Command::new(SENTINEL_BINARY);
            cmd.arg(&conf).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
            // SAFETY: prctl is async-signal-safe and touches only this child.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let mut sentinel = Sentinel {
                port,
                password: password.clone(),
                dir,
                child: Some(cmd.spawn().expect("spawn redis-sentinel")),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Some(Ok(Some(_))) = sentinel.child.as_mut().map(Child::try_wait) {
                    sentinel.child = None;
                    break;
                }
                if pong(port, password.as_deref()) {
                    return sentinel;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if sentinel.child.is_some() {
                panic!("redis-sentinel on {port} not ready; log:\n{}", sentinel.log());
            }
            dir = sentinel.take_dir();
        }
        panic!("redis-sentinel did not start after 5 ports");
    }

    fn take_dir(mut self) -> tempfile::TempDir {
        self.stop();
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"))
    }

    /// The Sentinel's log, for panic messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default()
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Runs a command on the Sentinel.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let auth = self.password.as_ref().map(|pw| format!(":{pw}@")).unwrap_or_default();
        let client =
            redis::Client::open(format!("redis://{auth}{}", self.address())).expect("client");
        let mut conn = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to Sentinel {}: {e}", self.port));
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut conn)
            .unwrap_or_else(|e| panic!("{args:?} on Sentinel {}: {e}\n{}", self.port, self.log()))
    }

    /// The master's port as this Sentinel sees it.
    pub fn master_port(&self) -> Option<u16> {
        let addr: Option<(String, u16)> =
            self.cmd(&["SENTINEL", "get-master-addr-by-name", SERVICE]);
        addr.map(|(_, port)| port)
    }

    /// How many connections the Sentinel has accepted so far (this call's
    /// own included).
    pub fn connections_received(&self) -> u64 {
        connections_in(&self.cmd::<String>(&["INFO", "stats"]))
    }

    /// Kills the Sentinel.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.stop();
    }
}

fn pong(port: u16, password: Option<&str>) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut asked = Vec::new();
    if let Some(pw) = password {
        asked.extend_from_slice(format!("AUTH {pw}\r\n").as_bytes());
    }
    asked.extend_from_slice(b"PING\r\n");
    if stream.write_all(&asked).is_err() {
        return false;
    }
    let mut seen = Vec::new();
    let mut buf = [0u8; 64];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if seen.windows(5).any(|w| w == b"+PONG") {
            return true;
        }
    }
    false
}

/// A master, its replicas and three Sentinels.
pub struct SentinelGroup {
    /// The servers: the master first, then the replica (their roles swap
    /// on a failover; see [`SentinelGroup::master`]).
    pub servers: Vec<RedisServer>,
    /// The Sentinels.
    pub sentinels: Vec<Sentinel>,
}

impl SentinelGroup {
    /// Starts the group and waits until every Sentinel knows the replica
    /// and the other two Sentinels (a failover needs both).
    pub fn start() -> SentinelGroup {
        SentinelGroup::start_with(1, &[])
    }

    /// [`SentinelGroup::start`] with `replicas` replicas and `extra`
    /// arguments for every `redis-server` (e.g. [`super::redis::NO_SCRIPTS`]).
    pub fn start_with(replicas: usize, extra: &[&str]) -> SentinelGroup {
        let master = RedisServer::start_build(Build::Redis7, extra);
        let port = master.port.to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", &port];
        args.extend_from_slice(extra);
        let mut servers = vec![master];
        for _ in 0..replicas {
            servers.push(RedisServer::start_build(Build::Redis7, &args));
        }
        let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(servers[0].port)).collect();
        let group = SentinelGroup { servers, sentinels };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = group.sentinels.iter().all(|s| {
                let replicas: Vec<std::collections::HashMap<String, String>> =
                    s.cmd(&["SENTINEL", "replicas", SERVICE]);
                let others: Vec<redis::Value> = s.cmd(&["SENTINEL", "sentinels", SERVICE]);
                let synced = replicas
                    .iter()
                    .filter(|r| {
                        r.get("flags").is_some_and(|f| f == "slave")
                            && r.get("master-link-status").is_some_and(|l| l == "ok")
                    })
                    .count()
                    == group.servers.len() - 1;
                synced && others.len() == 2
            });
            if ready {
                return group;
            }
            assert!(
                Instant::now() < deadline,
                "the Sentinels never saw the replica and each other; log:\n{}",
                group.sentinels[0].log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/redlock-test`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(Sentinel::address).collect();
        format!("redis+sentinel://{}/{SERVICE}", hosts.join(","))
    }

    /// The server the Sentinels currently name as master.
    pub fn master(&self) -> &RedisServer {
        let port = self.sentinels[0].master_port().expect("the Sentinels know the master");
        self.servers.iter().find(|s| s.port == port).expect("the master is one of ours")
    }

    /// Forces a failover (`SENTINEL FAILOVER`) and waits until every
    /// Sentinel names the other server, and that server says it is master.
    /// Returns the new master's port.
    pub fn failover(&self) -> u16 {
        let old = self.master().port;
        let _: String = self.sentinels[0].cmd(&["SENTINEL", "FAILOVER", SERVICE]);
        self.await_new_master(old)
    }

    /// Waits until every Sentinel names a master other than `old`, and it
    /// says so itself; its port.
    pub fn await_new_master(&self, old: u16) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ports: Vec<Option<u16>> =
                self.sentinels.iter().map(Sentinel::master_port).collect();
            if let Some(Some(new)) = ports.first()
                && *new != old
                && ports.iter().all(|p| *p == Some(*new))
            {
                let server = self.servers.iter().find(|s| s.port == *new).expect("ours");
                let role: Vec<redis::Value> = server.cmd(&["ROLE"]);
                if matches!(role.first(), Some(redis::Value::BulkString(b)) if b == b"master") {
                    return *new;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no failover after 30s ({ports:?}); log:\n{}",
                self.sentinels[0].log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
