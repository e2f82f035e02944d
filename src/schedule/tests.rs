//! The schedule's ticks against a model of cronie firing jobs by the local
//! wall clock, over every zone of the tz database that changes its clocks.

use std::collections::HashMap;

use super::*;

fn zone(name: &str) -> Zone {
    Zone::named(name, "--tz").unwrap()
}

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn tick(s: &Schedule, at: &str) -> (String, String) {
    let t = s.tick_at(ts(at)).unwrap();
    (t.label, format_instant(t.end, s.zone()))
}

#[test]
fn london_spring_keeps_its_day() {
    // 2027-03-28: 01:00 GMT becomes 02:00 BST.
    let s = Schedule::cron("30 0 * * *", zone("Europe/London")).unwrap();
    let got = tick(&s, "2027-03-28T00:30:05Z");
    assert_eq!(got, ("2027-03-28T00:30:00+00:00".into(), "2027-03-29T00:30:00+01:00".into()));
    // In the gap: the transition instant, that day's tick.
    let s = Schedule::cron("30 1 * * *", zone("Europe/London")).unwrap();
    assert_eq!(tick(&s, "2027-03-28T01:00:10Z").0, "2027-03-28T02:00:00+01:00");
    assert_eq!(tick(&s, "2027-03-28T00:59:00Z").0, "2027-03-27T01:30:00+00:00");
}

#[test]
fn autumn_fold_is_one_tick_for_fixed_and_two_for_wild() {
    // 2027-10-31: 02:00 BST becomes 01:00 GMT; 01:30 happens twice.
    let s = Schedule::cron("30 1 * * *", zone("Europe/London")).unwrap();
    let first = s.tick_at(ts("2027-10-31T00:30:00Z")).unwrap();
    let second = s.tick_at(ts("2027-10-31T01:30:00Z")).unwrap();
    assert_eq!(first, second);
    assert_eq!(first.label, "2027-10-31T01:30:00+01:00");
    let s = Schedule::cron("30 * * * *", zone("Europe/London")).unwrap();
    let first = s.tick_at(ts("2027-10-31T00:30:00Z")).unwrap();
    let second = s.tick_at(ts("2027-10-31T01:30:00Z")).unwrap();
    assert_eq!(first.label, "2027-10-31T01:30:00+01:00");
    assert_eq!(second.label, "2027-10-31T01:30:00+00:00");
    assert_eq!(first.end, second.start);
}

#[test]
fn once_per_counts_local_days_and_weeks_from_monday() {
    let s = Schedule::once_per(Duration::from_secs(86_400), zone("Europe/London")).unwrap();
    let t = s.tick_at(ts("2027-03-28T12:00:00Z")).unwrap();
    assert_eq!(t.label, "2027-03-28T00:00:00+00:00");
    assert_eq!(t.end_ms() - t.start_ms(), 23 * 3_600_000);
    let s = Schedule::once_per(Duration::from_secs(7 * 86_400), zone("Europe/London")).unwrap();
    // 2027-03-31 is a Wednesday.
    assert_eq!(tick(&s, "2027-03-31T12:00:00Z").0, "2027-03-29T00:00:00+01:00");
    // America/Santiago: no midnight on 2027-09-05 (00:00 becomes 01:00).
    let s = Schedule::once_per(Duration::from_secs(86_400), zone("America/Santiago")).unwrap();
    assert_eq!(tick(&s, "2027-09-05T12:00:00Z").0, "2027-09-05T01:00:00-03:00");
    let s = Schedule::once_per(Duration::from_secs(300), zone("Europe/London")).unwrap();
    assert_eq!(s.identity(), "every 5m");
    assert_eq!(tick(&s, "2027-03-28T01:07:00Z").0, "2027-03-28T02:05:00+01:00");
}

/// `check` lists a key's instants from its oldest entry on: however
/// short the ticks and long the window, at most [`MAX_INSTANTS`], the
/// newest, so a week of a `--once-per 1ms` key neither hangs nor fills
/// memory. The newest are the window's last, every one of them.
#[test]
fn instants_between_lists_at_most_the_newest_bound() {
    let (from, to) = (ts("2027-01-01T00:00:00Z"), ts("2027-01-01T00:10:00Z"));
    let every = Schedule::once_per(Duration::from_millis(1), Zone::utc()).unwrap();
    let got = every.instants_between(from, to).unwrap();
    assert_eq!(got.len(), MAX_INSTANTS);
    assert_eq!(got.last(), Some(&(to - jiff::SignedDuration::from_millis(1))));
    let minutely = Schedule::cron("* * * * *", Zone::utc()).unwrap();
    let got = minutely.instants_between(ts("2020-01-01T00:00:00Z"), to).unwrap();
    assert_eq!(got.len(), MAX_INSTANTS);
    assert_eq!(got.last(), Some(&(to - jiff::SignedDuration::from_mins(1))));
    // Under the bound, every instant.
    assert_eq!(minutely.instants_between(from, to).unwrap().len(), 10);
}

