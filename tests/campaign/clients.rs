//! The clients: threads that drive the real `redlock` binary at random,
//! each operation recorded at invocation and completion, each critical
//! section by the command itself.
//!
//! A `run`'s command is [`SECTION`], a Perl program (one process, no
//! fork): it opens the client's FIFO, writes `enter FENCE SLOT TICK T` and,
//! when it ends by itself or on SIGTERM, `exit HOW CODE T`, with `T` on
//! `CLOCK_MONOTONIC`. Both stamps are taken inside the section, so the
//! recorded interval lies inside the real one. A command killed outright
//! (SIGKILL: the guard, or a kill after the grace) writes no exit; the
//! reader stamps the end of file it sees instead, a moment after the
//! death.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness;
use crate::harness::netns::Netns;
use crate::history::{Event, Mode, Recorder, now, outcome, wall_ms};

/// The `redlock` the clients run: `REDLOCK_CAMPAIGN_BIN` when set (another
/// build, such as an older commit's, to learn which faults find a hole in
/// it), else the build under test. Only the campaign reads it, never
/// redlock: [`harness::isolate`] takes every `REDLOCK_*` variable away from
/// the clients.
pub fn binary() -> PathBuf {
    std::env::var_os("REDLOCK_CAMPAIGN_BIN").map_or_else(|| harness::bin().into(), PathBuf::from)
}

/// Whether `redlock run` of `bin` takes `flag` (an older build may lack
/// it): its `--help` names it.
pub fn run_takes(bin: &Path, flag: &str) -> bool {
    let help = Command::new(bin).args(["run", "--help"]).output().unwrap();
    String::from_utf8_lossy(&help.stdout).contains(flag)
}

/// Whether `bin` has the subcommand `name` (an older build may lack it).
pub fn takes(bin: &Path, name: &str) -> bool {
    Command::new(bin).args([name, "--help"]).output().is_ok_and(|o| o.status.success())
}

