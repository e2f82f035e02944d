//! The lock operations as types: each names its keys and arguments, and
//! both ways of running it read them by name: the script path
//! ([`Operation::script`], [`Operation::keys`], [`Operation::args`], in the
//! order each script's header documents) and the transaction path
//! ([`super::noscript`], which matches on the operation). Reordering a
//! script's arguments is a change to one `match` arm here, next to its
//! script's name.

use std::borrow::Cow;
use std::time::Duration;

use super::record::Tick;
use super::{Lua, SCRIPTS};
use crate::clock::BootInstant;

/// The numbers of one acquire call (`scripts/acquire.lua`, `ARGV[3]`), packed
/// as sixteen little-endian doubles that the script reads with one
/// `struct.unpack`: no string parsing and no `tonumber` on the server.
/// Every number stays below 2^53, so a double holds it exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Numbers {
    /// The lock's TTL.
    pub ttl_ms: u64,
    /// The client's fence proposal (µs), `None` to draw no fence.
    pub proposal: Option<u64>,
    /// The fence window (µs).
    pub window_us: u64,
    /// The fence counter's lifetime.
    pub life_ms: u64,
    /// A waiter not granted takes or refreshes its place.
    pub join: bool,
    /// Only the first waiter may take a free key.
    pub order: bool,
    /// A queue entry's lifetime.
    pub queue_life_ms: u64,
    /// When the waiter began to wait, by its clock.
    pub since_ms: u64,
    /// How far a server lets `since_ms` differ from its own clock.
    pub skew_ms: u64,
    /// The key's places (`--limit N`; 1 for the lock): the first this many
    /// waiters may take a free place.
    pub places: u32,
    /// A shared holder's attempt (`--shared`): the script's flag, set
    /// from the attempt's mode ([`super::Held`]).
    pub shared: bool,
    /// `-n`'s term on this server ([`Terms::untaken`]).
    pub untaken: Untaken,
    /// The run's tick ([`Terms::tick`]).
    pub tick: Option<Tick>,
}

impl Numbers {
    /// The packed form (`struct.pack('<dddddddddddddddd', ...)`; -1: none).
    pub fn pack(&self) -> Vec<u8> {
        // `as f64` is exact: every field is below 2^53 (see the type's doc).
        #[allow(clippy::cast_precision_loss)]
        let fields = [
            self.ttl_ms as f64,
            self.proposal.map_or(-1.0, |p| p as f64),
            self.window_us as f64,
            self.life_ms as f64,
            f64::from(u8::from(self.join)),
            f64::from(u8::from(self.order)),
            self.queue_life_ms as f64,
            self.since_ms as f64,
            self.skew_ms as f64,
            f64::from(self.places),
            f64::from(u8::from(self.shared)),
            match self.untaken {
                Untaken::Since(ms) => ms as f64,
                Untaken::Off | Untaken::For { .. } => -1.0,
            },
            self.untaken.look_back_ms().map_or(-1.0, |ms| ms as f64),
            self.tick.map_or(-1.0, |t| t.start_ms as f64),
            self.tick.map_or(-1.0, |t| t.end_ms as f64),
            self.tick.map_or(-1.0, |t| t.last_grant_ms() as f64),
        ];
        fields.iter().flat_map(|f| f.to_le_bytes()).collect()
    }
}

/// `-n`'s term on one server ([`super::record`]), as the acquire script
/// takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Untaken {
    /// No term.
    Off,
    /// Refuse a free key granted to another token at or after this server
    /// time (ms): when the contender began by this server's clock, as an
    /// earlier answer of the server bounds it.
    Since(u64),
    /// The same from the server's clock now less the time since `began`
    /// and `more`, the time since read as the request is built on its
    /// connection (the plain-command path: after it read the server's
    /// clock): for a server whose earlier answer is not known.
    For {
        /// When the contender began.
        began: BootInstant,
        /// How much further back.
        more: Duration,
    },
}

