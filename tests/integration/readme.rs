//! The README and the pages under `docs/`, checked against the program:
//! their recipes run as written against real servers (only the server
//! list, the protected command and a download are substituted), every
//! `redlock` command line they show uses real subcommands and flags, every
//! `REDLOCK_*` variable they name exists, their links resolve, and the
//! exit-code table matches the man page and `redlock::exit`. A recipe, a
//! flag or a link that goes stale fails here, wherever the text moved.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::harness::{Fleet, bin, lock_key, root};

/// README.md and every `docs/*.md`, as (path from the root, text).
pub fn pages() -> Vec<(String, String)> {
    let mut paths = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_owned())
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root().join(&p)).unwrap();
            (p.display().to_string(), text)
        })
        .collect()
}

/// The fenced block after `<!-- recipe: NAME -->`, in README.md or a page
/// under docs/ (exactly one of them).
pub fn recipe(name: &str) -> String {
    let marker = format!("<!-- recipe: {name} -->");
    let found: Vec<(String, String)> = pages()
        .into_iter()
        .filter(|(_, text)| text.contains(&marker))
        .map(|(path, text)| {
            let after = &text[text.find(&marker).unwrap() + marker.len()..];
            let body = after
                .split_once("```")
                .and_then(|(_, b)| b.split_once('\n'))
                .map(|(_, b)| b)
                .unwrap_or_else(|| panic!("{path}: no fenced block after {marker}"));
            (path, body.split_once("```").unwrap().0.to_owned())
        })
        .collect();
    assert_eq!(found.len(), 1, "{marker} must be in exactly one page: {found:?}");
    found.into_iter().next().unwrap().1
}

/// Every recipe the pages mark, and the test that runs it. A marked block
/// that no test runs would go stale unnoticed: adding one means adding its
/// test, and its name here.
const RECIPES: &[(&str, &str)] = &[
    ("quick-start", "readme::the_quick_start_shows_a_second_run_skip_and_wait"),
    ("config", "recipes::the_cron_recipe_reaches_usr_bin_and_its_config_file_works"),
    ("cron", "readme::the_cron_recipe_runs_the_job_once_across_hosts"),
    ("ci", "readme::the_github_action_recipe_runs_the_step_under_the_lock"),
    ("ci-run", "readme::the_plain_ci_step_returns_the_deploy_status"),
    ("gitlab", "recipes::the_gitlab_component_recipe_passes_the_deploy_status_through"),
    ("script", "readme::the_script_recipe_holds_and_releases_the_lock"),
    ("acl", "secrets::the_documented_acl_is_enough_for_every_lock_operation"),
    ("acl-noscript", "noscript::redis7_acl::the_documented_acl_without_scripting_is_enough"),
    ("systemd-service", "recipes::the_systemd_units_verify_and_the_service_runs_once_across_hosts"),
    ("systemd-timer", "recipes::the_systemd_units_verify_and_the_service_runs_once_across_hosts"),
    ("kubernetes", "recipes::the_kubernetes_cronjob_parses_and_its_command_runs"),
    ("backups", "limit::the_backups_recipe_runs_at_most_three_at_once"),
    ("builds-deploys", "shared::the_builds_and_deploys_recipe_never_mixes_them"),
    ("alert-rules", "rules::the_documented_report_rules_read_the_newest_run_across_hosts"),
    ("alert-ticks", "rules::the_documented_tick_rules_alert_for_a_missed_tick_only"),
    ("alert-servers", "rules::the_documented_tick_rules_alert_for_a_missed_tick_only"),
];

#[test]
fn every_marked_recipe_is_run_by_a_test() {
    let mut marked = BTreeSet::new();
    for (path, text) in pages() {
        for part in text.split("<!-- recipe: ").skip(1) {
            let name = part.split_once(" -->").unwrap_or_else(|| panic!("{path}: bad marker")).0;
            assert!(marked.insert(name.to_owned()), "{path}: recipe {name} marked twice");
            recipe(name);
        }
    }
    let known: BTreeSet<String> = RECIPES.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(marked, known, "marked recipes and the tests that run them (RECIPES) differ");
    for (name, test) in RECIPES {
        let module = test.split("::").next().unwrap();
        let function = test.rsplit("::").next().unwrap();
        let source =
            std::fs::read_to_string(root().join(format!("tests/integration/{module}.rs"))).unwrap();
        assert!(source.contains(&format!("fn {function}(")), "recipe {name}: no test {test}");
    }
}

