//! Schedules in a time zone: which tick a run belongs to, for `run --cron`
//! and for `--once-per` of a day or more, which count local calendar time.
//!
//! A [`Schedule`] is a crontab line's five fields ([`Schedule::cron`]) or a
//! `--once-per` period ([`Schedule::once_per`]), read in a [`Zone`] (an
//! IANA name, resolved by [`Zone::resolve`], and known by one name
//! whatever it was given: `links` holds the tz database's other names for
//! a zone). Its *instants* are the moments it schedules; the tick of a
//! run started at `t` is `[the latest instant at or before t, the next
//! instant)` ([`Schedule::tick_at`]).
//! Fields are parsed by the `croner` crate (into sets, nothing more);
//! civil time, zones and the tz database are `jiff`'s.
//!
//! # The instants of a crontab line
//! For each local date whose day matches (Vixie's rule: when the day of
//! month or the day of week field starts with `*`, both must match,
//! otherwise either) and each matching local time `h:m`, as cronie's
//! `cron.c` (`find_jobs`, and the main loop's `timeDiff` cases) fires a
//! job whose minute or hour field starts with `*` ("wild", cronie's
//! `MIN_STAR | HR_STAR`; `@hourly` is wild, the other `@` names are not)
//! and one whose fields do not ("fixed-time"):
//! - a local time that exists once: that instant;
//! - a local time that happens twice (a clock set back): fixed-time, the
//!   first occurrence only (cronie's "negative" case runs only wild jobs
//!   until its virtual clock catches up); wild, both occurrences;
//! - a local time that does not exist (a clock set forward): fixed-time,
//!   the transition instant, the first moment after the gap (cronie's
//!   "medium" case runs each skipped minute's fixed-time jobs at once);
//!   wild, none (cronie runs wild jobs for the current minute only, and
//!   the next matching time covers the real hour).
//!
//! Equal instants are one instant. cronie classes a jump by its size:
//! above 3 hours it is a clock change, not daylight saving, and cronie
//! then runs nothing it skipped; no tz database rule from 2026 on shifts
//! a clock that far, but a zone that changes its standard offset by more
//! would lose a fixed-time job's gap there under cronie, while its tick
//! still exists (no host fires it, so nothing runs twice). cronie also
//! applies these cases at its own zone's jumps: a job with a `CRON_TZ`
//! other than the daemon's may be missed or fire twice at its zone's
//! change (cronie's `find_jobs` comment); the tick rule makes the second
//! firing a skip.
//!
//! **Why every host computes the same tick.** The tick is a function of
//! the schedule (its sets, however the line spells them), the zone (by
//! its one name), the tz database's rules for that zone, and the start
//! instant; no state of the host enters it. Hosts
//! with the same line, zone and database agree on every instant, so two
//! runs whose starts fall between the same two instants get the same
//! tick. Breaks when hosts' clocks disagree by more than the lock's
//! clock allowance near an instant (each starts in a different tick; the
//! servers refuse a host that far off), or when hosts' tz databases
//! differ for that zone (a rule change not yet installed everywhere):
//! the record carries the schedule's identity ([`Schedule::identity`]),
//! not the database's version.
//!
//! # Periods of a day or more
//! `--once-per N` days counts local calendar days, midnight to midnight
//! (23 or 25 hours at a change; a midnight that does not exist starts the
//! day at its first instant), in slots of N days from 1970-01-01; a whole
//! number of weeks counts weeks from a Monday (1970-01-05). Below a day
//! the slot stays `floor(now / N)` from the Unix epoch, which no zone
//! changes. Anything else (36 h, humantime's 30.44-day month) is refused.
//!
//! A period knows the run's start, not the crontab's time, and that
//! breaks in one case: a gap that ends at local midnight (America/Nuuk's
//! spring change, 23:00 to 00:00) with a job timed inside it. cron runs
//! the skipped time at the next date's first instant, which counts as the
//! next date, so that date's own run is skipped and the date of the gap
//! has none. `--cron` has no such case: its instants are the line's.

use std::time::Duration;

use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;
use jiff::{Timestamp, Unit};