impl Untaken {
    /// For [`Untaken::For`]: how far back from the server's clock now
    /// (ms), as of this moment, rounded up: the server's clock in whole
    /// milliseconds less this is never later than the start.
    pub(crate) fn look_back_ms(&self) -> Option<u64> {
        match *self {
            Untaken::For { began, more } => {
                let ms = (began.elapsed() + more).as_micros().div_ceil(1000);
                Some(u64::try_from(ms).unwrap_or(u64::MAX))
            }
            _ => None,
        }
    }
}

/// `scripts/acquire.lua`: take the lock, keep the queue, draw the fence.
#[derive(Clone, Debug)]
pub(crate) struct AcquireOp {
    /// The lock key (a place's key for `--limit`).
    pub(crate) lock: String,
    /// Its fencing counter.
    pub(crate) fence: String,
    /// The queue's order.
    pub(crate) order: String,
    /// The queue's deadlines.
    pub(crate) deadlines: String,
    /// The shared holders, for a shared holder's attempt (`--shared`).
    pub(crate) readers: Option<String>,
    /// The grant record, for an exclusive attempt ([`super::record`]).
    pub(crate) record: Option<String>,
    /// This attempt's token.
    pub(crate) token: String,
    /// The waiter's queue entry, or empty.
    pub(crate) member: String,
    /// The numbers (TTL, fence proposal, queue...).
    pub(crate) numbers: Numbers,
    /// The schedule of the tick, as it travels with the record
    /// ([`Terms::schedule`]); `None` without a tick.
    pub(crate) schedule: Option<String>,
}

/// `scripts/extend.lua`: push the TTL of the token's lock (and its
/// counter's) to at least `ttl_ms`.
#[derive(Clone, Debug)]
pub(crate) struct ExtendOp {
    /// The lock key.
    pub(crate) lock: String,
    /// Its fencing counter.
    pub(crate) fence: String,
    /// The holder's token.
    pub(crate) token: String,
    /// The new TTL.
    pub(crate) ttl_ms: u64,
    /// The counter's lifetime (the TTL plus the linger).
    pub(crate) life_ms: u64,
}

/// `scripts/set_ttl.lua`: set the TTL of the token's lock to exactly
/// `ttl_ms` (`--keep`).
#[derive(Clone, Debug)]
pub(crate) struct SetTtlOp {
    /// The lock key.
    pub(crate) lock: String,
    /// The holder's token.
    pub(crate) token: String,
    /// The TTL.
    pub(crate) ttl_ms: u64,
}

/// `scripts/release.lua`: delete the key while `token` holds it, and call
/// the next waiter.
#[derive(Clone, Debug)]
pub(crate) struct ReleaseOp {
    /// The lock key.
    pub(crate) lock: String,
    /// The queue's order.
    pub(crate) order: String,
    /// The queue's deadlines.
    pub(crate) deadlines: String,
    /// The holder's token (for `release --force`, the value read there).
    pub(crate) token: String,
    /// The release channel of the key.
    pub(crate) channel: String,
    /// The grant record.
    pub(crate) record: String,
    /// Put the grant record back while it names the token: only for the
    /// release of a vote that landed after its round was won (`Call::on`).
    pub(crate) put_back: bool,
}

/// `scripts/withdraw.lua`: take back a failed attempt's vote (and put back
/// the waiter's entry its grant removed); with `readers`, a shared
/// holder's withdrawal, and with a `channel` too, its release.
#[derive(Clone, Debug)]
pub(crate) struct WithdrawOp {
    /// The lock key.
    pub(crate) lock: String,
    /// The queue's order.
    pub(crate) order: String,
    /// The queue's deadlines.
    pub(crate) deadlines: String,
    /// The shared holders (a shared token).
    pub(crate) readers: Option<String>,
    /// The grant record, put back while it names the token (exclusive).
    pub(crate) record: Option<String>,
    /// The attempt's token.
    pub(crate) token: String,
    /// The waiter's entry to put back, with its join score and deadline.
    pub(crate) entry: Option<(String, u64, u64)>,
    /// The release channel, for a shared holder's release.
    pub(crate) channel: Option<String>,
}