/// A YAML document as JSON, parsed by PyYAML.
pub fn yaml(text: &str) -> serde_json::Value {
    let mut child = Command::new("python3")
        .args(["-c", "import sys, yaml, json; print(json.dumps(yaml.safe_load(sys.stdin)))"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 must be installed");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "YAML does not parse (PyYAML: apt-get install -y python3-yaml): {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// PATH with the tested `redlock` first.
pub fn path_with_redlock() -> String {
    let bin_dir = Path::new(bin()).parent().unwrap();
    format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default())
}

/// Runs a shell snippet with `redlock` on PATH and the fleet's servers.
pub fn sh(fleet: &Fleet, script: &str) -> Shell {
    let child = crate::harness::isolate(&mut Command::new("sh"))
        .args(["-c", script])
        .env("PATH", path_with_redlock())
        .env("REDLOCK_SERVERS", fleet.urls())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    Shell(Some(child))
}

/// A shell running a recipe in a process group of its own. Dropped before
/// it finished (a test that failed), the whole group is killed: a `redlock`
/// the shell started would otherwise wait, forever by default, on servers
/// the test has stopped.
pub struct Shell(Option<std::process::Child>);

impl Drop for Shell {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let group = i32::try_from(child.id()).expect("pid fits i32");
            // SAFETY: kill(2) on the process group this test started.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let _ = child.wait();
        }
    }
}

pub fn finished(mut shell: Shell) -> Output {
    shell.0.take().expect("not yet waited for").wait_with_output().unwrap()
}

/// An executable `deploy.sh` in `dir` that prints "deploying" and exits 3.
pub fn failing_deploy(dir: &Path) -> PathBuf {
    let deploy = dir.join("deploy.sh");
    std::fs::write(&deploy, "#!/bin/sh\necho deploying\nexit 3\n").unwrap();
    std::fs::set_permissions(&deploy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    deploy
}

/// A release directory in `dir` as `dist/build` lays it out, holding the
/// tested binary as version 0.0.0: the tarball and its SHA256SUMS.
pub fn fake_release(dir: &Path) -> PathBuf {
    let release = dir.join("release");
    let name = "redlock-0.0.0-x86_64-linux-gnu";
    std::fs::create_dir_all(release.join(name)).unwrap();
    std::fs::copy(bin(), release.join(name).join("redlock")).unwrap();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("tar -czf {name}.tar.gz {name} && sha256sum {name}.tar.gz > SHA256SUMS"))
        .current_dir(&release)
        .status()
        .unwrap();
    assert!(ok.success());
    release
}

#[test]
fn the_quick_start_shows_a_second_run_skip_and_wait() {
    let fleet = Fleet::start(1);
    let quick = recipe("quick-start");
    let lines: Vec<&str> =
        quick.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 3, "terminal 1's run, then terminal 2's two runs:\n{quick}");
    let local = |l: &str| {
        let command = l.split("  #").next().unwrap().trim();
        assert!(command.starts_with("target/release/redlock "), "{command}");
        command.replacen("target/release/redlock", bin(), 1)
    };
    // Terminal 1 holds the lock; its 30 s become 3 here.
    let holder = local(lines[0]);
    assert!(holder.contains(" -v ") && holder.ends_with("sleep 30"), "{holder}");
    let holder = sh(&fleet, &holder.replace("sleep 30", "sleep 3"));
    let key = lock_key("demo");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fleet.values(&key)[0].is_none() {
        assert!(std::time::Instant::now() < deadline, "terminal 1 never took the lock");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Terminal 2: -n skips with 75 and the message the comment quotes.
    let skip = finished(sh(&fleet, &local(lines[1])));
    assert_eq!(skip.status.code(), Some(75), "{skip:?}");
    let quoted = lines[1].split('"').nth(1).expect("the skip's message, quoted");
    let said = quoted.split("HOST").next().unwrap();
    assert!(String::from_utf8_lossy(&skip.stderr).contains(said), "{skip:?} lacks {said:?}");
    assert!(lines[1].contains("exit 75"), "{}", lines[1]);
    // Then a waiting run, which runs once terminal 1 released.
    let waiter = finished(sh(&fleet, &local(lines[2])));
    let holder = finished(holder);
    assert_eq!(holder.status.code(), Some(0), "{holder:?}");
    assert!(!holder.stderr.is_empty(), "-v shows the steps: {holder:?}");
    assert_eq!(waiter.status.code(), Some(0), "{waiter:?}");
    assert_eq!(String::from_utf8_lossy(&waiter.stdout), "my turn\n");
}

#[test]
fn the_cron_recipe_runs_the_job_once_across_hosts() {
    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let job = dir.path().join("report");
    std::fs::write(&job, format!("#!/bin/sh\necho \"$REDLOCK_TICK\" >> {}\n", ran.display()))
        .unwrap();
    std::fs::set_permissions(&job, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let recipe = recipe("cron");
    let line = recipe.lines().find(|l| l.starts_with("*/5")).expect("a cron line");
    let command: Vec<&str> = line.split_whitespace().skip(5).collect();
    let command = command.join(" ").replace("/usr/local/bin/report", &job.display().to_string());
    assert!(command.starts_with("redlock run"), "{command}");

    // Two hosts fire the same tick, a third a little late: one run in all,
    // when no tick's end fell among them.
    let every = Duration::from_secs(300);
    let fired = tick_now(every);
    let hosts: Vec<_> = (0..2).map(|_| sh(&fleet, &command)).collect();
    let mut outputs: Vec<Output> = hosts.into_iter().map(finished).collect();
    outputs.push(finished(sh(&fleet, &command)));
    for out in &outputs {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "cron would mail: {out:?}");
    }
    assert_once_per_tick(&ran, fired == tick_now(every));
}

/// The tick of `every` (`--once-per`) that the wall clock is in now.
pub fn tick_now(every: Duration) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    now.as_secs() / every.as_secs()
}

