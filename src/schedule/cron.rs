//! A crontab line: its five fields parsed into sets (by croner), and its
//! instants on a local date by cronie's rule (the parent module's doc).

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
const MAX_CRON_LEN: usize = 200;

/// A crontab line's five fields as sets, with cronie's flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Cron {
    /// The line, whitespace-normalised (`@` names lower-cased).
    pub(super) text: String,
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

impl Cron {
    /// Parses a crontab line's schedule (see [`super::Schedule::cron`]).
    pub(super) fn parse(expr: &str) -> Result<Cron, String> {
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
    pub(super) fn day_matches(&self, day: Date) -> bool {
        if self.months & 1 << day.month() == 0 {
            return false;
        }
        let dom = self.days & 1 << day.day() != 0;
        let dow = self.weekdays & 1 << day.weekday().to_sunday_zero_offset() != 0;
        if self.day_and { dom && dow } else { dom || dow }
    }

    /// Pushes the instants of the local date `day` (a matching one) onto
    /// `out`, by the rule of the module doc, unsorted.
    pub(super) fn instants_on(
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

/// Each field: its name in messages, its range, and the names it takes.
const FIELDS: [(&str, u32, u32, &[&str]); 5] = [
    ("minute", 0, 59, &[]),
    ("hour", 0, 23, &[]),
    ("day of month", 1, 31, &[]),
    ("month", 1, 12, &MONTHS),
    ("day of week", 0, 7, &WEEKDAYS),
];

/// Checks one field's syntax as cronie reads it (lists of `*`, `N`, `N-M`,
/// each with an optional `/STEP`; names only in month and day of week,
/// each its own), so that errors name the field and the number, and
/// croner's extensions (`L`, `W`, `#`, `?`) and its replacing of any
/// name anywhere (`mon` in the month field) are refused, as cronie
/// refuses them.
fn check_field(field: &str, what: &str, low: u32, high: u32, names: &[&str]) -> Result<(), String> {
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
            } else if !names.iter().any(|name| name.eq_ignore_ascii_case(end)) {
                return Err(match names {
                    [] => format!("{what} {end:?} is not a number"),
                    [first, .., last] => {
                        format!("{what} {end:?} is not a number or a name ({first}-{last})")
                    }
                    [_] => format!("{what} {end:?} is not a number or a name"),
                });
            }
        }
    }
    Ok(())
}
