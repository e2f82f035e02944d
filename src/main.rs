//! The `redlock` binary: set up the process, call the library's
//! [`redlock::run`] with the arguments, and exit with the code it returns.

use std::process::ExitCode;

fn main() -> ExitCode {
    // First: `-n` counts takes of the lock from this moment.
    redlock::clock::BootInstant::mark_process_start();
    one_malloc_arena();
    ExitCode::from(redlock::run(std::env::args_os()))
}

/// Keeps every thread on glibc's main malloc arena. redlock runs at most a
/// few threads, so arenas buy nothing, and a thread's own arena costs an
/// address-space reservation and its unmapping (a TLB flush of every CPU
/// running redlock) on the path to the command's start: the thread that
/// forks the guard would make one on every `run`. Set here, before any
/// thread exists, for the whole process.
fn one_malloc_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets a malloc parameter; no thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
