//! When a run may run: its schedule (`--cron`, `--once-per`) read in its
//! zone (`--tz`, the file's `tz`, the environment's, the host's), the
//! tick of it that this run belongs to, and the jitter and the wait that
//! the tick bounds.

use std::time::Duration;

use crate::cli;
use crate::config_file;
use crate::error::Error;
use crate::lock::{Tick, Wait};
use crate::schedule::{Schedule, Zone, ZoneFrom};

use super::values::{duration, usage};

/// `--once-per DUR` (at least a second: a tick is a cron slot, and the
/// servers keep ms; at most a year) or `--cron EXPR` (whose ticks are at
/// most a year too), read in the zone of `--tz` (or the file's `tz`,
/// `CRON_TZ`, `TZ`, `/etc/localtime`, UTC). A zone given by `--tz` or the
/// file is looked up whatever the schedule, so a misspelt one is refused
/// even where nothing reads it; one from the environment or the host only
/// where the schedule counts calendar time. One run per tick, so neither
/// `--limit` nor `--shared`. With the schedule, where its zone came from
/// (`None` for `--once-per` under a day, which counts in UTC whatever
/// the zone).
pub(super) fn schedule(
    a: &cli::RunArgs,
    g: &config_file::Globals,
) -> Result<Option<(Schedule, Option<ZoneFrom>)>, Error> {
    let resolved = || zone(a.tz.as_deref(), g);
    let given = (a.tz.is_some() || g.tz.value.is_some()).then(resolved).transpose()?;
    let zone = || given.clone().map_or_else(resolved, Ok);
    let (flag, raw, shown) = match (&a.once_per, &a.cron) {
        (Some(raw), _) => ("--once-per", raw, format!("--once-per {raw}")),
        (None, Some(raw)) => ("--cron", raw, format!("--cron '{}'", crate::text::printable(raw))),
        (None, None) => return Ok(None),
    };
    if a.limit != 1 || a.shared {
        return usage(format!(
            "{shown}: one run per tick, so it takes neither --limit nor --shared"
        ));
    }
    let (schedule, from) = match &a.cron {
        Some(expr) => {
            let (zone, from) = zone()?;
            (Schedule::cron(expr, zone).map_err(Error::Usage)?, Some(from))
        }
        None => {
            let every = duration(flag, raw)?;
            if every < Duration::from_secs(1) || every > crate::lock::MAX_TICK {
                return usage(format!("{shown}: must be between 1s and a year"));
            }
            let (zone, from) = if every < Duration::from_secs(86_400) {
                (Zone::utc(), None)
            } else {
                zone().map(|(zone, from)| (zone, Some(from)))?
            };
            (Schedule::once_per(every, zone).map_err(Error::Usage)?, from)
        }
    };
    // The bound is the schedule's, not the tick in progress's, so a line
    // is accepted or refused at every start alike (`0 0 29 2 *` has
    // four-year ticks and eight across 2100).
    let longest = schedule.longest_tick();
    if longest > crate::lock::MAX_TICK {
        return usage(format!(
            "{shown}: {} days between two of its instants; a tick is at most a year (366 days)",
            longest.as_secs() / 86_400
        ));
    }
    Ok(Some((schedule, from)))
}

/// The zone `--cron` and `--once-per` of a day or more are read in, and
/// where it came from: `tz` (`--tz`), else the file's `tz`, else the
/// environment's or the host's ([`Zone::resolve`]).
pub(super) fn zone(tz: Option<&str>, g: &config_file::Globals) -> Result<(Zone, ZoneFrom), Error> {
    let explicit = match (tz, &g.tz.value) {
        (Some(tz), _) => Some(("--tz".to_owned(), tz)),
        (None, Some(tz)) => Some((g.tz.label("--tz"), tz.as_str())),
        (None, None) => None,
    };
    let explicit = explicit.as_ref().map(|(origin, name)| (origin.as_str(), *name));
    Zone::resolve(explicit, |var| std::env::var(var).ok()).map_err(Error::Usage)
}

/// The tick of `schedule` that holds this host's clock now.
pub(super) fn tick_now(schedule: &Schedule) -> Result<Tick, Error> {
    let now = jiff::Timestamp::now();
    let tick = schedule.tick_at(now).map_err(Error::Usage)?;
    Ok(Tick { start_ms: tick.start_ms(), end_ms: tick.end_ms(), offset_s: tick.offset_s })
}

/// `--jitter` of a run with a schedule: refused when it is at least the
/// schedule's longest tick ([`Schedule::longest_tick`]), else cut to what
/// is left of this run's tick.
///
/// A schedule's ticks differ in length (`0,1 * * * *` has one of a
/// minute and one of 59; a London day 23, 24 or 25 hours), so the rule
/// judges the schedule, not the tick in progress: a line is accepted or
/// refused at every firing alike, never a usage error at some. A jitter
/// as long as the longest tick would be cut in every tick (a typo, not a
/// spread), so it is refused. Below that, the sleep is drawn from what is
/// left of this tick when that is shorter (the flag's "up to" holds),
/// so a run never sleeps past its tick into one it does not belong to;
/// the wait ends with the tick as well. Assumes a spread over the rest of
/// the tick is what a jitter longer than this tick was for. Breaks as a
/// spread: in a short tick the hosts spread over less than `--jitter`, and
/// one that starts near its tick's end barely sleeps.
pub(super) fn tick_jitter(
    jitter: Duration,
    schedule: &Schedule,
    tick: Tick,
    flag: &str,
) -> Result<Duration, Error> {
    let longest = schedule.longest_tick();
    if jitter >= longest {
        return usage(format!(
            "--jitter {}: must be shorter than the tick ({flag}'s longest: {})",
            crate::text::fmt_duration(jitter),
            crate::text::fmt_duration(longest)
        ));
    }
    let end = tick.start() + Duration::from_millis(tick.end_ms - tick.start_ms);
    let left = end.duration_since(std::time::SystemTime::now()).unwrap_or_default();
    Ok(jitter.min(left))
}

/// A wait for a run of `tick` ends with the tick: a run that starts after
/// its tick ended would run a tick that is over.
pub(super) fn tick_wait(wait: Wait, tick: Option<Tick>) -> Wait {
    let Some(tick) = tick else { return wait };
    let now = std::time::SystemTime::now();
    let left = tick.start() + Duration::from_millis(tick.end_ms - tick.start_ms);
    let left = left.duration_since(now).unwrap_or_default();
    match wait {
        Wait::Once => Wait::Once,
        Wait::Forever => Wait::For(left),
        Wait::For(d) => Wait::For(d.min(left)),
    }
}
