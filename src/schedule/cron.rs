//! A crontab line: its five fields read as cronie reads them and parsed
//! into sets (by croner), the one text that identifies it however it was
//! spelled ([`Cron::canonical`]), and its instants on a local date by
//! cronie's rule (the parent module's doc).

use std::time::Duration;

use jiff::Timestamp;
use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{AmbiguousOffset, TimeZone};

/// How far [`super::Schedule::tick_at`] looks for an instant, in days: 30 years.
/// A line whose days match this rarely (`0 0 29 2 */2`: the 29th of
/// February on some weekdays) can go longer without an instant; the
/// tick is then an error naming the line.
const SEARCH_DAYS: i32 = 30 * 366;

/// croner's bit for "this value is in the field" (its private
/// `component::ALL_BIT`; `CronComponent::is_bit_set` takes it).
const CRONER_ALL_BIT: u8 = 1;

/// The longest `--cron` line accepted, in bytes: a crontab line's schedule
/// is short, and its text travels in every record.
pub(super) const MAX_CRON_LEN: usize = 200;

/// The longest [`Cron::canonical`] read back: a line of
/// [`MAX_CRON_LEN`] bytes may be written longer (`0-58/2,1-59/6` lists
/// its minutes), but no field's runs and steps are longer than its values
/// written apart: every value of every field so, each field led by a
/// `*/NN`, is 381 bytes.
pub(super) const MAX_CANONICAL_LEN: usize = 400;

/// A crontab line's five fields as sets, with cronie's flags.
#[derive(Clone, Debug)]
pub(super) struct Cron {
    /// The line as given, whitespace-normalised (`@` names lower-cased),
    /// for messages; [`Cron::canonical`] is what identifies it.
    pub(super) text: String,
    /// What it schedules.
    fields: Fields,
}

/// Two lines are one schedule when their sets and stars are: `@daily`,
/// `@midnight`, `0 0 * * *` and `00 00 * * *` are one line.
impl PartialEq for Cron {
    fn eq(&self, other: &Cron) -> bool {
        self.fields == other.fields
    }
}

impl Eq for Cron {}

/// The five fields as sets, and which of them start with `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fields {
    /// Bit m: minute m (0-59).
    minutes: u64,
    /// Bit h: hour h (0-23).
    hours: u32,
    /// Bit d: day of month d (1-31).
    days: u32,
    /// Bit m: month m (1-12).
    months: u16,
    /// Bit w: weekday w, 0 Sunday to 6 Saturday (7 is 0).
    weekdays: u8,
    /// Whether each field (minute, hour, day of month, month, day of
    /// week) starts with `*`: cronie's `MIN_STAR`, `HR_STAR` (the line is
    /// wild), `DOM_STAR` and `DOW_STAR` (both days must match, not either).
    stars: [bool; 5],
}