/// The critical section (see the module doc). Arguments: the FIFO, how
/// long to stay (ms), the exit code.
pub const SECTION: &str = r#"
use strict;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
my ($fifo, $ms, $code) = @ARGV;
open(my $fh, '>', $fifo) or die "open $fifo: $!";
$fh->autoflush(1);
sub stamp { printf $fh "%s %.0f\n", $_[0], clock_gettime(CLOCK_MONOTONIC) * 1e9; }
$SIG{TERM} = sub { stamp("exit term -"); exit 143; };
stamp(sprintf("enter %s %s %s", $ENV{REDLOCK_FENCE} // '-', $ENV{REDLOCK_SLOT} // '-',
    $ENV{REDLOCK_TICK} // '-'));
select(undef, undef, undef, $ms / 1000);
stamp("exit normal $code");
exit $code;
"#;

/// What every client shares.
pub struct Ctx {
    /// Where events go.
    pub rec: Recorder,
    /// The campaign's directory (FIFOs, the section program, logs).
    pub dir: PathBuf,
    /// The servers each client is given (`REDLOCK_SERVERS`), by client.
    pub urls: Vec<String>,
    /// Operation numbers.
    next_op: AtomicU64,
    /// Cron burst numbers.
    next_burst: AtomicU64,
    /// Client numbers free for the cron fleet's hosts (each concurrent
    /// operation needs its own FIFO, so its own client number).
    fleet_pool: Mutex<Vec<usize>>,
    /// Set when the faults stop: clients finish their operation and leave.
    pub stop: AtomicBool,
    /// Set once the nemesis has healed everything and returned: no fault
    /// acts on any process any more.
    pub faults_over: AtomicBool,
    /// The `run` processes running now: pid and TTL, for the freeze nemesis.
    pub running: Mutex<Vec<(u32, Duration)>>,
    /// The operation each client runs now, and its process's id.
    pub current: Mutex<BTreeMap<usize, (u64, u32)>>,
    /// Client numbers of the nemesis's own contenders (the stale-tick and
    /// stall families).
    pub nemesis_clients: Vec<usize>,
    /// Hangs seen: operations still running after [`harness::HANG`].
    pub hangs: Mutex<Vec<String>>,
    /// The freezes that hold their key now, for the freeze nemesis
    /// ([`crate::freezer`]).
    pub freezes: Mutex<Vec<crate::freezer::Freezing>>,
    /// The plain servers' URLs (on loopback), for the campaign's own looks
    /// at them ([`crate::stranger`]); a Sentinel group is not among them.
    pub servers: Vec<String>,
    /// Pass `--trust-restarts` (a negative control).
    pub trust_restarts: bool,
    /// The binary the clients run ([`binary`]).
    pub bin: PathBuf,
    /// The network namespaces the clients run in, client `c` in `c % len`
    /// (the net-partition family; empty: the test's own namespace).
    pub netns: Vec<Netns>,
}

impl Ctx {
    /// A context for clients on `urls` (one list per client), running in
    /// `netns` (see [`Ctx::netns`]), recording into `dir/history.jsonl`;
    /// `servers` are the plain servers' own URLs.
    pub fn new(
        dir: &Path,
        (urls, servers): (Vec<String>, Vec<String>),
        trust_restarts: bool,
        fleet_pool: Vec<usize>,
        nemesis_clients: Vec<usize>,
        netns: Vec<Netns>,
    ) -> Arc<Ctx> {
        std::fs::write(dir.join("section.pl"), SECTION).unwrap();
        Arc::new(Ctx {
            rec: Recorder::create(&dir.join("history.jsonl")),
            dir: dir.to_owned(),
            urls,
            next_op: AtomicU64::new(1),
            next_burst: AtomicU64::new(1),
            fleet_pool: Mutex::new(fleet_pool),
            stop: AtomicBool::new(false),
            faults_over: AtomicBool::new(false),
            running: Mutex::new(Vec::new()),
            current: Mutex::new(BTreeMap::new()),
            nemesis_clients,
            hangs: Mutex::new(Vec::new()),
            freezes: Mutex::new(Vec::new()),
            servers,
            trust_restarts,
            bin: binary(),
            netns,
        })
    }

    /// The next operation's number.
    pub fn op(&self) -> u64 {
        self.next_op.fetch_add(1, Ordering::Relaxed)
    }
}

/// One lock operation a client asks for.
#[derive(Clone, Debug)]
pub struct Ask {
    /// `run`, `acquire`, `extend`, `release`.
    pub f: &'static str,
    /// The key.
    pub key: String,
    /// How it is held.
    pub mode: Mode,
    /// `--limit` (1: none).
    pub limit: u32,
    /// `--ttl`.
    pub ttl: Duration,
    /// `--wait` (`None`: `-n`).
    pub wait: Option<Duration>,
    /// `-E` (cron bursts).
    pub busy_code: Option<i32>,
    /// The section's length and exit code (`run`).
    pub section: (Duration, i32),
    /// The cron burst it belongs to.
    pub burst: Option<u64>,
    /// After the faults: it must get in.
    pub after_faults: bool,
    /// The token, for `extend` and `release`.
    pub token: Option<String>,
    /// A cron host: the tick's length.
    pub every: Option<Duration>,
    /// Pass `--once-per` (`every`), or [`CRON_LINE`] when `cron`.
    pub once_per: bool,
    /// Its tick is [`CRON_LINE`]'s (`every` is then a minute).
    pub cron: bool,
    /// SIGKILL redlock this long after its start unless its command has
    /// begun: a waiter that dies while queued.
    pub kill_after: Option<Duration>,
    /// `--jitter` (a `run`), with `-v`, so that its stderr says when it
    /// sleeps (`--jitter: sleeping`): after it computed its tick, before
    /// its first attempt.
    pub jitter: Option<Duration>,
    /// How long it may run before it counts as hung (and is killed).
    pub hang: Duration,
    /// `--node-timeout` (`None`: redlock's default, a tenth of the TTL).
    pub node_timeout: Option<Duration>,
    /// More arguments (of `run`: `--renew-every`, `--kill-after`).
    pub extra: &'static [&'static str],
    /// Recorded as `-n` whatever `wait` says: a negative control, a `-n`
    /// that waits as a build ignoring `-n`'s rule would.
    pub claims_no_wait: bool,
    /// Passes `-v` but is recorded as a host that must skip without a
    /// word: a negative control for the `loud-skip` invariant.
    pub loud: bool,
    /// A `run` of another schedule than the one its key's record names
    /// ([`crate::stranger`]): it must be refused.
    pub other_schedule: bool,
}

impl Ask {
    /// A `run` of `key`.
    pub fn run(key: &str, mode: Mode, ttl: Duration, wait: Option<Duration>) -> Ask {
        Ask {
            f: "run",
            key: key.to_owned(),
            mode,
            limit: if mode == Mode::Limit { 3 } else { 1 },
            ttl,
            wait,
            busy_code: None,
            section: (Duration::from_millis(100), 0),
            burst: None,
            after_faults: false,
            token: None,
            every: None,
            once_per: false,
            cron: false,
            kill_after: None,
            jitter: None,
            hang: harness::HANG,
            node_timeout: None,
            extra: &[],
            claims_no_wait: false,
            loud: false,
            other_schedule: false,
        }
    }
}

/// What an operation's process gave back.
pub struct Done {
    /// Its exit code.
    pub code: Option<i32>,
    /// Its stdout.
    pub stdout: String,
}

/// `redlock` as `client` runs it: its servers and network namespace, the
/// campaign's `--max-ttl`. The campaign's TTLs are at most 2 s: its
/// servers vote 3 s after a restart, as redlock's own rule has it (no
/// trust by default).
pub fn command(ctx: &Ctx, client: usize) -> Command {
    let mut cmd = Command::new(&ctx.bin);
    if let Some(ns) = ctx.netns.get(client % ctx.netns.len().max(1)) {
        ns.enter(&mut cmd);
    }
    harness::isolate(&mut cmd)
        .env_remove("REDLOCK_TRUST_RESTARTS")
        .env("REDLOCK_SERVERS", &ctx.urls[client])
        .args(["--max-ttl", "2s"])
        .args(ctx.trust_restarts.then_some("--trust-restarts"))
        .stdin(Stdio::null());
    cmd
}

/// Runs one operation for `client` and records it. Returns its exit code
/// and stdout.
pub fn perform(ctx: &Ctx, client: usize, ask: &Ask) -> Done {
    let op = ctx.op();
    let fifo = ctx.dir.join(format!("c{client}.fifo"));
    if !fifo.exists() {
        let path = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo");
    }
    let mut args: Vec<String> = Vec::new();
    args.push(ask.f.to_owned());
    args.extend(["--key".into(), ask.key.clone()]);
    if ask.f != "release" {
        args.extend(["--ttl".into(), format!("{}ms", ask.ttl.as_millis())]);
    }
    if matches!(ask.f, "run" | "acquire") {
        match ask.wait {
            Some(w) => args.extend(["--wait".into(), format!("{}ms", w.as_millis())]),
            None => args.push("-n".into()),
        }
        if ask.mode == Mode::Limit {
            args.extend(["--limit".into(), ask.limit.to_string()]);
        }
        if ask.mode == Mode::Shared {
            args.push("--shared".into());
        }
    }
    match (ask.once_per, ask.every) {
        (true, Some(_)) if ask.cron => args.extend(CRON_LINE.map(String::from)),
        (true, Some(every)) => {
            args.extend(["--once-per".into(), format!("{}ms", every.as_millis())]);
        }
        _ => {}
    }
    if let Some(code) = ask.busy_code {
        args.extend(["-E".into(), code.to_string()]);
    }
    if ask.loud {
        args.push("-v".into());
    }
    args.extend(ask.extra.iter().map(|a| (*a).to_owned()));
    if let Some(timeout) = ask.node_timeout {
        args.extend(["--node-timeout".into(), format!("{}ms", timeout.as_millis())]);
    }
    if let Some(jitter) = ask.jitter {
        args.extend(["--jitter".into(), format!("{}ms", jitter.as_millis()), "-v".into()]);
    }
    if ask.f == "acquire" {
        args.push("--json".into());
    }
    if let Some(token) = &ask.token {
        args.extend(["--token".into(), token.clone()]);
    }
    if ask.f == "run" {
        args.extend(["--".into(), "perl".into()]);
        args.push(ctx.dir.join("section.pl").display().to_string());
        args.push(fifo.display().to_string());
        args.push(ask.section.0.as_millis().to_string());
        args.push(ask.section.1.to_string());
    }
    ctx.rec.record(&Event::Invoke {
        t: now(),
        client,
        op,
        f: ask.f.to_owned(),
        key: ask.key.clone(),
        mode: ask.mode,
        limit: ask.limit,
        ttl_ms: u64::try_from(ask.ttl.as_millis()).unwrap(),
        burst: ask.burst,
        child_code: (ask.f == "run").then_some(ask.section.1),
        busy_code: ask.busy_code,
        after_faults: ask.after_faults,
        token: ask.token.clone(),
        no_wait: (ask.wait.is_none() || ask.claims_no_wait) && matches!(ask.f, "run" | "acquire"),
        wait_ms: ask
            .wait
            .filter(|_| matches!(ask.f, "run" | "acquire"))
            .map(|w| u64::try_from(w.as_millis()).unwrap()),
        every_ms: ask.every.map(|e| u64::try_from(e.as_millis()).unwrap()),
        once_per: ask.once_per,
        wall_ms: wall_ms(),
        node_timeout_ms: ask.node_timeout.map(|t| u64::try_from(t.as_millis()).unwrap()),
        for_ms: None,
        other_schedule: ask.other_schedule,
    });
    // The section's reader: blocks in open until the command opens the
    // FIFO (or until it is let go below, when the command never ran).
    let opened = Arc::new(AtomicBool::new(false));
    let reader = (ask.f == "run").then(|| {
        let (fifo, opened) = (fifo.clone(), Arc::clone(&opened));
        std::thread::spawn(move || read_section(&fifo, &opened))
    });
    let log = std::fs::File::create(ctx.dir.join(format!("op{op}.err"))).unwrap();
    let mut cmd = command(ctx, client);
    cmd.args(&args).stdout(Stdio::piped()).stderr(log);
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    ctx.current.lock().unwrap().insert(client, (op, pid));
    if ask.f == "run" {
        ctx.running.lock().unwrap().push((pid, ask.ttl));
    }
    let mut stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let started = Instant::now();
    let mut kill_after = ask.kill_after;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if kill_after.is_some_and(|k| started.elapsed() > k) {
            kill_after = None;
            if !opened.load(Ordering::SeqCst) {
                let _ = child.kill();
            }
        }
        if started.elapsed() > ask.hang {
            ctx.hangs.lock().unwrap().push(format!("op {op}: {} {args:?}", ask.f));
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let t = now();
    ctx.running.lock().unwrap().retain(|(p, _)| *p != pid);
    ctx.current.lock().unwrap().remove(&client);
    let stdout = out.join().unwrap();
    let code = status.and_then(|s| s.code());
    let json: Option<serde_json::Value> = serde_json::from_str(stdout.trim()).ok();
    ctx.rec.record(&Event::Complete {
        t,
        client,
        op,
        outcome: outcome(code),
        code,
        token: json.as_ref().and_then(|j| j["token"].as_str().map(str::to_owned)),
        fence: json.as_ref().and_then(|j| j["fence"].as_u64()),
        validity_ms: json.as_ref().and_then(|j| j["validity_ms"].as_u64()),
        pid: Some(pid),
    });
    if ask.f == "run" {
        let quiet = ask.once_per && ask.busy_code == Some(0) && ask.jitter.is_none();
        let mut stderr =
            std::fs::read_to_string(ctx.dir.join(format!("op{op}.err"))).unwrap_or_default();
        stderr.truncate(stderr.floor_char_boundary(2000));
        ctx.rec.record(&Event::Said {
            t: now(),
            op,
            quiet: quiet && !ask.extra.contains(&"-v"),
            stderr,
        });
    }
    if let Some(reader) = reader {
        // A command that never ran never opened the FIFO: open it for a
        // moment so that the reader sees an empty section. One that still
        // runs after redlock ended runs unguarded.
        let since = Instant::now();
        while !reader.is_finished() {
            if !opened.load(Ordering::SeqCst) {
                let writer =
                    std::fs::OpenOptions::new().write(true).custom_flags_nonblock().open(&fifo);
                drop(writer);
            } else if since.elapsed() > Duration::from_secs(5) {
                ctx.hangs
                    .lock()
                    .unwrap()
                    .push(format!("op {op}: the command outlived redlock (exit {code:?}) by 5s"));
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let events = if reader.is_finished() { reader.join().unwrap() } else { Vec::new() };
        for event in events {
            ctx.rec.record(&match event {
                Line::Enter { t, fence, slot, tick } => {
                    Event::Enter { t, client, op, fence, slot, tick }
                }
                Line::Exit { t, how, code } => Event::Exit { t, client, op, how, code },
            });
        }
    }
    Done { code, stdout }
}

/// Opening a FIFO for writing without blocking when nobody reads it.
trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, libc::O_NONBLOCK)
    }
}

/// A line the section wrote.
enum Line {
    Enter { t: u64, fence: Option<u64>, slot: Option<u32>, tick: Option<String> },
    Exit { t: u64, how: String, code: Option<i32> },
}

/// Reads one section from `fifo`: its entry and exit, or its entry and
/// the end of file when it was killed; nothing when it never ran.
fn read_section(fifo: &Path, opened: &AtomicBool) -> Vec<Line> {
    let file = std::fs::File::open(fifo).unwrap();
    opened.store(true, Ordering::SeqCst);
    let mut lines = Vec::new();
    let mut exited = false;
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["enter", fence, slot, tick, t] => lines.push(Line::Enter {
                t: t.parse().unwrap(),
                fence: fence.parse().ok(),
                slot: slot.parse().ok(),
                tick: (*tick != "-").then(|| (*tick).to_owned()),
            }),
            ["exit", how, code, t] => {
                exited = true;
                lines.push(Line::Exit {
                    t: t.parse().unwrap(),
                    how: (*how).to_owned(),
                    code: code.parse().ok(),
                });
            }
            _ => {}
        }
    }
    if !lines.is_empty() && !exited {
        lines.push(Line::Exit { t: now(), how: "killed".to_owned(), code: None });
    }
    lines
}

