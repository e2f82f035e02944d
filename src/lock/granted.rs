//! One server's reply to the acquire script (`scripts/acquire.lua`), read
//! once into a [`Granted`]: a grant, or a refusal and why; what it counts
//! for in the round, and the server's clock where it said it.

use super::record::Schedules;
use super::vote::server_time;
use super::*;

/// One server's grant of the lock: the key is set there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Grant {
    /// The fence drawn there, when fencing is on.
    pub(super) fence: Option<u64>,
    /// The waiter's queue entry that the grant removed there (its join
    /// score and deadline), which a withdrawal puts back.
    pub(super) entry: Option<(u64, u64)>,
    /// The server's clock when it granted (`TIME`, since the Unix epoch),
    /// when it said.
    pub(super) clock: Option<Duration>,
    /// The grant record this grant replaced there: when (server ms) and
    /// to which token the key was last granted, if it was.
    pub(super) replaced: Option<(u64, String)>,
}

/// One server's answer to the acquire script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Granted {
    /// Set.
    Yes(Grant),
    /// Not set: held by `holder` for another `pttl` ms (-1: no expiry), or,
    /// with no holder, free but another waiter's turn; and the queue there.
    No {
        /// The holder's value; `None` when the key is free there.
        holder: Option<String>,
        /// Its PTTL.
        pttl: i64,
        /// The queue as this server sees it after the attempt.
        queue: queue::View,
        /// The server's clock, when the refusal said it (`-n`'s term).
        clock: Option<Duration>,
    },
    /// Not set: the key is free, but the record holds a tick that ends
    /// after this attempt's starts.
    Ran(TickRan),
    /// Not set: the key is free, but this token took it since the
    /// contender began.
    Taken(String),
    /// Not set: the tick is over by this server's clock.
    Over(TickOver),
    /// Not set: the key's ticks ran under another schedule.
    Elsewhere(Schedules),
}

impl Granted {
    /// What this answer counts for in the round: a grant is a vote for
    /// this attempt, anything else a vote against.
    pub(super) fn vote(&self) -> Vote {
        match self {
            Granted::Yes(..) => Vote::Yes,
            Granted::No { .. }
            | Granted::Ran(_)
            | Granted::Taken(_)
            | Granted::Over(_)
            | Granted::Elsewhere(_) => Vote::No,
        }
    }

    /// The answer in one word, as a server's part in the round shows it
    /// ([`ServerResult`]).
    pub(super) fn describe(&self) -> &'static str {
        match self {
            Granted::Yes(..) => "granted",
            Granted::No { holder: Some(_), .. } => "held",
            Granted::No { holder: None, .. } => "queued",
            Granted::Ran(_) => "ran",
            Granted::Taken(_) => "taken",
            Granted::Over(_) => "over",
            Granted::Elsewhere(_) => "another schedule",
        }
    }

    /// The server's clock, where its answer said it.
    pub(super) fn clock(&self) -> Option<Duration> {
        match self {
            Granted::Yes(Grant { clock, .. }) | Granted::No { clock, .. } => *clock,
            Granted::Over(over) => {
                Some(Duration::from_millis(over.tick.end_ms).saturating_add(over.ended))
            }
            Granted::Ran(_) | Granted::Taken(_) | Granted::Elsewhere(_) => None,
        }
    }
}

