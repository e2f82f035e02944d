//! `run --cron` and `--tz` across a fleet whose hosts read the line and
//! the zone each its own way: one run per tick, and every disagreement
//! refused out loud (64) and named, never a silent skip or a second run.

use std::time::Duration;

use crate::harness::{Fleet, Redlock, unique_key};

/// `run -n -E 0 -k KEY FLAGS -- sh -c 'echo "$REDLOCK_TICK"'`.
fn fire(fleet: &Fleet, key: &str, flags: &[&str]) -> crate::harness::Output {
    Redlock::on(fleet)
        .env("CRON_TZ", "")
        .args(["run", "-n", "-E", "0", "-k", key])
        .args(flags)
        .args(["--", "sh", "-c", "echo \"$REDLOCK_TICK\""])
        .run()
}

/// Hosts that read two zones for one key, all firing at once, several
/// times over: exactly one of them runs each time; the others skip or
/// are refused with 64 (held).
#[test]
fn hosts_of_two_zones_firing_at_once_run_the_tick_once() {
    let fleet = Fleet::start(3);
    for round in 0..3 {
        let key = unique_key(&format!("review-race-{round}"));
        let hosts: Vec<_> = (0..6)
            .map(|i| {
                let tz = if i % 2 == 0 { "UTC" } else { "Asia/Kolkata" };
                Redlock::on(&fleet)
                    .args(["run", "-n", "-E", "0", "-k", &key, "--cron", "0 0 * * *", "--tz", tz])
                    .args(["--", "echo", "RAN"])
                    .spawn()
            })
            .collect();
        let outs: Vec<_> = hosts.into_iter().map(|h| h.wait()).collect();
        let ran = outs.iter().filter(|o| o.stdout.contains("RAN")).count();
        assert_eq!(ran, 1, "round {round}: {ran} runs");
        for o in &outs {
            assert!([0, 64].contains(&o.code()), "{}", o.stderr);
        }
    }
}

/// The tick is one format everywhere: `history --json`, like
/// `REDLOCK_TICK`, `history`'s table, `status` and `check`, gives it at
/// the schedule zone's offset (`2026-11-29T14:05:00+05:30`), not as the
/// UTC instant (`2026-11-29T08:35:00Z`).
#[test]
fn history_json_names_the_tick_as_redlock_tick_does() {
    let fleet = Fleet::start(1);
    let key = unique_key("review-history-json");
    let out = fire(&fleet, &key, &["--cron", "0 0 * * *", "--tz", "Asia/Kolkata"]);
    out.expect(0);
    let tick = out.stdout.trim().to_owned();
    assert!(tick.ends_with("+05:30"), "{tick}");
    let history = Redlock::on(&fleet).args(["history", "-k", &key, "--json"]).run();
    history.expect(0);
    let json = history.json();
    assert_eq!(json["entries"][0]["tick"].as_str(), Some(tick.as_str()), "{json}");
}

/// One zone under two names is one schedule: `UTC`, `Etc/UTC` (Debian's
/// /etc/localtime) and the default of a host without /etc/localtime (a
/// scratch container) are the same zone, so a fleet mixing such hosts
/// runs each tick once and sends no cron mail (64) from either spelling
/// (the zone's canonical name, src/schedule/links.rs).
#[test]
fn one_zone_under_two_names_is_one_schedule() {
    let fleet = Fleet::start(1);
    let key = unique_key("review-zone-alias");
    let first = fire(&fleet, &key, &["--once-per", "1d", "--tz", "Etc/UTC"]);
    first.expect(0);
    for tz in ["UTC", "Etc/Universal", "Zulu"] {
        let out = fire(&fleet, &key, &["--once-per", "1d", "--tz", tz]);
        out.expect(0);
        assert!(out.stdout.is_empty(), "--tz {tz} ran the tick again: {}", out.stdout);
    }
}

/// One schedule spelled two ways is one schedule: `@daily` and
/// `0 0 * * *`, `@midnight` and `@daily`, Sunday as `0`, `7` or `sun`,
/// `00` and `0`. The record keeps the line rendered from its parsed
/// fields, so an edit of the crontab that only respells the line never
/// locks the key out until the old tick ends (a month for `@monthly` →
/// `0 0 1 * *`).
#[test]
fn one_line_spelled_two_ways_is_one_schedule() {
    let fleet = Fleet::start(1);
    for (a, b) in [
        ("@daily", "0 0 * * *"),
        ("@daily", "@midnight"),
        ("0 0 * * 0", "0 0 * * 7"),
        ("0 0 * * 0", "0 0 * * SUN"),
        ("00 00 * * *", "0 0 * * *"),
    ] {
        let key = unique_key("review-spelling");
        fire(&fleet, &key, &["--cron", a, "--tz", "UTC"]).expect(0);
        let out = fire(&fleet, &key, &["--cron", b, "--tz", "UTC"]);
        assert_eq!(out.code(), 0, "'{a}' then '{b}': {}", out.stderr);
        assert!(out.stdout.is_empty(), "'{a}' then '{b}' ran twice");
    }
}

