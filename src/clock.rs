//! Time for validity: instants on `CLOCK_BOOTTIME` and timers on the same
//! clock.
//!
//! Why not [`std::time::Instant`]: on Linux it and tokio's timers use
//! `CLOCK_MONOTONIC`, which stops while the machine is suspended. A laptop
//! or VM suspended for longer than the TTL would resume believing its lock
//! still valid, while the servers, whose clocks ran on, let the key expire
//! and handed it to someone else. So every validity deadline is a
//! [`BootInstant`] (`clock_gettime(CLOCK_BOOTTIME)`, which counts suspended
//! time), and every timer that stops the command is a timerfd on that clock
//! ([`Clock::sleep_until`], timerfd_create(2)): an expiry that passed during
//! a suspend fires as soon as the machine resumes. The guard process
//! (`child`) arms its own timerfd on the same clock, so the deadlines it
//! receives from redlock mean the same instants in both processes.
//!
//! A [`Clock`] can be moved forward by hand ([`Clock::advance`]) to stand for
//! a suspend in tests; nothing else ever moves it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

/// How many times [`timeout_at`] lets the runtime run before it declares a
/// timeout: each turn polls the I/O driver once, and an answer already in a
/// socket buffer needs two (the connection's task reads it, then hands it
/// over); more leave room for a chain of such hand-overs.
const LAST_LOOKS: usize = 8;

/// [`tokio::time::timeout_at`] that reads what has already arrived before
/// it declares the timeout: once `deadline` has passed, `fut` gets
/// `LAST_LOOKS` more turns of the runtime (microseconds, no sleep).
///
/// Why: a process frozen past its deadline (a VM pause, SIGSTOP, a starved
/// host) resumes with the timer expired and the answer in its socket
/// buffer, unread; tokio fires the timer first, and a plain timeout throws
/// the answer away (an acquire round then withdraws grants it had won).
/// Nothing about safety rests on this: a late answer still goes through
/// the validity arithmetic, measured on the boot clock, which counts the
/// freeze.
pub async fn timeout_at<F: std::future::Future>(
    deadline: tokio::time::Instant,
    fut: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::pin!(fut);
    let elapsed = match tokio::time::timeout_at(deadline, &mut fut).await {
        Ok(out) => return Ok(out),
        Err(elapsed) => elapsed,
    };
    for _ in 0..LAST_LOOKS {
        if let Some(out) = futures_util::FutureExt::now_or_never(&mut fut) {
            return Ok(out);
        }
        tokio::task::yield_now().await;
    }
    Err(elapsed)
}

/// The shortest node timeout worth a [`warm_timers`] task: below it the
/// task would wake the process some twenty times a second.
const WARM_MIN: Duration = Duration::from_millis(100);

/// A task that keeps one timer registered at most `period` ahead (`None`
/// under `WARM_MIN`; dropped, it ends), so that a call bounded by
/// `period` or more registers its timeout without a system call: tokio's
/// driver writes its eventfd for a timer due before the wake-up it planned,
/// and with no timer it planned none. Rests on tokio 1's `reregister` and
/// `next_wake` (the test below fails otherwise); a shorter node timeout or
/// another tokio only brings the writes back, never a safety loss. The
/// cost, a wake-up per `period` while idle: docs/performance.md.
pub fn warm_timers(period: Duration) -> Option<tokio_util::task::AbortOnDropHandle<()>> {
    (period >= WARM_MIN).then(|| {
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
            }
        }))
    })
}

/// This process's start ([`BootInstant::process_start`]).
static PROCESS_START: std::sync::OnceLock<BootInstant> = std::sync::OnceLock::new();

/// A point in time on `CLOCK_BOOTTIME`: time since boot, suspend included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BootInstant(Duration);

impl BootInstant {
    /// Now, on `CLOCK_BOOTTIME`.
    pub fn now() -> BootInstant {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given;
        // CLOCK_BOOTTIME exists on every Linux since 2.6.39, so it cannot
        // fail with a valid pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        BootInstant(timespec_to_duration(ts))
    }

    /// Time since boot, as the guard receives it over its pipe.
    pub fn since_boot(self) -> Duration {
        self.0
    }

    /// The instant `since_boot` after boot.
    pub fn from_since_boot(since_boot: Duration) -> BootInstant {
        BootInstant(since_boot)
    }

    /// Time passed since `self` (zero if it is in the future).
    pub fn elapsed(self) -> Duration {
        BootInstant::now().saturating_duration_since(self)
    }

