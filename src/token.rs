//! The lock token: 128 random bits plus readable holder facts.
//!
//! Written as `RANDOM.PID.MILLIS.HOST`: 32 hex digits of a UUID v4, the
//! holder's pid, the Unix time in milliseconds when the token was made, and
//! the host name. The random part alone makes it unique; the rest lets
//! `status` say who holds a lock. Nothing secret (command line, environment)
//! goes in. Tokens written by other Redlock clients are still valid values:
//! they just carry no holder facts.
//!
//! A holder of one of `N` places (`--limit N`, N > 1; [`crate::slots`])
//! writes its place after the random part: `RANDOM-SofN.PID.MILLIS.HOST`.
//! The place travels with the token, so `extend` and `release` given only
//! `--key` and `--token` find the place's key, and every other holder that
//! meets the token learns the `N` it was taken with (agreement on N). A
//! token of an ordinary lock (N = 1) keeps the old form exactly. A shared
//! holder (`--shared`, [`crate::shared`]) writes `RANDOM-shared.PID...`.
//!
//! A token of `redlock acquire` names the process that ran it (its
//! parent: the script that holds the token and releases it), since the
//! `acquire` process itself has exited by the time anyone reads the
//! token, and says so with `-acquire` before any other tag:
//! `RANDOM-acquire.PID...`, `RANDOM-acquire-2of3.PID...`,
//! `RANDOM-acquire-shared.PID...` (the queue's script looks for
//! `-shared.`, which stays whole). Tokens without it read as before.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A token made by redlock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// 128 bits of randomness (UUID v4, of which 122 are random).
    pub random: u128,
    /// The holder's process id.
    pub pid: u32,
    /// When the token was made, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The holder's host name (letters, digits, `-`, `.`, `_` only).
    pub host: String,
    /// How it holds the lock.
    pub mode: Mode,
    /// True when `pid` is the process that ran `redlock acquire` (which
    /// holds the token), not a redlock process: no redlock renews or
    /// guards this lock.
    pub caller: bool,
}

/// How a token holds its lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The one holder of an ordinary lock.
    #[default]
    Exclusive,
    /// Place `slot` of a `--limit` lock taken with `limit` places
    /// (`1 <= slot <= limit`, `limit >= 2`).
    Place {
        /// The place, from 1.
        slot: u32,
        /// The limit it was taken with.
        limit: u32,
    },
    /// One of the shared holders (`--shared`).
    Shared,
}

/// The process that tokens made by this process name, when it is not
/// this process ([`hold_for_caller`]).
static CALLER: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Makes every token this process makes from now on name its parent (the
/// caller of `redlock acquire`, which holds the token once this process
/// has exited) and say so ([`Token::caller`]).
pub fn hold_for_caller() {
    // SAFETY: getppid has no preconditions and cannot fail.
    let parent = unsafe { libc::getppid() };
    if let Ok(parent) = u32::try_from(parent) {
        let _ = CALLER.set(parent);
    }
}

/// The value the lock key holds while shared holders have it
/// ([`crate::shared`]); never a token.
pub const SHARED_MARKER: &str = "redlock-shared";

impl Token {
    /// A fresh token for this process, now.
    pub fn new() -> Token {
        let created_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let (pid, caller) = CALLER.get().map_or((std::process::id(), false), |&p| (p, true));
        Token {
            random: uuid::Uuid::new_v4().as_u128(),
            pid,
            created_ms,
            host: hostname(),
            mode: Mode::Exclusive,
            caller,
        }
    }

    /// The same token for a shared holder.
    pub fn for_shared(self) -> Token {
        Token { mode: Mode::Shared, ..self }
    }

    /// The same token for place `slot` of `limit` (an ordinary lock's when
    /// `limit` is 1).
    pub fn at(self, slot: u32, limit: u32) -> Token {
        let mode = if limit > 1 { Mode::Place { slot, limit } } else { Mode::Exclusive };
        Token { mode, ..self }
    }

    /// The place this token holds: 1 for an ordinary lock.
    pub fn slot(&self) -> u32 {
        match self.mode {
            Mode::Place { slot, .. } => slot,
            Mode::Exclusive | Mode::Shared => 1,
        }
    }

    /// The limit this token was taken with: 1 for an ordinary lock.
    pub fn limit(&self) -> u32 {
        match self.mode {
            Mode::Place { limit, .. } => limit,
            Mode::Exclusive | Mode::Shared => 1,
        }
    }

    /// True for a shared holder's token.
    pub fn is_shared(&self) -> bool {
        self.mode == Mode::Shared
    }

    /// When the token was made, as a wall-clock time.
    pub fn created(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.created_ms)
    }

    /// How long ago the token was made, by this machine's wall clock (zero
    /// when the holder's clock is ahead of ours).
    pub fn held_for(&self) -> Duration {
        SystemTime::now().duration_since(self.created()).unwrap_or_default()
    }
}

impl Default for Token {
    fn default() -> Token {
        Token::new()
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.random)?;
        if self.caller {
            f.write_str("-acquire")?;
        }
        match self.mode {
            Mode::Place { slot, limit } => write!(f, "-{slot}of{limit}")?,
            Mode::Shared => f.write_str("-shared")?,
            Mode::Exclusive => {}
        }
        write!(f, ".{}.{}.{}", self.pid, self.created_ms, self.host)
    }
}

impl FromStr for Token {
    type Err = ();