/// A client's random walk over the operations, until `ctx.stop`.
pub fn client(ctx: &Ctx, client: usize, seed: u64) {
    let mut rng =
        fastrand::Rng::with_seed(seed.wrapping_mul(0x9E37_79B9).wrapping_add(client as u64));
    let ms = |rng: &mut fastrand::Rng, lo: u64, hi: u64| Duration::from_millis(rng.u64(lo..hi));
    while !ctx.stop.load(Ordering::Relaxed) {
        let ttl = ms(&mut rng, 1000, 2000);
        let wait = if rng.u8(0..4) == 0 { None } else { Some(ms(&mut rng, 200, 3000)) };
        // Mostly short sections; some long enough to see the next fault.
        let long = rng.u8(0..5) == 0;
        let length = if long { ms(&mut rng, 500, 2500) } else { ms(&mut rng, 20, 300) };
        let section = (length, if rng.bool() { 0 } else { 3 });
        match rng.u8(0..20) {
            0..=8 => {
                perform(ctx, client, &Ask { section, ..Ask::run("x", Mode::Exclusive, ttl, wait) });
            }
            9..=11 => script_hold(ctx, client, &mut rng, ttl),
            12..=15 => {
                perform(ctx, client, &Ask { section, ..Ask::run("l", Mode::Limit, ttl, wait) });
            }
            _ => {
                let mode = if rng.u8(0..10) < 7 { Mode::Shared } else { Mode::Exclusive };
                perform(ctx, client, &Ask { section, ..Ask::run("s", mode, ttl, wait) });
            }
        }
    }
}