/// `scripts/status.lua`: read the lock and its counter.
#[derive(Clone, Debug)]
pub(crate) struct StatusOp {
    /// The lock key.
    pub(crate) lock: String,
    /// Its fencing counter.
    pub(crate) fence: String,
}

/// `scripts/raise_fence.lua`: raise the counter to the holder's fence.
#[derive(Clone, Debug)]
pub(crate) struct RaiseFenceOp {
    /// The lock key.
    pub(crate) lock: String,
    /// Its fencing counter.
    pub(crate) fence: String,
    /// The shared holders, for a shared holder (`--shared`).
    pub(crate) readers: Option<String>,
    /// The holder's token.
    pub(crate) token: String,
    /// The fence to record.
    pub(crate) value: u64,
    /// The counter's lifetime.
    pub(crate) life_ms: u64,
}

/// One operation, the same on every server of a round.
#[derive(Clone, Debug)]
pub(crate) enum Operation {
    /// Take the lock.
    Acquire(AcquireOp),
    /// Renew it.
    Extend(ExtendOp),
    /// Shorten it to the rest of `--keep`.
    SetTtl(SetTtlOp),
    /// Release it.
    Release(ReleaseOp),
    /// Take back an attempt (or a shared hold).
    Withdraw(WithdrawOp),
    /// Read it.
    Status(StatusOp),
    /// Record the fence on a quorum.
    RaiseFence(RaiseFenceOp),
    /// A script that has no transaction twice (the shared holders' own
    /// scripts, the run history): its keys and arguments as it documents.
    Scripted {
        /// The script.
        script: &'static Lua,
        /// KEYS.
        keys: Vec<String>,
        /// ARGV.
        args: Vec<Vec<u8>>,
    },
}

impl Operation {
    /// The lock key and token a release (or a shared holder's release)
    /// deletes; `None` for other operations.
    pub(crate) fn held(&self) -> Option<(&str, &str)> {
        match self {
            Operation::Release(r) => Some((&r.lock, &r.token)),
            Operation::Withdraw(w) => Some((&w.lock, &w.token)),
            _ => None,
        }
    }

