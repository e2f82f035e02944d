//! Schedules in a time zone: which tick a run belongs to, for `run --cron`
//! and for `--once-per` of a day or more, which count local calendar time.
//!
//! A [`Schedule`] is a crontab line's five fields ([`Schedule::cron`]) or a
//! `--once-per` period ([`Schedule::once_per`]), read in a [`Zone`] (an
//! IANA name, resolved by [`Zone::resolve`]). Its *instants* are the
//! moments it schedules; the tick of a run started at `t` is `[the latest
//! instant at or before t, the next instant)` ([`Schedule::tick_at`]).
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
//! the schedule's text, the zone's name, the tz database's rules for that
//! zone, and the start instant; no state of the host enters it. Hosts
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

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{Timestamp, Unit};

#[cfg(test)]
mod tests;

/// A day in milliseconds.
const DAY_MS: u128 = 86_400_000;

/// How far [`Schedule::tick_at`] looks for an instant, in days: 30 years.
/// A line whose days match this rarely (`0 0 29 2 */2`: the 29th of
/// February on some weekdays) can go longer without an instant; the
/// tick is then an error naming the line.
const SEARCH_DAYS: i32 = 30 * 366;

/// croner's bit for "this value is in the field" (its private
/// `component::ALL_BIT`; `CronComponent::is_bit_set` takes it).
const CRONER_ALL_BIT: u8 = 1;

/// The longest `--cron` line accepted, in bytes: a crontab line's schedule
/// is short, and its text travels in every record.
const MAX_CRON_LEN: usize = 200;

/// A time zone by its IANA name, as hosts compare it.
#[derive(Clone, Debug)]
pub struct Zone {
    /// The name, as the tz database spells it (`Europe/London`).
    name: String,
    /// Its rules.
    tz: TimeZone,
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl Zone {
    /// UTC.
    pub fn utc() -> Zone {
        Zone { name: "UTC".to_string(), tz: TimeZone::UTC }
    }

    /// The zone named `name` in the tz database (the system's, or the
    /// bundled copy on a host without one); `origin` names where the name
    /// came from for the error (`--tz`, `tz in /etc/redlock.toml`):
    /// `--tz Mars/Olympus: no such time zone`.
    pub fn named(name: &str, origin: &str) -> Result<Zone, String> {
        let shown: String = name.chars().filter(|c| !c.is_control()).collect();
        Zone::lookup(name, &format!("{origin} {}", shown.trim()))
    }

    /// The zone named `name`; errors begin with `label`.
    fn lookup(name: &str, label: &str) -> Result<Zone, String> {
        let name = name.trim();
        if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
            return Err(format!("{label}: not a time zone name"));
        }
        match TimeZone::get(name) {
            Ok(tz) => Ok(Zone { name: tz.iana_name().unwrap_or(name).to_string(), tz }),
            Err(_) => Err(format!("{label}: no such time zone")),
        }
    }

    /// The zone `--cron` and `--once-per` of a day or more are read in:
    /// `explicit` (`(origin, name)`: `--tz`, or else the configuration
    /// file's `tz`), then `CRON_TZ` (cronie hands a crontab's to its jobs),
    /// then `TZ` (a leading `:` and a path through a `zoneinfo` directory
    /// are taken off), then the host's `/etc/localtime`, then UTC. `env`
    /// reads the environment. An unknown zone from any of them is an error
    /// naming it; so is an `/etc/localtime` that does not say its zone's
    /// name (a copied file: hosts could not compare it).
    pub fn resolve(
        explicit: Option<(&str, &str)>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Zone, String> {
        Zone::resolve_from(explicit, env, std::path::Path::new("/etc/localtime"))
    }

    /// [`Zone::resolve`] with the host's zone read from `localtime`.
    fn resolve_from(
        explicit: Option<(&str, &str)>,
        env: impl Fn(&str) -> Option<String>,
        localtime: &std::path::Path,
    ) -> Result<Zone, String> {
        if let Some((origin, name)) = explicit {
            return Zone::named(name, origin);
        }
        for var in ["CRON_TZ", "TZ"] {
            if let Some(value) = env(var).filter(|v| !v.is_empty()) {
                let shown: String = value.chars().filter(|c| !c.is_control()).collect();
                return Zone::lookup(zone_name_of(&value), &format!("{var}={shown}"));
            }
        }
        let shown = localtime.display();
        match std::fs::symlink_metadata(localtime) {
            Err(_) => Ok(Zone::utc()),
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(localtime).map_err(|e| format!("{shown}: {e}"))?;
                let target = target.to_string_lossy();
                match target.rsplit_once("zoneinfo/") {
                    Some((_, name)) => Zone::lookup(name, &format!("{shown} -> {target}")),
                    None => Err(format!(
                        "{shown}: links to {target}, not into a zoneinfo directory; set --tz"
                    )),
                }
            }
            Ok(_) => {
                Err(format!("{shown}: a copied zone file does not say its zone's name; set --tz"))
            }
        }
    }

