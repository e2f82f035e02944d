//! The program from its arguments to its exit code: parse the command line,
//! build the configuration, run the subcommand on a runtime, and report a
//! failure (one line on stderr, or a JSON event) with its exit code. `main`
//! only calls [`run`], so every path from arguments to exit code is
//! reachable from tests.

use std::ffi::OsString;
use std::io::Write;

use clap::error::ErrorKind;

use crate::cli::{self, LogFormat};
use crate::config::Config;
use crate::error::Error;
use crate::exit;
use crate::output::Log;

/// Runs redlock with `args` (the program name first) and returns the
/// process exit code ([`crate::exit`]). Once per process: the subcommand's
/// runtime and its tasks are left to end with the process.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let parsed = match cli::parse_from(&args) {
        Ok(parsed) => parsed,
        Err(e) => return parse_failed(&e, &args),
    };
    // Until the configuration is known, messages follow the flags alone.
    let mut log =
        Log::new(parsed.cli.global.verbose, parsed.cli.global.quiet, parsed.cli.global.log_format);
    let result = crate::config_file::load(parsed.cli.global.config.as_deref())
        .and_then(|file| Config::from_parsed(parsed, file.as_ref()))
        .and_then(|config| {
            log = config.log;
            // Before any token is made: this process's only host name.
            if let Some(host) = config.host.clone() {
                crate::token::set_hostname(host);
            }
            execute(config)
        });
    match result {
        Ok(code) => code,
        Err(e) => {
            log.failed(&e);
            e.exit_code()
        }
    }
}

/// What a command line that did not parse prints, and its exit code.
fn parse_failed(e: &clap::Error, args: &[OsString]) -> u8 {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            exit::OK
        }
        // `redlock` alone (or with global options only): the short help on
        // stderr, and 64 as for any command line that says nothing to do.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            let _ = write!(std::io::stderr(), "{}", cli::command().render_help());
            exit::USAGE
        }
        // clap's message spans several lines (usage, tip); every error is
        // one line. The command line did not parse, but a pipeline that
        // asked for JSON still gets its error as a JSON event.
        _ => {
            let format = if cli::asks_for_json(args) { LogFormat::Json } else { LogFormat::Text };
            Log::new(0, false, format).failed(&Error::Usage(cli::error_line(e)));
            exit::USAGE
        }
    }
}

/// Runs the configured subcommand on a current-thread runtime: one
/// short-lived process doing a handful of parallel network calls gains
/// nothing from worker threads.
fn execute(config: Config) -> Result<u8, Error> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            Error::CannotRun {
                code: crate::exit::CANNOT_EXECUTE,
                message: format!("cannot start the async runtime: {e}"),
            }
        })?;
    let result = runtime.block_on(crate::cmd::execute(config));
    // Not dropped: its tasks (connections, release listeners) and threads
    // end with the process, which exits next; tearing each down first
    // would only delay the exit. Nothing of it needs a clean end: every
    // call that matters was awaited (`Fleet::settle`).
    std::mem::forget(runtime);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_that_does_not_parse_is_a_usage_error() {
        assert_eq!(run(["redlock", "--no-such-flag", "status"]), exit::USAGE);
        assert_eq!(run(["redlock", "--log-format", "json", "status", "--bogus"]), exit::USAGE);
    }
}