    /// Reads a redlock token; any other value (another client's) is `Err`.
    fn from_str(s: &str) -> Result<Token, ()> {
        let mut parts = s.splitn(4, '.');
        let first = parts.next().ok_or(())?;
        // `RANDOM[-acquire][-SofN | -shared]`
        let (random, tags) = first.split_once('-').map_or((first, None), |(r, t)| (r, Some(t)));
        let (caller, tag) = match tags {
            Some("acquire") => (true, None),
            Some(tags) => match tags.strip_prefix("acquire-") {
                Some(rest) => (true, Some(rest)),
                None => (false, Some(tags)),
            },
            None => (false, None),
        };
        let mode = match tag {
            Some("shared") => Mode::Shared,
            Some(place) => {
                let (slot, limit) = parse_place(place)?;
                Mode::Place { slot, limit }
            }
            None => Mode::Exclusive,
        };
        if random.len() != 32 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(());
        }
        let random = u128::from_str_radix(random, 16).map_err(|_| ())?;
        let pid = parts.next().ok_or(())?.parse().map_err(|_| ())?;
        let created_ms = parts.next().ok_or(())?.parse().map_err(|_| ())?;
        let host = parts.next().ok_or(())?;
        if host.is_empty() || host != sanitize_host(host) {
            return Err(());
        }
        Ok(Token { random, pid, created_ms, host: host.to_owned(), mode, caller })
    }
}

/// Reads `SofN` (`1 <= S <= N`, `N >= 2`): a place in a token.
fn parse_place(raw: &str) -> Result<(u32, u32), ()> {
    let (slot, limit) = raw.split_once("of").ok_or(())?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(slot) || !digits(limit) {
        return Err(());
    }
    let (slot, limit): (u32, u32) = (slot.parse().map_err(|_| ())?, limit.parse().map_err(|_| ())?);
    if slot == 0 || slot > limit || limit < 2 {
        return Err(());
    }
    Ok((slot, limit))
}

/// This machine's host name as tokens carry it: reduced to characters that
/// are safe in a token, read once per process (every token and history
/// entry of a run names it).
pub fn hostname() -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = sanitize_host(raw.trim());
        if host.is_empty() { "unknown".to_owned() } else { host }
    })
    .clone()
}

fn sanitize_host(raw: &str) -> String {
    raw.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_is_unique() {
        let a = Token::new();
        let b = Token::new();
        assert_ne!(a.random, b.random);
        assert_eq!(a.to_string().parse::<Token>(), Ok(a.clone()));
        assert_eq!(a.pid, std::process::id());
        assert!(a.to_string().starts_with(&format!("{:032x}.", a.random)));
    }

    #[test]
    fn foreign_values_are_not_tokens() {
        for s in ["", "abc", "a-b-c", "0123456789abcdef0123456789abcdeg.1.2.h", "x.1.2.host"] {
            assert!(s.parse::<Token>().is_err(), "{s}");
        }
        let t: Token =
            "0123456789abcdef0123456789abcdef.42.1700000000000.web-1.example.com".parse().unwrap();
        assert_eq!((t.pid, t.host.as_str()), (42, "web-1.example.com"));
        assert_eq!((t.slot(), t.limit()), (1, 1));
    }

    #[test]
    fn an_acquire_token_names_its_caller_and_says_so() {
        let plain = Token::new();
        let caller = Token { caller: true, pid: 4121, ..plain.clone() };
        let text = caller.to_string();
        assert!(text.starts_with(&format!("{:032x}-acquire.4121.", plain.random)), "{text}");
        assert_eq!(text.parse::<Token>(), Ok(caller.clone()));
        for t in [caller.clone().at(2, 3), caller.clone().for_shared()] {
            assert_eq!(t.to_string().parse::<Token>(), Ok(t.clone()));
        }
        // The queue's script finds a shared waiter by `-shared.`.
        assert!(caller.for_shared().to_string().contains("-acquire-shared."));
        // Tokens of earlier versions read as before: a run's.
        let old: Token = format!("{:032x}-2of3.7.1.h", plain.random).parse().unwrap();
        assert!(!old.caller && old.slot() == 2);
    }

    #[test]
    fn places_round_trip_and_limit_one_keeps_the_old_form() {
        let plain = Token::new();
        assert_eq!(plain.clone().at(1, 1).to_string(), plain.to_string());
        let t = plain.clone().at(2, 3);
        let text = t.to_string();
        assert!(text.starts_with(&format!("{:032x}-2of3.", plain.random)), "{text}");
        assert_eq!(text.parse::<Token>(), Ok(t.clone()));
        assert_eq!((t.slot(), t.limit()), (2, 3));
        let shared = plain.clone().for_shared();
        assert!(shared.to_string().contains("-shared."));
        assert_eq!(shared.to_string().parse::<Token>(), Ok(shared));
        for bad in [
            "0of3",
            "4of3",
            "1of1",
            "of3",
            "2of",
            "-1of3",
            "2of3x",
            "acquire-acquire",
            "shared-acquire",
            "2of3-shared",
        ] {
            let s = format!("{:032x}-{bad}.1.2.h", plain.random);
            assert!(s.parse::<Token>().is_err(), "{s}");
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_text_parses_or_not_without_panic(raw in "\\PC{0,120}") {
            let _ = raw.parse::<Token>();
        }

        #[test]
        fn tokens_round_trip(random: u128, pid: u32, created_ms: u64, host in "[a-z0-9][a-z0-9.-]{0,40}", limit in 1u32..200, slot in 1u32..200, caller: bool) {
            let t = Token { random, pid, created_ms, host, mode: Mode::Exclusive, caller }.at(slot.min(limit), limit);
            prop_assert_eq!(t.to_string().parse::<Token>(), Ok(t));
        }
    }
}
