//! The README's recipes, run as written against real servers. Only the
//! server list and the protected command (a path that does not exist here)
//! are substituted.

use std::path::Path;
use std::process::{Command, Output};

use crate::harness::Fleet;

/// The fenced block after `<!-- recipe: NAME -->` in README.md.
pub fn recipe(name: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let marker = format!("<!-- recipe: {name} -->");
    let after =
        &readme[readme.find(&marker).unwrap_or_else(|| panic!("no {marker}")) + marker.len()..];
    let body =
        after.split_once("```").and_then(|(_, b)| b.split_once('\n')).map(|(_, b)| b).unwrap();
    body.split_once("```").unwrap().0.to_owned()
}

/// Runs a shell snippet with `redlock` on PATH and the fleet's servers.
pub fn sh(fleet: &Fleet, script: &str) -> std::process::Child {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_redlock")).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    Command::new("sh")
        .args(["-c", script])
        .env("PATH", path)
        .env("REDLOCK_SERVERS", fleet.urls())
        .env_remove("REDLOCK_KEY")
        .env_remove("REDLOCK_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

pub fn finished(child: std::process::Child) -> Output {
    child.wait_with_output().unwrap()
}

#[test]
fn the_cron_recipe_runs_the_job_once_across_hosts() {
    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let job = dir.path().join("report");
    std::fs::write(&job, format!("#!/bin/sh\necho \"$REDLOCK_TOKEN\" >> {}\n", ran.display()))
        .unwrap();
    std::fs::set_permissions(&job, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let recipe = recipe("cron");
    let line = recipe.lines().find(|l| l.starts_with("*/5")).expect("a cron line");
    let command: Vec<&str> = line.split_whitespace().skip(5).collect();
    let command = command.join(" ").replace("/usr/local/bin/report", &job.display().to_string());
    assert!(command.starts_with("redlock run"), "{command}");

    // Two hosts fire the same tick, a third a little late: one run in all.
    let hosts: Vec<_> = (0..2).map(|_| sh(&fleet, &command)).collect();
    let mut outputs: Vec<Output> = hosts.into_iter().map(finished).collect();
    outputs.push(finished(sh(&fleet, &command)));
    for out in &outputs {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "cron would mail: {out:?}");
    }
    assert_eq!(std::fs::read_to_string(&ran).unwrap().lines().count(), 1);
}

#[test]
fn the_ci_recipe_returns_the_deploy_status() {
    let fleet = Fleet::start(3);
    let dir = tempfile::tempdir().unwrap();
    let deploy = dir.path().join("deploy.sh");
    std::fs::write(&deploy, "#!/bin/sh\necho deploying\nexit 3\n").unwrap();
    std::fs::set_permissions(&deploy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let recipe = recipe("ci");
    let command = recipe
        .lines()
        .find_map(|l| l.trim().strip_prefix("run: "))
        .expect("a run: line")
        .replace("./deploy.sh", &deploy.display().to_string());
    let out = finished(sh(&fleet, &command));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "deploying\n");
}

#[test]
fn the_script_recipe_holds_and_releases_the_lock() {
    let fleet = Fleet::start(3);
    let out = finished(sh(&fleet, &recipe("script")));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("held: maint is held by"), "{stdout}");
    assert_eq!(fleet.values("maint"), vec![None, None, None], "the trap released it");
}
