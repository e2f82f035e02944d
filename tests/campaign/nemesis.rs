//! The nemesis: faults injected at random while the clients run, each
//! recorded in the history when it starts and stops.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::clients::{Ask, Ctx};
use crate::harness::proxy::{Mode as ProxyMode, Proxy};
use crate::harness::{Fleet, lock_key, send_signal};
use crate::history::{Event, Mode, now, wall_ms};

/// A family of faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// redlock frozen (SIGSTOP) past its TTL; its guard and command run
    /// on. The redlock of a `run` in its section, or a freeze's (`hold`,
    /// [`crate::freezer`]).
    Freeze,
    /// redlock, its guard and its command frozen together past the TTL (a
    /// paused VM): the documented bound, where only fences protect.
    FreezeAll,
    /// A server paused: SIGSTOP, `DEBUG SLEEP` or `CLIENT PAUSE`.
    Pause,
    /// A client cut off from one or two servers (its own TCP proxies).
    Partition,
    /// A real partition: the clients run in network namespaces of the
    /// campaign's own ([`crate::harness::netns`]), and one namespace's
    /// packets to and from one or two servers are dropped (nftables, inside
    /// it), so they vanish: no refusal, no reset, TCP retransmits and
    /// delivers late once healed.
    NetPartition,
    /// A server killed and restarted at once, empty, while another is
    /// paused now and then (so that holders hold exact quorums).
    Restart,
    /// The same, restarted only after the longest TTL plus a second.
    RestartLate,
    /// A server's clock stepped 60 s forward (libfaketime), with pauses.
    Clock,
    /// A server out of memory (`maxmemory` below its use, `noeviction`).
    Evict,
    /// A foreign write over the lock on a majority.
    Foreign,
    /// All of the above but the bound, at random.
    Mixed,
    /// One member is a Sentinel group (a master, one replica, three
    /// Sentinels) beside two plain servers: `SENTINEL FAILOVER` at random,
    /// and pauses of a plain server (so that holders hold exact quorums).
    Sentinel,
    /// Faults that threaten a tick's record (a server paused or restarted
    /// empty, a run frozen past its TTL) with quiet ticks between them,
    /// where the cron fleet's ticks must each run exactly once.
    Tick,
    /// Holders' redlock paused (SIGSTOP) for 0.2 to 1.5 TTLs while a
    /// majority or all of the servers flush their scripts (`SCRIPT FLUSH`,
    /// at the pause's start and end): the renewal after the pause, and
    /// every contender meanwhile, meet a cold script cache.
    ScriptFlush,
    /// Writes paused on a majority (`CLIENT PAUSE ms WRITE`) while a
    /// holder runs: its renewals, contenders' grants and releases wait in
    /// the servers' queues, and keys do not expire meanwhile.
    PauseWrite,
    /// A server paused (so that holders hold exact quorums of the others)
    /// while another restarts empty (`SHUTDOWN NOSAVE`, started again) and
    /// then has persistence switched on at runtime (`appendonly yes`,
    /// `appendfsync always`): it claims to keep every write, but lost the
    /// ones before its restart.
    Persist,
    /// A `--once-per` contender frozen (SIGSTOP) during its `--jitter`
    /// sleep, after it computed its tick and before its first attempt,
    /// and continued a few seconds after that tick ended, on a key of its
    /// own that nobody ran since; with `REDLOCK_CAMPAIGN=full` also one
    /// continued past the tick's end plus the record's life (60 s) on a key
    /// whose tick another host ran meanwhile. Its tick is over: it must
    /// not run it (`tick-late`), let alone a second time (`tick-twice`).
    StaleTick,
    /// Servers stalled 0.3 to 0.6 s each by a Lua busy loop (`EVAL` of a
    /// script that spins on `TIME`) during a burst of `-n` runs and
    /// ordinary holders of one key: a minority as the burst begins, then a
    /// majority (two of three) just before a `-n`'s first attempt, which
    /// waits in their queues while holders invoked after it have taken and
    /// released the key. The `-n` must still see those takes
    /// (`taken-meanwhile`).
    Stall,
}

impl Family {
    /// Every family the campaign runs, the bound last.
    pub const ALL: [Family; 18] = [
        Family::Freeze,
        Family::Pause,
        Family::Partition,
        Family::NetPartition,
        Family::Restart,
        Family::RestartLate,
        Family::Clock,
        Family::Evict,
        Family::Foreign,
        Family::Mixed,
        Family::Sentinel,
        Family::Tick,
        Family::ScriptFlush,
        Family::PauseWrite,
        Family::Persist,
        Family::StaleTick,
        Family::Stall,
        Family::FreezeAll,
    ];

