//! The alert rules docs/recipes.md gives, as Prometheus reads them:
//! `promtool test rules` evaluates the recipe's rules over the textfiles
//! (`--metrics-file`) that real runs wrote on several hosts, each host's
//! file as node_exporter would serve it (its own `instance`). Each rule
//! must fire for the fleet's state it names, with the labels it pages
//! with, and stay quiet for the others.
//!
//! A rule test's clock starts at 0, so every timestamp of the files is
//! moved back by one constant: the files' "now" is 10 minutes into the
//! test, and a later evaluation is that much time without a new file.
//! Every difference and comparison a rule takes is unchanged.

use std::fmt::Write as _;

use crate::alerts::{next_tick, tick_run};
use crate::harness::Fleet;
use crate::hold::{frozen, hold, terminate};
use crate::readme::recipe;

/// promtool, taken out of Debian's prometheus package by `.ci/run`.
const PROMTOOL: &str = "/opt/redlock-ci/bin/promtool";

/// When the files' "now" is, in the rule test's time.
const NOW: u64 = 600;

/// The recipe's rules file: its `groups:` block and the rules added to it.
fn documented_rules() -> String {
    ["alert-rules", "alert-ticks", "alert-servers"].map(recipe).concat()
}

/// What each host's textfile said at one moment: (host, the file's text).
type Files = Vec<(&'static str, String)>;

/// Reads each host's textfile under `dir` (`HOST.prom`).
fn files(dir: &std::path::Path, hosts: &[&'static str]) -> Files {
    hosts
        .iter()
        .map(|h| (*h, std::fs::read_to_string(dir.join(format!("{h}.prom"))).unwrap()))
        .collect()
}

/// The files as a rule test's input series: every sample with its host as
/// `instance`, the same value each minute up to `minutes`, the timestamps
/// moved so that the moment they were read is [`NOW`].
fn input_series(files: &Files, minutes: u64) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let shift = (now.as_secs() - NOW) as f64;
    let mut yaml = String::new();
    for (host, text) in files {
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
            let labels = labels.strip_suffix('}').unwrap();
            let comma = if labels.is_empty() { "" } else { "," };
            let mut value: f64 = value.parse().unwrap();
            if name.ends_with("_timestamp_seconds") {
                value -= shift;
            }
            writeln!(
                yaml,
                "      - series: '{name}{{{labels}{comma}instance=\"{host}\"}}'\n        values: '{value}+0x{minutes}'"
            )
            .unwrap();
        }
    }
    yaml
}

/// One expectation: at `minutes` into the test, `alert` fires with
/// exactly these label sets (each `k: v, ...`; none: it must not fire).
type Expect<'a> = (u64, &'a str, &'a [&'a str]);