#[test]
fn errors_name_the_input() {
    let london = || zone("Europe/London");
    let err = |r: Result<Schedule, String>| r.unwrap_err();
    assert_eq!(
        err(Schedule::cron("61 * * * *", london())),
        "--cron '61 * * * *': minute 61 is out of range 0-59"
    );
    assert!(err(Schedule::cron("0 0 30 2 *", london())).contains("never fires"));
    assert!(err(Schedule::cron("0 0 L * *", london())).contains("day of month \"L\""));
    assert!(err(Schedule::cron("@reboot", london())).contains("@hourly"));
    assert!(
        err(Schedule::cron("0 0 * mon *", london()))
            .contains("month \"mon\" is not a number or a name (jan-dec)")
    );
    assert!(Schedule::cron("0 0 * JAN-Mar Mon-fri", london()).is_ok());
    assert!(err(Schedule::cron("* * * *", london())).contains("4 fields"));
    let e = err(Schedule::once_per(Duration::from_secs(36 * 3600), london()));
    assert!(e.starts_with("--once-per 1d12h: neither below a day nor"), "{e}");
    assert!(err(Schedule::once_per(Duration::from_secs(2_630_016), london())).contains("--cron"));
    assert_eq!(
        Zone::named("Mars/Olympus", "--tz").unwrap_err(),
        "--tz Mars/Olympus: no such time zone"
    );
}

#[test]
fn names_and_identity() {
    let s = Schedule::cron("  30   0 * *\tmon-fri ", zone("europe/london")).unwrap();
    assert_eq!(s.identity(), "cron 30 0 * * 1-5 in Europe/London");
    assert_eq!(s.describe(), "'30 0 * * mon-fri' in Europe/London");
    // Weekdays only: Friday 2027-04-02 is followed by Monday 2027-04-05.
    assert_eq!(tick(&s, "2027-04-03T12:00:00Z").0, "2027-04-02T00:30:00+01:00");
    assert_eq!(tick(&s, "2027-04-03T12:00:00Z").1, "2027-04-05T00:30:00+01:00");
    let s = Schedule::cron("@WEEKLY", zone("UTC")).unwrap();
    assert_eq!(s.identity(), "cron 0 0 * * 0 in UTC");
    assert_eq!(s.describe(), "'@weekly' in UTC");
    assert_eq!(tick(&s, "2027-04-03T12:00:00Z").0, "2027-03-28T00:00:00+00:00");
    // Vixie: both day fields restricted means either.
    let s = Schedule::cron("0 0 13 * fri", zone("UTC")).unwrap();
    assert_eq!(tick(&s, "2027-04-14T00:00:00Z").0, "2027-04-13T00:00:00+00:00");
    assert_eq!(tick(&s, "2027-04-14T00:00:00Z").1, "2027-04-16T00:00:00+00:00");
    let got = s.instants_between(ts("2027-04-01T00:00:00Z"), ts("2027-04-10T00:00:00Z")).unwrap();
    assert_eq!(got, vec![ts("2027-04-02T00:00:00Z"), ts("2027-04-09T00:00:00Z")]);
}

#[test]
fn zone_resolution_order() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    };
    let none = std::path::Path::new("/nonexistent/localtime");
    let got = |explicit, e| Zone::resolve_from(explicit, e, none).map(|z| z.0.name().to_string());
    assert_eq!(got(Some(("--tz", "Asia/Tokyo")), env(&[("TZ", "UTC")])).unwrap(), "Asia/Tokyo");
    assert_eq!(
        got(None, env(&[("CRON_TZ", "Europe/Paris"), ("TZ", "UTC")])).unwrap(),
        "Europe/Paris"
    );
    assert_eq!(
        got(None, env(&[("TZ", ":/usr/share/zoneinfo/America/New_York")])).unwrap(),
        "America/New_York"
    );
    assert_eq!(got(None, env(&[])).unwrap(), "UTC");
    assert_eq!(
        got(None, env(&[("TZ", "Mars/Olympus")])).unwrap_err(),
        "TZ=Mars/Olympus: no such time zone"
    );
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("localtime");
    std::os::unix::fs::symlink("../usr/share/zoneinfo/Asia/Tokyo", &link).unwrap();
    assert_eq!(Zone::resolve_from(None, env(&[]), &link).unwrap().0.name(), "Asia/Tokyo");
    let copied = dir.path().join("copied");
    std::fs::write(&copied, b"TZif").unwrap();
    assert!(Zone::resolve_from(None, env(&[]), &copied).unwrap_err().contains("set --tz"));
}

/// One test schedule, matched by the model on its own (never through the
/// code under test): `None` is `*`.
struct Case {
    expr: String,
    minute: u8,
    hour: Option<i8>,
    day: Option<i8>,
    month: Option<i8>,
    weekday: Option<i8>,
    /// Daily: also checked with `--once-per 1d` and `1w`.
    daily: bool,
}

impl Case {
    fn wild(&self) -> bool {
        self.hour.is_none()
    }

    fn matches(&self, date: Date, hour: i8, minute: i8) -> bool {
        i16::from(self.minute) == i16::from(minute)
            && self.hour.is_none_or(|h| h == hour)
            && self.day.is_none_or(|d| d == date.day())
            && self.month.is_none_or(|m| m == date.month())
            && self.weekday.is_none_or(|w| w == date.weekday().to_sunday_zero_offset())
    }
}

fn cases() -> Vec<Case> {
    let case = |expr: &str, minute, hour, day, month, weekday, daily| Case {
        expr: expr.to_string(),
        minute,
        hour,
        day,
        month,
        weekday,
        daily,
    };
    let mut out = Vec::new();
    for hour in 0..24 {
        for minute in [0, 30] {
            out.push(case(
                &format!("{minute} {hour} * * *"),
                minute,
                Some(hour),
                None,
                None,
                None,
                true,
            ));
        }
    }
    out.push(case("0 * * * *", 0, None, None, None, None, false));
    out.push(case("30 * * * *", 30, None, None, None, None, false));
    out.push(case("@hourly", 0, None, None, None, None, false));
    out.push(case("@daily", 0, Some(0), None, None, None, false));
    for hour in [0, 1, 2, 3, 23] {
        out.push(case(&format!("30 {hour} * * 0"), 30, Some(hour), None, None, Some(0), false));
    }
    out.push(case("@weekly", 0, Some(0), None, None, Some(0), false));
    out.push(case("0 0 1 * *", 0, Some(0), Some(1), None, None, false));
    out.push(case("30 2 1 * *", 30, Some(2), Some(1), None, None, false));
    out.push(case("0 0 31 * *", 0, Some(0), Some(31), None, None, false));
    out.push(case("30 1 31 * *", 30, Some(1), Some(31), None, None, false));
    out.push(case("@yearly", 0, Some(0), Some(1), Some(1), None, false));
    out
}