/// `acquire`, a pause, perhaps an `extend` and a pause, then `release`,
/// each pause well within the validity.
fn script_hold(ctx: &Ctx, client: usize, rng: &mut fastrand::Rng, ttl: Duration) {
    let acquire = Ask {
        f: "acquire",
        wait: Some(Duration::from_millis(rng.u64(200..2000))),
        ..Ask::run("x", Mode::Exclusive, ttl, None)
    };
    let done = perform(ctx, client, &acquire);
    if done.code != Some(0) {
        return;
    }
    let token = serde_json::from_str::<serde_json::Value>(done.stdout.trim())
        .ok()
        .and_then(|j| j["token"].as_str().map(str::to_owned));
    let Some(token) = token else { return };
    std::thread::sleep(ttl / 4);
    if rng.bool() {
        let extend = Ask { f: "extend", token: Some(token.clone()), ..acquire.clone() };
        perform(ctx, client, &extend);
        std::thread::sleep(ttl / 4);
    }
    perform(ctx, client, &Ask { f: "release", token: Some(token), ..acquire });
}

/// Cron bursts on key `c`: every so often, `hosts` runs of `run -n -E 0`
/// at once, until `ctx.stop`. Client numbers from `first`.
pub fn bursts(ctx: &Arc<Ctx>, first: usize, hosts: usize, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xB0B5);
    while !ctx.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(rng.u64(500..1500)));
        let burst = ctx.next_burst.fetch_add(1, Ordering::Relaxed);
        let runs: Vec<_> = (0..hosts)
            .map(|h| {
                let ctx = Arc::clone(ctx);
                let ask = Ask {
                    busy_code: Some(0),
                    burst: Some(burst),
                    section: (Duration::from_millis(rng.u64(20..200)), 3),
                    ..Ask::run("c", Mode::Exclusive, Duration::from_secs(1), None)
                };
                std::thread::spawn(move || perform(&ctx, first + h, &ask))
            })
            .collect();
        for r in runs {
            r.join().unwrap();
        }
    }
}

