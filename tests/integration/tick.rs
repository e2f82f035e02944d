//! `run --once-per DUR`: one run per tick, recorded on the servers with the
//! grant, whatever the job's length and however late a host fires.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::harness::{Fleet, Redlock, Running, unique_key};

/// Sleeps until `offset` past the start of the next tick of `every`.
pub fn next_tick(every: Duration, offset: Duration) -> SystemTime {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let every_ms = every.as_millis();
    let start = (now.as_millis() / every_ms + 1) * every_ms;
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(start).unwrap()) + offset;
    std::thread::sleep(at.duration_since(SystemTime::now()).unwrap_or_default());
    at
}

/// Waits for the next tick of `every` to begin when less than `need` is
/// left of the current one: hosts that must all fire in one tick see a
/// second tick's run when its end falls among them.
fn inside_one_tick(every: Duration, need: Duration) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let left = every.as_millis() - now.as_millis() % every.as_millis();
    if left < need.as_millis() {
        next_tick(every, Duration::ZERO);
    }
}

fn sleep_until(at: SystemTime) {
    std::thread::sleep(at.duration_since(SystemTime::now()).unwrap_or_default());
}

/// The recorded ticks: each tick the job saw (`$REDLOCK_TICK`), and how
/// many times it ran.
fn ticks(path: &std::path::Path) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut ran = BTreeMap::new();
    for line in text.lines() {
        *ran.entry(line.to_owned()).or_insert(0) += 1;
    }
    ran
}

/// The fleet, with a 3 s tick standing for 5 minutes: 20 hosts per
/// tick, fired in a burst at its start and at 20 s, 90 s and 4 min into it
/// (scaled), with jobs of 0.1 s, for 10 ticks: each tick runs exactly once.
#[test]
fn a_fleet_fired_early_late_and_in_bursts_runs_each_tick_exactly_once() {
    let fleet = Fleet::start(3);
    let key = unique_key("tick-fleet");
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let every = Duration::from_secs(3);
    let job = format!("sleep 0.1; echo \"$REDLOCK_TICK\" >> {}", ran.display());
    let fire = |n: usize| -> Vec<Running> {
        (0..n)
            .map(|_| {
                Redlock::on(&fleet)
                    .args(["run", "--once-per", "3s", "-n", "-E", "0", "-k", &key])
                    .args(["--", "sh", "-c", &job])
                    .spawn()
            })
            .collect()
    };
    // Offsets in ms into the tick, and how many hosts fire then.
    let waves = [(0, 8), (200, 4), (900, 4), (2_400, 4)];
    let mut running = Vec::new();
    let first = next_tick(every, Duration::ZERO);
    for tick in 0..10u32 {
        let start = first + every * tick;
        for (offset, n) in waves {
            sleep_until(start + Duration::from_millis(offset));
            running.extend(fire(n));
        }
    }
    for r in running {
        r.wait().expect(0);
    }
    let ran = ticks(&ran);
    let twice: Vec<_> = ran.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ticks that ran more than once: {twice:?}");
    // A host fired 2.4 s in may start in the next tick under load: 10 or 11.
    assert!((10..=11).contains(&ran.len()), "ticks run: {ran:?}");
}