/// Reads the acquire script's reply.
pub(super) fn parse_acquire(reply: Value) -> Result<Granted, String> {
    let bad = |reply: &Value| format!("unexpected acquire reply {reply:?}");
    let Value::Array(items) = &reply else { return Err(bad(&reply)) };
    // A server's TIME at the end of a reply, when it says it.
    let clock = |time: &[Value]| -> Result<Option<Duration>, String> {
        let number = |v: &Value| match v {
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse::<u64>().ok(),
            _ => None,
        };
        match time {
            [] => Ok(None),
            [secs, micros] => {
                Ok(Some(server_time(number(secs), number(micros)).ok_or_else(|| bad(&reply))?))
            }
            _ => Err(bad(&reply)),
        }
    };
    match items.as_slice() {
        [Value::Int(1), Value::Int(fence), Value::Int(score), Value::Int(deadline), rest @ ..] => {
            let entry = u64::try_from(*score).ok().zip(u64::try_from(*deadline).ok());
            let (time, replaced) = match rest {
                [_, _, Value::Int(at), Value::BulkString(token)] => (
                    &rest[..2],
                    u64::try_from(*at)
                        .ok()
                        .map(|at| (at, String::from_utf8_lossy(token).into_owned())),
                ),
                [] | [_, _] => (rest, None),
                _ => return Err(bad(&reply)),
            };
            let clock = clock(time)?;
            Ok(Granted::Yes(Grant { fence: u64::try_from(*fence).ok(), entry, clock, replaced }))
        }
        [Value::Int(4), Value::Int(start), Value::Int(end), Value::Int(now)] => {
            let number = |n: &i64| u64::try_from(*n).map_err(|_| bad(&reply));
            let tick = Tick { start_ms: number(start)?, end_ms: number(end)?, offset_s: 0 };
            let ended = Duration::from_millis(number(now)?.saturating_sub(tick.end_ms));
            Ok(Granted::Over(TickOver { tick, ended }))
        }
        [Value::Int(2), Value::BulkString(token), Value::Int(start), Value::Int(end)] => {
            let tick = Tick {
                start_ms: u64::try_from(*start).map_err(|_| bad(&reply))?,
                end_ms: u64::try_from(*end).map_err(|_| bad(&reply))?,
                offset_s: 0,
            };
            Ok(Granted::Ran(TickRan { token: String::from_utf8_lossy(token).into_owned(), tick }))
        }
        [Value::Int(5), Value::BulkString(token), Value::BulkString(schedule), Value::Int(end)] => {
            Ok(Granted::Elsewhere(Schedules {
                token: String::from_utf8_lossy(token).into_owned(),
                theirs: String::from_utf8_lossy(schedule).into_owned(),
                ours: String::new(),
                ends_ms: u64::try_from(*end).ok(),
            }))
        }
        [Value::Int(3), Value::BulkString(token), Value::Int(_)] => {
            Ok(Granted::Taken(String::from_utf8_lossy(token).into_owned()))
        }
        [
            Value::Int(0),
            holder,
            Value::Int(pttl),
            Value::Int(rank),
            Value::Int(len),
            first,
            time @ ..,
        ] => {
            let text = |v: &Value| match v {
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            };
            let (Some(holder), Some(first)) = (text(holder), text(first)) else {
                return Err(bad(&reply));
            };
            Ok(Granted::No {
                // A key that exists has a PTTL of -1 or more: -2 is "free".
                holder: (*pttl != -2).then_some(holder),
                pttl: *pttl,
                queue: queue::View {
                    rank: usize::try_from(*rank).ok(),
                    len: usize::try_from(*len).map_err(|_| bad(&reply))?,
                    first,
                },
                clock: clock(time)?,
            })
        }
        _ => Err(bad(&reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_reply_is_read_strictly() {
        let int = Value::Int;
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let yes = Value::Array(vec![int(1), int(7), int(10), int(20)]);
        let grant = |fence, entry, clock| Grant { fence, entry, clock, replaced: None };
        assert_eq!(parse_acquire(yes), Ok(Granted::Yes(grant(Some(7), Some((10, 20)), None))));
        let timed = Value::Array(vec![int(1), int(7), int(-1), int(-1), text("12"), text("5")]);
        let clock = Some(Duration::from_secs(12) + Duration::from_micros(5));
        assert_eq!(parse_acquire(timed), Ok(Granted::Yes(grant(Some(7), None, clock))));
        let unfenced = Value::Array(vec![int(1), int(-1), int(-1), int(-1)]);
        assert_eq!(parse_acquire(unfenced), Ok(Granted::Yes(grant(None, None, None))));
        // The record the grant replaced: when and to whom; -1 for none.
        let replacing = |at: i64, by: &str| {
            Value::Array(vec![
                int(1),
                int(7),
                int(-1),
                int(-1),
                text("12"),
                text("5"),
                int(at),
                text(by),
            ])
        };
        assert_eq!(
            parse_acquire(replacing(11_900, "a")),
            Ok(Granted::Yes(Grant {
                replaced: Some((11_900, "a".into())),
                ..grant(Some(7), None, clock)
            }))
        );
        assert_eq!(parse_acquire(replacing(-1, "")), Ok(Granted::Yes(grant(Some(7), None, clock))));
        assert!(
            parse_acquire(Value::Array(vec![int(1), int(7), int(-1), int(-1), text("12")]))
                .is_err()
        );
        // The tick is over: its start, end and the server's clock.
        let over_reply = Value::Array(vec![int(4), int(60_000), int(120_000), int(185_500)]);
        let tick = Tick { start_ms: 60_000, end_ms: 120_000, offset_s: 0 };
        let over = TickOver { tick, ended: Duration::from_millis(65_500) };
        assert_eq!(
            parse_acquire(over_reply).map(|g| (g.clock(), g)),
            Ok((Some(Duration::from_millis(185_500)), Granted::Over(over)))
        );
        let busy = Value::Array(vec![int(0), text("t"), int(5), int(1), int(2), text("w")]);
        let queue = queue::View { rank: Some(1), len: 2, first: "w".into() };
        let held =
            Granted::No { holder: Some("t".into()), pttl: 5, queue: queue.clone(), clock: None };
        assert_eq!(parse_acquire(busy), Ok(held));
        let queued = Value::Array(vec![int(0), text(""), int(-2), int(1), int(2), text("w")]);
        assert_eq!(
            parse_acquire(queued),
            Ok(Granted::No { holder: None, pttl: -2, queue: queue.clone(), clock: None })
        );
        let stamped = Value::Array(vec![
            int(0),
            text("t"),
            int(5),
            int(-1),
            int(0),
            text(""),
            text("12"),
            text("5"),
        ]);
        let clock = Some(Duration::from_secs(12) + Duration::from_micros(5));
        assert!(matches!(parse_acquire(stamped), Ok(Granted::No { clock: c, .. }) if c == clock));
        let raw_empty_value =
            Value::Array(vec![int(0), text(""), int(-1), int(-1), int(0), text("")]);
        assert!(matches!(parse_acquire(raw_empty_value), Ok(Granted::No { holder: Some(_), .. })));
        assert!(parse_acquire(Value::Array(vec![int(1), int(7)])).is_err());
        assert!(parse_acquire(Value::Okay).is_err());
    }
}
