//! Who may vote in an acquire round: a server whose grant counts towards
//! a quorum. No vote from a server whose clock is too far from this host's
//! ([`no_vote`]), one restarted within the restart window ([`restarted`]),
//! one that may evict a tick's or a take's record (`evicting`), or one
//! listed twice (`Fleet::twins`: a configuration error, whatever won).

use super::*;

/// How far a server's clock may be from this host's before its grant
/// counts towards no quorum: the spread of clocks that fences already
/// assume: [`fence::LINGER`] less [`fence::WINDOW`].
pub const CLOCK_ALLOWANCE: Duration = fence::LINGER.saturating_sub(fence::WINDOW);

/// Why a grant counts towards no quorum, if it does not: the server's
/// clock (`clock`, its `TIME` in the grant) is further from this host's
/// than [`CLOCK_ALLOWANCE`], beyond what the round trip `asked` (sent,
/// answered) can explain.
///
/// The argument: a server's clock decides when its keys expire. One that
/// jumped forward (a stepped NTP correction, a VM restored from a
/// snapshot) let a holder's key expire early, so its "free" may hide a
/// holder that still relies on it; a holder with exactly a quorum then
/// shares a second quorum with a newcomer. Its grant is kept (the key is
/// set there, so that it rejoins), but not counted. The bound: a clock
/// that jumped and was stepped back before the next round looks sound
/// again (the harm, an early expiry, is done and not seen); a holder that
/// holds every server needs no detection at all, since any quorum of the
/// newcomer shares a server that still has the key. A host whose own
/// clock is off sees every server off, and takes no lock until its clock
/// is fixed: the error names the offset.
pub(super) fn no_vote(
    clock: Option<Duration>,
    (sent, answered): (SystemTime, SystemTime),
) -> Option<String> {
    let clock = clock?;
    let epoch = |t: SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (sent, answered) = (epoch(sent), epoch(answered));
    let middle = (sent + answered) / 2;
    let (ahead, off) =
        if clock >= middle { (true, clock - middle) } else { (false, middle - clock) };
    clock_too_far(off, answered.saturating_sub(sent) / 2).then(|| {
        format!(
            "its clock is {} {} this host's (more than the {} the locks allow): a holder's key \
             may have expired there early",
            crate::text::fmt_duration(off),
            if ahead { "ahead of" } else { "behind" },
            crate::text::fmt_duration(CLOCK_ALLOWANCE)
        )
    })
}

/// Whether a server whose clock reads `off` from this host's, give or
/// take `uncertainty` (half the round trip that read it), gets no vote
/// (`no_vote`'s rule; `doctor` applies the same).
pub fn clock_too_far(off: Duration, uncertainty: Duration) -> bool {
    off.saturating_sub(uncertainty) > CLOCK_ALLOWANCE
}

/// A server's `TIME` (seconds, microseconds) as time since the epoch;
/// `None` for a reply no clock gives (missing, or past `Duration::MAX`).
pub(super) fn server_time(secs: Option<u64>, micros: Option<u64>) -> Option<Duration> {
    Duration::from_secs(secs?).checked_add(Duration::from_micros(micros?))
}

/// How long a server that may have restarted without its data gets no
/// vote ([`restarted`]), and what its restart may have lost, which sets
/// that length. Computed by [`restart_window`] alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RestartWindow {
    /// How long after its start a server gets no vote.
    pub(super) length: Duration,
    /// What a restart within it may have lost.
    pub(super) lost: Lost,
}

/// What a restart may have lost, for the longest time: the reason for a
/// [`RestartWindow`]'s length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lost {
    /// A holder's key, which lives at most the longest TTL after its last
    /// write ([`base_restart_window`]).
    Key,
    /// The grant record of a run of this tick, which began `begun` ago.
    Tick {
        /// How long ago the tick began, by this host's clock.
        begun: Duration,
    },
    /// The grant record of a take since this `-n` began, `began` ago
    /// ([`super::record`]).
    Take {
        /// How long ago the `-n` began.
        began: Duration,
    },
}

/// A fleet's restart window for a longest TTL of `max_ttl` (`--max-ttl`,
/// which `run`, `acquire` and `extend` never exceed): a key lives at most
/// that long after its last write, and the fences need their linger more
/// ([`crate::fence`]). What `restart_window` widens for an attempt.
pub const fn base_restart_window(max_ttl: Duration) -> Duration {
    max_ttl.saturating_add(fence::LINGER)
}

