//! The `redlock` binary: parse, build the runtime, call the library, and
//! turn the result into the process exit code. Everything else is in the
//! library so that tests reach it.

use std::io::Write;
use std::process::ExitCode;

use clap::error::ErrorKind;
use redlock::cli::LogFormat;
use redlock::config::Config;
use redlock::output::Log;
use redlock::{error::Error, exit};

fn main() -> ExitCode {
    one_malloc_arena();
    let parsed = match redlock::cli::parse_from(std::env::args_os()) {
        Ok(parsed) => parsed,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
            ) =>
        {
            // `redlock` alone (or with global options only): the short help
            // on stderr, and 64 as for any command line that says nothing to do.
            let _ = write!(std::io::stderr(), "{}", redlock::cli::command().render_help());
            return ExitCode::from(exit::USAGE);
        }
        Err(e) => {
            // clap's message spans several lines (usage, tip); DESIGN.md
            // wants one. The command line did not parse, but a pipeline that
            // asked for JSON still gets its error as a JSON event.
            let format = if redlock::cli::asks_for_json(std::env::args_os()) {
                LogFormat::Json
            } else {
                LogFormat::Text
            };
            let line = redlock::cli::error_line(&e);
            Log::new(0, false, format).failed(&Error::Usage(line));
            return ExitCode::from(exit::USAGE);
        }
    };
    // Until the configuration is known, messages follow the flags alone.
    let mut log =
        Log::new(parsed.cli.global.verbose, parsed.cli.global.quiet, parsed.cli.global.log_format);
    let config =
        redlock::config_file::load().and_then(|file| Config::from_parsed(parsed, file.as_ref()));
    let result = config.and_then(|config| {
        log = config.log;
        // A current-thread runtime: one short-lived process doing a handful
        // of parallel network calls gains nothing from worker threads.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Usage(format!("cannot start the async runtime: {e}")))?;
        let result = runtime.block_on(redlock::cmd::execute(config));
        // Not dropped: its tasks (connections, release listeners) and
        // threads end with the process, which exits now. Dropping it
        // tore each of them down first, about 0.1 to 0.3 ms of every run
        // (issue 11); nothing of it needs a clean end (every call that
        // matters was awaited: `Fleet::drain`).
        std::mem::forget(runtime);
        result
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            log.failed(&e);
            ExitCode::from(e.exit_code())
        }
    }
}

/// Keeps every thread on glibc's main malloc arena. redlock runs at most a
/// few threads, so arenas buy nothing; the thread that forks the guard
/// made one of its own on every `run` (a 128 MB reservation, two unmaps
/// and an mprotect, each unmap a TLB flush of every CPU running redlock),
/// on the path to the command's start (issue 11).
fn one_malloc_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets a malloc parameter; no thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