impl Cron {
    /// Parses a crontab line's schedule (see [`super::Schedule::cron`]) of
    /// at most `max_len` bytes.
    pub(super) fn parse(expr: &str, max_len: usize) -> Result<Cron, String> {
        let shown = crate::text::printable(expr.trim());
        let words: Vec<&str> = expr.split_whitespace().collect();
        let text = words.join(" ");
        let bad = |why: String| format!("--cron '{}': {why}", crate::text::printable(&text));
        if expr.chars().any(|c| crate::text::is_unsafe(c) && !c.is_whitespace()) {
            return Err(format!("--cron '{shown}': holds control characters"));
        }
        if text.len() > max_len {
            return Err(bad(format!("longer than {max_len} bytes")));
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
        for (field, spec) in split.iter().zip(&FIELDS) {
            check_field(field, spec).map_err(bad)?;
        }
        let pattern = croner_parse(&fields)
            .map_err(|_| {
                // The fields passed `check_field`, which refuses all croner
                // refuses; should croner differ, name the field it refused.
                let alone = |i: usize| {
                    let mut only = ["*"; 5];
                    only[i] = split[i];
                    croner_parse(&only.join(" ")).map_err(|e| (i, e))
                };
                match (0..5).map(alone).find_map(Result::err) {
                    Some((i, e)) => bad(format!("{} {:?}: {e}", FIELDS[i].what, split[i])),
                    None => bad("not a schedule cron reads".to_string()),
                }
            })?
            .pattern;
        let bits = |c: &croner::CronComponent, range: std::ops::RangeInclusive<u16>| -> u64 {
            range
                .filter(|&i| c.is_bit_set(i, CRONER_ALL_BIT).unwrap_or(false))
                .fold(0, |acc, i| acc | 1 << i)
        };
        let weekdays = bits(&pattern.days_of_week, 0..=7);
        let fields = Fields {
            minutes: bits(&pattern.minutes, 0..=59),
            hours: bits(&pattern.hours, 0..=23) as u32,
            days: bits(&pattern.days, 1..=31) as u32,
            months: bits(&pattern.months, 1..=12) as u16,
            // Sunday is 0 or 7.
            weekdays: ((weekdays | weekdays >> 7) & 0x7f) as u8,
            stars: [0, 1, 2, 3, 4].map(|i| split[i].starts_with('*')),
        };
        let cron = Cron { text, fields };
        if !cron.ever_matches() {
            return Err(bad("no month has that day: it never fires".to_string()));
        }
        Ok(cron)
    }

    /// The line as one schedule has one text: each field's set, written
    /// from its smallest member up (runs of three or more as `a-b`, a
    /// whole field of one step as `a-b/s`, Sunday as 0), a field that
    /// starts with `*` still starting with it (`*`, `*/s`, or `*/s,...`
    /// when more than a step's members are in it, the smallest such
    /// step), and `@` names as their five fields. Two spellings of one
    /// line (`@daily`, `00 00 * * *`; `0 0 * * 7`, `0 0 * * sun`) have one
    /// text, which [`Cron::parse`] reads back as the same line. A field
    /// whose star is not needed to say its set still keeps it, so
    /// `*/30 * * * *` and `0,30 * * * *` (both wild, as the hour is `*`)
    /// are one schedule of two texts: hosts giving them are refused (64).
    pub(super) fn canonical(&self) -> String {
        let f = &self.fields;
        let sets = [
            f.minutes,
            u64::from(f.hours),
            u64::from(f.days),
            u64::from(f.months),
            u64::from(f.weekdays),
        ];
        let written: Vec<String> = FIELDS
            .iter()
            .zip(sets)
            .zip(f.stars)
            .map(|((spec, set), star)| spec.write(set, star))
            .collect();
        written.join(" ")
    }

    /// Whether both day fields must match (one starts with `*`), not either.
    fn day_and(&self) -> bool {
        self.fields.stars[2] || self.fields.stars[4]
    }

    /// Whether the minute or hour field starts with `*` (cronie's
    /// `MIN_STAR | HR_STAR`): fires in both passes of a fold and not in a
    /// gap.
    fn wild(&self) -> bool {
        self.fields.stars[0] || self.fields.stars[1]
    }

    /// The longest time between two consecutive instants of the line read
    /// where no clock changes (UTC): the longest of its gaps within a day
    /// and across two consecutive matching dates of the Gregorian
    /// calendar's 400-year cycle (146,097 days, a whole number of weeks:
    /// every date has the same weekday 400 years on, so the cycle holds
    /// every gap). A zone's tick is this long give or take a clock change
    /// of that day; `0 0 29 2 *` gives 8 years (2096 to 2104).
    pub(super) fn longest_gap(&self) -> Duration {
        const CYCLE: i64 = 146_097;
        const DAY_MIN: i64 = 1440;
        let hours: Vec<i64> = members(u64::from(self.fields.hours)).map(i64::from).collect();
        let minutes: Vec<i64> = members(self.fields.minutes).map(i64::from).collect();
        let times: Vec<i64> =
            hours.iter().flat_map(|h| minutes.iter().map(move |m| h * 60 + m)).collect();
        let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
            return Duration::MAX;
        };
        let mut longest = times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let (mut first_date, mut previous) = (None, None);
        let mut day = Date::constant(2000, 1, 1);
        for i in 0..CYCLE {
            if self.day_matches(day) {
                if let Some(p) = previous {
                    longest = longest.max((i - p) * DAY_MIN + first - last);
                }
                first_date.get_or_insert(i);
                previous = Some(i);
            }
            let Ok(next) = day.tomorrow() else { break };
            day = next;
        }
        match (first_date, previous) {
            (Some(f), Some(p)) => {
                let wrap = (f + CYCLE - p) * DAY_MIN + first - last;
                Duration::from_secs(60 * longest.max(wrap) as u64)
            }
            _ => Duration::MAX,
        }
    }