/// The restart window, the one computation of it: `base`, a fleet's
/// ([`base_restart_window`]; `None`: restarts are trusted, and there is no
/// window), widened for an attempt on `tick` and for a `-n` that began at
/// `began`, to whichever is longest.
///
/// A tick's record may be lost by a server restarted since the tick
/// began: no vote from it for the tick. So may the record of a take since
/// a `-n` began ([`super::record`]): no vote from a server restarted since
/// then either, for a `-n` that began longer ago than `base` allows for
/// (up to `record::STARTUP` and the wait's settle bound: a `--max-ttl`
/// under 12 s). Each widening is the time since its start plus
/// [`CLOCK_ALLOWANCE`]: the tick's start is read by this host's clock,
/// which may be that far from the servers'.
pub(super) fn restart_window(
    base: Option<Duration>,
    tick: Option<Tick>,
    began: Option<BootInstant>,
) -> Option<RestartWindow> {
    let base = RestartWindow { length: base?, lost: Lost::Key };
    let tick = tick.map(|tick| {
        let begun = SystemTime::now().duration_since(tick.start()).unwrap_or_default();
        RestartWindow { length: begun + CLOCK_ALLOWANCE, lost: Lost::Tick { begun } }
    });
    let take = began.map(|began| {
        let began = began.elapsed();
        RestartWindow { length: began + CLOCK_ALLOWANCE, lost: Lost::Take { began } }
    });
    Some(
        tick.into_iter()
            .chain(take)
            .fold(base, |w, wider| if wider.length >= w.length { wider } else { w }),
    )
}

/// Why a grant counts towards no quorum, if it does not: the server
/// (`facts`, its own account) started less than `window` ago.
///
/// The argument: a server that restarts without its data (no persistence,
/// or `appendfsync everysec` losing the last second) forgets every
/// holder's key, so its "free" may hide a holder that relies on it; with a
/// holder on exactly a quorum, a newcomer then shares a second quorum with
/// it. Redlock's answer is a delayed restart: no vote until no holder can
/// still rely on a key the server forgot. A key lives at most the longest
/// TTL (`--max-ttl`, which `run`, `acquire` and `extend` never exceed)
/// after its last write, and the fences need their linger more
/// ([`crate::fence`]): that sum is the window, widened for a tick's or a
/// `-n`'s record ([`restart_window`]). The grant is kept (the server
/// rejoins with the key), but not counted. A fleet restarted at once takes
/// no lock for the window, and the error says what it is, why that long,
/// and when each server votes again.
///
/// What it assumes, and the cases that break it (none can be told from
/// what a server says of itself):
/// - a server that keeps every write (`appendfsync always` since it started:
///   [`crate::server::Facts::keeps_data`]) is taken at its configuration
///   and votes at once: one that came back without its data directory (a
///   container recreated without its volume, a disk replaced) looks the
///   same, and votes for a newcomer;
/// - uptime is the server's wall clock less its start: a server that
///   restarted with its clock behind, then stepped forward before anyone
///   asked, looks up for long;
/// - a server whose uptime cannot be read (an ACL without `INFO`) is
///   assumed to have restarted long ago, and `doctor` says so; one whose
///   data was lost without a restart (`FLUSHALL`) is not seen;
/// - a holder with a TTL above `--max-ttl` (another configuration) is not
///   covered.
///
/// A marker key that redlock writes on each server would see the first two
/// (absent: no vote for `window`), at the price of a window's wait the
/// first time redlock meets any server, which a new server and an emptied
/// one share.
pub(super) fn restarted(
    facts: Option<&crate::server::Facts>,
    window: Option<RestartWindow>,
) -> Option<String> {
    let (facts, window) = (facts?, window?);
    let up = facts.started.elapsed();
    let rest = votes_again_in(up, facts.keeps_data, Some(window.length))?;
    let ago = crate::text::fmt_duration;
    // A window widened for a record grows with the time since its start:
    // the server votes again for a tick or a `-n` begun after its start,
    // not in `rest`.
    let (within, lost, again) = match window.lost {
        Lost::Key => (
            format!("within the longest TTL plus 1s ({})", ago(window.length)),
            "a holder's key",
            format!("it votes in {}", ago(rest)),
        ),
        Lost::Tick { begun } => (
            since(up, begun, "this tick"),
            "the record of a run of this tick",
            "it votes for a tick begun after its start".to_owned(),
        ),
        Lost::Take { began } => (
            since(up, began, "this -n"),
            "the record of a take since this -n began",
            "it votes for a -n begun after its start".to_owned(),
        ),
    };
    Some(format!(
        "it started {} ago, {within}: a restart may have lost {lost}; {again} (at once if it \
         keeps every write: start it with appendonly yes and appendfsync always; or \
         --trust-restarts)",
        ago(up),
    ))
}

/// Where a server's start, `up` ago, lies from the start of `what`,
/// `begun` ago: within it, or less than the clock allowance before it.
fn since(up: Duration, begun: Duration, what: &str) -> String {
    let ago = crate::text::fmt_duration;
    if up <= begun {
        format!("within {what} (begun {} ago)", ago(begun))
    } else {
        let allowance = ago(CLOCK_ALLOWANCE);
        format!(
            "less than the clock allowance ({allowance}) before {what} began ({} ago)",
            ago(begun)
        )
    }
}

