//! Fencing numbers: the rule the servers draw them by, why they strictly
//! increase from one holder of a key to the next without any persistence,
//! and the two pure decisions built on it (the holder's fence after a won
//! round, and the holder's fence as `status` reads it back).
//!
//! # The rule
//! Each server keeps, beside the lock, a counter (see
//! [`crate::lock::KeyLayout`] for its name). Where a server grants the lock
//! it draws, atomically with the `SET NX PX` (`scripts/acquire.lua`):
//!
//! ```text
//! draw = max(counter + 1, clamp(proposal, now, now + WINDOW))
//! ```
//!
//! `now` is the server's own clock (`TIME`) in microseconds, an absent
//! counter counts as 0, and the counter keeps the draw for
//! [`lifetime`]`(ttl) = ttl + LINGER`. The `proposal` is the client's clock
//! plus half the [`WINDOW`]: servers whose clocks are within half a window of
//! the client's all draw the same number, so a quorum agrees and the
//! acquisition costs no extra round trip. A client's clock cannot move a draw
//! outside `[now, now + WINDOW]` of the server's own.
//!
//! The holder's fence is the largest draw among the granting servers it
//! heard ([`settle`]). When fewer than a quorum drew exactly that number, it
//! is written back first (`scripts/raise_fence.lua`: compare the token, then
//! raise, never lower) until a quorum of the servers holding its token has
//! exactly that counter; only then is the lock reported held.
//!
//! # Why fences increase (the argument)
//! Assumptions, Redlock's own: Δ, the largest difference between two
//! servers' clocks, stays below `LINGER - WINDOW` (900 ms); clocks run at
//! rates within the drift factor; a server that lost its data restarts only
//! after the longest TTL in use plus `LINGER`; and the validity rule: an
//! acquisition that takes longer than its TTL is not a holder. Let ε be the
//! number of grants of one key on one server within one microsecond of each
//! other: 0 in practice, since each grant needs the previous lock gone (a
//! release script, or a TTL of at least 10 ms).
//!
//! 1. *Upper bound.* A draw never exceeds the largest server clock at that
//!    moment plus `WINDOW + ε`: the clamp caps the proposal, and `counter + 1`
//!    only carries forward earlier draws (raises copy them), which the clocks
//!    have meanwhile overtaken. So holder A's fence `F` is at most
//!    `max clock(t_A) + WINDOW + ε`, where `t_A` is when A's round ended.
//! 2. *Lower bound.* A draw is never below the drawing server's `now`.
//! 3. *Intersection.* When A reports `F`, a quorum of servers holding A's
//!    token has counter exactly `F`, written there at some `t_F` less than
//!    a TTL before `t_A` (the validity rule). The next holder B's granting
//!    quorum shares one of them, `s`; B was granted there after A's lock
//!    left `s`. Between `t_F` and B's grant, on `s`, either
//!    - the counter stayed: counters never go down, so B draws at least
//!      `F + 1` on `s`, and B's fence, the maximum of its draws, exceeds `F`;
//!    - or it vanished: it expired, `ttl + LINGER` after its last write by
//!      `s`'s own clock, or `s` lost its data and restarted after the longest
//!      TTL plus `LINGER`. Either way `s`'s clock advanced by more than
//!      `ttl + LINGER` since `t_F`, so by (2) B draws at least
//!      `clock_s(t_F) + ttl + LINGER`, while by (1) and the validity rule
//!      `F <= clock_s(t_F) + ttl + Δ + WINDOW + ε`. `LINGER > Δ + WINDOW + ε`
//!      makes B's draw, and so B's fence, larger than `F`.
//!
//! Persistence is never needed; it only makes the first case more common.
//! A server restored from an old snapshot and restarted at once breaks
//! Redlock's exclusion, but not this order once the clocks have moved past
//! the fences it forgot (case 2 still holds).
//!
//! # What breaks it
//! A server clock more than `LINGER - WINDOW` away from the others (Δ too
//! large: `doctor` warns), a clock that ran ahead and was then stepped back
//! by more than the slack (fences drawn from the fast clock outlive, on the
//! other servers' counters, the time it takes the corrected clocks to catch
//! up), and a server that lost its data and came back sooner than the
//! longest TTL plus `LINGER`. Within a single holder, nothing: the fence is
//! fixed once reported.
//!
//! # What `status` shows
//! While a server holds A's token, its counter does not change: draws need
//! a grant, raises compare the token first. So the number that a quorum of
//! A's servers holds is exactly A's fence ([`holder_fence`]): a server that
//! granted A late, after contenders had raised its counter, holds a
//! different number on its own. Once a counter outlives its
//! `ttl + LINGER` (a lock renewed for longer than that), `status` no longer
//! knows the fence and says so.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far ahead of a server's own clock a draw may be put by the client's
/// proposal. Small against [`LINGER`]; large against the clock differences
/// of machines kept by NTP, so that their proposals are taken as they are.
pub const WINDOW: Duration = Duration::from_millis(100);