/// Checks the runs a job recorded in `ran`, one `$REDLOCK_TICK` a line:
/// no tick ran twice, and, when every host fired and ended inside one tick
/// (`one_tick`), one run in all. Hosts that straddle a tick's end (a
/// `--jitter` of 5 s makes three hosts span up to 6 s, and a five-minute
/// tick ends among them in one run of fifty) rightly run once in each tick,
/// or only in the second: a host whose tick ended before its first attempt
/// may skip it.
pub fn assert_once_per_tick(ran: &Path, one_tick: bool) {
    let text = std::fs::read_to_string(ran).unwrap_or_default();
    let mut ticks: BTreeMap<&str, usize> = BTreeMap::new();
    for line in text.lines() {
        *ticks.entry(line).or_insert(0) += 1;
    }
    assert!(ticks.values().all(|&n| n == 1), "a tick ran more than once: {ticks:?}");
    let ran = if one_tick { 1..=1 } else { 1..=2 };
    assert!(ran.contains(&ticks.len()), "ticks run: {ticks:?} (within one tick: {one_tick})");
}

#[test]
fn the_plain_ci_step_returns_the_deploy_status() {
    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let deploy = failing_deploy(dir.path());
    let recipe = recipe("ci-run");
    let command = recipe
        .lines()
        .find_map(|l| l.trim().strip_prefix("run: "))
        .expect("a run: line")
        .replace("./deploy.sh", &deploy.display().to_string());
    let out = finished(sh(&fleet, &command));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "deploying\n");
}

/// GitHub's `${{ inputs.NAME }}` and `${{ github.NAME }}` in an action's
/// step, from the step's inputs and `github` facts.
fn expand_github(text: &str, inputs: &BTreeMap<String, String>, github: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    while let Some(start) = out.find("${{") {
        let end = start + out[start..].find("}}").expect("a closed expression") + 2;
        let expr = out[start + 3..end - 2].trim();
        let value = if let Some(name) = expr.strip_prefix("inputs.") {
            inputs.get(name).unwrap_or_else(|| panic!("the action has no input {name}")).clone()
        } else if let Some(name) = expr.strip_prefix("github.") {
            github
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
                .unwrap_or_default()
        } else {
            panic!("an expression the test cannot evaluate: {expr}")
        };
        out.replace_range(start..end, &value);
    }
    out
}