/// A `--wait` contender for a tick whose holder is still running waits,
/// then skips when the holder ends (the tick ran), with the busy code and,
/// with `-v`, a line naming the tick and the host; a plain run of another
/// tick then runs.
#[test]
fn a_waiter_for_a_tick_that_ran_skips_it_and_says_where_it_ran() {
    let fleet = Fleet::start(3);
    let key = unique_key("tick-wait");
    let dir = tempfile::tempdir().unwrap();
    let held = dir.path().join("held");
    inside_one_tick(Duration::from_secs(3600), Duration::from_secs(30));
    let once = |extra: &[&str], cmd: &str| {
        Redlock::on(&fleet)
            .args(["-v", "run", "--once-per", "1h", "-k", &key])
            .args(extra)
            .args(["--", "sh", "-c", cmd])
    };
    let holder = once(&[], &format!("touch {}; sleep 1", held.display())).spawn();
    crate::harness::wait_for_file(&held);
    let waiter = once(&["--wait", "30s"], "echo waiter ran").spawn();
    holder.wait().expect(0);
    let out = waiter.wait();
    out.expect(75);
    assert!(!out.stdout.contains("waiter ran"), "{}", out.stdout);
    assert!(out.stderr.contains("already ran on"), "{}", out.stderr);
    assert!(out.stderr.contains("the tick of"), "{}", out.stderr);
    // Long after the holder ended, still the same tick: skipped at once.
    let late = once(&["-n"], "echo late ran").run();
    late.expect(75);
    assert!(!late.stdout.contains("late ran"));
    // Another key's tick, or the same key without --once-per, is not held up.
    Redlock::on(&fleet).args(["run", "-n", "-k", &key, "--", "true"]).run().expect(0);
}

/// The README's cron line (`--once-per -E 0`) is silent on the host that
/// fires while another runs the tick: it waits, finds the tick ran, and
/// skips with 0, and cron mails nothing. (Its first "waiting for" line
/// came at once: the README's recipe test caught it when two hosts'
/// jitters met.) A wait that lasts says so after the usual 10 s.
#[test]
fn a_tick_waiter_that_finds_it_ran_says_nothing_without_v() {
    let fleet = Fleet::start(3);
    let key = unique_key("tick-quiet");
    let dir = tempfile::tempdir().unwrap();
    let held = dir.path().join("held");
    inside_one_tick(Duration::from_secs(3600), Duration::from_secs(30));
    let cron = |cmd: &str| {
        Redlock::on(&fleet)
            .args(["run", "--once-per", "1h", "-E", "0", "-k", &key])
            .args(["--", "sh", "-c", cmd])
    };
    let holder = cron(&format!("touch {}; sleep 1", held.display())).spawn();
    crate::harness::wait_for_file(&held);
    let waiter = cron("echo waiter ran").spawn();
    holder.wait().expect(0);
    let out = waiter.wait();
    out.expect(0);
    if !out.stdout.is_empty() || !out.stderr.is_empty() {
        out.fail("cron would mail");
    }
}

/// A round that does not win leaves no tick behind: its withdrawal puts
/// the record back, and the next host of the same tick runs it.
#[test]
fn a_round_that_did_not_win_leaves_no_tick_behind() {
    let fleet = Fleet::start(3);
    let key = unique_key("tick-withdrawn");
    fleet.servers[1].hang();
    fleet.servers[2].hang();
    let out = Redlock::on(&fleet)
        .args(["--node-timeout", "200ms", "run", "--once-per", "1h", "-n", "-k", &key])
        .args(["--", "echo", "ran"])
        .run();
    out.expect(69);
    fleet.servers[1].resume();
    fleet.servers[2].resume();
    let record = format!("redlock:{{{key}}}:last");
    // The withdrawal on the server that granted runs in the background of
    // the failed run, which waits for it before it exits.
    let fields: Vec<String> = fleet.servers[0].cmd(&["HKEYS", &record]);
    assert!(fields.is_empty(), "the failed round's record stayed: {fields:?}");
    let out = Redlock::on(&fleet)
        .args(["run", "--once-per", "1h", "-n", "-k", &key, "--", "echo", "ran"])
        .run();
    out.expect(0);
    assert!(out.stdout.contains("ran"));
}