/// A host whose schedule differs from the record's is refused with 64
/// naming both, also while the tick's holder still runs (the acquire
/// script reads the record whether or not the key is free): a
/// misconfigured host with `-n -E 0` never exits 0 without a word behind
/// a nightly job longer than the hosts' firing spread.
#[test]
fn another_schedule_is_refused_while_the_holder_runs() {
    use crate::harness::redis::{Build, NO_SCRIPTS};
    // With scripts (acquire.lua) and without (src/lock/noscript.rs).
    for fleet in [Fleet::start(3), Fleet::start_build_with(Build::default_build(), 3, NO_SCRIPTS)] {
        let key = unique_key("review-held");
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join("inside");
        let holder = Redlock::on(&fleet)
            .args(["run", "-n", "-E", "0", "-k", &key, "--cron", "0 0 * * *", "--tz", "UTC"])
            .args(["--", "sh", "-c", &format!("touch {}; sleep 3", inside.display())])
            .spawn();
        crate::harness::wait_for_file(&inside);
        let other = fire(&fleet, &key, &["--cron", "0 0 * * *", "--tz", "Asia/Kolkata"]);
        holder.wait().expect(0);
        other.expect(64).stderr_has("Asia/Kolkata");
    }
}

/// A host refused for another schedule is told where its own zone came
/// from (`--tz`, the file's `tz`, `CRON_TZ`, `TZ`, `/etc/localtime`): the
/// usual cause is one host's environment, and the line says which.
#[test]
fn a_refused_host_is_told_where_its_zone_came_from() {
    let fleet = Fleet::start(3);
    let key = unique_key("review-source");
    fire(&fleet, &key, &["--cron", "0 0 * * *", "--tz", "UTC"]).expect(0);
    let other = Redlock::on(&fleet)
        .env("CRON_TZ", "")
        .env("TZ", "Asia/Kolkata")
        .args(["run", "-n", "-E", "0", "-k", &key, "--cron", "0 0 * * *", "--", "true"])
        .run();
    other.expect(64).stderr_has("this host's zone comes from env TZ=Asia/Kolkata");
    let given = fire(&fleet, &key, &["--cron", "0 0 * * *", "--tz", "Asia/Tokyo"]);
    given.expect(64).stderr_has("this host's zone comes from --tz");
}

/// A host of another schedule that waits (`--wait`) is told at once too,
/// and as a refusal: a usage error that waiting cannot cure, not a wait
/// that "gave up".
#[test]
fn a_waiting_host_of_another_schedule_is_refused_at_once() {
    let fleet = Fleet::start(3);
    let key = unique_key("review-wait");
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("inside");
    let holder = Redlock::on(&fleet)
        .args(["run", "-n", "-k", &key, "--cron", "0 0 * * *", "--tz", "UTC"])
        .args(["--", "sh", "-c", &format!("touch {}; sleep 4", inside.display())])
        .spawn();
    crate::harness::wait_for_file(&inside);
    let started = std::time::Instant::now();
    let other = Redlock::on(&fleet)
        .args(["run", "--wait", "20s", "-k", &key, "--cron", "0 0 * * *", "--tz", "Asia/Kolkata"])
        .args(["--", "true"])
        .run();
    other.expect(64).stderr_has("Asia/Kolkata").stderr_lacks("gave up");
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "{:?}", started.elapsed());
    holder.wait().expect(0);
}

/// `TZ=:/etc/localtime` (glibc's form for "the host's zone", often set
/// to spare a stat per call) reads the zone /etc/localtime names, as
/// `TZ=:Europe/London` reads London's.
#[test]
fn tz_naming_etc_localtime_reads_the_host_zone() {
    let meta = std::fs::symlink_metadata("/etc/localtime");
    if !meta.is_ok_and(|m| m.file_type().is_symlink()) {
        eprintln!("skipped: /etc/localtime is no link here");
        return;
    }
    let fleet = Fleet::start(1);
    let key = unique_key("review-tz-colon");
    let out = Redlock::on(&fleet)
        .env("CRON_TZ", "")
        .env("TZ", ":/etc/localtime")
        .args(["run", "-n", "-k", &key, "--cron", "0 0 * * *", "--", "true"])
        .run();
    out.expect(0);
}