/// How long a counter outlives the TTL of the acquisition that last wrote
/// it; the margin that the clock spread and the [`WINDOW`] must stay below.
pub const LINGER: Duration = Duration::from_secs(1);

/// The fence the client proposes at `now`: its clock in microseconds plus
/// half the window, so that servers up to half a window behind or ahead of
/// it take the proposal as it is.
pub fn proposal(now: SystemTime) -> u64 {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default() + WINDOW / 2;
    u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX)
}

/// How long a counter written by an acquisition with `ttl` lives.
pub fn lifetime(ttl: Duration) -> Duration {
    ttl + LINGER
}

/// The fence of a won round, from the draws of the granting servers heard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    /// The holder's fence: the largest draw.
    pub fence: u64,
    /// True when fewer than a quorum drew exactly it, so it must be written
    /// back to a quorum of the holder's servers before the lock is reported.
    pub write_back: bool,
}

/// The holder's fence from the granting servers' `drawn` numbers; `None`
/// when none drew one (fencing off).
pub fn settle(drawn: &[u64], quorum: usize) -> Option<Settled> {
    let fence = *drawn.iter().max()?;
    let write_back = drawn.iter().filter(|&&f| f == fence).count() < quorum;
    Some(Settled { fence, write_back })
}

/// The holder's fence as `status` reads it: the counter that at least a
/// quorum of the servers holding its token agree on. `None` when no number
/// has a quorum (the counters expired during a long hold, or too few of the
/// holder's servers answered). At most one number can have a quorum.
pub fn holder_fence(counters: &[Option<u64>], quorum: usize) -> Option<u64> {
    counters
        .iter()
        .flatten()
        .find(|&&f| counters.iter().filter(|&&c| c == Some(f)).count() >= quorum)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_takes_the_largest_and_writes_back_unless_a_quorum_drew_it() {
        assert_eq!(settle(&[], 2), None);
        assert_eq!(settle(&[7, 7], 2), Some(Settled { fence: 7, write_back: false }));
        assert_eq!(settle(&[7, 7, 9], 2), Some(Settled { fence: 9, write_back: true }));
        assert_eq!(settle(&[9, 7, 9], 2), Some(Settled { fence: 9, write_back: false }));
    }

    #[test]
    fn status_needs_a_quorum_on_one_number() {
        assert_eq!(holder_fence(&[Some(5), Some(5), Some(9)], 2), Some(5));
        assert_eq!(holder_fence(&[Some(5), Some(9), None], 2), None);
        assert_eq!(holder_fence(&[None, None, None], 2), None);
        assert_eq!(holder_fence(&[Some(3)], 1), Some(3));
    }

    #[test]
    fn proposals_are_half_a_window_ahead_in_microseconds() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(proposal(t), 1_700_000_000_000_000 + 50_000);
        assert_eq!(lifetime(Duration::from_secs(30)), Duration::from_secs(31));
    }
}