/// A firing of the model: the case, the real minute it fired at (minutes
/// since the epoch, UTC) and the local minute it fired for.
#[derive(Clone, Copy, Debug)]
struct Firing {
    case: usize,
    real: i64,
    local: i64,
    /// The local minute of `real`.
    now: i64,
}

/// A zone's offsets over a window: the offset (s) at its start and each
/// change after it, by real second.
struct Offsets {
    at_start: i64,
    changes: Vec<(i64, i64)>,
}

impl Offsets {
    fn of(tz: &TimeZone, from: i64, to: i64) -> Offsets {
        let start = Timestamp::from_second(from).unwrap();
        let at_start = i64::from(tz.to_offset(start).seconds());
        let changes = tz
            .following(start)
            .take_while(|t| t.timestamp().as_second() < to)
            .map(|t| (t.timestamp().as_second(), i64::from(t.offset().seconds())))
            .collect();
        Offsets { at_start, changes }
    }
}

fn local_date(day: i64) -> Date {
    Date::constant(1970, 1, 1).checked_add(jiff::Span::new().days(day)).unwrap()
}

/// Fires the cases over the real minutes `[from, to)` as cronie's main
/// loop does (cron.c: the `timeDiff` cases: 1 normal; 2-5 catch up every
/// minute; 6-180 wild jobs now and each skipped minute's fixed-time jobs;
/// at most 0 wild jobs only, the virtual clock waiting; beyond 180 jump),
/// by the local wall clock. With `naive`, fires whatever matches the local
/// time at each real minute (a timer that fires twice in a fold and never
/// in a gap). Returns the firings and each local date's first real minute.
fn fire(
    cases: &[Case],
    offsets: &Offsets,
    from: i64,
    to: i64,
    naive: bool,
) -> (Vec<Firing>, HashMap<i64, i64>) {
    let mut out = Vec::new();
    let mut first_minute_of_day = HashMap::new();
    let mut change = 0;
    let mut offset = offsets.at_start;
    let mut date_of: (i64, Date) = (0, local_date(0));
    let mut run =
        |real: i64, now: i64, local: i64, wild: bool, fixed: bool, out: &mut Vec<Firing>| {
            if local.rem_euclid(30) != 0 {
                return;
            }
            let day = local.div_euclid(1440);
            if date_of.0 != day {
                date_of = (day, local_date(day));
            }
            let date = date_of.1;
            let minute_of_day = local.rem_euclid(1440);
            let (hour, minute) = ((minute_of_day / 60) as i8, (minute_of_day % 60) as i8);
            for (i, case) in cases.iter().enumerate() {
                if (if case.wild() { wild } else { fixed }) && case.matches(date, hour, minute) {
                    out.push(Firing { case: i, real, local, now });
                }
            }
        };
    let mut virtual_time: Option<i64> = None;
    for real in from..to {
        while change < offsets.changes.len() && offsets.changes[change].0 <= real * 60 {
            offset = offsets.changes[change].1;
            change += 1;
        }
        let now = real + offset.div_euclid(60);
        if now.rem_euclid(1440) < 240 || real == from {
            first_minute_of_day.entry(now.div_euclid(1440)).or_insert(real);
        }
        if naive {
            run(real, now, now, true, true, &mut out);
            continue;
        }
        let virt = virtual_time.unwrap_or(now - 1);
        let diff = now - virt;
        if diff == 1 || !(-180..=180).contains(&diff) {
            run(real, now, now, true, true, &mut out);
            virtual_time = Some(now);
        } else if diff > 5 {
            run(real, now, now, true, false, &mut out);
            for v in virt + 1..=now {
                run(real, now, v, false, true, &mut out);
            }
            virtual_time = Some(now);
        } else if diff > 0 {
            for v in virt + 1..=now {
                run(real, now, v, true, true, &mut out);
            }
            virtual_time = Some(now);
        } else {
            run(real, now, now, true, false, &mut out);
        }
    }
    (out, first_minute_of_day)
}

/// What the sweep checked, for the closing note.
#[derive(Default, Debug)]
struct Counts {
    zone_names: usize,
    rule_sets: usize,
    transitions: usize,
    windows: usize,
    firings: usize,
    second_pass: usize,
    instants: usize,
    day_ticks: usize,
    past_midnight: usize,
}

impl Counts {
    /// Adds another sweep's firings and ticks.
    fn add(&mut self, other: &Counts) {
        self.windows += other.windows;
        self.firings += other.firings;
        self.second_pass += other.second_pass;
        self.instants += other.instants;
        self.day_ticks += other.day_ticks;
        self.past_midnight += other.past_midnight;
    }
}