/// An unknown zone given by `--tz` is exit 64 naming it, whatever the
/// schedule: also with a `--once-per` below a day (which counts in UTC)
/// or no schedule at all, before anything is written to the servers.
#[test]
fn an_unknown_zone_is_refused_whatever_the_schedule() {
    let fleet = Fleet::start(1);
    let key = unique_key("review-bad-tz");
    let out = fire(&fleet, &key, &["--once-per", "5m", "--tz", "Mars/Olympus"]);
    out.expect(64).stderr_has("Mars/Olympus");
    assert_eq!(fleet.dbsizes(), [0], "nothing written");
}

/// `redlock config` (the effective configuration and its sources) shows
/// the zone `--cron` reads and where it came from (here the file's `tz`):
/// a zone that differs between hosts is what the 64 refusal is about.
#[test]
fn config_shows_the_zone_and_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "servers = [\"redis://127.0.0.1:1\"]\ntz = \"Asia/Tokyo\"\n").unwrap();
    let out = Redlock::new("redis://127.0.0.1:1")
        .args(["--config", file.to_str().unwrap(), "config"])
        .run();
    out.expect(0);
    assert!(out.stdout.contains("Asia/Tokyo"), "{}", out.stdout);
}

/// `--jitter` is judged by the schedule, not by the tick the host is in
/// now, so one crontab line is accepted or refused at every firing
/// alike: `--cron '0,1 * * * *' --jitter 90s` and `--cron '0 0 * * *'
/// --tz Europe/London --jitter 23h30m` (a 23-hour tick on the spring
/// change's day) run at every firing, the jitter cut to what is left of
/// the tick; a jitter at or above the schedule's longest tick is refused
/// at every firing.
#[test]
fn jitter_is_judged_by_the_schedule_not_by_the_tick_in_progress() {
    let cases = [
        ("@2027-05-03 10:00:30", vec!["--cron", "0,1 * * * *", "--jitter", "90s"]),
        (
            "@2027-03-28 00:00:30",
            vec!["--cron", "0 0 * * *", "--tz", "Europe/London", "--jitter", "23h30m"],
        ),
    ];
    for (clock, flags) in cases {
        let key = unique_key("review-jitter");
        // Nothing listens there: the run is judged before any server is
        // asked, and a run that was accepted sleeps its jitter first.
        let mut running = Redlock::new("redis://127.0.0.1:1")
            .env("LD_PRELOAD", &crate::harness::redis::libfaketime())
            .env("FAKETIME", clock)
            .env("DONT_FAKE_MONOTONIC", "1")
            .args(["run", "-n", "-k", &key])
            .args(&flags)
            .args(["--", "true"])
            .spawn();
        std::thread::sleep(Duration::from_secs(2));
        let status = running.child.try_wait().unwrap();
        assert!(
            status.is_none(),
            "at {clock}, {flags:?} was refused at once ({status:?}), as it is not an hour later"
        );
    }
}

/// "A tick is between 1s and a year long" (docs/commands.md) holds for
/// `--cron` as for `--once-per`: `0 0 29 2 *` (a four-year tick, whose
/// record would live four years and whose restart window would be as
/// long) is refused, naming the days between two of its instants.
#[test]
fn a_cron_tick_is_at_most_a_year() {
    let fleet = Fleet::start(1);
    let key = unique_key("review-leap");
    let out = fire(&fleet, &key, &["--cron", "0 0 29 2 *", "--tz", "UTC"]);
    assert_eq!(out.code(), 64, "ran the tick {}", out.stdout.trim());
}

/// Three Redis 6.2 servers and the hosts under one libfaketime clock, as
/// `drift::london_s_clock_changes_keep_one_run_per_local_day` runs them.
struct Faked {
    fleet: Fleet,
    dir: tempfile::TempDir,
}

impl Faked {
    fn start() -> Faked {
        let dir = tempfile::tempdir().unwrap();
        let stamp = dir.path().join("clock");
        std::fs::write(&stamp, "+0\n").unwrap();
        let servers = (0..3).map(|_| crate::harness::RedisServer::start_faked(&stamp)).collect();
        Faked { fleet: Fleet { servers }, dir }
    }