/// Runs step `index` of action.yml as GitHub would: bash, its `env:` with
/// the expressions evaluated, and `GITHUB_*` from `github`.
fn action_step(
    index: usize,
    inputs: &BTreeMap<String, String>,
    github: &[(&str, &str)],
    path: &str,
    runner: &[(&str, &str)],
) -> Output {
    let action = yaml(&std::fs::read_to_string(root().join("action.yml")).unwrap());
    let step = &action["runs"]["steps"][index];
    assert_eq!(step["shell"], "bash");
    let mut command = Command::new("bash");
    crate::harness::isolate(&mut command)
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
        .arg(step["run"].as_str().unwrap())
        .env("PATH", path)
        .env("GITHUB_ACTION_PATH", root());
    for (k, v) in github {
        command.env(format!("GITHUB_{}", k.to_uppercase()), v);
    }
    command.envs(runner.iter().copied());
    for (k, v) in step["env"].as_object().into_iter().flatten() {
        command.env(k, expand_github(v.as_str().unwrap(), inputs, github));
    }
    command.output().unwrap()
}

/// The recipe's `with:` over the action's defaults; every input it gives
/// must exist, and every required one must be given.
fn action_inputs(with: &serde_json::Value) -> BTreeMap<String, String> {
    let action = yaml(&std::fs::read_to_string(root().join("action.yml")).unwrap());
    let declared = action["inputs"].as_object().expect("inputs");
    let with = with.as_object().expect("with:");
    let mut inputs = BTreeMap::new();
    for (name, spec) in declared {
        let given = with.get(name).map(|v| v.as_str().unwrap().to_owned());
        if spec["required"] == true {
            assert!(given.is_some(), "the recipe does not give the required input {name}");
        }
        let default = spec["default"].as_str().unwrap_or_default().to_owned();
        inputs.insert(name.clone(), given.unwrap_or(default));
    }
    for name in with.keys() {
        assert!(declared.contains_key(name), "action.yml has no input {name}");
    }
    inputs
}

#[test]
fn the_github_action_recipe_runs_the_step_under_the_lock() {
    let doc = yaml(&recipe("ci"));
    let step = &doc[0];
    let uses = step["uses"].as_str().expect("a uses: step");
    let (_, reference) = uses.split_once("/redlock@").expect("this repository's action, at a ref");
    let mut inputs = action_inputs(&step["with"]);
    assert!(inputs["servers"].contains("secrets."), "servers come from a secret: {inputs:?}");
    assert!(inputs["password"].contains("secrets."), "the password from a secret: {inputs:?}");
    // This test's servers have no password.
    inputs.insert("password".into(), String::new());
    let fleet = Fleet::start(3);
    inputs.insert("servers".into(), fleet.urls());
    let dir = tempfile::tempdir().unwrap();
    let deploy = failing_deploy(dir.path());
    let command = inputs["command"].replace("./deploy.sh", &deploy.display().to_string());
    inputs.insert("command".into(), command);

    // The install step, at the recipe's release tag, from a release laid
    // out as dist/build makes it (here a local directory).
    let release = fake_release(dir.path());
    let versions = dir.path().join("releases").join("v0.0.0");
    std::fs::create_dir_all(versions.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&release, &versions).unwrap();
    let github_path = dir.path().join("github_path");
    let runner_temp = dir.path().join("runner");
    std::fs::create_dir_all(&runner_temp).unwrap();
    assert!(reference.starts_with('v'), "a release tag: {reference}");
    let github = [
        ("action_ref", "v0.0.0"),
        ("action_repository", "OWNER/redlock"),
        ("path", github_path.to_str().unwrap()),
    ];
    // The runner's PATH has no redlock; the release is a local directory.
    let releases = format!("file://{}", dir.path().join("releases").display());
    let runner =
        [("RUNNER_TEMP", runner_temp.to_str().unwrap()), ("REDLOCK_RELEASES", releases.as_str())];
    let installed = action_step(0, &inputs, &github, "/usr/bin:/bin", &runner);
    assert!(installed.status.success(), "{installed:?}");
    let bin_dir = std::fs::read_to_string(&github_path).unwrap();
    let bin_dir = bin_dir.trim();
    assert!(Path::new(bin_dir).join("redlock").exists(), "{bin_dir}");

    // The run step, with the installed binary first on PATH.
    let path = format!("{bin_dir}:/usr/bin:/bin");
    let out = action_step(1, &inputs, &github, &path, &[]);
    assert_eq!(out.status.code(), Some(3), "the deploy's status is the step's: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "deploying\n");
    assert_eq!(fleet.values(&lock_key(&inputs["key"])), vec![None, None, None], "released");
}

#[test]
fn the_script_recipe_holds_and_releases_the_lock() {
    let fleet = Fleet::start(3);
    let out = finished(sh(&fleet, &recipe("script")));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("held: maint is held by"), "{stdout}");
    assert_eq!(fleet.values(&lock_key("maint")), vec![None, None, None], "the trap released it");
}