/// A model of the fence rule over random histories, checked against the
/// argument above: servers with skewed clocks, counters that expire, grants
/// heard or late or lost, releases, expiries, and servers that lose their
/// data and restart after the longest TTL plus [`LINGER`]. Every holder's
/// fence must exceed every earlier holder's, and `status` must read back
/// exactly the holder's fence.
#[cfg(test)]
mod model {
    use super::*;
    use proptest::prelude::*;

    const US: u64 = 1;
    const MS: u64 = 1_000 * US;
    /// The largest difference between two server clocks the model draws
    /// (the argument allows up to `LINGER - WINDOW`, less ε).
    const SPREAD: u64 = 800 * MS;
    /// The TTLs in use.
    const TTLS: [u64; 4] = [10 * MS, 200 * MS, 2_000 * MS, 30_000 * MS];

    fn micros(d: Duration) -> u64 {
        u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
    }

    /// One server: its clock's offset from true time, and its keys with
    /// their expiry instants on its own clock.
    #[derive(Clone, Debug, Default)]
    struct Server {
        offset: u64,
        lock: Option<(usize, u64)>,
        counter: Option<(u64, u64)>,
        down_until: u64,
    }

    impl Server {
        fn clock(&self, t: u64) -> u64 {
            t + self.offset
        }
        /// Drops what has expired by the server's clock at true time `t`.
        fn expire(&mut self, t: u64) {
            let now = self.clock(t);
            if self.lock.is_some_and(|(_, at)| at <= now) {
                self.lock = None;
            }
            if self.counter.is_some_and(|(_, at)| at <= now) {
                self.counter = None;
            }
        }
        /// acquire.lua.
        fn acquire(&mut self, t: u64, holder: usize, ttl: u64, proposal: u64) -> Option<u64> {
            self.expire(t);
            if t < self.down_until || self.lock.is_some() {
                return None;
            }
            let now = self.clock(t);
            self.lock = Some((holder, now + ttl));
            let counter = self.counter.map_or(0, |(c, _)| c);
            let draw = (counter + 1).max(proposal.clamp(now, now + micros(WINDOW)));
            self.counter = Some((draw, now + ttl + micros(LINGER)));
            Some(draw)
        }
        /// raise_fence.lua: the counter after the call, or `None` when
        /// `holder` does not hold the lock here.
        fn raise(&mut self, t: u64, holder: usize, fence: u64, ttl: u64) -> Option<u64> {
            self.expire(t);
            if t < self.down_until || self.lock.map(|(h, _)| h) != Some(holder) {
                return None;
            }
            let current = self.counter.map_or(0, |(c, _)| c);
            if fence > current {
                self.counter = Some((fence, self.clock(t) + ttl + micros(LINGER)));
                return Some(fence);
            }
            Some(current)
        }
        /// release.lua (also the withdrawal of a lost round).
        fn release(&mut self, t: u64, holder: usize) {
            self.expire(t);
            if t >= self.down_until && self.lock.map(|(h, _)| h) == Some(holder) {
                self.lock = None;
            }
        }
    }

    /// What happens next in a history.
    #[derive(Clone, Debug)]
    enum Step {
        /// Time passes, in microseconds.
        Wait(u64),
        /// A client whose clock is off by `skew` µs (minus 2 s) tries with
        /// TTL `TTLS[ttl]`; each server's call is heard (0), granted late
        /// (1), or lost (2) per `fate`; the write-back is heard per `raise`.
        Acquire { ttl: usize, skew: u64, fate: Vec<u8>, raise: Vec<bool> },
        /// The current holder, if any, releases on the servers picked.
        Release(Vec<bool>),
        /// A server loses its data, restarting after the longest TTL plus
        /// `LINGER` plus `extra` µs.
        Crash { server: usize, extra: u64 },
    }