/// Runs promtool on the documented rules over `files` and fails, with its
/// report and the input, unless every expectation holds.
fn assert_alerts(case: &str, rules: &str, files: &Files, expect: &[Expect]) {
    let last = expect.iter().map(|e| e.0).max().unwrap();
    let mut tests = format!(
        "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{}    alert_rule_test:\n",
        input_series(files, last + 1)
    );
    for (minutes, alert, labels) in expect {
        write!(
            tests,
            "      - eval_time: {minutes}m\n        alertname: {alert}\n        exp_alerts:"
        )
        .unwrap();
        if labels.is_empty() {
            tests.push_str(" []\n");
        }
        for set in *labels {
            write!(tests, "\n          - exp_labels: {{{set}}}").unwrap();
        }
        tests.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yml"), rules).unwrap();
    std::fs::write(dir.path().join("tests.yml"), &tests).unwrap();
    let out = std::process::Command::new(PROMTOOL)
        .args(["test", "rules", "tests.yml"])
        .current_dir(dir.path())
        .output()
        .unwrap_or_else(|e| {
            panic!("{PROMTOOL}: {e}; bash .ci/run takes it out of Debian's prometheus package")
        });
    assert!(
        out.status.success(),
        "{case}: the documented rules do not alert as expected:\n{}{}\n{tests}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The files without the lines of `metric` (a host too old to write it).
fn without(files: &Files, metric: &str) -> Files {
    let kept = |t: &str| t.lines().filter(|l| !l.contains(metric)).collect::<Vec<_>>().join("\n");
    files.iter().map(|(h, t)| (*h, kept(t))).collect()
}

/// The tick rules (`NightlyTickMissed`, `NightlyNoHostFired`,
/// `NightlyRunsAbsent`) and `RedlockServerFailing`, over two hosts that
/// fire every tick: a tick one of them ran; a tick neither could take (no
/// quorum); a tick a freeze (`redlock hold`) paused, which pages nobody
/// unless a host is too old to say it was paused.
#[test]
fn the_documented_tick_rules_alert_for_a_missed_tick_only() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let cut_off = format!("{},redis://127.0.0.1:1,redis://127.0.0.1:2", fleet.servers[0].url());
    let rules = documented_rules();
    let dir = tempfile::tempdir().unwrap();
    let metrics = |host: &str| dir.path().join(format!("{host}.prom")).display().to_string();
    let tick = |servers: &str, host: &str, code: i32| {
        tick_run(servers, "nightly", "true", &["--metrics-file", &metrics(host)]).expect(code);
    };
    let hosts = ["a", "b"];
    let server_failing = "RedlockServerFailing";
    next_tick();
    tick(&urls, "a", 0);
    tick(&urls, "b", 0);
    let ran = files(dir.path(), &hosts);
    assert_alerts(
        "a tick that ran",
        &rules,
        &ran,
        &[
            (10, "NightlyTickMissed", &[]),
            (10, "NightlyNoHostFired", &[]),
            (26, "NightlyNoHostFired", &["key: nightly, severity: page"]),
            (10, "NightlyRunsAbsent", &[]),
            (10, server_failing, &[]),
        ],
    );
    assert_alerts(
        "no file",
        &rules,
        &vec![("a", String::new())],
        &[(10, "NightlyRunsAbsent", &["key: nightly, severity: ticket"])],
    );
    next_tick();
    tick(&cut_off, "a", 69);
    tick(&cut_off, "b", 69);
    assert_alerts(
        "a tick nobody could take",
        &rules,
        &files(dir.path(), &hosts),
        &[
            (10, "NightlyTickMissed", &["key: nightly, severity: ticket"]),
            (
                10,
                server_failing,
                &[
                    "instance: a, key: nightly, severity: ticket",
                    "instance: b, key: nightly, severity: ticket",
                ],
            ),
        ],
    );
    next_tick();
    tick(&urls, "a", 0);
    let freeze = hold(&urls, "3s", "nightly", "60s", "Black Friday");
    frozen(&urls, "nightly");
    next_tick();
    tick(&urls, "a", 0);
    tick(&urls, "b", 0);
    let paused = files(dir.path(), &hosts);
    terminate(freeze);
    assert_alerts("a paused tick", &rules, &paused, &[(10, "NightlyTickMissed", &[])]);
    assert_alerts(
        "a paused tick, hosts too old to say so",
        &rules,
        &without(&paused, "redlock_last_tick_paused"),
        &[(10, "NightlyTickMissed", &["key: nightly, severity: ticket"])],
    );
}

/// The report rules (`NightlyReportFailed`, `NightlyReportDidNotRun`)
/// read the newest run across hosts: a failure on one host alerts until
/// a later run elsewhere succeeds; 25 hours without a run pages, unless a
/// freeze paused the newest tick.
#[test]
fn the_documented_report_rules_read_the_newest_run_across_hosts() {
    let fleet = Fleet::start(3);
    let urls = fleet.urls();
    let rules = documented_rules();
    let dir = tempfile::tempdir().unwrap();
    let metrics = |host: &str| dir.path().join(format!("{host}.prom")).display().to_string();
    let key = "nightly-report";
    let day = 10 + 25 * 60 + 1;
    next_tick();
    tick_run(&urls, key, "exit 3", &["--metrics-file", &metrics("a")]).expect(3);
    assert_alerts(
        "a failed run",
        &rules,
        &files(dir.path(), &["a"]),
        &[
            (10, "NightlyReportFailed", &["instance: a, key: nightly-report, severity: ticket"]),
            (10, "NightlyReportDidNotRun", &[]),
            (day, "NightlyReportDidNotRun", &["key: nightly-report, severity: page"]),
        ],
    );
    next_tick();
    tick_run(&urls, key, "true", &["--metrics-file", &metrics("b")]).expect(0);
    assert_alerts(
        "a failed run, then one that succeeded elsewhere",
        &rules,
        &files(dir.path(), &["a", "b"]),
        &[(10, "NightlyReportFailed", &[])],
    );
    let freeze = hold(&urls, "3s", key, "60s", "Black Friday");
    frozen(&urls, key);
    next_tick();
    tick_run(&urls, key, "true", &["--metrics-file", &metrics("c")]).expect(0);
    let paused = files(dir.path(), &["a", "b", "c"]);
    terminate(freeze);
    assert_alerts(
        "the newest tick paused",
        &rules,
        &paused,
        &[(day, "NightlyReportDidNotRun", &[]), (10, "NightlyReportFailed", &[])],
    );
    assert_alerts(
        "the newest tick paused, hosts too old to say so",
        &rules,
        &without(&paused, "redlock_last_tick_paused"),
        &[(day, "NightlyReportDidNotRun", &["key: nightly-report, severity: page"])],
    );
}