/// The text that holds command lines: fenced blocks (whole lines, each
/// with the block's number) and inline code spans (block 0), which may
/// wrap across the lines of a paragraph.
fn code_segments(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut block = None;
    let mut blocks = 0;
    let mut paragraph = String::new();
    let spans = |paragraph: &mut String, out: &mut Vec<(usize, String)>| {
        for (i, span) in paragraph.split('`').enumerate() {
            if i % 2 == 1 {
                out.push((0, span.replace('\n', " ")));
            }
        }
        paragraph.clear();
    };
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            spans(&mut paragraph, &mut out);
            block = if block.is_some() {
                None
            } else {
                blocks += 1;
                Some(blocks)
            };
            continue;
        }
        match block {
            Some(n) => out.push((n, line.to_owned())),
            None if line.trim().is_empty() => spans(&mut paragraph, &mut out),
            None => {
                paragraph.push_str(line);
                paragraph.push('\n');
            }
        }
    }
    spans(&mut paragraph, &mut out);
    out
}

/// Each `redlock ...` command line in `segment`: the words after
/// `redlock` up to `--`, a pipe, `;`, `&&` or a comment, without quotes
/// and the synopsis' brackets. `cargo run --release --` counts as `redlock`.
fn invocations(segment: &str) -> Vec<Vec<String>> {
    let segment = segment.replace("cargo run --release -- ", "redlock ");
    let mut out = Vec::new();
    let mut rest = segment.as_str();
    while let Some(at) = rest.find("redlock ") {
        let before = rest[..at].chars().last();
        let after = &rest[at + "redlock ".len()..];
        rest = after;
        if before.is_some_and(|c| !" (/\"'=$".contains(c)) {
            continue;
        }
        let mut words = Vec::new();
        for word in after.split_whitespace() {
            if matches!(word, "--" | "(--" | "|" | "||" | "&&" | ";") || word.starts_with('#') {
                break;
            }
            let ends = word.ends_with(';') || word.ends_with(')') && !word.contains('(');
            let word = word.trim_matches(|c| "[]()\"';".contains(c));
            if !word.is_empty() && word != "..." {
                words.push(word.to_owned());
            }
            if ends {
                break;
            }
        }
        out.push(words);
    }
    out
}

/// Checks one command line's words against clap's tree; `sub` carries a
/// synopsis' subcommand over its continuation lines.
/// Whether `word` is a typo of `name`: one letter changed, added, dropped
/// or two swapped (`rn`, `stauts`).
fn near(name: &str, word: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (name.chars().collect(), word.chars().collect());
    let mut d: Vec<Vec<usize>> = (0..=a.len()).map(|i| vec![i; b.len() + 1]).collect();
    (0..=b.len()).for_each(|j| d[0][j] = j);
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()] <= 1 || (a.len() > 4 && d[a.len()][b.len()] <= 2)
}