    /// The zone's name (`Europe/London`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The zone name in a `TZ` value: `:Europe/London` and
/// `/usr/share/zoneinfo/Europe/London` both name `Europe/London`.
fn zone_name_of(value: &str) -> &str {
    let value = value.strip_prefix(':').unwrap_or(value);
    match value.rsplit_once("zoneinfo/") {
        Some((_, name)) => name,
        None => value,
    }
}

/// `at` with its offset in `zone`, to the second (with a fraction only when
/// it has one): `2027-03-29T00:30:00+01:00`. The one format of a tick
/// everywhere (`REDLOCK_TICK`, history, status, check, the skip line).
pub fn format_instant(at: Timestamp, zone: &Zone) -> String {
    at.to_zoned_datetime(zone.tz.clone()).strftime("%Y-%m-%dT%H:%M:%S%.f%:z").to_string()
}

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

/// A crontab line's five fields as sets, with cronie's flags.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cron {
    /// The line, whitespace-normalised (`@` names lower-cased).
    text: String,
    /// Bit m: minute m (0-59).
    minutes: u64,
    /// Bit h: hour h (0-23).
    hours: u32,
    /// Bit d: day of month d (1-31).
    days: u32,
    /// Bit m: month m (1-12).
    months: u16,
    /// Bit w: weekday w, 0 Sunday to 6 Saturday.
    weekdays: u8,
    /// Both day fields must match (one starts with `*`), not either.
    day_and: bool,
    /// The minute or hour field starts with `*` (cronie's `MIN_STAR |
    /// HR_STAR`): fires in both passes of a fold and not in a gap.
    wild: bool,
}

impl Schedule {
    /// The schedule of the crontab line `expr` (five fields with lists,
    /// ranges, steps and names, or `@hourly`, `@daily`, `@weekly`,
    /// `@monthly`, `@yearly`) in `zone`. Errors name the line and the
    /// field: `--cron '61 * * * *': minute 61 is out of range 0-59`.
    pub fn cron(expr: &str, zone: Zone) -> Result<Schedule, String> {
        Ok(Schedule { kind: Kind::Cron(Cron::parse(expr)?), zone })
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
    pub fn identity(&self) -> String {
        match &self.kind {
            Kind::Cron(cron) => format!("cron {} in {}", cron.text, self.zone.name),
            Kind::Every(ms) => format!("every {}", format_duration(Duration::from_millis(*ms))),
            Kind::Days(n) => format!("every {n}d in {}", self.zone.name),
            Kind::Weeks(n) => format!("every {n}w in {}", self.zone.name),
        }
    }

    /// The schedule for messages: `'30 0 * * *' in Europe/London`,
    /// `once per 1d in Europe/London`, `once per 5m`.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Cron(cron) => format!("'{}' in {}", cron.text, self.zone.name),
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
        Ok(Tick { start, end, label: format_instant(start, &self.zone) })
    }