    /// Every clock to `at` (UTC).
    fn set(&self, at: &str) {
        let at = at.parse::<jiff::Timestamp>().unwrap();
        let offset = at.as_second() - jiff::Timestamp::now().as_second();
        std::fs::write(self.dir.path().join("clock"), format!("{offset:+}\n")).unwrap();
    }

    fn redlock(&self) -> Redlock {
        Redlock::on(&self.fleet).faked(&self.dir.path().join("clock")).env("CRON_TZ", "")
    }

    fn fire(&self, at: &str, key: &str, line: &str) -> crate::harness::Output {
        self.set(at);
        self.redlock()
            .args(["run", "-n", "-E", "0", "-k", key, "--cron", line, "--tz", "Europe/London"])
            .args(["--", "sh", "-c", "echo \"$REDLOCK_TICK\""])
            .run()
    }
}

/// What held: London's autumn fold and spring gap for a fixed-time line,
/// an hourly line and a wild-minute line, each host firing when cronie
/// (or a timer that fires twice) would: one run per scheduled instant.
#[test]
fn london_s_changes_for_hourly_and_wild_minute_lines() {
    let f = Faked::start();
    let runs = |key: &str, line: &str, fired: &[&str]| -> Vec<String> {
        fired
            .iter()
            .filter_map(|at| {
                let out = f.fire(at, key, line);
                out.expect(0);
                Some(out.stdout.trim().to_owned()).filter(|s| !s.is_empty())
            })
            .collect()
    };
    let key = unique_key("review-hourly");
    let hourly = [
        "2027-10-30T23:00:01Z",
        "2027-10-31T00:00:01Z", // 01:00 BST
        "2027-10-31T00:30:01Z",
        "2027-10-31T01:00:01Z", // 01:00 GMT: its own real hour
        "2027-10-31T01:59:59Z",
        "2027-10-31T02:00:01Z",
    ];
    assert_eq!(
        runs(&key, "0 * * * *", &hourly),
        [
            "2027-10-31T00:00:00+01:00",
            "2027-10-31T01:00:00+01:00",
            "2027-10-31T01:00:00+00:00",
            "2027-10-31T02:00:00+00:00"
        ]
    );
    let key = unique_key("review-wild-minute");
    let wild = [
        "2027-10-31T00:00:01Z",
        "2027-10-31T00:30:01Z",
        "2027-10-31T01:00:01Z",
        "2027-10-31T01:30:01Z",
        "2027-10-31T02:00:01Z", // 02:00 GMT: no instant, the 01:30 GMT tick
    ];
    assert_eq!(
        runs(&key, "*/30 1 * * *", &wild),
        [
            "2027-10-31T01:00:00+01:00",
            "2027-10-31T01:30:00+01:00",
            "2027-10-31T01:00:00+00:00",
            "2027-10-31T01:30:00+00:00"
        ]
    );
}

/// A crontab edit that moves a daily line earlier (`0 2` to `30 1`) loses
/// a day by design, and never unseen: the old line ran 1 Nov 02:00, so
/// its tick (and the record's schedule) lasts to 2 Nov 02:00; the new
/// line fires 2 Nov 01:30 and is refused (64, naming until when), since
/// letting it in would run the day twice in a mixed fleet. The refusal is
/// recorded for its tick, and `check` names 2 Nov as refused.
#[test]
fn an_edited_line_loses_no_day_unseen() {
    let f = Faked::start();
    let key = unique_key("review-edit");
    let out = f.fire("2027-11-01T02:00:01Z", &key, "0 2 * * *");
    out.expect(0);
    let refused = f.fire("2027-11-02T01:30:01Z", &key, "30 1 * * *");
    assert_eq!(refused.code(), 64, "{}", refused.stderr);
    // The refusal says when the old line's record lets the new one in.
    assert!(refused.stderr.contains("until 2027-11-02T02:01:00+00:00"), "{}", refused.stderr);
    f.fire("2027-11-03T01:30:01Z", &key, "30 1 * * *").expect(0);
    f.set("2027-11-03T05:00:00Z");
    let check = f.redlock().args(["check", "-k", &key, "--max-age", "1d", "--since", "3d"]).run();
    assert!(check.stdout.starts_with("WARNING"), "2 Nov had no run, yet: {}", check.stdout);
    assert!(
        check.stdout.contains("2027-11-02T01:30:00+00:00 (hosts fired but were refused"),
        "the day is named, and why: {}",
        check.stdout
    );
}
