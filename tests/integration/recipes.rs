//! The README's deployment recipes beyond cron and GitHub Actions: the
//! configuration file, a systemd service and timer, a Kubernetes CronJob
//! and GitLab CI. Each is checked as far as this machine allows: units by
//! `systemd-analyze verify`, YAML by a YAML parser, and every command line
//! run against real servers with only the paths substituted.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::harness::{Fleet, Redlock, unique_key};
use crate::readme::{finished, recipe, sh};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_redlock")
}

/// A YAML document as JSON, parsed by PyYAML.
fn yaml(text: &str) -> serde_json::Value {
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

/// A job that records each run in `ran`.
fn job(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let ran = dir.join("ran");
    let job = dir.join("report");
    std::fs::write(&job, format!("#!/bin/sh\necho run >> {}\n", ran.display())).unwrap();
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

    let fleet = Fleet::start(3);
    let hosts: Vec<_> = (0..3).map(|_| sh(&fleet, &exec)).collect();
    for out in hosts.into_iter().map(finished) {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    assert_eq!(runs(&ran), 1);
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

#[test]
fn the_gitlab_job_parses_and_passes_the_deploy_status_through() {
    let doc = yaml(&recipe("gitlab"));
    let script = doc["deploy-prod"]["script"][0].as_str().expect("a script line");
    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let deploy = dir.path().join("deploy.sh");
    std::fs::write(&deploy, "#!/bin/sh\necho deploying\nexit 3\n").unwrap();
    std::fs::set_permissions(&deploy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = finished(sh(&fleet, &script.replace("./deploy.sh", &deploy.display().to_string())));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "deploying\n");
}