/// Checks one window of one zone: cronie's firings, a naive timer's, and
/// the daily and weekly `--once-per` ticks of the daily cases.
fn check_window(
    name: &str,
    cases: &[Case],
    schedules: &[Schedule],
    periods: &[Schedule; 2],
    from: i64,
    to: i64,
    counts: &mut Counts,
) {
    // The model's clock: the zone's by name, not the schedules' own.
    let tz = TimeZone::get(name).unwrap();
    let offsets = Offsets::of(&tz, from * 60, to * 60);
    let (cronie, first_minute_of_day) = fire(cases, &offsets, from, to, false);
    let (naive, _) = fire(cases, &offsets, from, to, true);
    let at = |real: i64| Timestamp::from_second(real * 60 + 1).unwrap();
    // Per case: the tick of each scheduled local minute (fixed) or real
    // minute (wild), and the key of each tick start.
    let mut tick_of: HashMap<(usize, i64), Timestamp> = HashMap::new();
    let mut key_of: HashMap<(usize, Timestamp), i64> = HashMap::new();
    for f in &cronie {
        let case = &cases[f.case];
        let tick = schedules[f.case].tick_at(at(f.real)).unwrap();
        let ctx = || {
            format!(
                "{name} '{}' fired at {} for local minute {}: {tick:?}",
                case.expr,
                at(f.real),
                f.local
            )
        };
        assert_eq!(tick.start.as_second(), f.real * 60, "{}", ctx());
        let key = if case.wild() { f.real } else { f.local };
        let prev = *tick_of.entry((f.case, key)).or_insert(tick.start);
        assert_eq!(prev, tick.start, "{}", ctx());
        let other = *key_of.entry((f.case, tick.start)).or_insert(key);
        assert_eq!(other, key, "two scheduled times share a tick: {}", ctx());
        counts.firings += 1;
    }
    let mut second_pass = Vec::new();
    for f in naive.iter().filter(|f| !cases[f.case].wild()) {
        // Fired again in a fold's second pass: the first pass's tick.
        if let Some(start) =
            tick_of.get(&(f.case, f.local)).filter(|s| s.as_second() != f.real * 60)
        {
            let tick = schedules[f.case].tick_at(at(f.real)).unwrap();
            assert_eq!(
                tick.start,
                *start,
                "{name} '{}' second firing at {}",
                cases[f.case].expr,
                at(f.real)
            );
            counts.second_pass += 1;
            second_pass.push(*f);
        }
    }
    let (lo, hi) =
        (Timestamp::from_second(from * 60).unwrap(), Timestamp::from_second(to * 60).unwrap());
    for (i, s) in schedules.iter().enumerate() {
        for t in s.instants_between(lo, hi).unwrap() {
            assert!(
                key_of.contains_key(&(i, t)),
                "{name} '{}': instant {t} that cronie never fired",
                cases[i].expr
            );
            counts.instants += 1;
        }
    }
    check_periods(name, cases, periods, &cronie, &second_pass, &first_minute_of_day, counts);
}

/// `--once-per 1d` and `1w` for the daily cases' firings: one tick per
/// local date (week), from its first real minute to the next one's.
fn check_periods(
    name: &str,
    cases: &[Case],
    periods: &[Schedule; 2],
    cronie: &[Firing],
    second_pass: &[Firing],
    first_minute_of_day: &HashMap<i64, i64>,
    counts: &mut Counts,
) {
    let monday =
        Date::constant(1970, 1, 5).since(Date::constant(1970, 1, 1)).unwrap().get_days() as i64;
    for (p, period) in periods.iter().enumerate() {
        let len = if p == 0 { 1 } else { 7 };
        let slot = |day: i64| (day - if p == 0 { 0 } else { monday }).div_euclid(len);
        // Only a slot whose first date's first minute is not the window's
        // first (then the date began before the window).
        let window_start = first_minute_of_day.values().min().copied();
        let first_of_slot = |k: i64| -> Option<i64> {
            let first_day = k * len + if p == 0 { 0 } else { monday };
            let start = *first_minute_of_day.get(&first_day)?;
            (Some(start) != window_start).then_some(start)
        };
        let mut tick_of_slot: HashMap<i64, Timestamp> = HashMap::new();
        for f in cronie.iter().chain(second_pass).filter(|f| cases[f.case].daily) {
            if f.now.div_euclid(1440) != f.local.div_euclid(1440) {
                // A gap that ends at midnight: cronie runs the skipped
                // time at the next date's first instant, which a period
                // counts as that date (the module doc's limit).
                counts.past_midnight += 1;
                continue;
            }
            let at = Timestamp::from_second(f.real * 60 + 1).unwrap();
            let tick = period.tick_at(at).unwrap();
            let k = slot(f.local.div_euclid(1440));
            let ctx = || {
                format!("{name} {} '{}' at {at}: {tick:?}", period.describe(), cases[f.case].expr)
            };
            assert!(tick.start <= at && at < tick.end, "{}", ctx());
            assert_eq!(*tick_of_slot.entry(k).or_insert(tick.start), tick.start, "{}", ctx());
            if let Some(start) = first_of_slot(k) {
                assert_eq!(tick.start.as_second(), start * 60, "{}", ctx());
            }
            if let Some(end) = first_of_slot(k + 1) {
                assert_eq!(tick.end.as_second(), end * 60, "{}", ctx());
            }
            counts.day_ticks += 1;
        }
        let mut starts: Vec<_> = tick_of_slot.values().collect();
        let n = starts.len();
        starts.sort();
        starts.dedup();
        assert_eq!(starts.len(), n, "{name} {}: two dates share a tick", period.describe());
    }
}