    /// The schedule's instants (the starts of its ticks) in `[from, to)`,
    /// in order: the ticks a `check` finds missed between two moments.
    pub fn instants_between(
        &self,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<Timestamp>, String> {
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

impl Cron {
    /// Parses a crontab line's schedule (see [`Schedule::cron`]).
    fn parse(expr: &str) -> Result<Cron, String> {
        let shown: String = expr.chars().filter(|c| !c.is_control() || c.is_whitespace()).collect();
        let words: Vec<&str> = shown.split_whitespace().collect();
        let text = words.join(" ");
        let bad = |why: String| format!("--cron '{text}': {why}");
        if shown.len() != expr.len() {
            return Err(bad("holds control characters".to_string()));
        }
        if text.len() > MAX_CRON_LEN {
            return Err(bad(format!("longer than {MAX_CRON_LEN} bytes")));
        }
        let (text, fields) = match words.as_slice() {
            [name] if name.starts_with('@') => {
                let name = name.to_ascii_lowercase();
                let fields = match name.as_str() {
                    "@hourly" => "0 * * * *",
                    "@daily" | "@midnight" => "0 0 * * *",
                    "@weekly" => "0 0 * * 0",
                    "@monthly" => "0 0 1 * *",
                    "@yearly" | "@annually" => "0 0 1 1 *",
                    _ => {
                        return Err(bad(
                            "not one of @hourly, @daily, @weekly, @monthly, @yearly".to_string()
                        ));
                    }
                };
                (name, fields.to_string())
            }
            [_, _, _, _, _] => (text.clone(), text.clone()),
            _ => {
                return Err(bad(format!(
                    "{} fields; a schedule has five (minute, hour, day of month, month, day of week) or is an @ name",
                    words.len()
                )));
            }
        };
        let split: Vec<&str> = fields.split(' ').collect();
        for (field, (what, low, high, names)) in split.iter().zip(FIELDS) {
            check_field(field, what, low, high, names).map_err(bad)?;
        }
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .year(croner::parser::Year::Disallowed)
            .build();
        let pattern = parser.parse(&fields).map_err(|e| bad(e.to_string()))?.pattern;
        let bits = |c: &croner::CronComponent, range: std::ops::RangeInclusive<u16>| -> u64 {
            range
                .filter(|&i| c.is_bit_set(i, CRONER_ALL_BIT).unwrap_or(false))
                .fold(0, |acc, i| acc | 1 << i)
        };
        let weekdays = bits(&pattern.days_of_week, 0..=7);
        let star = |i: usize| split[i].starts_with('*');
        let cron = Cron {
            text,
            minutes: bits(&pattern.minutes, 0..=59),
            hours: bits(&pattern.hours, 0..=23) as u32,
            days: bits(&pattern.days, 1..=31) as u32,
            months: bits(&pattern.months, 1..=12) as u16,
            // Sunday is 0 or 7.
            weekdays: ((weekdays | weekdays >> 7) & 0x7f) as u8,
            day_and: star(2) || star(4),
            wild: star(0) || star(1),
        };
        if !cron.ever_matches() {
            return Err(bad("no month has that day: it never fires".to_string()));
        }
        Ok(cron)
    }

    /// Whether some date of some year matches (`0 0 30 2 *` never does).
    fn ever_matches(&self) -> bool {
        const LONGEST: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let day_any = (1..=12).any(|m| {
            self.months & 1 << m != 0
                && self.days & ((1u64 << (LONGEST[m - 1] + 1)) - 2) as u32 != 0
        });
        let sets = self.minutes != 0 && self.hours != 0 && self.months != 0;
        sets && if self.day_and {
            day_any && self.weekdays != 0
        } else {
            day_any || self.weekdays != 0
        }
    }

    /// Whether the line runs on the local date `day` (Vixie's day rule).
    fn day_matches(&self, day: Date) -> bool {
        if self.months & 1 << day.month() == 0 {
            return false;
        }
        let dom = self.days & 1 << day.day() != 0;
        let dow = self.weekdays & 1 << day.weekday().to_sunday_zero_offset() != 0;
        if self.day_and { dom && dow } else { dom || dow }
    }

    /// Pushes the instants of the local date `day` (a matching one) onto
    /// `out`, by the rule of the module doc, unsorted.
    fn instants_on(
        &self,
        day: Date,
        tz: &TimeZone,
        out: &mut Vec<Timestamp>,
    ) -> Result<(), String> {
        for hour in members(u64::from(self.hours)) {
            for minute in members(self.minutes) {
                let local = DateTime::from_parts(day, Time::constant(hour, minute, 0, 0));
                let at = |offset: jiff::tz::Offset| {
                    offset.to_timestamp(local).map_err(|e| e.to_string())
                };
                match tz.to_ambiguous_timestamp(local).offset() {
                    AmbiguousOffset::Unambiguous { offset } => out.push(at(offset)?),
                    AmbiguousOffset::Fold { before, after } => {
                        let (a, b) = (at(before)?, at(after)?);
                        out.push(a.min(b));
                        if self.wild {
                            out.push(a.max(b));
                        }
                    }
                    AmbiguousOffset::Gap { before, after } if !self.wild => {
                        // The local time read with the later offset falls
                        // before the jump; the jump is the next transition.
                        let early = at(before)?.min(at(after)?);
                        let jump = tz.following(early).next().map(|t| t.timestamp());
                        out.push(jump.ok_or_else(|| format!("no transition after {local}"))?);
                    }
                    AmbiguousOffset::Gap { .. } => {}
                }
            }
        }
        Ok(())
    }

    /// The latest instant at or before `at`.
    fn latest_at_or_before(&self, at: Timestamp, tz: &TimeZone) -> Result<Timestamp, String> {
        self.search(at, tz, |d| d.yesterday(), |t| t <= at, |best, t| t > best)
    }

    /// The first instant after `at`.
    fn next_after(&self, at: Timestamp, tz: &TimeZone) -> Result<Timestamp, String> {
        self.search(at, tz, |d| d.tomorrow(), |t| t > at, |best, t| t < best)
    }

    /// Walks local dates from `at`'s by `step` to the first date with an
    /// instant that `fits`, and returns its `better` one. The instants of
    /// a date lie from its first instant to the next date's first (that
    /// one included: a time in a gap at the date's end maps to the jump),
    /// so an earlier date (later, walking forwards) can only tie; dates
    /// past `at`'s in the other direction cannot fit. Gives up after
    /// [`SEARCH_DAYS`].
    fn search(
        &self,
        at: Timestamp,
        tz: &TimeZone,
        step: impl Fn(Date) -> Result<Date, jiff::Error>,
        fits: impl Fn(Timestamp) -> bool,
        better: impl Fn(Timestamp, Timestamp) -> bool,
    ) -> Result<Timestamp, String> {
        let mut day = at.to_zoned_datetime(tz.clone()).date();
        let mut instants = Vec::new();
        for _ in 0..SEARCH_DAYS {
            if self.day_matches(day) {
                instants.clear();
                self.instants_on(day, tz, &mut instants)?;
                let best = instants
                    .iter()
                    .copied()
                    .filter(|&t| fits(t))
                    .reduce(|b, t| if better(b, t) { t } else { b });
                if let Some(best) = best {
                    return Ok(best);
                }
            }
            day = step(day).map_err(|e| e.to_string())?;
        }
        Err(format!("no instant within 30 years of {at}"))
    }
}

/// The members of a set of small numbers (bit n: n), in order.
fn members(mut set: u64) -> impl Iterator<Item = i8> {
    std::iter::from_fn(move || {
        let member = set.trailing_zeros();
        set &= set.wrapping_sub(1);
        (member < 64).then_some(member as i8)
    })
}

/// Each field: its name in messages, its range, and whether it takes names.
const FIELDS: [(&str, u32, u32, bool); 5] = [
    ("minute", 0, 59, false),
    ("hour", 0, 23, false),
    ("day of month", 1, 31, false),
    ("month", 1, 12, true),
    ("day of week", 0, 7, true),
];

/// Checks one field's syntax as cronie reads it (lists of `*`, `N`, `N-M`,
/// each with an optional `/STEP`; names only in month and day of week), so
/// that errors name the field and the number, and croner's extensions
/// (`L`, `W`, `#`, `?`) that cronie does not know are refused.
fn check_field(field: &str, what: &str, low: u32, high: u32, names: bool) -> Result<(), String> {
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        if let Some(step) = step {
            match step.parse::<u32>() {
                Ok(s) if (1..=high.max(1)).contains(&s) => {}
                _ => return Err(format!("{what} step {step:?} is not a number in 1-{high}")),
            }
        }
        if range == "*" {
            continue;
        }
        let ends: Vec<&str> = range.split('-').collect();
        if ends.len() > 2 || ends.iter().any(|e| e.is_empty()) {
            return Err(format!("{what} {item:?} is not a value, a range or *"));
        }
        for end in ends {
            if end.chars().all(|c| c.is_ascii_digit()) {
                let n: u32 = end
                    .parse()
                    .map_err(|_| format!("{what} {end} is out of range {low}-{high}"))?;
                if !(low..=high).contains(&n) {
                    return Err(format!("{what} {n} is out of range {low}-{high}"));
                }
            } else if !(names && end.len() == 3 && end.chars().all(|c| c.is_ascii_alphabetic())) {
                return Err(format!(
                    "{what} {end:?} is not a number{}",
                    if names { " or a three-letter name" } else { "" }
                ));
            }
        }
    }
    Ok(())
}