mod cron;
mod links;
#[cfg(test)]
mod tests;
mod zone;

use cron::Cron;
pub use zone::{Zone, ZoneFrom, format_at_offset, format_instant};

/// A day in milliseconds.
const DAY_MS: u128 = 86_400_000;

/// The most instants [`Schedule::instants_between`] lists (the newest):
/// a 1 s tick over a day; a longer window of shorter ticks lists only
/// these, so `check` on any key ends in bounded time and memory.
pub const MAX_INSTANTS: usize = 100_000;

/// The tick a run belongs to: `[start, end)`, the scheduled instant at or
/// before the run's start and the next one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tick {
    /// The scheduled instant the tick starts at.
    pub start: Timestamp,
    /// The next scheduled instant, where the next tick starts.
    pub end: Timestamp,
    /// `start` with its offset in the schedule's zone ([`format_instant`]).
    pub label: String,
    /// The zone's offset from UTC at `start`, in seconds.
    pub offset_s: i32,
}

impl Tick {
    /// The start in ms since the Unix epoch (0 before it).
    pub fn start_ms(&self) -> u64 {
        u64::try_from(self.start.as_millisecond()).unwrap_or(0)
    }

    /// The end in ms since the Unix epoch (0 before it).
    pub fn end_ms(&self) -> u64 {
        u64::try_from(self.end.as_millisecond()).unwrap_or(0)
    }
}

/// A schedule and the zone it is read in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// What it schedules.
    kind: Kind,
    /// Where its calendar is read.
    zone: Zone,
}

/// What a schedule schedules.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// A crontab line.
    Cron(Cron),
    /// Below a day: slots of this many ms from the Unix epoch.
    Every(u64),
    /// Slots of this many local days from 1970-01-01.
    Days(i64),
    /// Slots of this many weeks from Monday 1970-01-05.
    Weeks(i64),
}

impl Schedule {
    /// The schedule of the crontab line `expr` (five fields with lists,
    /// ranges, steps and names, or `@hourly`, `@daily`, `@weekly`,
    /// `@monthly`, `@yearly`) in `zone`. Errors name the line and the
    /// field: `--cron '61 * * * *': minute 61 is out of range 0-59`.
    pub fn cron(expr: &str, zone: Zone) -> Result<Schedule, String> {
        Ok(Schedule { kind: Kind::Cron(Cron::parse(expr, cron::MAX_CRON_LEN)?), zone })
    }

    /// The schedule of `--once-per every` in `zone`: below a day, slots of
    /// `every` from the Unix epoch; a whole number of days, local calendar
    /// days (weeks from Monday when a multiple of seven). Anything else is
    /// an error pointing at `--cron`.
    pub fn once_per(every: Duration, zone: Zone) -> Result<Schedule, String> {
        let ms = every.as_millis();
        let shown = format_duration(every);
        let kind = if ms == 0 {
            return Err(format!("--once-per {shown}: must be at least 1ms"));
        } else if ms < DAY_MS {
            Kind::Every(ms as u64)
        } else if every.subsec_nanos() == 0 && ms.is_multiple_of(DAY_MS) && ms / DAY_MS <= 366 * 100
        {
            let days = ms / DAY_MS;
            if days.is_multiple_of(7) {
                Kind::Weeks((days / 7) as i64)
            } else {
                Kind::Days(days as i64)
            }
        } else {
            return Err(format!(
                "--once-per {shown}: neither below a day nor a whole number of days; \
                 use --cron for a calendar schedule (--cron '0 0 1 * *' runs monthly)"
            ));
        };
        Ok(Schedule { kind, zone })
    }

    /// The zone the schedule is read in.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// What identifies the schedule to the servers' record, short and
    /// without control characters: `cron 30 0 * * * in Europe/London`,
    /// `every 1d in Europe/London`, `every 5m` (below a day no zone counts).
    /// One schedule has one identity however it was spelled: the line as
    /// one canonical text (`@daily` and `00 00 * * *` are `0 0 * * *`),
    /// the zone by its one name (`Etc/UTC` is `UTC`).
    pub fn identity(&self) -> String {
        match &self.kind {
            Kind::Cron(cron) => format!("cron {} in {}", cron.canonical(), self.zone.name()),
            Kind::Every(ms) => format!("every {}", format_duration(Duration::from_millis(*ms))),
            Kind::Days(n) => format!("every {n}d in {}", self.zone.name()),
            Kind::Weeks(n) => format!("every {n}w in {}", self.zone.name()),
        }
    }