/// How long until a server up for `up` votes again, if it has no vote
/// now (`restarted`'s rule; `doctor` applies the same): `None` once it
/// is older than `window`, when it keeps every write, or with no window
/// (`--trust-restarts`).
pub fn votes_again_in(
    up: Duration,
    keeps_data: bool,
    window: Option<Duration>,
) -> Option<Duration> {
    let window = window?;
    (!keeps_data && up < window).then(|| window - up)
}

/// Why a grant for a tick or a `-n` counts towards no quorum, if it does
/// not: the server (`facts`) may evict keys ([`crate::server::evicts`]).
/// An evicted grant record forgets the tick that ran or the take since the
/// `-n` began, as a restart without its data would, and unlike a restart
/// nothing tells when: no vote for as long as the policy stands. A server
/// whose `INFO` is refused is not seen.
pub(super) fn evicting(facts: Option<&crate::server::Facts>) -> Option<String> {
    let policy = facts?.evicts.as_deref()?;
    Some(format!(
        "its maxmemory-policy {policy} may evict the record of a tick or of a take: no vote for \
         --once-per or -n (set maxmemory-policy noeviction)"
    ))
}

impl Fleet {
    /// The restart window of an attempt on `terms` ([`restart_window`]).
    pub(super) fn restart_window_for(&self, terms: Terms<'_>) -> Option<RestartWindow> {
        restart_window(self.restart_window, terms.tick, terms.untaken.map(|s| s.began()))
    }

    /// Two members that are one server (the same `run_id`, however their
    /// URLs are spelled), as a configuration error. One server counted as
    /// two makes a quorum of fewer servers than it says, and renewals count
    /// it twice: the fleet is refused as a usage error (64: a mistake in
    /// the server list, not servers down), whatever won this round. The
    /// twin of a server that answered is as quick to connect and answer
    /// (its connection may still be opening: a host name to resolve);
    /// [`TWIN_WAIT`] bounds the wait for it. A member that does not answer
    /// in time (down, hung), or whose `INFO` is refused, is not compared
    /// here; a twin slower than that is caught when it answers (`contend`:
    /// this attempt's own token) or at the first renewal, which compares
    /// every member that answered it ([`Fleet::twin_among`]).
    pub(super) async fn twins(&self, key: &str) -> Option<Error> {
        let deadline = tokio::time::Instant::now() + TWIN_WAIT;
        let facts = futures_util::future::join_all(self.servers.iter().map(|s| async move {
            // A cluster member's connection is for the lock's slot, which
            // a call naming no key would not reuse; a cluster listed twice
            // meets its own token instead (`contend`).
            if s.cluster().is_some() {
                return None;
            }
            // The connection the round's call opens (or opened): one open
            // per server, shared.
            let conn = crate::clock::timeout_at(deadline, s.connect(Op::Acquire, b"", deadline));
            s.facts(&conn.await.ok()?.ok()?, deadline).await
        }))
        .await;
        self.same_server(&facts, Op::Acquire, key)
    }

    /// The error for two members of `facts` (by index) that are one
    /// server, if any. An empty run_id (a proxy or a fork that blanks it)
    /// tells nothing, as in `doctor`.
    pub(super) fn same_server(
        &self,
        facts: &[Option<crate::server::Facts>],
        op: Op,
        key: &str,
    ) -> Option<Error> {
        for (i, a) in facts.iter().enumerate() {
            let Some(a) = a.as_ref().filter(|a| !a.run_id.is_empty()) else { continue };
            for (j, b) in facts.iter().enumerate().skip(i + 1) {
                if b.as_ref().is_some_and(|b| b.run_id == a.run_id) {
                    let why = format!(
                        "is the same server as {} (run_id {})",
                        self.servers[i].name(),
                        a.run_id.get(..12).unwrap_or(&a.run_id)
                    );
                    return Some(listed_twice(op, key, self.servers[j].name(), &why));
                }
            }
        }
        None
    }

    /// A twin found after the lock was taken: a member that answered this
    /// process's attempt with the attempt's own token once the round had
    /// been won without it (`contend`), as an error.
    pub fn late_twin(&self, key: &str) -> Option<Error> {
        let twin = self.twin.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()?;
        let why = "answered with this attempt's own token: it is the same server as another";
        Some(listed_twice(Op::Acquire, key, &twin.server, why))
    }
}

/// How long a won round (or one a configuration failure ended, such as a
/// twin meeting its own token) waits for the `INFO` answers of members that are
/// still in flight before it compares the servers' identities: a twin
/// answers with its twin.
const TWIN_WAIT: Duration = Duration::from_millis(20);