    /// Whether it runs only in the long campaign (`REDLOCK_CAMPAIGN=full`)
    /// or when `REDLOCK_CAMPAIGN_FAMILIES` names it: the default run stays
    /// about three minutes.
    pub fn full_only(self) -> bool {
        matches!(self, Family::ScriptFlush | Family::PauseWrite | Family::NetPartition)
    }

    /// Its name in messages and `REDLOCK_CAMPAIGN_FAMILIES`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Freeze => "freeze",
            Family::FreezeAll => "freeze-all",
            Family::Pause => "pause",
            Family::Partition => "partition",
            Family::NetPartition => "net-partition",
            Family::Restart => "restart",
            Family::RestartLate => "restart-late",
            Family::Clock => "clock",
            Family::Evict => "evict",
            Family::Foreign => "foreign",
            Family::Mixed => "mixed",
            Family::Sentinel => "sentinel",
            Family::Tick => "tick",
            Family::ScriptFlush => "script-flush",
            Family::PauseWrite => "pause-write",
            Family::Persist => "persist",
            Family::StaleTick => "stale-tick",
            Family::Stall => "stall",
        }
    }
}

/// What the faults act on.
pub struct World {
    /// The servers.
    pub fleet: Fleet,
    /// Each client's proxies, one per server (the partition family only).
    pub proxies: Vec<Vec<Proxy>>,
    /// Each server's libfaketime timestamp file (the clock family only).
    pub clocks: Vec<PathBuf>,
    /// The Sentinel group that is one more member (the sentinel family only).
    pub group: Option<crate::harness::sentinel::SentinelGroup>,
}

/// The pids of `pid` and all its descendants.
fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let parent = all[i];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let ppid = stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1));
            if ppid.and_then(|p| p.parse::<u32>().ok()) == Some(parent) && !all.contains(&child) {
                all.push(child);
            }
        }
        i += 1;
    }
    all
}

/// A process's command name (`/proc/PID/comm`).
fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_owned()
}

/// The `run` processes inside their section (their command, perl, runs),
/// with their TTL.
fn holding(ctx: &Ctx) -> Vec<(u32, Duration)> {
    let running = ctx.running.lock().unwrap().clone();
    running
        .into_iter()
        .filter(|(pid, _)| tree(*pid).iter().skip(1).any(|p| comm(*p) == "perl"))
        .collect()
}

/// A random majority of `n` servers, or all of them when `all`.
fn some_servers(rng: &mut fastrand::Rng, n: usize, all: bool) -> Vec<usize> {
    let mut servers: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut servers);
    servers.truncate(if all { n } else { n / 2 + 1 });
    servers.sort_unstable();
    servers
}

fn record(ctx: &Ctx, what: &str, phase: &str, foreign: Option<(String, u64)>) {
    record_frozen(ctx, what, phase, foreign, &[]);
}

/// [`record`] for a fault that stops the processes `frozen` (SIGSTOP): a
/// stopped redlock cannot keep its time bounds, and the checker excuses it.
fn record_frozen(
    ctx: &Ctx,
    what: &str,
    phase: &str,
    foreign: Option<(String, u64)>,
    frozen: &[u32],
) {
    ctx.rec.record(&Event::Nemesis {
        t: now(),
        what: what.to_owned(),
        phase: phase.to_owned(),
        foreign,
        servers: Vec::new(),
        fleet: 0,
        frozen: frozen.to_vec(),
    });
}