/// Checks one command line's words against clap's tree: the problems, and
/// whether it was a command line at all. `sub` carries a synopsis'
/// subcommand over its continuation lines.
fn check_words(
    cmd: &clap::Command,
    words: &[String],
    sub: &mut Option<String>,
) -> (Vec<String>, bool) {
    let mut problems = Vec::new();
    let args_of = |sub: &Option<String>| -> Vec<clap::Arg> {
        match sub {
            Some(name) => cmd.find_subcommand(name).unwrap().get_arguments().cloned().collect(),
            None => cmd.get_arguments().cloned().collect(),
        }
    };
    let mut skip_value = false;
    for word in words {
        if skip_value {
            skip_value = false;
            continue;
        }
        let args = args_of(sub);
        let takes_value = |a: &clap::Arg| a.get_action().takes_values();
        if let Some(long) = word.strip_prefix("--") {
            let (name, value) = long.split_once('=').map_or((long, None), |(n, v)| (n, Some(v)));
            match args.iter().find(|a| {
                a.get_long() == Some(name)
                    || a.get_all_aliases().is_some_and(|al| al.contains(&name))
            }) {
                Some(a) => skip_value = takes_value(a) && value.is_none(),
                None => problems.push(format!("--{name} is no flag of {sub:?}")),
            }
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            if shorts.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                continue;
            }
            for (i, c) in shorts.chars().enumerate() {
                match args.iter().find(|a| a.get_short() == Some(c)) {
                    Some(a) if takes_value(a) => {
                        skip_value = i + 1 == shorts.len();
                        break;
                    }
                    Some(_) => {}
                    None => {
                        problems.push(format!("-{c} is no flag of {sub:?}"));
                        break;
                    }
                }
            }
        } else if sub.is_none() && word != "GLOBAL" {
            if cmd.find_subcommand(word).is_some() {
                *sub = Some(word.clone());
            } else if cmd.get_subcommands().any(|s| near(s.get_name(), word)) {
                problems.push(format!("{word} is no subcommand"));
                break;
            } else {
                // Prose or a path ("redlock renews it", "install redlock
                // /usr/local/bin/"), not a command line.
                return (problems, false);
            }
        }
    }
    (problems, true)
}

/// Where command lines are shown: the pages, and the action and component
/// that build them.
fn command_texts() -> Vec<(String, String)> {
    let mut texts = pages();
    for file in ["action.yml", "templates/run.yml"] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        // Whole lines, as in a fenced block.
        texts.push((file.to_owned(), format!("```\n{text}\n```\n")));
    }
    texts
}

#[test]
fn documented_command_lines_use_real_subcommands_and_flags() {
    let mut cmd = redlock::cli::command();
    cmd.build();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (path, text) in command_texts() {
        let mut carried: Option<(usize, Option<String>)> = None;
        for (block, segment) in code_segments(&text) {
            let found = invocations(&segment);
            let trimmed = segment.trim_start();
            if found.is_empty() && block > 0 && trimmed.starts_with("[-") {
                // A synopsis' continuation line: the previous line's subcommand.
                if let Some((b, sub)) = &mut carried
                    && *b == block
                {
                    let words = invocations(&format!("redlock {trimmed}"));
                    for p in check_words(&cmd, &words[0], sub).0 {
                        problems.push(format!("{path}: {segment}: {p}"));
                    }
                }
                continue;
            }
            for words in found {
                let mut sub = None;
                let (found, command_line) = check_words(&cmd, &words, &mut sub);
                problems.extend(found.into_iter().map(|p| format!("{path}: {segment}: {p}")));
                if command_line {
                    checked += 1;
                    carried = Some((block, sub));
                }
            }
        }
    }
    assert!(problems.is_empty(), "stale command lines:\n{}", problems.join("\n"));
    assert!(checked > 50, "only {checked} command lines found: is the extraction broken?");
}

/// Every file of the repository that a variable's reader may be in.
fn sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "docs" {
                sources(&path, out);
            }
        } else if name != "README.md" {
            out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
}

