//! One module per subcommand: thin orchestration over [`crate::lock`] and
//! [`crate::wait`]; each returns the process exit code or an [`Error`].
//! The [`Fleet`] they work on is built here from the validated
//! configuration (`fleet`), so that `config` names no server connection.

mod acquire;
mod check;
mod doctor;
mod extend;
mod history;
mod hold;
mod release;
mod report;
mod run;
mod status;
mod table;

use serde_json::json;

use crate::config::{Command, Config};
use crate::error::Error;
use crate::lock::{Fleet, ServerResult};
use crate::output::{Level, Log};
use crate::server::Server;

/// The `released` event: how many servers deleted the key, and each one's
/// part: `released k: deleted on 2 of 3 (quorum 2), 1 not awaited`.
fn released(log: &Log, key: &str, quorum: usize, servers: &[ServerResult]) {
    let deleted =
        servers.iter().filter(|s| s.result == crate::lock::Part::Answered("deleted")).count();
    let first = format!("deleted on {deleted} of {} (quorum {quorum})", servers.len());
    log.event(
        Level::Info,
        "released",
        &format!(
            "released {}: {}",
            crate::text::display_key(key.as_bytes()),
            crate::lock::took_part(first, servers, "deleted", log.verbose())
        ),
        json!({ "key": key, "deleted": deleted, "quorum": quorum, "servers": servers }),
    );
}

/// `redlock config`: the rows as an aligned table on stdout (not with
/// `--check`), then each problem on stderr; 64 if there is any.
fn show_config(rows: &[[String; 3]], problems: Vec<String>, check: bool, log: &Log) -> u8 {
    if !check {
        let out = table::render(["SETTING", "VALUE", "FROM"], rows);
        // A closed stdout loses only the report.
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    }
    if problems.is_empty() {
        return crate::exit::OK;
    }
    let problems = Error::Problems(problems);
    log.failed(&problems);
    problems.exit_code()
}

/// Opens (lazily) the servers of `config` with its node timeout, as the
/// fleet every subcommand works on: the configuration says what the
/// servers and the rules are, the command layer builds the engine's value
/// (public for programs that drive the library with the binary's settings:
/// the peers' benchmark).
pub fn fleet(config: &Config) -> Result<Fleet, Error> {
    let servers = config
        .servers
        .iter()
        .map(|url| Server::new(url.clone(), config.node_timeout, &config.tls))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::Usage)?;
    Ok(Fleet::new(servers, config.quorum, config.drift_factor)
        .with_key_layout(config.key_layout)
        .with_restart_window(config.restart_window))
}

/// Runs the configured subcommand; `Ok` carries the exit code.
pub async fn execute(config: Config) -> Result<u8, Error> {
    let fleet = std::sync::Arc::new(fleet(&config)?);
    let log = config.log;
    let result = match config.command {
        Command::Acquire { request, json } => acquire::acquire(&fleet, &request, json, &log).await,
        Command::Extend { key, token, ttl } => {
            extend::extend(&fleet, &key, &token, ttl, &log).await
        }
        Command::Release { key, token, any_value, limit } => {
            release::release(&fleet, &key, token.as_deref(), any_value, limit, &log).await
        }
        Command::Status { key, json, limit } => status::status(&fleet, &key, json, limit).await,
        Command::Run(run) => run::run(std::sync::Arc::clone(&fleet), run, &log).await,
        Command::Hold(hold) => hold::hold(std::sync::Arc::clone(&fleet), hold, &log).await,
        Command::History { key, count, json } => history::history(&fleet, &key, count, json).await,
        Command::Check { key, max_age, require_success, max_missed, since, max_runtime, json } => {
            let limits = check::Limits { max_age, require_success, max_missed, since, max_runtime };
            Ok(check::check(&fleet, &key, &limits, json).await)
        }
        Command::Doctor { ttl, json, config_file } => {
            doctor::doctor(&fleet, ttl, config.drift_factor, config_file.as_deref(), json).await
        }
        Command::ShowConfig { rows, problems, warnings, check } => {
            for warning in &warnings {
                log.event(Level::Warn, "config_warning", warning, json!({}));
            }
            Ok(show_config(&rows, problems, check, &log))
        }
    };
    // Calls that outlived their round's verdict finish (each within the
    // node timeout) before the runtime, and with it they, go away.
    fleet.settle().await;
    result
}