#[test]
fn once_per_takes_a_tick_of_a_second_to_a_year_and_one_holder() {
    let fleet = Fleet::start(1);
    for (args, why) in [
        (vec!["--once-per", "500ms"], "between 1s and a year"),
        (vec!["--once-per", "2y"], "between 1s and a year"),
        (vec!["--once-per", "5m", "--limit", "2"], "neither --limit nor --shared"),
        (vec!["--once-per", "5m", "--shared"], "neither --limit nor --shared"),
        (vec!["--once-per", "5s", "--jitter", "5s"], "shorter than the tick"),
    ] {
        let out =
            Redlock::on(&fleet).args(["run", "-k", "k"]).args(&args).args(["--", "true"]).run();
        out.expect(64);
        assert!(out.stderr.contains(why), "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    assert_eq!(fleet.dbsizes(), vec![0], "nothing written on a usage error");
}

/// `history` shows each run's tick, `check` the last tick that ran and
/// the ticks missed since the oldest kept, `status` the last tick, and the
/// metrics file its start.
#[test]
fn history_check_status_and_metrics_know_the_ticks() {
    let fleet = Fleet::start(3);
    let key = unique_key("tick-history");
    let every = Duration::from_secs(1);
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("m.prom");
    let metrics = metrics.display().to_string();
    let run = || {
        Redlock::on(&fleet)
            .args(["run", "--once-per", "1s", "-n", "--metrics-file", &metrics, "-k", &key])
            .args(["--", "true"])
            .run()
            .expect(0);
    };
    // Ticks T and T+2 run; T+1 and T+3 do not.
    next_tick(every, Duration::from_millis(100));
    run();
    next_tick(every, Duration::from_millis(100));
    next_tick(every, Duration::from_millis(100));
    run();
    next_tick(every, Duration::from_millis(100));
    next_tick(every, Duration::from_millis(100));
    let out = Redlock::on(&fleet).args(["history", "-k", &key]).run();
    out.expect(0);
    assert!(out.stdout.contains("TICK"), "{}", out.stdout);
    // The two missed ticks are named; `--max-missed 2` tolerates them.
    let check = ["check", "-k", &key, "--max-age", "1h", "--max-missed", "2"];
    let out = Redlock::on(&fleet).args(check).run();
    out.expect(0);
    assert!(out.stdout.contains("for the tick of"), "{}", out.stdout);
    assert!(out.stdout.contains("2 earlier ticks did not run"), "{}", out.stdout);
    let json = Redlock::on(&fleet).args(check).args(["--json"]).run();
    let v = json.json();
    assert_eq!(v["missed_ticks"].as_array().map(Vec::len), Some(2), "{v}");
    assert!(v["last_tick"].is_string(), "{v}");
    let status = Redlock::on(&fleet).args(["status", "-k", &key]).run();
    assert!(status.stdout.contains("last tick: "), "{}", status.stdout);
    let json = Redlock::on(&fleet).args(["status", "-k", &key, "--json"]).run().json();
    assert!(json["last_tick"]["tick"].is_string(), "{json}");
    let prom = std::fs::read_to_string(&metrics).unwrap();
    assert!(prom.contains("redlock_last_tick_timestamp_seconds{"), "{prom}");
}

/// The README's crontab line as a fleet runs it, through a pseudo cron
/// that mails whatever a host prints (stdout and stderr): with a job
/// longer than the 10 s after which a wait first says it waits, only the
/// host that ran the tick mails (the job's own output). The others waited
/// behind it and printed `waiting for ...`: a mail per host and tick.
#[test]
fn the_readme_cron_line_mails_only_from_the_host_that_ran_the_tick() {
    let fleet = Fleet::start(3);
    let key = unique_key("tick-mail");
    let readme = std::fs::read_to_string(crate::harness::root().join("README.md")).unwrap();
    let line = readme.lines().find(|l| l.contains("redlock run --cron")).unwrap();
    // The line's own schedule, quoted, stands for a tick: a 15 s one below.
    let (before, after) = line.split_once("--cron '").unwrap();
    let line = format!("{before}--once-per 5m{}", after.split_once('\'').unwrap().1);
    let flags: Vec<&str> = line.split(" -- ").next().unwrap().split_whitespace().collect();
    let at = flags.iter().position(|w| *w == "run").unwrap();
    // The line's flags, with a 15 s tick for its 5 minutes, a jitter of
    // 1 s (so that every other host waits more than 10 s) and this key.
    let mut args: Vec<String> = Vec::new();
    let mut words = flags[at..].iter();
    while let Some(word) = words.next() {
        match *word {
            "--once-per" => {
                args.extend(["--once-per".into(), words.next().map(|_| "15s".into()).unwrap()])
            }
            "--jitter" => {
                args.extend(["--jitter".into(), words.next().map(|_| "1s".into()).unwrap()]);
            }
            "--key" | "-k" => {
                args.extend(["--key".into(), words.next().map(|_| key.clone()).unwrap()])
            }
            other => args.push(other.to_owned()),
        }
    }
    assert!(args.contains(&"-E".to_owned()), "the README's line: {line}");
    next_tick(Duration::from_secs(15), Duration::from_millis(200));
    let hosts: Vec<Running> = (0..4)
        .map(|_| {
            Redlock::on(&fleet)
                .args(&args)
                .args(["--", "sh", "-c", "sleep 12; echo report done"])
                .spawn()
        })
        .collect();
    let mails: Vec<String> = hosts
        .into_iter()
        .map(|h| {
            let out = h.wait();
            out.expect(0);
            format!("{}{}", out.stdout, out.stderr)
        })
        .filter(|mail| !mail.is_empty())
        .collect();
    assert_eq!(mails, ["report done\n"], "one mail, the job's own");
}

/// `--cron` takes the crontab's line and `--tz` its zone: the tick starts
/// at the scheduled instant, `REDLOCK_TICK` says it with the zone's
/// offset, a second host of the same tick skips, and a host that reads
/// the line in another zone is refused (64, naming both) instead of
/// running a tick of its own. (A yearly line: its tick holds the test.)
#[test]
fn cron_runs_its_tick_once_and_refuses_another_zone() {
    let fleet = Fleet::start(3);
    let key = unique_key("cron");
    let cron = |tz: &str, cmd: &str| {
        Redlock::on(&fleet)
            .args(["run", "--cron", "0 0 1 1 *", "--tz", tz, "-n", "-k", &key])
            .args(["--", "sh", "-c", cmd])
            .run()
    };
    let first = cron("Asia/Kolkata", "echo \"$REDLOCK_TICK\"");
    first.expect(0);
    let year = first.stdout.get(..4).unwrap_or_default().to_owned();
    assert_eq!(first.stdout, format!("{year}-01-01T00:00:00+05:30\n"), "{}", first.stderr);
    let again = cron("Asia/Kolkata", "echo ran again");
    again.expect(75);
    assert!(again.stdout.is_empty() && again.stderr.is_empty(), "a quiet skip: {}", again.stderr);
    let other = cron("UTC", "echo ran in UTC");
    other
        .expect(64)
        .stderr_has("`cron 0 0 1 1 * in UTC`")
        .stderr_has("`cron 0 0 1 1 * in Asia/Kolkata`");
    assert!(other.stdout.is_empty());
}

/// What `--cron` and `--once-per` refuse, each with one line and nothing
/// written: both at once, a place count or a shared hold, a line cron
/// would not take, an unknown zone, and a period that is neither below a
/// day nor whole days (a month drifts off its day: `--cron` says it).
#[test]
fn cron_and_once_per_refuse_what_no_crontab_means() {
    let fleet = Fleet::start(1);
    for (args, why) in [
        (vec!["--cron", "0 * * * *", "--once-per", "1h"], "cannot be used with"),
        (vec!["--cron", "0 * * * *", "--limit", "2"], "neither --limit nor --shared"),
        (vec!["--cron", "0 * * * *", "--shared"], "neither --limit nor --shared"),
        (vec!["--cron", "61 * * * *"], "out of range"),
        (vec!["--cron", "0 0 * mon *"], "--cron"),
        (vec!["--cron", "0 0 * * *", "--tz", "Mars/Olympus"], "Mars/Olympus"),
        (vec!["--once-per", "36h"], "use --cron"),
        (vec!["--once-per", "1month"], "use --cron"),
    ] {
        let out =
            Redlock::on(&fleet).args(["run", "-k", "k"]).args(&args).args(["--", "true"]).run();
        out.expect(64);
        assert!(out.stderr.contains(why), "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
    assert_eq!(fleet.dbsizes(), vec![0], "nothing written on a usage error");
}
