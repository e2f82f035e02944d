//! OS signals as typed events.
//!
//! signal-hook's handler only writes to a self-pipe (async-signal-safe); a
//! plain thread reads the pipe and forwards each signal number into a tokio
//! channel, and the supervisor's one `select!` decides what to do with it.
//! While a [`Signals`] is alive, the forwarded signals no longer end
//! redlock: they are events, so that the lock is always released.

use std::io;
use std::thread;

use signal_hook::iterator::Handle;
use tokio::sync::mpsc;

/// The signals `run` passes on to its child (DESIGN.md, "Child supervision").
pub const FORWARDED: [i32; 6] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

/// The stream of received signals.
pub struct Signals {
    rx: mpsc::UnboundedReceiver<i32>,
    handle: Handle,
}

impl Signals {
    /// Starts catching [`FORWARDED`].
    pub fn install() -> io::Result<Signals> {
        let mut signals = signal_hook::iterator::Signals::new(FORWARDED)?;
        let handle = signals.handle();
        let (tx, rx) = mpsc::unbounded_channel();
        thread::Builder::new().name("signals".into()).spawn(move || {
            for signal in signals.forever() {
                if tx.send(signal).is_err() {
                    break;
                }
            }
        })?;
        Ok(Signals { rx, handle })
    }

    /// The next signal.
    pub async fn recv(&mut self) -> i32 {
        match self.rx.recv().await {
            Some(signal) => signal,
            // The reader thread never ends while `handle` is open; if it
            // somehow did, no more signals can come.
            None => std::future::pending().await,
        }
    }

    /// A signal already received, if any.
    pub fn try_recv(&mut self) -> Option<i32> {
        self.rx.try_recv().ok()
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        self.handle.close();
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