#[test]
fn documented_variables_are_read_somewhere() {
    let mut code = String::new();
    for dir in ["src", "tests", "benches", "dist", ".ci", "templates"] {
        sources(&root().join(dir), &mut code);
    }
    code.push_str(&std::fs::read_to_string(root().join("action.yml")).unwrap());
    let mut unknown = BTreeSet::new();
    for (path, text) in pages() {
        for (i, _) in text.match_indices("REDLOCK_") {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let name = name.trim_end_matches('_');
            if !code.contains(name) {
                unknown.insert(format!("{path}: {name}"));
            }
        }
    }
    assert!(unknown.is_empty(), "variables nothing reads: {unknown:?}");
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// as dashes.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn links_between_the_pages_resolve() {
    let mut broken = Vec::new();
    let mut links = 0;
    for (path, text) in pages() {
        let dir = Path::new(&path).parent().unwrap().to_owned();
        for part in text.split("](").skip(1) {
            let target = part.split(')').next().unwrap();
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            links += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if file.is_empty() { Path::new(&path).to_owned() } else { dir.join(file) };
            let Ok(target_text) = std::fs::read_to_string(root().join(&file)) else {
                broken.push(format!("{path}: {target}: no file {}", file.display()));
                continue;
            };
            let is_markdown = file.extension().is_some_and(|e| e == "md");
            if !anchor.is_empty() && (!is_markdown || !anchors(&target_text).contains(anchor)) {
                broken.push(format!("{path}: {target}: no heading #{anchor}"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(links > 30, "only {links} links found");
}

#[test]
fn the_readme_is_a_guide_and_links_every_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: move a topic to docs/");
    for (path, _) in pages().into_iter().skip(1) {
        let name = path.strip_prefix("docs/").unwrap();
        assert!(readme.contains(&format!("(docs/{name})")), "README.md does not link {path}");
    }
    // The quick start's marked lines, as .ci/run reads them: a
    // prerequisite, then the main command, then the tests, in one block.
    let block = readme.split("## Quick start").nth(1).unwrap().split("```sh\n").nth(1).unwrap();
    let lines: Vec<&str> = block.split("```").next().unwrap().lines().collect();
    assert!(lines.len() == 3, "{lines:?}");
    assert!(lines[0].contains("redis-server") && lines[0].contains("export REDLOCK_SERVERS="));
    assert!(lines[1].ends_with("# main") && lines[2].ends_with("# tests"), "{lines:?}");
}

/// The codes of an exit-code table (`126 / 127` is two), in order.
fn codes(rows: impl Iterator<Item = String>) -> Vec<String> {
    rows.flat_map(|r| r.split(" / ").map(str::to_owned).collect::<Vec<_>>()).collect()
}

#[test]
fn the_exit_code_table_matches_the_man_page_and_the_program() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let table = readme.split("## Exit codes").nth(1).expect("an Exit codes section");
    let readme_codes = codes(
        table
            .lines()
            .skip_while(|l| !l.starts_with("| code"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.split('|').nth(1).unwrap().trim().to_owned()),
    );
    let man = std::fs::read_to_string(root().join("man/redlock.1")).unwrap();
    let status = man.split(".SH \"EXIT STATUS\"").nth(1).unwrap().split(".SH").next().unwrap();
    let man_codes = codes(
        status
            .lines()
            .filter_map(|l| l.strip_prefix("\\fB").and_then(|l| l.strip_suffix("\\fR")))
            .map(str::to_owned),
    );
    let sorted = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
    assert_eq!(sorted(&readme_codes), sorted(&man_codes), "README.md and redlock(1) differ");
    use redlock::exit;
    for code in [
        exit::OK,
        exit::FREE_OR_WARNINGS,
        exit::USAGE,
        exit::UNAVAILABLE,
        exit::LOST,
        exit::BUSY,
        exit::MAX_HOLD,
        exit::CANNOT_EXECUTE,
        exit::NOT_FOUND,
        exit::CHECK_STALE,
        exit::CHECK_UNKNOWN,
    ] {
        assert!(readme_codes.contains(&code.to_string()), "the table lacks {code}");
    }
    assert!(readme_codes.contains(&format!("{}+N", exit::SIGNAL_BASE)));
}