/// Injects faults of `family` until `ctx.stop`, then heals everything
/// (clocks last, after the clients are done: see [`heal_clocks`]).
pub fn run(ctx: &Arc<Ctx>, world: &mut World, setup: &crate::Setup) {
    let (family, seed) = (setup.family, setup.seed);
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x4E4E);
    let ms = |rng: &mut fastrand::Rng, lo: u64, hi: u64| Duration::from_millis(rng.u64(lo..hi));
    let mut foreign_n = 0;
    let (mut stale_n, mut stall_n) = (0, 0);
    let mut jumped: Option<usize> = None;
    while !ctx.stop.load(Ordering::Relaxed) {
        std::thread::sleep(ms(&mut rng, 200, 1200));
        if family == Family::Tick {
            // Quiet for one or two ticks of the fleet.
            std::thread::sleep(ms(&mut rng, 4000, 7000));
        }
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        let family = match family {
            Family::Mixed => {
                let pick = [
                    Family::Freeze,
                    Family::Pause,
                    Family::Restart,
                    Family::Evict,
                    Family::Foreign,
                    Family::Pause,
                ];
                pick[rng.usize(..pick.len())]
            }
            Family::Tick => {
                let pick = [Family::Freeze, Family::Pause, Family::Restart];
                pick[rng.usize(..pick.len())]
            }
            other => other,
        };
        let n = world.fleet.servers.len();
        match family {
            Family::Freeze | Family::FreezeAll => {
                let all = family == Family::FreezeAll;
                // Past the freeze's end half the time (always in the
                // replay of the hole that had): it then ends while lost.
                let past_end = setup.freeze_past_hold_end || rng.bool();
                freeze_one(ctx, &mut rng, all, past_end);
            }
            Family::Sentinel if rng.bool() => {
                let Some(group) = &world.group else { continue };
                let what = "SENTINEL FAILOVER".to_owned();
                record(ctx, &what, "start", None);
                // Refused while one is in progress (INPROG): nothing happens.
                let sentinel = &group.sentinels[rng.usize(..group.sentinels.len())];
                let client = redis::Client::open(format!("redis://{}", sentinel.address()));
                if let Ok(mut conn) = client.and_then(|c| c.get_connection()) {
                    let _: redis::RedisResult<redis::Value> = redis::cmd("SENTINEL")
                        .arg("FAILOVER")
                        .arg(crate::harness::sentinel::SERVICE)
                        .query(&mut conn);
                }
                record(ctx, &what, "stop", None);
            }
            Family::Pause
            | Family::Restart
            | Family::RestartLate
            | Family::Clock
            | Family::Sentinel
                if matches!(family, Family::Pause | Family::Sentinel) || rng.bool() =>
            {
                // Pauses make holders with exact quorums, which the other
                // families then test.
                let i = rng.usize(..n);
                let long = ms(&mut rng, 100, 2500);
                let server = &world.fleet.servers[i];
                let how = rng.u8(0..3);
                let what = format!(
                    "pause server {i} ({}) for {}ms",
                    ["SIGSTOP", "DEBUG SLEEP", "CLIENT PAUSE"][how as usize],
                    long.as_millis()
                );
                record(ctx, &what, "start", None);
                match how {
                    0 => {
                        server.hang();
                        std::thread::sleep(long);
                        server.resume();
                    }
                    1 => {
                        let secs = format!("{:.3}", long.as_secs_f64());
                        let _: redis::RedisResult<redis::Value> =
                            redis::cmd("DEBUG").arg("SLEEP").arg(secs).query(&mut server.conn());
                    }
                    _ => {
                        let _: redis::Value =
                            server.cmd(&["CLIENT", "PAUSE", &long.as_millis().to_string(), "ALL"]);
                        std::thread::sleep(long);
                    }
                }
                record(ctx, &what, "stop", None);
            }
            Family::Partition => {
                if world.proxies.is_empty() {
                    continue;
                }
                let c = rng.usize(..world.proxies.len());
                let mut cut: Vec<usize> = (0..n).collect();
                rng.shuffle(&mut cut);
                cut.truncate(rng.usize(1..=2.min(n - 1)));
                let long = ms(&mut rng, 300, 3000);
                let what =
                    format!("cut client {c} from servers {cut:?} for {}ms", long.as_millis());
                record(ctx, &what, "start", None);
                for &s in &cut {
                    world.proxies[c][s].set(ProxyMode::Stall);
                }
                std::thread::sleep(long);
                for &s in &cut {
                    world.proxies[c][s].set(ProxyMode::Pass);
                    world.proxies[c][s].drop_connections();
                }
                record(ctx, &what, "stop", None);
            }
            Family::NetPartition => {
                // One namespace (a third of the clients) from one or two
                // servers, fewer than all: its clients' calls to them time
                // out (each bounded by the node timeout), a holder among
                // them cut from a majority must stop its command before
                // its validity ends, and the other namespaces, which see
                // every server, take the key once it expires. Healed, TCP
                // retransmits what the cut held back, so a server may run
                // an abandoned attempt's write late: bounded by its TTL,
                // and withdrawn by the attempt's own server task. The
                // nemesis and the harness reach the servers on loopback,
                // outside any cut.
                let g = rng.usize(..ctx.netns.len().max(1));
                let Some(ns) = ctx.netns.get(g) else { continue };
                let mut cut: Vec<usize> = (0..n).collect();
                rng.shuffle(&mut cut);
                cut.truncate(rng.usize(1..=2.min(n - 1)));
                cut.sort_unstable();
                let ports: Vec<u16> = cut.iter().map(|&s| world.fleet.servers[s].port).collect();
                let long = ms(&mut rng, 300, 3000);
                let what = format!(
                    "drop packets between namespace {} (clients {g} mod {}) and servers {cut:?} \
                     for {}ms",
                    ns.name(),
                    ctx.netns.len(),
                    long.as_millis()
                );
                record(ctx, &what, "start", None);
                ns.cut(&ports).unwrap();
                std::thread::sleep(long);
                ns.cut(&[]).unwrap();
                record(ctx, &what, "stop", None);
            }
            Family::RestartLate => {
                // Down for the longest TTL (2 s) plus a second, back empty.
                let i = rng.usize(..n);
                let what = format!("restart server {i} empty after 3s down");
                record(ctx, &what, "start", None);
                world.fleet.servers[i].stop();
                std::thread::sleep(Duration::from_secs(3));
                world.fleet.servers[i].start_again();
                record(ctx, &what, "stop", None);
            }
            Family::Restart => {
                // Server x down for a while, so that holders take exact
                // quorums of the others; meanwhile server y restarts empty
                // (forgetting their keys); then x comes back, empty too.
                let x = rng.usize(..n);
                let y = (x + 1 + rng.usize(..n - 1)) % n;
                let (down, after) = (ms(&mut rng, 300, 1500), ms(&mut rng, 0, 500));
                let what = format!(
                    "server {x} down {}ms, server {y} restarted empty {}ms before it is back",
                    down.as_millis() + after.as_millis(),
                    after.as_millis()
                );
                record(ctx, &what, "start", None);
                world.fleet.servers[x].stop();
                std::thread::sleep(down);
                world.fleet.servers[y].restart();
                std::thread::sleep(after);
                world.fleet.servers[x].start_again();
                record(ctx, &what, "stop", None);
            }
            Family::Clock => {
                // Forward only, until the faults stop: a clock stepped back
                // after running ahead is the fences' documented breaking
                // case (src/fence.rs), not this family's. One server: the
                // others keep a quorum.
                let i = *jumped.get_or_insert_with(|| rng.usize(..n));
                let what = format!("step server {i}'s clock 60s forward");
                record(ctx, &what, "start", None);
                let step = std::fs::read_to_string(&world.clocks[i]).unwrap_or_default();
                let ahead: u64 = step.trim().trim_start_matches('+').parse().unwrap_or(0);
                std::fs::write(&world.clocks[i], format!("+{}\n", ahead + 60)).unwrap();
            }
            Family::Evict => {
                let i = rng.usize(..n);
                let server = &world.fleet.servers[i];
                let info: String = server.cmd(&["INFO", "memory"]);
                let used: u64 = info
                    .lines()
                    .find_map(|l| l.strip_prefix("used_memory:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(1 << 20);
                let long = ms(&mut rng, 300, 3000);
                let what = format!("server {i} out of memory for {}ms", long.as_millis());
                record(ctx, &what, "start", None);
                let _: redis::Value =
                    server.cmd(&["CONFIG", "SET", "maxmemory", &(used / 2).to_string()]);
                std::thread::sleep(long);
                let _: redis::Value = server.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
                record(ctx, &what, "stop", None);
            }
            Family::Foreign => {
                foreign_n += 1;
                let key = if rng.bool() { "x" } else { "c" };
                let long = rng.u64(500..2000);
                let value = format!("foreign-{foreign_n}");
                let mut servers: Vec<usize> = (0..n).collect();
                rng.shuffle(&mut servers);
                servers.truncate(n / 2 + 1);
                let what = format!("foreign write over {key} on servers {servers:?} for {long}ms");
                // The servers written: a later write over some of them
                // replaces this one's value there, so the checker works out
                // when a quorum was free of both.
                ctx.rec.record(&Event::Nemesis {
                    t: now(),
                    what: what.clone(),
                    phase: "start".to_owned(),
                    foreign: Some((key.to_owned(), long)),
                    servers: servers.clone(),
                    fleet: n,
                    frozen: Vec::new(),
                });
                for &s in &servers {
                    let server = &world.fleet.servers[s];
                    let _: redis::RedisResult<redis::Value> = redis::cmd("SET")
                        .arg(lock_key(key))
                        .arg(&value)
                        .arg("PX")
                        .arg(long)
                        .query(&mut server.conn());
                }
                record(ctx, &what, "stop", None);
            }
            Family::ScriptFlush => {
                // A holder paused for part of its TTL (or none, now and
                // then: contenders alone meet the cold cache).
                let running = holding(ctx);
                let paused = (!running.is_empty() && rng.u8(0..4) > 0)
                    .then(|| running[rng.usize(..running.len())]);
                let all = rng.bool();
                let servers = some_servers(&mut rng, n, all);
                let what = match paused {
                    Some((pid, _)) => {
                        format!("SCRIPT FLUSH on servers {servers:?}, run {pid} paused")
                    }
                    None => format!("SCRIPT FLUSH on servers {servers:?}"),
                };
                let frozen: Vec<u32> = paused.iter().map(|(pid, _)| *pid).collect();
                record_frozen(ctx, &what, "start", None, &frozen);
                let flush = |world: &World| {
                    for &s in &servers {
                        let _: redis::RedisResult<redis::Value> = redis::cmd("SCRIPT")
                            .arg("FLUSH")
                            .query(&mut world.fleet.servers[s].conn());
                    }
                };
                if let Some((pid, _)) = paused {
                    send_signal(i32::try_from(pid).unwrap(), libc::SIGSTOP);
                }
                flush(world);
                if let Some((pid, ttl)) = paused {
                    // Within its TTL or past it; the cache flushed again
                    // at the end, as contenders have loaded the scripts
                    // since, so that its renewal meets a cold cache.
                    std::thread::sleep(ttl.mul_f64(0.2 + rng.f64() * 1.3));
                    flush(world);
                    send_signal(i32::try_from(pid).unwrap(), libc::SIGCONT);
                }
                record(ctx, &what, "stop", None);
            }
            Family::PauseWrite => {
                // While a holder renews.
                if holding(ctx).is_empty() {
                    continue;
                }
                let servers = some_servers(&mut rng, n, false);
                let long = ms(&mut rng, 300, 2500);
                let what =
                    format!("CLIENT PAUSE {} WRITE on servers {servers:?}", long.as_millis());
                record(ctx, &what, "start", None);
                for &s in &servers {
                    let _: redis::RedisResult<redis::Value> = redis::cmd("CLIENT")
                        .arg("PAUSE")
                        .arg(long.as_millis().to_string())
                        .arg("WRITE")
                        .query(&mut world.fleet.servers[s].conn());
                }
                std::thread::sleep(long);
                record(ctx, &what, "stop", None);
            }
            Family::Persist => {
                // Server x paused, so that holders take exact quorums of
                // the others; server y restarts empty and has persistence
                // switched on; then x resumes (with its data).
                let x = rng.usize(..n);
                let y = (x + 1 + rng.usize(..n - 1)) % n;
                let (down, after) = (ms(&mut rng, 300, 1500), ms(&mut rng, 0, 800));
                let what = format!(
                    "server {x} paused {}ms; server {y} restarted empty with appendonly switched \
                     on {}ms before it resumes",
                    down.as_millis() + after.as_millis(),
                    after.as_millis()
                );
                record(ctx, &what, "start", None);
                world.fleet.servers[x].hang();
                std::thread::sleep(down);
                let server = &mut world.fleet.servers[y];
                server.shutdown(false);
                server.start_again();
                let _: redis::Value = server.cmd(&["CONFIG", "SET", "appendonly", "yes"]);
                let _: redis::Value = server.cmd(&["CONFIG", "SET", "appendfsync", "always"]);
                std::thread::sleep(after);
                world.fleet.servers[x].resume();
                record(ctx, &what, "stop", None);
            }
            Family::StaleTick => {
                // The long variant once per run, first.
                let long = setup.stale_past_record && stale_n == 0;
                stale_n += 1;
                stale_tick(ctx, &mut rng, &format!("z{stale_n}"), long);
            }
            Family::Stall => {
                stall_n += 1;
                stall(ctx, world, &mut rng, stall_n, setup.n_waits);
            }
            Family::Pause | Family::Mixed | Family::Sentinel | Family::Tick => {}
        }
    }
    heal(ctx, world);
    record(ctx, "heal", "stop", None);
}

/// One freeze fault: a holder's redlock (with its guard and command when
/// `all`) stopped (SIGSTOP) for 1.2 to 2.2 of its TTL, then continued. The
/// holder is a freeze ([`crate::freezer`]) whenever one holds its key with
/// a TTL and [`crate::freezer::SETTLE`] left (that time is short: it would
/// seldom be stopped otherwise), else a `run` in its section. A freeze's
/// stop ends `SETTLE` before the freeze's end or its SIGTERM, so that it
/// sees its loss first, and so lasts a TTL at least, longer than its lock's
/// validity. With `past_end` (half the stops, and every one in the replay
/// of the hole a freeze stopped past its end had), any freeze that holds is stopped, from at least a TTL and
/// `SETTLE` before its end (the key lapses and a waiter may take it within
/// the freeze's span) until `SETTLE` past it. Nothing when no holder runs.
fn freeze_one(ctx: &Ctx, rng: &mut fastrand::Rng, all: bool, past_end: bool) {
    let settle = crate::freezer::SETTLE;
    let mut freezes = ctx.freezes.lock().unwrap().clone();
    let now = std::time::Instant::now();
    freezes.retain(|f| past_end || f.ends.saturating_duration_since(now) >= f.ttl + settle);
    let (pid, ttl, ends) = if freezes.is_empty() {
        let running = holding(ctx);
        if running.is_empty() {
            return;
        }
        let (pid, ttl) = running[rng.usize(..running.len())];
        (pid, ttl, None)
    } else {
        let f = freezes[rng.usize(..freezes.len())];
        (f.pid, f.ttl, Some(f.ends))
    };
    let mut long = ttl.mul_f64(1.2 + rng.f64());
    if let Some(ends) = ends {
        let left = ends.saturating_duration_since(std::time::Instant::now());
        if !past_end {
            long = long.min(left.saturating_sub(settle));
        } else if left < ttl + settle {
            return;
        } else {
            long = long.max(left + settle);
        }
    }
    let pids = if all { tree(pid) } else { vec![pid] };
    let what = format!("freeze {pids:?} for {}ms", long.as_millis());
    record_frozen(ctx, &what, "start", None, &pids);
    for p in &pids {
        send_signal(i32::try_from(*p).unwrap(), libc::SIGSTOP);
    }
    std::thread::sleep(long);
    for p in &pids {
        send_signal(i32::try_from(*p).unwrap(), libc::SIGCONT);
    }
    record(ctx, &what, "stop", None);
}

/// The `--jitter` of a stale-tick contender: shorter than the tick, as
/// `--once-per` requires, and long enough that its sleep is seen and
/// frozen before it ends (it is drawn at random below it).
const STALE_JITTER: Duration = Duration::from_millis(1900);

/// How long past its tick's end a stale-tick contender stays frozen (the
/// short variant): beyond the clock allowance and the checker's slack.
const STALE_SHORT_PAST: (u64, u64) = (2500, 4000);

/// How long past its tick's end a stale-tick contender stays frozen in
/// the long variant: the tick's record lives 60 s past the tick's end
/// (`TICK_MARGIN`, src/lock/record.rs), plus a few seconds.
const STALE_LONG_PAST: (u64, u64) = (63_000, 66_000);

/// One stale-tick fault on `key` (see [`Family::StaleTick`]): at a tick's
/// start, a host of that tick (the long variant only, which then runs it),
/// then a `-n -E 0 --once-per` contender with `--jitter`, frozen as soon as
/// its stderr says it sleeps and continued well after the tick ended. A
/// contender whose drawn sleep ended before the freeze has attempted
/// already: nothing to see that time.
fn stale_tick(ctx: &Ctx, rng: &mut fastrand::Rng, key: &str, long: bool) {
    let every = crate::TICK;
    let every_ms = u64::try_from(every.as_millis()).unwrap();
    let [host, stale] = [ctx.nemesis_clients[0], ctx.nemesis_clients[1]];
    let start = (wall_ms() / every_ms + 1) * every_ms;
    std::thread::sleep(Duration::from_millis(start + 20 - wall_ms()));
    let ask = Ask {
        busy_code: Some(0),
        section: (Duration::from_millis(100), 3),
        every: Some(every),
        once_per: true,
        ..Ask::run(key, Mode::Exclusive, Duration::from_secs(1), None)
    };
    if long {
        crate::clients::perform(ctx, host, &ask);
    }
    let past = if long { STALE_LONG_PAST } else { STALE_SHORT_PAST };
    let past = Duration::from_millis(rng.u64(past.0..past.1));
    let ask = Ask { jitter: Some(STALE_JITTER), hang: crate::harness::HANG + past + every, ..ask };
    std::thread::scope(|scope| {
        scope.spawn(|| crate::clients::perform(ctx, stale, &ask));
        let current = || ctx.current.lock().unwrap().get(&stale).copied();
        let Some((op, pid)) = wait_for(Duration::from_secs(3), current) else { return };
        let err = ctx.dir.join(format!("op{op}.err"));
        let sleeping = || {
            let text = std::fs::read_to_string(&err).unwrap_or_default();
            text.contains("--jitter: sleeping").then_some(())
        };
        if wait_for(Duration::from_secs(3), sleeping).is_none() {
            return;
        }
        let what = format!(
            "freeze stale-tick contender {pid} on {key} until {}ms past its tick's end",
            past.as_millis()
        );
        record_frozen(ctx, &what, "start", None, &[pid]);
        send_signal(i32::try_from(pid).unwrap(), libc::SIGSTOP);
        let until = start + every_ms + u64::try_from(past.as_millis()).unwrap();
        std::thread::sleep(Duration::from_millis(until.saturating_sub(wall_ms())));
        send_signal(i32::try_from(pid).unwrap(), libc::SIGCONT);
        record(ctx, &what, "stop", None);
    });
}

/// Polls `probe` every 2 ms until it gives a value, for at most `limit`.
fn wait_for<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let since = std::time::Instant::now();
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if since.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A Lua script that spins for `ARGV[1]` microseconds of the server's
/// clock: the server runs nothing else meanwhile (Redis 7 refuses `DEBUG
/// SLEEP` unless enabled, and answers others BUSY only after
/// `busy-reply-threshold`, 5 s by default).
const BUSY_LOOP: &str = "local t = redis.call('TIME') \
    local start = t[1] * 1000000 + t[2] \
    while true do \
        local n = redis.call('TIME') \
        if n[1] * 1000000 + n[2] - start >= tonumber(ARGV[1]) then return 1 end \
    end";

/// The `--jitter` of the first `-n` run of a stall's burst: long enough
/// that holders invoked after it may take and release the key before its
/// first attempt, as after a slow start.
const STALL_JITTER: Duration = Duration::from_millis(1200);

/// The `--node-timeout` of a stall's `-n` runs: above the longest loop
/// (0.6 s), so that a request that waited in a stalled server's queue is
/// still answered in time and its answer counts, as with redlock's default
/// for a TTL of 7 s or more. With the campaign's longest TTL (2 s) it fits
/// only with [`STALL_RUN_ARGS`].
const STALL_NODE_TIMEOUT: Duration = Duration::from_millis(700);

/// What lets [`STALL_NODE_TIMEOUT`] fit a TTL of 2 s: a renewal every
/// 300 ms, plus two node timeouts, the drift allowance, a kill grace of
/// 100 ms and the margins come to 1.97 s, below the TTL.
const STALL_RUN_ARGS: &[&str] = &["--renew-every", "300ms", "--kill-after", "100ms"];

/// One stall fault (see [`Family::Stall`]) on key `n`, in two phases of
/// [`BUSY_LOOP`]s (0.3 to 0.6 s each, each sent from a connection of its
/// own):
/// 1. a burst: two or three `-n` runs (the first with [`STALL_JITTER`])
///    and, 1 to 25 ms later, one to three holders (`--wait 3s`, sections
///    of 10 to 60 ms); a minority of the servers stalls as it begins, so
///    that the holders take an exact quorum of the others, and a holder's
///    late vote on a stalled server is taken back with its record at the
///    release;
/// 2. the other servers (a quorum, which the holders' takes are recorded
///    on) stall from shortly before the jittered `-n`'s first attempt (its
///    stderr says when): that attempt waits in their queues, and a server
///    that dates the `-n`'s start from when it runs the request misses the
///    takes made meanwhile.
///
/// With `n_waits` (a negative control), the `-n` runs wait instead
/// (`--wait 3s`), recorded as `-n` still.
fn stall(ctx: &Ctx, world: &World, rng: &mut fastrand::Rng, round: u64, n_waits: bool) {
    let n = world.fleet.servers.len();
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let (first_phase, second_phase) = order.split_at(n - (n / 2 + 1));
    let longs: Vec<u64> = (0..n).map(|_| rng.u64(300..600)).collect();
    let key = "n";
    let ttl = Duration::from_secs(1);
    // (offset in ms from the burst's start, what)
    let mut starts: Vec<(u64, Ask)> = Vec::new();
    for i in 0..rng.usize(2..4) {
        let ask = Ask {
            section: (Duration::from_millis(rng.u64(10..60)), 3),
            jitter: (i == 0).then_some(STALL_JITTER),
            node_timeout: Some(STALL_NODE_TIMEOUT),
            extra: STALL_RUN_ARGS,
            claims_no_wait: n_waits,
            // The longest TTL, which STALL_NODE_TIMEOUT fits.
            ..Ask::run(key, Mode::Exclusive, ttl * 2, n_waits.then_some(Duration::from_secs(3)))
        };
        starts.push((rng.u64(0..5) * u64::from(i > 0), ask));
    }
    for _ in 0..rng.usize(1..4) {
        let ask = Ask {
            section: (Duration::from_millis(rng.u64(10..60)), 3),
            ..Ask::run(key, Mode::Exclusive, ttl, Some(Duration::from_secs(3)))
        };
        starts.push((rng.u64(1..25), ask));
    }
    starts.sort_by_key(|(at, _)| *at);
    let ahead = Duration::from_millis(rng.u64(40..150));
    let phase = |servers: &[usize]| {
        let ms: Vec<u64> = servers.iter().map(|&s| longs[s]).collect();
        format!(
            "Lua busy loop {round} on servers {servers:?} for {ms:?}ms during a -n burst on {key}"
        )
    };
    let (first_what, second_what) = (phase(first_phase), phase(second_phase));
    let [first, rest @ ..] = &ctx.nemesis_clients[..] else { return };
    std::thread::scope(|scope| {
        let origin = std::time::Instant::now();
        let first_loops = start_loops(ctx, world, scope, first_phase, &longs, &first_what, origin);
        for (i, (at, ask)) in starts.iter().enumerate() {
            let when = origin + Duration::from_millis(*at);
            std::thread::sleep(when.saturating_duration_since(std::time::Instant::now()));
            let client = if ask.jitter.is_some() { *first } else { rest[i] };
            scope.spawn(move || crate::clients::perform(ctx, client, ask));
        }
        // The jittered -n's first attempt: when its sleep ends.
        let sleeping = wait_for(Duration::from_secs(1), || {
            let (op, _) = ctx.current.lock().unwrap().get(first).copied()?;
            let err = std::fs::read_to_string(ctx.dir.join(format!("op{op}.err"))).ok()?;
            let ms = err.split("--jitter: sleeping ").nth(1)?.split("ms").next()?;
            Some((std::time::Instant::now(), ms.trim().parse::<u64>().ok()?))
        });
        let at = sleeping.map_or_else(std::time::Instant::now, |(seen, ms)| {
            (seen + Duration::from_millis(ms)).checked_sub(ahead).unwrap_or(seen)
        });
        let second_loops = start_loops(ctx, world, scope, second_phase, &longs, &second_what, at);
        first_loops.join().unwrap();
        second_loops.join().unwrap();
    });
}

/// Starts [`BUSY_LOOP`] on `servers` (for `longs[server]` ms each) at
/// `origin`, each from a thread and a connection of its own; records the
/// fault's start, and its stop once every loop has returned (the thread
/// returned does both).
fn start_loops<'s>(
    ctx: &'s Ctx,
    world: &'s World,
    scope: &'s std::thread::Scope<'s, '_>,
    servers: &[usize],
    longs: &[u64],
    what: &str,
    origin: std::time::Instant,
) -> std::thread::ScopedJoinHandle<'s, ()> {
    std::thread::sleep(origin.saturating_duration_since(std::time::Instant::now()));
    record(ctx, what, "start", None);
    let loops: Vec<_> = servers
        .iter()
        .map(|&s| {
            let (mut conn, us) = (world.fleet.servers[s].conn(), longs[s] * 1000);
            scope.spawn(move || {
                let _: redis::RedisResult<redis::Value> =
                    redis::cmd("EVAL").arg(BUSY_LOOP).arg(0).arg(us).query(&mut conn);
            })
        })
        .collect();
    let what = what.to_owned();
    scope.spawn(move || {
        for l in loops {
            l.join().unwrap();
        }
        record(ctx, &what, "stop", None);
    })
}

/// Ends every fault: servers running and answering, links passing, clocks
/// true, memory unbounded.
pub fn heal(ctx: &Ctx, world: &mut World) {
    for ns in &ctx.netns {
        ns.cut(&[]).unwrap();
    }
    for server in &mut world.fleet.servers {
        if server.is_running() {
            server.resume();
        } else {
            server.start_again();
        }
        let _: redis::RedisResult<redis::Value> =
            redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("0").query(&mut server.conn());
        let _: redis::RedisResult<redis::Value> =
            redis::cmd("CLIENT").arg("UNPAUSE").query(&mut server.conn());
    }
    for proxies in &world.proxies {
        for p in proxies {
            p.set(ProxyMode::Pass);
        }
    }
}

/// Steps every server's clock back to the true time.
pub fn heal_clocks(world: &World) {
    for clock in &world.clocks {
        std::fs::write(clock, "+0\n").unwrap();
    }
}
