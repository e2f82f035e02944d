//! OS signals as typed events.
//!
//! tokio's handler (signal-hook-registry underneath) only records the
//! signal and writes to a self-pipe, which is async-signal-safe; the
//! runtime wakes the task that waits, and the supervisor's one `select!`
//! decides what to do with it. No thread of its own: the runtime already
//! listens for SIGCHLD this way, and a reader thread would add a thread's
//! start to every `run`. While a
//! [`Signals`] is alive, the forwarded signals no longer end redlock: they
//! are events, so that the lock is always released. Two deliveries of one
//! signal before it is read count once, as with any self-pipe.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signals `run` passes on to its child, each exactly once
/// (docs/commands.md, `run`).
pub const FORWARDED: [i32; 6] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

/// The stream of received signals.
pub struct Signals {
    /// One listener per forwarded signal, with its number.
    streams: Vec<(i32, Signal)>,
}

impl Signals {
    /// Starts catching [`FORWARDED`]. Call inside the tokio runtime.
    pub fn install() -> io::Result<Signals> {
        let streams = FORWARDED
            .iter()
            .map(|&n| signal(SignalKind::from_raw(n)).map(|s| (n, s)))
            .collect::<io::Result<_>>()?;
        Ok(Signals { streams })
    }

    /// The next signal.
    pub async fn recv(&mut self) -> i32 {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// A signal already received, if any.
    pub fn try_recv(&mut self) -> Option<i32> {
        let mut cx = Context::from_waker(Waker::noop());
        match pin!(self.recv()).poll(&mut cx) {
            Poll::Ready(signal) => Some(signal),
            Poll::Pending => None,
        }
    }

    /// Ready with a forwarded signal that arrived (the first in
    /// [`FORWARDED`] order when several did); a listener that ended (the
    /// runtime shutting down) never is.
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<i32> {
        for (n, stream) in &mut self.streams {
            if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                return Poll::Ready(*n);
            }
        }
        Poll::Pending
    }
}

/// Signal names redlock knows, without the `SIG` prefix.
const NAMES: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ABRT", libc::SIGABRT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
];

/// `SIGTERM` for a signal number, or `signal 42` when it has no name here.
pub fn name(signal: i32) -> String {
    NAMES
        .iter()
        .find(|(_, n)| *n == signal)
        .map_or_else(|| format!("signal {signal}"), |(s, _)| format!("SIG{s}"))
}

/// Reads a signal as `TERM`, `SIGTERM`, `term` or `15`.
pub fn parse(raw: &str) -> Option<i32> {
    let upper = raw.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some((_, n)) = NAMES.iter().find(|(s, _)| *s == name) {
        return Some(*n);
    }
    name.parse::<i32>().ok().filter(|n| (1..=64).contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(parse("TERM"), Some(libc::SIGTERM));
        assert_eq!(parse("sigint"), Some(libc::SIGINT));
        assert_eq!(parse("9"), Some(libc::SIGKILL));
        assert_eq!(parse("0"), None);
        assert_eq!(parse("NOPE"), None);
        assert_eq!(name(libc::SIGUSR1), "SIGUSR1");
        assert_eq!(name(40), "signal 40");
    }
}