    /// The script that runs it.
    pub(crate) fn script(&self) -> &'static Lua {
        match self {
            Operation::Acquire(_) => &SCRIPTS.acquire,
            Operation::Extend(_) => &SCRIPTS.extend,
            Operation::SetTtl(_) => &SCRIPTS.set_ttl,
            Operation::Release(_) => &SCRIPTS.release,
            Operation::Withdraw(_) => &SCRIPTS.withdraw,
            Operation::Status(_) => &SCRIPTS.status,
            Operation::RaiseFence(_) => &SCRIPTS.raise_fence,
            Operation::Scripted { script, .. } => script,
        }
    }

    /// The script's KEYS, in its documented order.
    pub(crate) fn keys(&self) -> Vec<&str> {
        match self {
            Operation::Acquire(a) => {
                let mut keys = vec![&*a.lock, &a.fence, &a.order, &a.deadlines];
                keys.extend(a.readers.as_deref().or(a.record.as_deref()));
                keys
            }
            Operation::Extend(e) => vec![&e.lock, &e.fence],
            Operation::SetTtl(s) => vec![&s.lock],
            Operation::Release(r) => {
                let mut keys = vec![&*r.lock, &r.order, &r.deadlines];
                keys.extend(r.put_back.then_some(&*r.record));
                keys
            }
            Operation::Withdraw(w) => {
                let mut keys = vec![&*w.lock, &w.order, &w.deadlines];
                keys.extend(w.readers.as_deref().or(w.record.as_deref()));
                keys
            }
            Operation::Status(s) => vec![&s.lock, &s.fence],
            Operation::RaiseFence(r) => {
                let mut keys = vec![&*r.lock, &r.fence];
                keys.extend(r.readers.as_deref());
                keys
            }
            Operation::Scripted { keys, .. } => keys.iter().map(String::as_str).collect(),
        }
    }

    /// The script's ARGV, in its documented order: borrowed where the
    /// operation holds the bytes, as every server of a round sends them.
    pub(crate) fn args<'a>(&'a self) -> Vec<Cow<'a, [u8]>> {
        let text = |n: u64| Cow::Owned(n.to_string().into_bytes());
        let borrowed = |s: &'a str| Cow::Borrowed(s.as_bytes());
        match self {
            Operation::Acquire(a) => {
                let mut args =
                    vec![borrowed(&a.token), borrowed(&a.member), Cow::Owned(a.numbers.pack())];
                args.extend(a.schedule.as_deref().map(borrowed));
                args
            }
            Operation::Extend(e) => vec![borrowed(&e.token), text(e.ttl_ms), text(e.life_ms)],
            Operation::SetTtl(s) => vec![borrowed(&s.token), text(s.ttl_ms)],
            Operation::Release(r) => vec![borrowed(&r.token), borrowed(&r.channel)],
            Operation::Withdraw(w) => {
                let (member, entry) = match &w.entry {
                    Some((member, score, deadline)) => {
                        (borrowed(member), Cow::Owned(format!("{score} {deadline}").into_bytes()))
                    }
                    None => (Cow::Borrowed(&[][..]), Cow::Borrowed(&[][..])),
                };
                let mut args = vec![borrowed(&w.token), member, entry];
                if w.readers.is_some() {
                    args.push(borrowed(w.channel.as_deref().unwrap_or_default()));
                }
                args
            }
            Operation::Status(_) => Vec::new(),
            Operation::RaiseFence(r) => vec![borrowed(&r.token), text(r.value), text(r.life_ms)],
            Operation::Scripted { args, .. } => {
                args.iter().map(|a| Cow::Borrowed(&a[..])).collect()
            }
        }
    }

    /// The first key, whose hash slot a cluster routes the call by.
    pub(crate) fn first_key(&self) -> &str {
        self.keys().first().copied().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::CLOCK_ALLOWANCE;

    #[test]
    fn the_numbers_are_packed_as_sixteen_little_endian_doubles() {
        let numbers = Numbers {
            ttl_ms: 30_000,
            proposal: Some(1_795_621_712_435_565),
            window_us: 500_000,
            life_ms: 31_000,
            join: true,
            order: false,
            queue_life_ms: 60_000,
            since_ms: 1_795_621_712_435,
            skew_ms: 100,
            places: 3,
            shared: false,
            untaken: Untaken::Since(1_795_621_712_000),
            tick: Some(Tick {
                start_ms: 1_795_621_500_000,
                end_ms: 1_795_621_800_000,
                offset_s: 0,
            }),
        };
        let packed = numbers.pack();
        let read: Vec<f64> =
            packed.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
        #[allow(clippy::cast_precision_loss)]
        let expected = [
            30_000.0,
            1_795_621_712_435_565.0,
            500_000.0,
            31_000.0,
            1.0,
            0.0,
            60_000.0,
            1_795_621_712_435.0,
            100.0,
            3.0,
            0.0,
            1_795_621_712_000.0,
            -1.0,
            1_795_621_500_000.0,
            1_795_621_800_000.0,
            1_795_621_800_000.0 + CLOCK_ALLOWANCE.as_millis() as f64,
        ];
        assert_eq!(read, expected);
        // A start in the future: no time since it, only `more`.
        let began = crate::clock::BootInstant::now() + Duration::from_secs(3600);
        let untaken = Untaken::For { began, more: Duration::from_millis(7) };
        let unfenced = Numbers { proposal: None, untaken, ..numbers }.pack();
        assert_eq!(f64::from_le_bytes(unfenced[8..16].try_into().unwrap()), -1.0);
        let untaken: Vec<f64> = unfenced[88..104]
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(untaken, [-1.0, 7.0], "untaken for: since -1, for 7");
    }
}