    /// Notes now as this process's start: `main` calls it first.
    pub fn mark_process_start() {
        PROCESS_START.get_or_init(BootInstant::now);
    }

    /// When this process began, as `main` noted it first thing (a
    /// millisecond or so after the fork, the loader's time); `None` where
    /// it was not noted (the library in another program, whose requests
    /// begin with their waits). `-n` counts takes from it
    /// ([`crate::lock::record`]): a take while it read its configuration
    /// or connected counts. Not the kernel's record of the fork
    /// (`/proc/self/stat`): that comes in clock ticks (10 ms), and rounded
    /// down it counted the take of a run that ended just before this one
    /// was started, a shell script's `redlock run -n ...` twice in a row,
    /// as a take meanwhile.
    pub fn process_start() -> Option<BootInstant> {
        PROCESS_START.get().copied()
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: BootInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// `self - d`, or `None` before boot.
    pub fn checked_sub(self, d: Duration) -> Option<BootInstant> {
        self.0.checked_sub(d).map(BootInstant)
    }
}

impl std::ops::Add<Duration> for BootInstant {
    type Output = BootInstant;
    fn add(self, d: Duration) -> BootInstant {
        BootInstant(self.0.saturating_add(d))
    }
}

impl std::ops::Sub<Duration> for BootInstant {
    type Output = BootInstant;
    /// Saturates at boot.
    fn sub(self, d: Duration) -> BootInstant {
        BootInstant(self.0.saturating_sub(d))
    }
}

fn timespec_to_duration(ts: libc::timespec) -> Duration {
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// A timespec for `d`, saturating far beyond any deadline redlock computes.
pub(crate) fn duration_to_timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(i32::try_from(d.subsec_nanos()).unwrap_or(0)),
    }
}