/// The zone's offset changes in `[from, to)`, by real second.
fn changes(tz: &TimeZone, from: i64, to: i64) -> Vec<i64> {
    let offsets = Offsets::of(tz, from, to);
    let mut before = offsets.at_start;
    let mut out = Vec::new();
    for (at, offset) in offsets.changes {
        if offset != before {
            out.push(at);
        }
        before = offset;
    }
    out
}

/// The windows to sweep in one zone: 36 hours before each change to 60
/// after (the day before, the day of and the day after), and 2027 whole
/// when `whole_year`, merged; in real minutes.
fn windows(jumps: &[i64], whole_year: bool) -> Vec<(i64, i64)> {
    let mut spans: Vec<(i64, i64)> =
        jumps.iter().map(|j| (j / 60 - 36 * 60, j / 60 + 60 * 60)).collect();
    if whole_year {
        spans.push((
            ts("2027-01-01T00:00:00Z").as_second() / 60,
            ts("2028-01-01T00:00:00Z").as_second() / 60,
        ));
    }
    spans.sort();
    let mut windows: Vec<(i64, i64)> = Vec::new();
    for (a, b) in spans {
        match windows.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => windows.push((a, b)),
        }
    }
    windows
}

/// Sweeps one zone's windows.
fn sweep(name: &str, windows: &[(i64, i64)], cases: &[Case], counts: &mut Counts) {
    let zone = zone(name);
    let schedules: Vec<Schedule> =
        cases.iter().map(|c| Schedule::cron(&c.expr, zone.clone()).unwrap()).collect();
    let periods = [
        Schedule::once_per(Duration::from_secs(86_400), zone.clone()).unwrap(),
        Schedule::once_per(Duration::from_secs(7 * 86_400), zone.clone()).unwrap(),
    ];
    for &(a, b) in windows {
        counts.windows += 1;
        check_window(name, cases, &schedules, &periods, a, b, counts);
    }
}