    /// Whether some date of some year matches (`0 0 30 2 *` never does).
    fn ever_matches(&self) -> bool {
        const LONGEST: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let day_any = (1..=12).any(|m| {
            self.fields.months & 1 << m != 0
                && self.fields.days & ((1u64 << (LONGEST[m - 1] + 1)) - 2) as u32 != 0
        });
        let sets = self.fields.minutes != 0 && self.fields.hours != 0 && self.fields.months != 0;
        sets && if self.day_and() {
            day_any && self.fields.weekdays != 0
        } else {
            day_any || self.fields.weekdays != 0
        }
    }

    /// Whether the line runs on the local date `day` (Vixie's day rule).
    pub(super) fn day_matches(&self, day: Date) -> bool {
        if self.fields.months & 1 << day.month() == 0 {
            return false;
        }
        let dom = self.fields.days & 1 << day.day() != 0;
        let dow = self.fields.weekdays & 1 << day.weekday().to_sunday_zero_offset() != 0;
        if self.day_and() { dom && dow } else { dom || dow }
    }

    /// Pushes the instants of the local date `day` (a matching one) onto
    /// `out`, by the rule of the module doc, unsorted.
    pub(super) fn instants_on(
        &self,
        day: Date,
        tz: &TimeZone,
        out: &mut Vec<Timestamp>,
    ) -> Result<(), String> {
        for hour in members(u64::from(self.fields.hours)) {
            for minute in members(self.fields.minutes) {
                let local = DateTime::from_parts(day, Time::constant(hour, minute, 0, 0));
                let at = |offset: jiff::tz::Offset| {
                    offset.to_timestamp(local).map_err(|e| e.to_string())
                };
                match tz.to_ambiguous_timestamp(local).offset() {
                    AmbiguousOffset::Unambiguous { offset } => out.push(at(offset)?),
                    AmbiguousOffset::Fold { before, after } => {
                        let (a, b) = (at(before)?, at(after)?);
                        out.push(a.min(b));
                        if self.wild() {
                            out.push(a.max(b));
                        }
                    }
                    AmbiguousOffset::Gap { before, after } if !self.wild() => {
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
    pub(super) fn latest_at_or_before(
        &self,
        at: Timestamp,
        tz: &TimeZone,
    ) -> Result<Timestamp, String> {
        self.search(at, tz, |d| d.yesterday(), |t| t <= at, |best, t| t > best)
    }

    /// The first instant after `at`.
    pub(super) fn next_after(&self, at: Timestamp, tz: &TimeZone) -> Result<Timestamp, String> {
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

/// Month names, as cronie's `MonthNames` (any case).
const MONTHS: [&str; 12] =
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/// Weekday names, as cronie's `DowNames` (any case).
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// One field of a crontab line: how cronie reads it (`entry.c`,
/// `get_list` and `get_range`), and how [`Cron::canonical`] writes it.
struct Spec {
    /// Its name in messages.
    what: &'static str,
    /// Its smallest value.
    low: u32,
    /// Its largest value (7 for the day of week: Sunday is 0 or 7).
    high: u32,
    /// The names it takes for its values, from `low` up.
    names: &'static [&'static str],
}

/// The five fields, in order.
const FIELDS: [Spec; 5] = [
    Spec { what: "minute", low: 0, high: 59, names: &[] },
    Spec { what: "hour", low: 0, high: 23, names: &[] },
    Spec { what: "day of month", low: 1, high: 31, names: &[] },
    Spec { what: "month", low: 1, high: 12, names: &MONTHS },
    Spec { what: "day of week", low: 0, high: 7, names: &WEEKDAYS },
];

/// The largest step accepted (cronie takes any; croner a `u16`). A step
/// larger than a field's span selects its start alone: `*/60` is minute 0.
const MAX_STEP: u32 = u16::MAX as u32;

/// Checks one field's syntax as cronie reads it, so that errors name the
/// field and the number: a list of `*`, `N` or `N-M`, `*` and `N-M` with
/// an optional `/STEP` (any step from 1; one beyond the range selects its
/// start: `*/60` is minute 0, `0 */24 * * *` hour 0); names only in month
/// and day of week, each its own. cronie refuses, and so does this:
/// a range whose start is after its end (`5-1`; `fri-sun` is 5-0, where
/// `fri-7` is Friday to Sunday), `N/STEP` (read as `N-high/STEP` by some
/// crons, as `N` or refused by others: a line that means two things is
/// refused rather than guessed), and croner's extensions (`L`, `W`, `#`,
/// `?`) and its reading of any name anywhere (`mon` in the month field).
fn check_field(field: &str, spec: &Spec) -> Result<(), String> {
    let what = spec.what;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        if let Some(step) = step {
            match step.parse::<u32>() {
                Ok(s) if (1..=MAX_STEP).contains(&s) => {}
                _ => {
                    return Err(format!(
                        "{what} step {step:?} is not a number from 1 to {MAX_STEP}"
                    ));
                }
            }
        }
        if range == "*" {
            continue;
        }
        let ends: Vec<&str> = range.split('-').collect();
        if ends.len() > 2 || ends.iter().any(|e| e.is_empty()) {
            return Err(format!("{what} {item:?} is not a value, a range or *"));
        }
        let values = ends.iter().map(|end| spec.value(end)).collect::<Result<Vec<_>, _>>()?;
        match (values.as_slice(), step) {
            ([start, end], _) if start > end => {
                return Err(format!(
                    "{what} {item:?}: the range ends before it starts ({start} is after {end})"
                ));
            }
            ([start], Some(step)) => {
                return Err(format!(
                    "{what} {item:?}: a step follows * or a range (*/{step}, {start}-{}/{step}); \
                     crons read N/STEP in two ways",
                    spec.high
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

impl Spec {
    /// The value `end` (a number or one of the field's names) stands for.
    fn value(&self, end: &str) -> Result<u32, String> {
        let (what, low, high) = (self.what, self.low, self.high);
        if end.chars().all(|c| c.is_ascii_digit()) {
            return match end.parse::<u32>() {
                Ok(n) if (low..=high).contains(&n) => Ok(n),
                Ok(n) => Err(format!("{what} {n} is out of range {low}-{high}")),
                Err(_) => Err(format!("{what} {end} is out of range {low}-{high}")),
            };
        }
        match self.names.iter().position(|name| name.eq_ignore_ascii_case(end)) {
            Some(i) => Ok(low + i as u32),
            None => Err(match self.names {
                [] => format!("{what} {end:?} is not a number"),
                [first, .., last] => {
                    format!("{what} {end:?} is not a number or a name ({first}-{last})")
                }
                [_] => format!("{what} {end:?} is not a number or a name"),
            }),
        }
    }

    /// The field's set (bit v: value v) as [`Cron::canonical`] writes it;
    /// `star`: the field starts with `*`, which it keeps, followed by the
    /// smallest step whose members are all in the set (`*` is step 1;
    /// one beyond the span, its start alone), then the members left.
    fn write(&self, set: u64, star: bool) -> String {
        if !star {
            return write_list(set);
        }
        let span = self.high - self.low + 1;
        let step = (1..=span).find(|&s| self.stepped(s) & !set == 0).unwrap_or(span + 1);
        let head = if step == 1 { "*".to_string() } else { format!("*/{step}") };
        match set & !self.stepped(step) {
            0 => head,
            rest => format!("{head},{}", write_list(rest)),
        }
    }

    /// The members of `*/step` in this field (Sunday as 0).
    fn stepped(&self, step: u32) -> u64 {
        let sunday = |v: u32| if self.high == 7 { v % 7 } else { v };
        (self.low..=self.high).step_by(step as usize).fold(0, |acc, v| acc | 1 << sunday(v))
    }
}

/// A set of values (bit v: v) as a list: the whole set as `a-b/s` when it
/// is three or more values a step `s` > 1 apart, else its runs of three
/// or more consecutive values as `a-b` and the other values alone.
fn write_list(set: u64) -> String {
    let values: Vec<i8> = members(set).collect();
    let steps: Vec<i8> = values.windows(2).map(|w| w[1] - w[0]).collect();
    if let ([first, .., last], [step, ..]) = (values.as_slice(), steps.as_slice())
        && values.len() >= 3
        && *step > 1
        && steps.iter().all(|s| s == step)
    {
        return format!("{first}-{last}/{step}");
    }
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<i8> = Vec::new();
    let flush = |run: &mut Vec<i8>, out: &mut Vec<String>| {
        match run.as_slice() {
            [first, _, .., last] if run.len() >= 3 => out.push(format!("{first}-{last}")),
            _ => out.extend(run.iter().map(i8::to_string)),
        }
        run.clear();
    };
    for v in values {
        if run.last().is_some_and(|&l| l + 1 != v) {
            flush(&mut run, &mut out);
        }
        run.push(v);
    }
    flush(&mut run, &mut out);
    out.join(",")
}

/// Parses five fields with croner (no seconds, no year).
fn croner_parse(fields: &str) -> Result<croner::Cron, croner::errors::CronError> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(fields)
}
