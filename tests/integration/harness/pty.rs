//! A pseudo-terminal for tests: a command runs as the leader of a new
//! session whose controlling terminal is the pty (as under a terminal
//! emulator), and the test types on the master side and reads the screen.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A command at a terminal.
pub struct Terminal {
    /// The session leader.
    pub child: Child,
    writer: std::fs::File,
    rx: mpsc::Receiver<String>,
    /// Everything the terminal showed so far.
    pub screen: String,
    /// How much of `screen` [`Terminal::expect`] has consumed.
    seen: usize,
}

impl Terminal {
    /// Starts `cmd` on a new pty; with `tostop`, background output stops
    /// the writer (`stty tostop`).
    pub fn spawn(mut cmd: Command, tostop: bool) -> Terminal {
        let (mut master_fd, mut slave_fd) = (0, 0);
        // SAFETY: openpty writes two new descriptors into the out-parameters.
        let rc = unsafe {
            libc::openpty(
                &mut master_fd,
                &mut slave_fd,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty");
        // SAFETY: both descriptors were just opened and are owned here only.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master_fd), OwnedFd::from_raw_fd(slave_fd)) };
        if tostop {
            // SAFETY: tcgetattr/tcsetattr on the pty we just opened.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                assert_eq!(libc::tcgetattr(slave.as_raw_fd(), &mut t), 0);
                t.c_lflag |= libc::TOSTOP;
                assert_eq!(libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t), 0);
            }
        }
        cmd.stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave.try_clone().unwrap());
        // SAFETY: setsid and ioctl are async-signal-safe; they make the pty
        // the controlling terminal of a new session.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                libc::ioctl(0, libc::TIOCSCTTY, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn at the terminal");
        drop(slave);
        let writer = std::fs::File::from(master.try_clone().unwrap());
        let (tx, rx) = mpsc::channel::<String>();
        let mut reader = std::fs::File::from(master);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(String::from_utf8_lossy(&buf[..n]).into_owned()).is_err() {
                    break;
                }
            }
        });
        Terminal { child, writer, rx, screen: String::new(), seen: 0 }
    }

    /// Types `bytes` (`\x03` is Ctrl-C, `\x1a` Ctrl-Z).
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// Reads what the terminal shows for `d`.
    pub fn pump(&mut self, d: Duration) {
        let start = Instant::now();
        while start.elapsed() < d {
            if let Ok(s) = self.rx.recv_timeout(Duration::from_millis(10)) {
                self.screen.push_str(&s);
            }
        }
    }

    /// Waits (at most `limit`) until `text` shows after what earlier
    /// expectations consumed, and consumes up to its end.
    pub fn expect(&mut self, text: &str, limit: Duration) {
        let start = Instant::now();
        loop {
            if let Some(at) = self.screen[self.seen..].find(text) {
                self.seen += at + text.len();
                return;
            }
            assert!(
                start.elapsed() < limit,
                "no {text:?} on the terminal within {limit:?}; the screen:\n{}",
                self.screen
            );
            if let Ok(s) = self.rx.recv_timeout(Duration::from_millis(10)) {
                self.screen.push_str(&s);
            }
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // Hang up the session (its processes get SIGHUP), then make sure.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