    /// The schedule an [`Schedule::identity`] names (as a history entry or
    /// a record keeps it), so that `check` can list the instants a key's
    /// runs were scheduled at. It reads an identity as an older redlock
    /// wrote it too (the line and the zone as they were given:
    /// `cron @daily in Etc/UTC`).
    pub fn from_identity(identity: &str) -> Result<Schedule, String> {
        let bad = || format!("{identity:?}: not a schedule");
        let (what, zone) = match identity.rsplit_once(" in ") {
            Some((what, zone)) => (what, Zone::named(zone, "the key's schedule")?),
            None => (identity, Zone::utc()),
        };
        if let Some(expr) = what.strip_prefix("cron ") {
            let cron = Cron::parse(expr, cron::MAX_CANONICAL_LEN)?;
            return Ok(Schedule { kind: Kind::Cron(cron), zone });
        }
        let every = what.strip_prefix("every ").ok_or_else(bad)?;
        let duration = match every.strip_suffix('w') {
            Some(weeks) => {
                Duration::from_secs(weeks.parse::<u64>().map_err(|_| bad())? * 7 * 86_400)
            }
            None => humantime::parse_duration(every).map_err(|_| bad())?,
        };
        Schedule::once_per(duration, zone)
    }

    /// The longest tick the schedule has where no clock changes: the
    /// period of `--once-per` (whole days as 24 hours each), the longest
    /// time between two instants of a crontab line read in UTC. It
    /// depends on the schedule alone, so a bound on it holds at every
    /// start alike; a zone's clock change makes one tick of its day
    /// shorter or longer than this by the change (an hour, mostly).
    pub fn longest_tick(&self) -> Duration {
        match &self.kind {
            Kind::Cron(cron) => cron.longest_gap(),
            Kind::Every(ms) => Duration::from_millis(*ms),
            Kind::Days(n) => Duration::from_secs(86_400 * *n as u64),
            Kind::Weeks(n) => Duration::from_secs(7 * 86_400 * *n as u64),
        }
    }