/// Creates a non-blocking timerfd on `CLOCK_BOOTTIME`.
pub(crate) fn boot_timerfd() -> std::io::Result<OwnedFd> {
    // SAFETY: timerfd_create returns a new fd or -1.
    let fd = unsafe {
        libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms `fd` (a boot timerfd) to fire once when `CLOCK_BOOTTIME` reaches
/// `at` (time since boot), or at once when it already has.
///
/// The timer is armed relative (`at` minus now, as `clock_gettime` reads
/// it), not with `TFD_TIMER_ABSTIME`: a relative timer on `CLOCK_BOOTTIME`
/// counts suspended time all the same, and it stays right when the clock
/// that `clock_gettime` shows is not the kernel's (libfaketime, which the
/// drift tests use, answers `CLOCK_BOOTTIME` with its fake wall clock).
/// Callers check the clock again when the timer fires.
pub(crate) fn arm_timerfd(fd: i32, at: Duration) -> std::io::Result<()> {
    let left = at.saturating_sub(BootInstant::now().0).max(Duration::from_nanos(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: duration_to_timespec(left),
    };
    // SAFETY: timerfd_settime on a timerfd with a valid itimerspec.
    let rc = unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Boot time and timers, with a hand-moved offset for tests.
#[derive(Debug, Default)]
pub struct Clock {
    /// Nanoseconds added to `CLOCK_BOOTTIME` (zero outside tests).
    offset: AtomicU64,
    /// Wakes sleepers when the offset moves.
    moved: Notify,
}

impl Clock {
    /// The system's boot clock.
    pub fn new() -> Clock {
        Clock::default()
    }

    fn offset(&self) -> Duration {
        Duration::from_nanos(self.offset.load(Ordering::SeqCst))
    }

    /// Now on this clock.
    pub fn now(&self) -> BootInstant {
        BootInstant::now() + self.offset()
    }

    /// Moves this clock forward by `d`, as a system suspend of `d` would
    /// look to redlock after the resume. For tests only.
    #[doc(hidden)]
    pub fn advance(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.offset.fetch_add(nanos, Ordering::SeqCst);
        self.moved.notify_waiters();
    }

    /// Sleeps until `at` on this clock, counting suspended time. Falls back
    /// to tokio's (monotonic) timer only when no timerfd can be created
    /// (file descriptors exhausted), which loses only the suspend case.
    pub async fn sleep_until(&self, at: BootInstant) {
        loop {
            let moved = self.moved.notified();
            let offset = self.offset();
            let real = at.0.saturating_sub(offset);
            if BootInstant::now().0 >= real {
                return;
            }
            tokio::select! {
                () = sleep_until_boot(real) => return,
                () = moved => {}
            }
        }
    }
}

/// Sleeps until `CLOCK_BOOTTIME` reaches `at`.
async fn sleep_until_boot(at: Duration) {
    let Ok(timer) = boot_timerfd().and_then(|fd| {
        // SAFETY: the OwnedFd is a valid timerfd, moved into the AsyncFd,
        // and neither closed nor replaced while the AsyncFd owns it.
        unsafe { AsyncFd::register(fd) }.map_err(std::io::Error::from)
    }) else {
        let left = at.saturating_sub(BootInstant::now().0);
        return tokio::time::sleep(left).await;
    };
    while BootInstant::now().0 < at {
        if arm_timerfd(timer.as_raw_fd(), at).is_err() {
            let left = at.saturating_sub(BootInstant::now().0);
            return tokio::time::sleep(left).await;
        }
        loop {
            let Ok(mut ready) = timer.readable().await else {
                return;
            };
            let mut expirations = 0u64;
            // SAFETY: reading the 8-byte expiration count of our own timerfd.
            let n = unsafe {
                libc::read(timer.as_raw_fd(), (&raw mut expirations).cast(), size_of::<u64>())
            };
            if n == 8 {
                break;
            }
            ready.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's write-like system calls so far (`/proc/thread-self/io`).
    fn writes() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        let line = io.lines().find_map(|l| l.strip_prefix("syscw: ")).unwrap();
        line.trim().parse().unwrap()
    }

    /// Registers `n` timers `ahead` and keeps them; how many write-like
    /// system calls that took.
    fn register(
        n: usize,
        ahead: Duration,
        kept: &mut Vec<std::pin::Pin<Box<tokio::time::Sleep>>>,
    ) -> u64 {
        let before = writes();
        for _ in 0..n {
            let mut sleep = Box::pin(tokio::time::sleep(ahead));
            assert!(futures_util::FutureExt::now_or_never(&mut sleep).is_none());
            kept.push(sleep);
        }
        writes() - before
    }

    #[test]
    fn warm_timers_spare_the_system_call_a_timer_costs() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let mut kept = Vec::new();
            // No timer planned: each registration wakes the driver.
            assert!(register(5, Duration::from_secs(2), &mut kept) >= 5, "the cost to spare");
            kept.clear();
            tokio::task::yield_now().await;
            assert!(warm_timers(Duration::from_millis(99)).is_none(), "too short to be worth it");
            let warm = warm_timers(Duration::from_secs(1)).unwrap();
            // The task registers its timer, and the driver plans by it.
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            assert_eq!(register(5, Duration::from_secs(1), &mut kept), 0);
            kept.clear();
            drop(warm);
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            assert!(register(5, Duration::from_secs(2), &mut kept) >= 5, "ended with its handle");
        });
    }

    #[test]
    fn the_process_start_is_noted_once() {
        BootInstant::mark_process_start();
        let began = BootInstant::process_start().unwrap();
        assert!(began <= BootInstant::now());
        std::thread::sleep(Duration::from_millis(20));
        BootInstant::mark_process_start();
        assert_eq!(BootInstant::process_start(), Some(began), "noted once, not read again");
    }

    #[test]
    fn boot_time_counts_at_least_what_monotonic_time_counts() {
        let boot = BootInstant::now();
        let mono = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        assert!(boot.elapsed() >= mono.elapsed() - Duration::from_millis(1));
        assert!(boot.elapsed() >= Duration::from_millis(20));
    }

    #[tokio::test]
    async fn a_timer_fires_at_its_instant_and_a_past_one_at_once() {
        let clock = Clock::new();
        let start = clock.now();
        clock.sleep_until(start + Duration::from_millis(30)).await;
        assert!(start.elapsed() >= Duration::from_millis(30));
        let past = std::time::Instant::now();
        clock.sleep_until(start).await;
        assert!(past.elapsed() < Duration::from_millis(5));
    }

    #[tokio::test]
    async fn a_suspend_past_the_instant_ends_the_sleep_at_once() {
        let clock = std::sync::Arc::new(Clock::new());
        let at = clock.now() + Duration::from_secs(3600);
        let sleeper = {
            let clock = std::sync::Arc::clone(&clock);
            tokio::spawn(async move { clock.sleep_until(at).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(3601));
        let woke = tokio::time::timeout(Duration::from_secs(5), sleeper).await;
        assert!(woke.is_ok(), "the sleep should end as soon as the clock passes its instant");
    }
}