/// A fleet that lists a server twice: a configuration mistake (64), with
/// the fix. `twin` is the second listing, `why` says how it was told.
fn listed_twice(op: Op, key: &str, twin: &str, why: &str) -> Error {
    Error::Usage(format!(
        "{op} {}: a server is listed twice: {twin} {why}: list each server once (--servers, \
         REDLOCK_SERVERS or the configuration file's servers)",
        crate::text::display_key(key.as_bytes()),
    ))
}

/// Why a member that answers with the attempt's own token is refused: it
/// is the same server as another member that granted it.
pub(super) const OWN_TOKEN: &str = "already holds this attempt's own token: the same server is listed \
                         more than once (run `redlock doctor`)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_function_computes_every_restart_window_and_the_message_says_why() {
        let base = Some(Duration::from_secs(61));
        assert_eq!(restart_window(None, None, None), None, "--trust-restarts");
        let keys = restart_window(base, None, None).unwrap();
        assert_eq!(keys, RestartWindow { length: Duration::from_secs(61), lost: Lost::Key });
        // A tick that began 4 minutes ago: the window reaches back to its
        // start, and the allowance before it.
        let ms =
            |t: SystemTime| crate::text::millis(t.duration_since(std::time::UNIX_EPOCH).unwrap());
        let now = SystemTime::now();
        let start_ms = ms(now - Duration::from_secs(240));
        let tick = Tick { start_ms, end_ms: ms(now + Duration::from_secs(60)), offset_s: 0 };
        let ticked = restart_window(base, Some(tick), None).unwrap();
        let Lost::Tick { begun } = ticked.lost else { panic!("{ticked:?}") };
        assert!(begun >= Duration::from_secs(240), "{ticked:?}");
        assert_eq!(ticked.length, begun + CLOCK_ALLOWANCE);
        // A `-n` that began 8 s ago, under a 4 s window; a tick shorter
        // than the base changes nothing.
        let began = BootInstant::now() - Duration::from_secs(8);
        let short = Some(Duration::from_secs(4));
        let taken = restart_window(short, None, Some(began)).unwrap();
        assert!(matches!(taken.lost, Lost::Take { began } if began >= Duration::from_secs(8)));
        let late = Tick { start_ms: ms(now), ..tick };
        assert_eq!(restart_window(base, Some(late), None).unwrap().lost, Lost::Key);
        // The message names the window and why it is that long.
        let facts = |up: u64, keeps_data| crate::server::Facts {
            run_id: String::new(),
            started: tokio::time::Instant::now() - Duration::from_secs(up),
            keeps_data,
            evicts: None,
        };
        let why = restarted(Some(&facts(27, false)), Some(ticked)).unwrap();
        assert!(
            why.starts_with(
                "it started 27.0s ago, within this tick (begun 4m ago): a restart may have lost \
                 the record of a run of this tick; it votes for a tick begun after its start (at \
                 once if"
            ),
            "{why}"
        );
        let why = restarted(Some(&facts(27, false)), Some(keys)).unwrap();
        assert!(
            why.starts_with(
                "it started 27.0s ago, within the longest TTL plus 1s (1m 1s): a restart may \
                 have lost a holder's key; it votes in 34.0s"
            ),
            "{why}"
        );
        let why = restarted(Some(&facts(6, false)), Some(taken)).unwrap();
        assert!(why.contains("within this -n (begun 8.0s ago)"), "{why}");
        // Started just before the tick, within the clock allowance.
        let before = Duration::from_secs(240) + CLOCK_ALLOWANCE / 2;
        assert!(since(before, Duration::from_secs(240), "this tick").starts_with("less than"));
        // One that keeps every write votes at once.
        assert_eq!(restarted(Some(&facts(27, true)), Some(ticked)), None);
    }

    #[test]
    fn a_grant_from_a_clock_too_far_from_ours_is_no_vote() {
        let at = |s: u64| std::time::UNIX_EPOCH + Duration::from_secs(s);
        let asked = (at(1_000), at(1_000) + Duration::from_millis(10));
        let clock = |ms: u64| Some(Duration::from_secs(1_000) + Duration::from_millis(ms));
        assert_eq!(no_vote(clock(5), asked), None, "in step");
        assert_eq!(no_vote(clock(800), asked), None, "within the allowance");
        assert_eq!(no_vote(None, asked), None, "no clock said (no scripts)");
        let why = no_vote(clock(60_000), asked).unwrap();
        assert!(why.contains("ahead of") && why.contains("60.0s"), "{why}");
        let behind = no_vote(Some(Duration::from_secs(998)), asked).unwrap();
        assert!(behind.contains("behind"), "{behind}");
        // A slow round trip explains up to half of itself.
        let slow = (at(1_000), at(1_002));
        assert_eq!(no_vote(clock(1_500), slow), None);
    }
}