    /// The schedule for messages: `'30 0 * * *' in Europe/London`,
    /// `once per 1d in Europe/London`, `once per 5m`.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Cron(cron) => format!("'{}' in {}", cron.text, self.zone.name()),
            _ => self.identity().replacen("every", "once per", 1),
        }
    }

    /// The tick a run started at `at` belongs to. An error only when the
    /// schedule has no instant within 30 years of `at`, or `at` is near
    /// the ends of the calendar (year 9999).
    pub fn tick_at(&self, at: Timestamp) -> Result<Tick, String> {
        let (start, end) = match &self.kind {
            Kind::Cron(cron) => {
                let start =
                    cron.latest_at_or_before(at, &self.zone.tz).map_err(|e| self.failed(e))?;
                let end = cron.next_after(at, &self.zone.tz).map_err(|e| self.failed(e))?;
                (start, end)
            }
            Kind::Every(ms) => {
                let every = *ms as i64;
                let start = at.as_millisecond().div_euclid(every) * every;
                (millis(start)?, millis(start + every)?)
            }
            Kind::Days(n) => self.days_slot(at, *n, Date::constant(1970, 1, 1))?,
            Kind::Weeks(n) => self.days_slot(at, n * 7, Date::constant(1970, 1, 5))?,
        };
        let offset_s = self.zone.tz.to_offset(start).seconds();
        Ok(Tick { start, end, label: format_instant(start, &self.zone), offset_s })
    }

    /// The schedule's instants (the starts of its ticks) in `[from, to)`,
    /// in order: the ticks a `check` finds missed between two moments. At
    /// most [`MAX_INSTANTS`], the newest; a window is first cut to the
    /// last [`MAX_INSTANTS`] slots of `--once-per` below a day, or minutes
    /// of a crontab line (no two of its instants are closer), so the work
    /// is bounded too.
    pub fn instants_between(
        &self,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<Timestamp>, String> {
        let closest = match &self.kind {
            Kind::Every(ms) => Some(*ms),
            Kind::Cron(_) => Some(60_000),
            Kind::Days(_) | Kind::Weeks(_) => None,
        };
        let span = closest.map(|ms| ms.saturating_mul(MAX_INSTANTS as u64 + 1));
        let cut =
            span.and_then(|ms| to.checked_sub(jiff::SignedDuration::from_millis(ms as i64)).ok());
        let from = cut.map_or(from, |cut| from.max(cut));
        let mut out = self.all_between(from, to)?;
        out.drain(..out.len().saturating_sub(MAX_INSTANTS));
        Ok(out)
    }

    /// Every instant of the schedule in `[from, to)`, in order.
    fn all_between(&self, from: Timestamp, to: Timestamp) -> Result<Vec<Timestamp>, String> {
        let mut out = Vec::new();
        if from >= to {
            return Ok(out);
        }
        if let Kind::Cron(cron) = &self.kind {
            let tz = &self.zone.tz;
            let last = to
                .to_zoned_datetime(tz.clone())
                .date()
                .tomorrow()
                .map_err(|e| self.failed(e.to_string()))?;
            let mut day = from
                .to_zoned_datetime(tz.clone())
                .date()
                .yesterday()
                .map_err(|e| self.failed(e.to_string()))?;
            while day <= last {
                if cron.day_matches(day) {
                    cron.instants_on(day, tz, &mut out).map_err(|e| self.failed(e))?;
                }
                day = day.tomorrow().map_err(|e| self.failed(e.to_string()))?;
            }
            out.retain(|t| (from..to).contains(t));
            out.sort();
            out.dedup();
            return Ok(out);
        }
        let mut tick = self.tick_at(from)?;
        if tick.start < from {
            tick = self.tick_at(tick.end)?;
        }
        while tick.start < to {
            out.push(tick.start);
            tick = self.tick_at(tick.end)?;
        }
        Ok(out)
    }

    /// The slot of `n` local days from `epoch` holding `at`.
    fn days_slot(
        &self,
        at: Timestamp,
        n: i64,
        epoch: Date,
    ) -> Result<(Timestamp, Timestamp), String> {
        let tz = &self.zone.tz;
        let day = at.to_zoned_datetime(tz.clone()).date();
        let since = epoch.until((Unit::Day, day)).map_err(|e| self.failed(e.to_string()))?;
        let first = i64::from(since.get_days()).div_euclid(n) * n;
        let start = day_start(epoch, first, tz).map_err(|e| self.failed(e))?;
        let end = day_start(epoch, first + n, tz).map_err(|e| self.failed(e))?;
        Ok((start, end))
    }

    /// An error of this schedule's arithmetic, naming it.
    fn failed(&self, why: String) -> String {
        format!("{}: {why}", self.describe())
    }
}

/// The first instant of the local day `days` after `epoch` in `tz`.
fn day_start(epoch: Date, days: i64, tz: &TimeZone) -> Result<Timestamp, String> {
    let date = epoch.checked_add(jiff::Span::new().days(days)).map_err(|e| e.to_string())?;
    let midnight =
        tz.to_zoned_datetime(date.to_datetime(Time::midnight())).map_err(|e| e.to_string())?;
    Ok(midnight.start_of_day().map_err(|e| e.to_string())?.timestamp())
}

/// The instant `ms` after the Unix epoch.
fn millis(ms: i64) -> Result<Timestamp, String> {
    Timestamp::from_millisecond(ms).map_err(|e| e.to_string())
}

/// A duration as `--once-per` takes it: `5m`, `1h30m`, `36h`, `1d`, `1500ms`.
fn format_duration(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return format!("{}ns", d.as_nanos());
    }
    let mut out = String::new();
    for (unit, size) in [("d", DAY_MS), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)] {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}