/// How often a fleet's sleep looks whether the run is over.
const STOP_POLL: Duration = Duration::from_millis(200);

/// The crontab line of the fleet on key `u` (`REDLOCK_CAMPAIGN=full`):
/// every minute, read in a zone whose offset (+05:45) is no whole hour,
/// so its ticks are the UTC minutes the checker counts (`every` 60 s), and
/// a host that read the line in another zone would be refused.
pub const CRON_LINE: [&str; 4] = ["--cron", "* * * * *", "--tz", "Asia/Kathmandu"];

/// The tick of [`CRON_LINE`].
pub const CRON_TICK: Duration = Duration::from_secs(60);

/// The cron fleet on `key`: hosts of `run -n -E 0` for the tick of
/// `every` (with `--once-per` unless `plain`, the old recipe; with
/// [`CRON_LINE`] when `cron`, `every` being its minute), each fired
/// at its own moment of the tick, as hosts whose crons drift do: a burst at
/// the tick's start, one or two early, one mid-tick, a burst late in it;
/// and, after the first burst, a `--wait` waiter SIGKILLed while it is
/// likely queued behind the winner: a host of the fleet in one tick of two,
/// else a plain waiter (a host killed may have been granted its tick
/// before its command ran, so its tick cannot be asked to run exactly
/// once). Jobs last 0.1 s and exit 3. Until `ctx.stop`.
pub fn fleet(
    ctx: &Arc<Ctx>,
    (key, every, cron): (&'static str, Duration, bool),
    (plain, loud): (bool, bool),
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xF1EE);
    let every_ms = u64::try_from(every.as_millis()).unwrap();
    let mut hosts = Vec::new();
    while !ctx.stop.load(Ordering::Relaxed) {
        // The next tick's start on the wall clock.
        let start = (wall_ms() / every_ms + 1) * every_ms;
        let late = every_ms - rng.u64(100..350);
        // (offset in ms into the tick, hosts, a dead waiter)
        let mut waves = vec![
            (0, 3, false),
            (rng.u64(40..90), 1, true),
            (rng.u64(100..400), rng.usize(1..3), false),
            (rng.u64(every_ms / 3..every_ms * 2 / 3), 1, false),
            (late, 2, false),
        ];
        waves.sort_unstable_by_key(|w| w.0);
        for (offset, n, dead) in waves {
            let at = start + offset;
            // In steps: a fleet waiting for a minute's tick stops with the run.
            while wall_ms() < at && !ctx.stop.load(Ordering::Relaxed) {
                let left = Duration::from_millis(at.saturating_sub(wall_ms()));
                std::thread::sleep(left.min(STOP_POLL));
            }
            if ctx.stop.load(Ordering::Relaxed) {
                break;
            }
            for _ in 0..n {
                let Some(client) = ctx.fleet_pool.lock().unwrap().pop() else { continue };
                let wait = dead.then(|| Duration::from_secs(5));
                let host = !dead || rng.bool();
                let ask = Ask {
                    busy_code: Some(0),
                    section: (Duration::from_millis(100), 3),
                    every: host.then_some(every),
                    once_per: host && !plain,
                    cron,
                    loud,
                    // The winner of the first burst holds for about 0.1 s.
                    kill_after: dead.then(|| Duration::from_millis(rng.u64(15..45))),
                    ..Ask::run(key, Mode::Exclusive, Duration::from_secs(1), wait)
                };
                let ctx = Arc::clone(ctx);
                hosts.push(std::thread::spawn(move || {
                    perform(&ctx, client, &ask);
                    ctx.fleet_pool.lock().unwrap().push(client);
                }));
            }
        }
        hosts.retain(|h: &std::thread::JoinHandle<()>| !h.is_finished());
    }
    for h in hosts {
        h.join().unwrap();
    }
}
