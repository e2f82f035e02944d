//! The deployment recipes beyond cron and GitHub Actions: the
//! configuration file, a systemd service and timer, a Kubernetes CronJob
//! and the GitLab CI component. Each is checked as far as this machine allows: units by
//! `systemd-analyze verify`, YAML by a YAML parser, and every command line
//! run against real servers with only the paths substituted.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::harness::{Fleet, Redlock, bin, root, unique_key};
use crate::readme::{
    assert_once_per_tick, failing_deploy, fake_release, finished, path_with_redlock, recipe, sh,
    tick_now, yaml,
};

/// A job that records each run in `ran`.
fn job(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let ran = dir.join("ran");
    let job = dir.join("report");
    // The tick it ran for (`--once-per`), or an empty line.
    std::fs::write(&job, format!("#!/bin/sh\necho \"$REDLOCK_TICK\" >> {}\n", ran.display()))
        .unwrap();
    std::fs::set_permissions(&job, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (job, ran)
}

fn runs(ran: &Path) -> usize {
    std::fs::read_to_string(ran).map_or(0, |t| t.lines().count())
}

#[test]
fn the_cron_recipe_reaches_usr_bin_and_its_config_file_works() {
    let cron = recipe("cron");
    let path = cron.lines().find_map(|l| l.strip_prefix("PATH=")).expect("a PATH= line");
    assert!(path.split(':').any(|d| d == "/usr/bin"), "cron's PATH must reach /usr/bin/redlock");

    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let servers: Vec<String> = fleet.servers.iter().map(|s| format!("\"{}\"", s.url())).collect();
    // The fleet has no password: the recipe's password-file line goes.
    let config: String = recipe("config")
        .lines()
        .filter(|l| !l.starts_with("password-file"))
        .map(|l| {
            if l.starts_with("servers = ") {
                format!("servers = [{}]", servers.join(", "))
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let line = 1 + config.lines().position(|l| l.starts_with("servers = ")).expect("servers");
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config).unwrap();
    let file = file.display().to_string();
    Redlock::new("")
        .env("REDLOCK_CONFIG", &file)
        .args(["run", "-k", &unique_key("config-recipe"), "--", "true"])
        .run()
        .expect(0);
    let shown = Redlock::new("").env("REDLOCK_CONFIG", &file).args(["config"]).run();
    shown.expect(0);
    assert!(
        shown.stdout.contains(&format!("{file}:{line}")),
        "servers from the file:\n{}",
        shown.stdout
    );
}

#[test]
fn the_systemd_units_verify_and_the_service_runs_once_across_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let (job, ran) = job(dir.path());
    let service = recipe("systemd-service");
    let exec = service
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart= line")
        .replace("/usr/local/bin/report", &job.display().to_string());
    assert!(exec.starts_with("/usr/bin/redlock run "), "{exec}");
    let exec = exec.replacen("/usr/bin/redlock", bin(), 1);

    // systemd-analyze checks that ExecStart's program exists: point it at ours.
    let units = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("nightly-report.service", service.replace("/usr/bin/redlock", bin())),
        ("nightly-report.timer", recipe("systemd-timer")),
    ] {
        std::fs::write(units.path().join(name), text).unwrap();
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(units.path().join("nightly-report.service"))
        .arg(units.path().join("nightly-report.timer"))
        .output()
        .expect("systemd-analyze (Debian package systemd) must be installed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "systemd-analyze verify: {stderr}");

    // One run in all, unless the day's end (UTC) fell among the hosts.
    let fleet = Fleet::start(3);
    let every = Duration::from_secs(86_400);
    let fired = tick_now(every);
    let hosts: Vec<_> = (0..3).map(|_| sh(&fleet, &exec)).collect();
    for out in hosts.into_iter().map(finished) {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    assert_once_per_tick(&ran, fired == tick_now(every));
}

#[test]
fn the_kubernetes_cronjob_parses_and_its_command_runs() {
    let doc = yaml(&recipe("kubernetes"));
    assert_eq!(doc["kind"], "CronJob");
    assert_eq!(doc["apiVersion"], "batch/v1");
    let pod = &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    let container = &pod["containers"][0];
    let env: Vec<&str> =
        container["env"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
    assert!(env.contains(&"REDLOCK_SERVERS") && env.contains(&"REDLOCK_PASSWORD"), "{env:?}");
    let command: Vec<String> = container["command"]
        .as_array()
        .expect("a command array")
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(command[0], "/usr/bin/redlock");

    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let (job, ran) = job(dir.path());
    let args: Vec<String> = command[1..]
        .iter()
        .map(|a| if a == "/usr/local/bin/report" { job.display().to_string() } else { a.clone() })
        .collect();
    Redlock::on(&fleet).args(&args).run().expect(0);
    assert_eq!(runs(&ran), 1);
}

/// GitLab's `$[[ inputs.NAME ]]` in a component's text.
fn interpolate(text: &str, inputs: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    while let Some(start) = out.find("$[[") {
        let end = start + out[start..].find("]]").expect("a closed interpolation") + 2;
        let expr = out[start + 3..end - 2].trim();
        let name = expr.strip_prefix("inputs.").unwrap_or_else(|| panic!("{expr}"));
        let value = inputs.get(name).unwrap_or_else(|| panic!("the component has no input {name}"));
        out.replace_range(start..end, value);
    }
    out
}

/// The recipe's component job as GitLab would run it: its inputs over the
/// component's defaults (every input it gives must exist, every required
/// one must be given), `overrides` on top, then the job's variables and
/// script, the script run by `sh -e` with `path`.
fn run_component(overrides: &[(&str, &str)], fleet: &Fleet, path: &str) -> (String, Output) {
    let doc = yaml(&recipe("gitlab"));
    let include = &doc["include"][0];
    let component = include["component"].as_str().expect("an include: component:");
    let name = component.rsplit('/').next().unwrap().split('@').next().unwrap();
    let template = std::fs::read_to_string(root().join(format!("templates/{name}.yml"))).unwrap();
    let (spec, job) = template.split_once("\n---\n").expect("spec, then the job");
    let spec = yaml(spec);
    let declared = spec["spec"]["inputs"].as_object().expect("spec: inputs:");
    let given = include["inputs"].as_object().expect("inputs:");
    let mut inputs = BTreeMap::new();
    for (name, input) in declared {
        let value = given.get(name).map(|v| v.as_str().unwrap().to_owned());
        let default = input.get("default").map(|d| d.as_str().unwrap().to_owned());
        assert!(value.is_some() || default.is_some(), "the recipe lacks the input {name}");
        inputs.insert(name.clone(), value.or(default).unwrap());
    }
    for name in given.keys() {
        assert!(declared.contains_key(name), "templates/{name}.yml has no input {name}");
    }
    for (k, v) in overrides {
        inputs.insert((*k).to_owned(), (*v).to_owned());
    }
    let jobs = yaml(job);
    let (job_name, job) = jobs.as_object().unwrap().iter().next().expect("one job");
    let mut command = Command::new("sh");
    crate::harness::isolate(&mut command);
    for (k, v) in job["variables"].as_object().into_iter().flatten() {
        let value = v.as_str().or_else(|| v["value"].as_str()).unwrap();
        command.env(k, interpolate(value, &inputs));
    }
    let script: Vec<&str> =
        job["script"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    let out = command
        .arg("-e")
        .arg("-c")
        .arg(script.join("\n"))
        .env("PATH", path)
        .env("REDLOCK_SERVERS", fleet.urls())
        .env_remove("REDLOCK_KEY")
        .env_remove("REDLOCK_TOKEN")
        .output()
        .unwrap();
    (interpolate(job_name, &inputs), out)
}

#[test]
fn the_gitlab_component_recipe_passes_the_deploy_status_through() {
    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let deploy = failing_deploy(dir.path()).display().to_string();
    let recipe_inputs = yaml(&recipe("gitlab"))["include"][0]["inputs"].clone();
    let command = recipe_inputs["command"].as_str().unwrap().replace("./deploy.sh", &deploy);
    assert!(!recipe_inputs["version"].as_str().unwrap_or_default().is_empty(), "a release");

    // An image with redlock: no download.
    let (job, out) =
        run_component(&[("command", &command), ("version", "")], &fleet, &path_with_redlock());
    assert_eq!(job, recipe_inputs["job-name"].as_str().unwrap());
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("deploying\n"), "{out:?}");

    // An image without: the release's tarball, checked against SHA256SUMS.
    let release = format!("file://{}", fake_release(dir.path()).display());
    let (_, out) = run_component(
        &[("command", &command), ("version", "0.0.0"), ("download-url", &release)],
        &fleet,
        "/usr/bin:/bin",
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("deploying\n"), "{out:?}");
}

/// A directory of links to these commands (found on this machine's PATH),
/// as the PATH of an image that has those and no others.
fn image_path(dir: &Path, commands: &[&str]) -> String {
    let image = dir.join("image");
    std::fs::create_dir_all(&image).unwrap();
    for name in commands {
        let found = ["/usr/local/bin", "/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{name} is not on this machine"));
        std::os::unix::fs::symlink(found, image.join(name)).unwrap();
    }
    std::os::unix::fs::symlink(bin(), image.join("redlock")).unwrap();
    image.display().to_string()
}

/// The component's `command` runs under bash where the image has bash (a
/// `[[ ]]` test works), and where it has none the job says that sh runs
/// it, so a bash-only test is never silently taken as false.
#[test]
fn the_gitlab_component_runs_the_command_by_bash_and_says_when_it_cannot() {
    let fleet = Fleet::start(1);
    let command = "if [[ bash == bash ]]; then echo by-bash; else echo by-sh; exit 9; fi";
    let (_, out) =
        run_component(&[("command", command), ("version", "")], &fleet, &path_with_redlock());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("by-bash\n"), "{out:?}");

    let dir = tempfile::tempdir().unwrap();
    let no_bash = image_path(dir.path(), &["sh"]);
    let (_, out) = run_component(&[("command", "echo ran"), ("version", "")], &fleet, &no_bash);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no bash") && stderr.contains("sh -e"), "{out:?}");
}

/// A download the component cannot make fails with its own message: the
/// `download-url` input left empty, or an image without curl.
#[test]
fn the_gitlab_component_says_what_its_download_lacks() {
    let fleet = Fleet::start(1);
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = run_component(
        &[("command", "true"), ("version", "0.0.0"), ("download-url", "")],
        &fleet,
        "/usr/bin:/bin",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(stderr.contains("download-url input is empty"), "{out:?}");

    let no_curl = image_path(dir.path(), &["sh", "mktemp"]);
    let (_, out) = run_component(
        &[("command", "true"), ("version", "0.0.0"), ("download-url", "file:///nowhere")],
        &fleet,
        &no_curl,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(stderr.contains("needs curl"), "{out:?}");
}