    fn step(n: usize) -> impl Strategy<Value = Step> {
        // Mostly heard, so that rounds are often won.
        let fate = prop_oneof![6 => Just(0u8), 1 => Just(1u8), 2 => Just(2u8)];
        prop_oneof![
            4 => prop_oneof![0..2 * MS, 0..300 * MS, 0..3_000 * MS, 0..40_000 * MS].prop_map(Step::Wait),
            4 => (0..TTLS.len(), 0..4_000 * MS, prop::collection::vec(fate, n), prop::collection::vec(prop::bool::weighted(0.8), n))
                .prop_map(|(ttl, skew, fate, raise)| Step::Acquire { ttl, skew, fate, raise }),
            2 => prop::collection::vec(any::<bool>(), n).prop_map(Step::Release),
            1 => (0..n, 0..5_000 * MS).prop_map(|(server, extra)| Step::Crash { server, extra }),
        ]
    }

    fn history() -> impl Strategy<Value = (Vec<u64>, Vec<Step>)> {
        prop_oneof![Just(3usize), Just(5usize)].prop_flat_map(|n| {
            (prop::collection::vec(0..SPREAD, n), prop::collection::vec(step(n), 1..120))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn every_holder_draws_a_larger_fence_than_all_before((offsets, steps) in history()) {
            let n = offsets.len();
            let quorum = n / 2 + 1;
            let longest = TTLS.iter().max().copied().unwrap_or(0);
            let mut servers: Vec<Server> =
                offsets.iter().map(|&offset| Server { offset, ..Server::default() }).collect();
            // True time starts far from the epoch, like the clocks.
            let mut t: u64 = 1_700_000_000 * 1_000 * MS;
            let mut highest: Option<u64> = None;
            let mut holder: Option<usize> = None;
            for (id, s) in steps.into_iter().enumerate() {
                match s {
                    Step::Wait(d) => t += d,
                    Step::Crash { server, extra } => {
                        let s = &mut servers[server];
                        s.lock = None;
                        s.counter = None;
                        s.down_until = t + longest + micros(LINGER) + extra;
                    }
                    Step::Release(on) => {
                        if let Some(h) = holder.take() {
                            for (s, release) in servers.iter_mut().zip(on) {
                                if release {
                                    s.release(t, h);
                                }
                            }
                        }
                    }
                    Step::Acquire { ttl, skew, fate, raise } => {
                        let ttl = TTLS[ttl];
                        // The client's clock, anywhere within 2 s of true time.
                        let proposal = (t + skew).saturating_sub(2_000 * MS) + micros(WINDOW) / 2;
                        let mut heard = Vec::new();
                        for (s, fate) in servers.iter_mut().zip(&fate) {
                            if *fate == 2 {
                                continue;
                            }
                            if let Some(draw) = s.acquire(t, id, ttl, proposal)
                                && *fate == 0
                            {
                                heard.push(draw);
                            }
                        }
                        let won = heard.len() >= quorum
                            && settle(&heard, quorum).is_some_and(|settled| {
                                !settled.write_back || {
                                    let exact = servers
                                        .iter_mut()
                                        .zip(&raise)
                                        .filter(|(_, heard)| **heard)
                                        .filter_map(|(s, _)| s.raise(t, id, settled.fence, ttl))
                                        .filter(|&c| c == settled.fence)
                                        .count();
                                    exact >= quorum
                                }
                            });
                        if !won {
                            for s in &mut servers {
                                s.release(t, id);
                            }
                            continue;
                        }
                        let fence = settle(&heard, quorum).map(|s| s.fence).unwrap_or(0);
                        prop_assert!(
                            highest.is_none_or(|h| fence > h),
                            "holder {id} drew {fence}, not above {highest:?}"
                        );
                        highest = Some(fence);
                        holder = Some(id);
                        let counters: Vec<Option<u64>> = servers
                            .iter()
                            .filter(|s| s.lock.map(|(h, _)| h) == Some(id))
                            .map(|s| s.counter.map(|(c, _)| c))
                            .collect();
                        prop_assert_eq!(holder_fence(&counters, quorum), Some(fence));
                    }
                }
            }
        }
    }
}
