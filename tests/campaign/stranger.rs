//! The stranger: a host of another schedule on a cron fleet's key, as a
//! host whose crontab names another zone ([`OTHER_LINE`]: the fleet's
//! line in UTC instead of +05:45, the same minutes). The servers record
//! each tick with its schedule, and refuse a host of another (exit 64,
//! skip kind `elsewhere`), on a free key and while the tick's holder runs;
//! the checker's `schedule-refused` invariant asks every such run to be
//! refused, never to run its command, never to skip (0 or the busy code)
//! as if another host of its own schedule had run the tick.
//!
//! It fires only when a quorum of the servers' records name the fleet's
//! schedule ([`FLEET_SCHEDULE`]), read directly from the servers just
//! before: then any quorum it could win holds a server that refuses it,
//! so it can never take the key's ticks from the fleet (a server that
//! forgot the record in a restart since has no vote for the tick). Each
//! tick it fires up to [`WHILE_HELD`] times as soon as the fleet's
//! holder of the tick is seen holding the key on a quorum (its job lasts
//! 0.1 s), then once in the tick's second half, the key free.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::clients::{Ask, Ctx, perform};
use crate::harness::lock_key;
use crate::history::{Mode, wall_ms};

/// The other schedule: the fleet's crontab line ([`crate::clients::CRON_LINE`])
/// read in UTC, whose minutes are the fleet's (+05:45 is a whole number of
/// minutes): the same ticks, another schedule.
pub const OTHER_LINE: [&str; 4] = ["--cron", "* * * * *", "--tz", "UTC"];

/// What the servers record for the fleet's line (`Schedule::identity`,
/// src/schedule/mod.rs). Written here, not taken from the library: a
/// change of the record's text shows as a stranger that never fires, and
/// so as a replay (`hole_another_schedule_skips_silently_while_held`)
/// that finds nothing.
const FLEET_SCHEDULE: &str = "cron * * * * * in Asia/Kathmandu";

/// How many times a tick it fires while the fleet's holder holds the key,
/// [`HELD_AGAIN`] apart.
const WHILE_HELD: usize = 3;

/// The pause between two firings while the key is held.
const HELD_AGAIN: Duration = Duration::from_millis(40);

/// How long into a tick it looks for the fleet's holder, in ms.
const LOOK_FOR_MS: u64 = 2_000;

/// How often it looks at the servers meanwhile.
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// A server's answer within this, or none.
const SERVER_TIMEOUT: Duration = Duration::from_millis(200);

/// Fires runs of [`OTHER_LINE`] on `key` (whose fleet's tick is `every`)
/// as `client`, each tick (see the module doc), until `ctx.stop`.
pub fn stranger(ctx: &Arc<Ctx>, client: usize, (key, every): (&'static str, Duration), seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x574A);
    let every_ms = u64::try_from(every.as_millis()).unwrap();
    let mut looks = Looks { conns: ctx.servers.iter().map(|_| None).collect() };
    // The quorum of the members the clients are given (a Sentinel group
    // is one, and not read: it counts as not naming the schedule).
    let quorum = ctx.urls[client].split(',').count() / 2 + 1;
    while !ctx.stop.load(Ordering::Relaxed) {
        let start = (wall_ms() / every_ms + 1) * every_ms;
        if !nap_until(ctx, start) {
            break;
        }
        let mut fired = 0;
        while fired < WHILE_HELD && wall_ms() < start + LOOK_FOR_MS {
            let (held, named) = looks.of(ctx, key);
            if held >= quorum && named >= quorum {
                fire(ctx, client, key);
                fired += 1;
                std::thread::sleep(HELD_AGAIN);
            } else {
                std::thread::sleep(LOOK_EVERY);
            }
        }
        let later = start + rng.u64(every_ms / 2..every_ms - every_ms / 10);
        if !nap_until(ctx, later) {
            break;
        }
        if looks.of(ctx, key).1 >= quorum {
            fire(ctx, client, key);
        }
    }
}

/// Sleeps until the wall clock reads `at` (ms), in steps, so that a run
/// that stops is not held up a minute; false when the run stopped.
fn nap_until(ctx: &Ctx, at: u64) -> bool {
    while wall_ms() < at && !ctx.stop.load(Ordering::Relaxed) {
        let left = Duration::from_millis(at.saturating_sub(wall_ms()));
        std::thread::sleep(left.min(Duration::from_millis(200)));
    }
    !ctx.stop.load(Ordering::Relaxed)
}

/// One run of [`OTHER_LINE`] as a fleet's host runs (`-n -E 0`, a job of
/// 0.1 s that exits 3), recorded as a run of another schedule.
fn fire(ctx: &Ctx, client: usize, key: &str) {
    let ask = Ask {
        busy_code: Some(0),
        section: (Duration::from_millis(100), 3),
        extra: &OTHER_LINE,
        other_schedule: true,
        ..Ask::run(key, Mode::Exclusive, Duration::from_secs(1), None)
    };
    perform(ctx, client, &ask);
}

/// Connections to the servers, for the stranger's own looks (on loopback,
/// outside every cut of the partition families).
struct Looks {
    conns: Vec<Option<redis::Connection>>,
}

impl Looks {
    /// On how many servers `key` is held, and on how many its record
    /// names [`FLEET_SCHEDULE`]. A server that does not answer within
    /// [`SERVER_TIMEOUT`] counts for neither.
    fn of(&mut self, ctx: &Ctx, key: &str) -> (usize, usize) {
        let lock = lock_key(key);
        let record = format!("{lock}:last");
        let (mut held, mut named) = (0, 0);
        for (url, conn) in ctx.servers.iter().zip(&mut self.conns) {
            if conn.is_none() {
                *conn = connect(url);
            }
            let Some(c) = conn.as_mut() else { continue };
            let answer: redis::RedisResult<(bool, Option<String>)> =
                redis::pipe().cmd("EXISTS").arg(&lock).cmd("HGET").arg(&record).arg("sch").query(c);
            match answer {
                Ok((exists, schedule)) => {
                    held += usize::from(exists);
                    named += usize::from(schedule.as_deref() == Some(FLEET_SCHEDULE));
                }
                Err(_) => *conn = None,
            }
        }
        (held, named)
    }
}

/// A connection to `url` whose calls time out after [`SERVER_TIMEOUT`].
fn connect(url: &str) -> Option<redis::Connection> {
    let client = redis::Client::open(url).ok()?;
    let conn = client.get_connection_with_timeout(SERVER_TIMEOUT).ok()?;
    conn.set_read_timeout(Some(SERVER_TIMEOUT)).ok()?;
    conn.set_write_timeout(Some(SERVER_TIMEOUT)).ok()?;
    Some(conn)
}