#[test]
fn every_zone_that_changes_its_clocks_2026_to_2036() {
    let began = std::time::Instant::now();
    // SCHEDULE_ZONES=Europe/London,Asia/Gaza sweeps only those.
    let only = std::env::var("SCHEDULE_ZONES").ok();
    let (from, to) =
        (ts("2026-01-01T00:00:00Z").as_second(), ts("2037-01-01T00:00:00Z").as_second());
    let whole_year = ["Europe/London", "Australia/Lord_Howe", "America/Santiago"];
    let mut counts = Counts::default();
    let mut seen: HashMap<Vec<(i64, i64)>, String> = HashMap::new();
    let mut jobs: Vec<(String, Vec<(i64, i64)>)> = Vec::new();
    for name in jiff::tz::db().available() {
        let name = name.as_str();
        if only.as_ref().is_some_and(|o| !o.split(',').any(|z| z == name)) {
            continue;
        }
        let tz = TimeZone::get(name).unwrap();
        let jumps = changes(&tz, from, to);
        if jumps.is_empty() {
            continue;
        }
        counts.zone_names += 1;
        // Zones whose offsets agree over the years share every answer.
        let print: Vec<(i64, i64)> = std::iter::once(from)
            .chain(jumps.iter().copied())
            .map(|t| (t, i64::from(tz.to_offset(Timestamp::from_second(t).unwrap()).seconds())))
            .collect();
        let whole = whole_year.contains(&name);
        if seen.insert(print, name.to_string()).is_none() || whole {
            counts.transitions += jumps.len();
            jobs.push((name.to_string(), windows(&jumps, whole)));
        }
    }
    counts.rule_sets = seen.len();
    // Two threads: the machine has two cores.
    let cases = cases();
    let halves: Vec<Counts> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|k| {
                let (jobs, cases) = (&jobs, &cases);
                scope.spawn(move || {
                    let mut counts = Counts::default();
                    for (name, windows) in jobs.iter().skip(k).step_by(2) {
                        sweep(name, windows, cases, &mut counts);
                    }
                    counts
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for half in halves {
        counts.add(&half);
    }
    eprintln!("{counts:?} in {:?}", began.elapsed());
    assert!(
        counts.rule_sets > 20 && counts.second_pass > 0 && counts.past_midnight > 0,
        "{counts:?}"
    );
}

#[test]
fn lists_are_fixed_time_and_a_star_minute_is_wild() {
    let (from, to) = (ts("2027-03-27T12:00:00Z"), ts("2027-03-28T12:00:00Z"));
    let shown = |s: &Schedule| -> Vec<String> {
        s.instants_between(from, to)
            .unwrap()
            .into_iter()
            .map(|t| format_instant(t, s.zone()))
            .collect()
    };
    // Both gap times map to the jump: one instant.
    let s = Schedule::cron("0,30 1 * * *", zone("Europe/London")).unwrap();
    assert_eq!(shown(&s), ["2027-03-28T02:00:00+01:00"]);
    // A star minute is wild (cronie's MIN_STAR): nothing in the gap.
    let s = Schedule::cron("*/30 1 * * *", zone("Europe/London")).unwrap();
    assert!(shown(&s).is_empty());
    let s = Schedule::once_per(Duration::from_secs(86_400), zone("Europe/London")).unwrap();
    assert_eq!(shown(&s), ["2027-03-28T00:00:00+00:00"]);
}

#[test]
fn the_sweep_sees_epoch_aligned_ticks() {
    // The negative control: London's crontab fired by London's clock
    // against ticks read in UTC, as `--once-per 1d` had them.
    let cases: Vec<Case> = cases().into_iter().filter(|c| c.expr == "30 0 * * *").collect();
    let utc = Zone::utc();
    let schedules = [Schedule::cron("30 0 * * *", utc.clone()).unwrap()];
    let periods = [
        Schedule::once_per(Duration::from_secs(86_400), utc.clone()).unwrap(),
        Schedule::once_per(Duration::from_secs(7 * 86_400), utc).unwrap(),
    ];
    let jump = ts("2027-03-28T01:00:00Z").as_second();
    let window = windows(&[jump], false)[0];
    let caught = std::panic::catch_unwind(|| {
        check_window(
            "Europe/London",
            &cases,
            &schedules,
            &periods,
            window.0,
            window.1,
            &mut Counts::default(),
        )
    });
    assert!(caught.is_err(), "the sweep passed ticks read in the wrong zone");
}

#[test]
fn an_identity_reads_back_as_its_schedule() {
    let london = || zone("Europe/London");
    for schedule in [
        Schedule::cron("30 0 * * *", london()).unwrap(),
        Schedule::cron("@hourly", zone("UTC")).unwrap(),
        Schedule::once_per(Duration::from_secs(86_400), london()).unwrap(),
        Schedule::once_per(Duration::from_secs(14 * 86_400), london()).unwrap(),
        Schedule::once_per(Duration::from_secs(5400), Zone::utc()).unwrap(),
        Schedule::once_per(Duration::from_millis(1500), Zone::utc()).unwrap(),
    ] {
        let back = Schedule::from_identity(&schedule.identity()).unwrap();
        assert_eq!(back.identity(), schedule.identity());
        let at = ts("2027-03-29T00:30:00Z");
        assert_eq!(back.tick_at(at), schedule.tick_at(at), "{}", schedule.identity());
    }
    assert!(Schedule::from_identity("weekly on Mars").is_err());
    assert!(Schedule::from_identity("cron 30 0 * * * in Mars/Olympus").is_err());
}

/// Every name of one zone is one zone, of one name: the names of UTC,
/// a link of the tz database (a renamed zone, an old country name), any
/// case; a zone that only shares rules with another since 1970 keeps its
/// own name.
#[test]
fn one_zone_has_one_name() {
    let utc = [
        "UTC",
        "Etc/UTC",
        "Etc/UCT",
        "UCT",
        "Etc/Universal",
        "Universal",
        "Etc/Zulu",
        "Zulu",
        "Etc/GMT",
        "GMT",
        "GMT0",
        "Etc/GMT0",
        "Etc/GMT+0",
        "Etc/GMT-0",
        "Greenwich",
        "Etc/Greenwich",
        "utc",
        "etc/utc",
    ];
    for name in utc {
        assert_eq!(zone(name), Zone::utc(), "{name}");
        assert_eq!(zone(name).name(), "UTC", "{name}");
    }
    for (given, one) in [
        ("Europe/Kiev", "Europe/Kyiv"),
        ("europe/kyiv", "Europe/Kyiv"),
        ("US/Eastern", "America/New_York"),
        ("Asia/Calcutta", "Asia/Kolkata"),
        ("GB", "Europe/London"),
        ("posix/Europe/London", "Europe/London"),
        ("Europe/Amsterdam", "Europe/Amsterdam"),
        ("Etc/GMT+5", "Etc/GMT+5"),
    ] {
        assert_eq!(zone(given).name(), one, "{given}");
    }
    assert_ne!(zone("Europe/Amsterdam"), zone("Europe/Brussels"));
    // Identities name the zone so: the scratch container's default and
    // Debian's /etc/localtime are one schedule.
    let daily = |z: &str| Schedule::cron("30 0 * * *", zone(z)).unwrap().identity();
    assert_eq!(daily("Etc/UTC"), daily("UTC"));
    assert_eq!(
        Schedule::cron("30 0 * * *", Zone::utc()).unwrap(),
        Schedule::cron("30 0 * * *", zone("Etc/UTC")).unwrap()
    );
    assert_eq!(daily("Europe/Kiev"), "cron 30 0 * * * in Europe/Kyiv");
}

/// The table of links is the tz database's: each link and the zone it
/// names have the same clock changes from 2026 to 2036, where the
/// host's database (or the bundled one) knows both.
#[test]
fn links_name_zones_of_the_same_rules() {
    let (from, to) = (ts("2026-01-01T00:00:00Z"), ts("2036-01-01T00:00:00Z"));
    let changes = |tz: &TimeZone| -> Vec<(Timestamp, i32)> {
        tz.following(from)
            .take_while(|t| t.timestamp() < to)
            .map(|t| (t.timestamp(), t.offset().seconds()))
            .collect()
    };
    let mut compared = 0;
    for (link, target) in super::links::LINKS {
        let (Ok(a), Ok(b)) = (TimeZone::get(link), TimeZone::get(target)) else { continue };
        assert_eq!(changes(&a), changes(&b), "{link} -> {target}");
        assert_eq!(a.to_offset(from), b.to_offset(from), "{link} -> {target}");
        compared += 1;
    }
    assert!(compared > 100, "{compared} links compared");
    let names: Vec<&str> = super::links::LINKS.iter().map(|(link, _)| *link).collect();
    let mut sorted = names.clone();
    sorted.sort_by_key(|n| n.to_ascii_lowercase());
    assert_eq!(names, sorted, "the table is sorted, ASCII case ignored");
}

/// Names that stand for each host's own zone are refused, from any
/// source; a name is shown with its control characters escaped.
#[test]
fn zone_names_that_hosts_cannot_compare() {
    for name in ["localtime", "posixrules", "Localtime", "posix/posixrules"] {
        let e = Zone::named(name, "--tz").unwrap_err();
        assert!(e.contains("each host's own zone"), "{e}");
    }
    let env = |k: &str| (k == "TZ").then(|| "localtime".to_owned());
    let none = std::path::Path::new("/nonexistent/localtime");
    let e = Zone::resolve_from(None, env, none).unwrap_err();
    assert!(e.starts_with("TZ=localtime: names each host's own zone"), "{e}");
    assert_eq!(
        Zone::named("Europe/Lon\u{1b}don", "--tz").unwrap_err(),
        "--tz Europe/Lon\\u{1b}don: not a time zone name"
    );
}

/// `TZ` (or `CRON_TZ`) naming a file outside a zoneinfo directory
/// (`:/etc/localtime`, glibc's "the host's zone") reads the zone the
/// file links to, as the `/etc/localtime` fallback does; and each source
/// is said.
#[test]
fn tz_naming_a_file_reads_the_zone_it_links_to() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("localtime");
    std::os::unix::fs::symlink("/usr/share/zoneinfo/Europe/Kiev", &link).unwrap();
    let shown = link.display().to_string();
    let none = std::path::Path::new("/nonexistent/localtime");
    for value in [format!(":{shown}"), shown.clone()] {
        let env = |k: &str| (k == "TZ").then(|| value.clone());
        let (zone, from) = Zone::resolve_from(None, env, none).unwrap();
        assert_eq!(zone.name(), "Europe/Kyiv");
        assert_eq!(from, ZoneFrom::Env("TZ", value.clone()));
    }
    let env = |k: &str| (k == "TZ").then(|| ":/nonexistent/zone".to_owned());
    assert_eq!(
        Zone::resolve_from(None, env, none).unwrap_err(),
        "TZ=:/nonexistent/zone: no such file"
    );
    let (zone, from) = Zone::resolve_from(None, |_| None, &link).unwrap();
    assert_eq!(zone.name(), "Europe/Kyiv");
    assert_eq!(from.to_string(), format!("{shown} -> /usr/share/zoneinfo/Europe/Kiev"));
    let (zone, from) = Zone::resolve_from(None, |_| None, none).unwrap();
    assert_eq!((zone, from), (Zone::utc(), ZoneFrom::Default));
    let (_, from) = Zone::resolve_from(Some(("--tz", "UTC")), |_| None, none).unwrap();
    assert_eq!(from.to_string(), "--tz");
    let env = |k: &str| (k == "CRON_TZ").then(|| "Etc/UTC".to_owned());
    let (zone, from) = Zone::resolve_from(None, env, none).unwrap();
    assert_eq!((zone.name(), from.to_string()), ("UTC", "env CRON_TZ=Etc/UTC".to_owned()));
}

/// One line spelled many ways has one identity, the canonical text.
#[test]
fn one_line_spelled_two_ways_has_one_identity() {
    let text = |expr: &str| Schedule::cron(expr, Zone::utc()).unwrap().identity();
    let same = [
        (&["@daily", "@midnight", "0 0 * * *", "00 00 * * *", "0 0 */1 * *"][..], "0 0 * * *"),
        (&["@weekly", "0 0 * * 0", "0 0 * * 7", "0 0 * * SUN", "0 0 * * sun"], "0 0 * * 0"),
        (&["@hourly", "0 * * * *", "0-0 * * * *"], "0 * * * *"),
        (&["@monthly", "0 0 1 * *"], "0 0 1 * *"),
        (&["@yearly", "@annually", "0 0 1 1 *", "0 0 1 jan *"], "0 0 1 1 *"),
        (&["30 0 * * mon-fri", "30 0 * * 1,2,3,4,5", "30 0 * * 1-5"], "30 0 * * 1-5"),
        (&["0,15,30,45 * * * *", "0-59/15 * * * *", "45,30,15,0 * * * *"], "0-45/15 * * * *"),
        (&["*/15 * * * *", "*/15,30 * * * *"], "*/15 * * * *"),
        (&["*/60 * * * *", "*/61 * * * *"], "*/60 * * * *"),
        (&["0 */24 * * *"], "0 */24 * * *"),
        (&["0 0 * * 5-7", "0 0 * * fri-7", "0 0 * * 0,5,6"], "0 0 * * 0,5,6"),
        (&["0 0 * * */7", "0 0 * * */9"], "0 0 * * */7"),
        (&["5 4 1,2,3,10 * *"], "5 4 1-3,10 * *"),
        (&["5 4 1,2 * *"], "5 4 1,2 * *"),
        (&["*/15,7 * * * *"], "*/15,7 * * * *"),
        (&["1-59/2 * * * *"], "1-59/2 * * * *"),
        (&["0 0 * */3 *"], "0 0 * */3 *"),
    ];
    for (spellings, canonical) in same {
        for expr in spellings {
            assert_eq!(text(expr), format!("cron {canonical} in UTC"), "{expr}");
        }
    }
    // Stars say which days rule (Vixie's either-day rule) and whether a
    // line is wild, so a field keeps its star: these are other schedules.
    assert_ne!(text("0 0 1 * *"), text("0 0 1 * 0-6"));
    assert_ne!(text("*/30 1 * * *"), text("0,30 1 * * *"));
}

/// Every identity reads back as its schedule and is written again the
/// same; an older redlock's (the line and the zone as given) reads too.
#[test]
fn identities_read_back_old_and_new() {
    let lines = [
        "* * * * *",
        "*/7 */5 */3 */4 */2",
        "*/13,1,2 1-5,7 1,15,31 feb-apr,dec sun-sat",
        "0-58/2,1-59/6 0-22/2,1,3 1-31/2,2,4 1-12/5 0-6/3",
        "5 4 * * 0,6",
        "0 12 13 * 5",
        "@hourly",
        "59 23 31 12 *",
        "0 0 29 2 1",
        "*/60 */24 */31 */12 */8",
        "0-59/59 23-23 31-31/31 12 7",
    ];
    let mut longest = 0;
    for line in lines {
        for zone in [Zone::utc(), zone("Europe/London")] {
            let s = Schedule::cron(line, zone).unwrap();
            let identity = s.identity();
            longest = longest.max(identity.len());
            let back = Schedule::from_identity(&identity).unwrap();
            assert_eq!(back, s, "{line}: {identity}");
            assert_eq!(back.identity(), identity, "{line}");
            let at = ts("2027-03-28T00:30:00Z");
            assert_eq!(back.tick_at(at), s.tick_at(at), "{identity}");
        }
    }
    // The longest canonical text: every value of every field apart.
    let widest = "0,1,3,4,6,7,9,10,12,13,15,16,18,19,21,22,24,25,27,28,30,31,33,34,36,37,39,40,42,43,45,46,48,49,51,52,54,55,57,58 0,1,3,4,6,7,9,10,12,13,15,16,18,19,21,22 1,2,4,5,7,8,10,11,13,14,16,17,19,20,22,23,25,26,28,29,31 1,2,4,5,7,8,10,11 0,1,3,4,6";
    assert!(Schedule::cron(widest, Zone::utc()).is_err(), "longer than a --cron line");
    let s = Schedule::from_identity(&format!("cron {widest} in UTC")).unwrap();
    assert_eq!(Schedule::from_identity(&s.identity()).unwrap(), s);
    for (old, new) in [
        ("cron @daily in Etc/UTC", "cron 0 0 * * * in UTC"),
        ("cron 30 0 * * mon-fri in Europe/Kiev", "cron 30 0 * * 1-5 in Europe/Kyiv"),
        ("cron 00 00 * * 7 in GMT", "cron 0 0 * * 0 in UTC"),
        ("every 1d in Etc/UTC", "every 1d in UTC"),
        ("every 2w in US/Eastern", "every 2w in America/New_York"),
    ] {
        let s = Schedule::from_identity(old).unwrap();
        assert_eq!(s.identity(), new, "{old}");
        assert_eq!(s, Schedule::from_identity(new).unwrap(), "{old}");
    }
}

/// cronie's rules where crons differ: a step beyond the field selects
/// its start; a range that ends before it starts and `N/STEP` are
/// refused; every error names the field.
#[test]
fn fields_as_cronie_reads_them() {
    let err = |expr: &str| Schedule::cron(expr, Zone::utc()).unwrap_err();
    let first =
        |expr: &str| tick(&Schedule::cron(expr, Zone::utc()).unwrap(), "2027-05-03T10:30:00Z");
    assert_eq!(first("*/60 * * * *").0, "2027-05-03T10:00:00+00:00");
    assert_eq!(first("*/60 * * * *").1, "2027-05-03T11:00:00+00:00");
    assert_eq!(first("0 */24 * * *").1, "2027-05-04T00:00:00+00:00");
    assert_eq!(
        err("0 0 * * 5-1"),
        "--cron '0 0 * * 5-1': day of week \"5-1\": the range ends before it starts (5 is after 1)"
    );
    assert!(err("0 0 * * mon-sun").contains("day of week \"mon-sun\": the range ends"));
    assert!(err("0 0 * * fri-sun").contains("(5 is after 0)"));
    assert!(err("30-10 * * * *").starts_with("--cron '30-10 * * * *': minute \"30-10\""));
    assert_eq!(
        err("5/10 * * * *"),
        "--cron '5/10 * * * *': minute \"5/10\": a step follows * or a range (*/10, 5-59/10); \
         crons read N/STEP in two ways"
    );
    assert!(err("*/0 * * * *").contains("minute step \"0\" is not a number from 1 to 65535"));
    assert!(err("*/65536 * * * *").contains("minute step"));
    assert!(Schedule::cron("0 0 * * fri-7", Zone::utc()).is_ok());
    assert_eq!(err("0 0 * * \u{1b}"), "--cron '0 0 * * \\u{1b}': holds control characters");
}

/// A schedule's longest tick where no clock changes: the bound `--cron`
/// and `--jitter` are judged by, the same at every start.
#[test]
fn longest_tick_is_the_schedule_s() {
    let cron = |expr: &str| Schedule::cron(expr, zone("Europe/London")).unwrap().longest_tick();
    let (min, hour, day) = (60, 3600, 86_400);
    for (expr, secs) in [
        ("0,1 * * * *", 59 * min),
        ("*/15 * * * *", 15 * min),
        ("* * * * *", min),
        ("0 * * * *", hour),
        ("30 0 * * *", day),
        ("0 9 * * 1-5", 3 * day),
        ("0 0 1 * *", 31 * day),
        ("@yearly", 366 * day),
        // 2096-02-29 to 2104-02-29: 2100 is no leap year.
        ("0 0 29 2 *", 2921 * day),
        ("0 0 13 * 5", 7 * day),
        ("0 0 31 * *", 61 * day),
    ] {
        assert_eq!(cron(expr), Duration::from_secs(secs), "{expr}");
    }
    let once_per =
        |secs| Schedule::once_per(Duration::from_secs(secs), Zone::utc()).unwrap().longest_tick();
    assert_eq!(once_per(300), Duration::from_secs(300));
    assert_eq!(once_per(14 * day), Duration::from_secs(14 * day));
}
