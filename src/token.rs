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
//!
//! Where the holder runs may follow the host: `~note=TEXT` (`--note`) and
//! `~job=URL` (the CI job: GitHub Actions' run, GitLab's job), each at most
//! [`MAX_NOTE`] bytes and without a control or formatting character
//! ([`crate::text::is_unsafe`]: every holder and waiter prints them), so a
//! token whose fields hold one is no redlock token. Each is
//! percent-encoded so that the token stays one shell
//! word of printable ASCII: every byte but letters, digits and `_/:,+=@`
//! is written `%XX` (upper-case hex), so neither `.` (the fields), `~` (the
//! tags) nor `-shared.` (the queue's script) can appear in it. They are
//! fixed when the token is made, since the servers compare tokens byte for
//! byte; a token without them reads as before, and a tag whose encoding is
//! not exactly that is no token.
//!
//! A freeze (`redlock hold`) says when it ends: `~until=MILLIS`, the Unix
//! time in milliseconds, in decimal without leading zeros (so that the
//! token written again is the same), after the note and the job. Every
//! waiter's busy line and `status` show it ([`Token::until`]). A token
//! without it is no freeze and reads as before.

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
    /// Where the holder runs, as `--note` said ([`Token::with_note`]: at
    /// most [`MAX_NOTE`] bytes, no control or formatting character).
    pub note: Option<String>,
    /// The CI job the holder runs in (its URL's scheme, host and path; as
    /// bounded as the note).
    pub job: Option<String>,
    /// When the freeze this token holds ends (`redlock hold`), in
    /// milliseconds since the Unix epoch; `None`: no freeze.
    pub until: Option<u64>,
}

/// The longest `--note` (and CI job URL) a token carries, in bytes: the
/// token is sent with every call and shown in every busy message.
pub const MAX_NOTE: usize = 200;

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

impl Mode {
    /// The mode `value` holds its lock in: a redlock token's, read once
    /// where a value comes in (`--token`, `$REDLOCK_TOKEN`, a server's
    /// answer) and carried from there ([`crate::lock::Held`]); any other
    /// value (another client's lock) holds it as the one holder.
    pub fn of(value: &str) -> Mode {
        value.parse::<Token>().map_or(Mode::Exclusive, |t| t.mode)
    }

    /// The place held: 1 for an ordinary lock and a shared holder.
    pub fn slot(self) -> u32 {
        match self {
            Mode::Place { slot, .. } => slot,
            Mode::Exclusive | Mode::Shared => 1,
        }
    }

    /// The limit the lock was taken with: 1 for an ordinary lock and a
    /// shared holder.
    pub fn limit(self) -> u32 {
        match self {
            Mode::Place { limit, .. } => limit,
            Mode::Exclusive | Mode::Shared => 1,
        }
    }
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
            note: None,
            job: None,
            until: None,
        }
    }

    /// The same token holding a freeze that ends at `until` (ms since the
    /// Unix epoch; `None`: no freeze).
    pub fn with_until(self, until: Option<u64>) -> Token {
        Token { until, ..self }
    }

    /// When the freeze this token holds ends, as a wall-clock time.
    pub fn freeze_end(&self) -> Option<SystemTime> {
        self.until.map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
    }

    /// The same token saying where its holder runs (`--note`, the CI job):
    /// a control or formatting character in either written escaped
    /// ([`crate::text::printable`]), each cut to [`MAX_NOTE`] bytes, so
    /// that the token always reads back.
    pub fn with_note(self, note: Option<String>, job: Option<String>) -> Token {
        Token { note: note.and_then(field), job: job.and_then(field), ..self }
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
        write!(f, ".{}.{}.{}", self.pid, self.created_ms, self.host)?;
        for (tag, text) in [("note", &self.note), ("job", &self.job)] {
            if let Some(text) = text {
                write!(f, "~{tag}={}", escape(text))?;
            }
        }
        if let Some(until) = self.until {
            write!(f, "~until={until}")?;
        }
        Ok(())
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
        let mut rest = parts.next().ok_or(())?.split('~');
        let host = rest.next().ok_or(())?;
        if host.is_empty() || host != sanitize_host(host) {
            return Err(());
        }
        let (mut note, mut job, mut until) = (None, None, None);
        // Each tag at most once, in the order they are written: note, job, until.
        for tag in rest {
            if until.is_some() {
                return Err(());
            }
            let slot = match tag.split_once('=') {
                Some(("until", ms)) => {
                    until = Some(parse_millis(ms)?);
                    continue;
                }
                Some(("note", text)) if note.is_none() && job.is_none() => (&mut note, text),
                Some(("job", text)) if job.is_none() => (&mut job, text),
                _ => return Err(()),
            };
            *slot.0 = Some(unescape(slot.1)?);
        }
        let host = host.to_owned();
        Ok(Token { random, pid, created_ms, host, mode, caller, note, job, until })
    }
}

/// `text` as a token's note or job carries it: a control or formatting
/// character ([`crate::text::is_unsafe`]) written escaped
/// ([`crate::text::printable`]), cut to [`MAX_NOTE`] bytes on a character
/// boundary, since the escapes lengthen it; `None` when nothing is left.
/// Whatever it returns reads back from the token ([`unescape`]).
fn field(text: String) -> Option<String> {
    let mut text = match crate::text::printable(&text) {
        std::borrow::Cow::Owned(escaped) if text.chars().any(crate::text::is_unsafe) => escaped,
        _ => text,
    };
    if text.len() > MAX_NOTE {
        let cut = (0..=MAX_NOTE).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        text.truncate(cut);
    }
    (!text.is_empty()).then_some(text)
}

/// True for the bytes a note keeps as they are ([`escape`]).
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_/:,+=@".contains(&b)
}

/// A note as a token carries it: [`plain`] bytes as they are, every other
/// byte `%XX`.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if plain(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reads a note written by [`escape`]: only its exact output (so the text
/// read writes the same token again), UTF-8, at most [`MAX_NOTE`] bytes,
/// without control or formatting characters ([`crate::text::is_unsafe`]).
fn unescape(raw: &str) -> Result<String, ()> {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut it = raw.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hex = [it.next().ok_or(())?, it.next().ok_or(())?];
            let hex = std::str::from_utf8(&hex).map_err(|_| ())?;
            let byte = u8::from_str_radix(hex, 16).map_err(|_| ())?;
            bytes.push(byte);
        } else {
            bytes.push(b);
        }
    }
    let text = String::from_utf8(bytes).map_err(|_| ())?;
    if text.is_empty() || text.len() > MAX_NOTE || text.chars().any(crate::text::is_unsafe) {
        return Err(());
    }
    if escape(&text) != raw { Err(()) } else { Ok(text) }
}

/// Reads a freeze's end (`~until=`): decimal milliseconds, above zero,
/// without a sign or leading zeros, so that the token written again is
/// the same.
fn parse_millis(raw: &str) -> Result<u64, ()> {
    let ms: u64 = raw.parse().map_err(|_| ())?;
    if ms == 0 || ms.to_string() != raw { Err(()) } else { Ok(ms) }
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

/// The host name of this process's tokens, history entries and status
/// lines: [`set_hostname`]'s, else the kernel's.
static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// This machine's host name as tokens carry it: `--host` when it was given
/// ([`set_hostname`]), else the kernel's (`/proc/sys/kernel/hostname`: in
/// Kubernetes the pod's name, on some images `localhost`) reduced to
/// characters that are safe in a token; fixed once per process (every
/// token and history entry of a run names it).
pub fn hostname() -> String {
    HOST.get_or_init(|| {
        let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = sanitize_host(raw.trim());
        if host.is_empty() { "unknown".to_owned() } else { host }
    })
    .clone()
}

/// Makes `name` this process's host name ([`hostname`]) in place of the
/// kernel's: once, before any token is made. `name` must pass
/// [`check_host`]. False when the host name was fixed already.
pub fn set_hostname(name: String) -> bool {
    HOST.set(name).is_ok()
}

/// The longest host name a token carries, in bytes.
pub const MAX_HOST: usize = 64;

/// Whether `name` can be a token's host as given: 1 to [`MAX_HOST`] ASCII
/// letters, digits, `-`, `.` and `_`; anything else (a space, `~`, a
/// control character) would be the token's next field or no token. The
/// message says what is wrong.
pub fn check_host(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_HOST || sanitize_host(name) != name {
        return Err(format!(
            "must be 1 to {MAX_HOST} letters, digits, `-`, `.` and `_` (a token's host field)"
        ));
    }
    Ok(())
}

fn sanitize_host(raw: &str) -> String {
    raw.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(MAX_HOST)
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
    fn a_host_given_is_one_a_token_reads_back() {
        for good in ["web-1", "ci_runner.7", &"h".repeat(MAX_HOST)] {
            assert_eq!(check_host(good), Ok(()), "{good}");
            let t = Token { host: good.to_owned(), ..Token::new() };
            assert_eq!(t.to_string().parse::<Token>().map(|t| t.host), Ok(good.to_owned()));
        }
        for bad in ["", "web 1", "a~note=x", "a\u{1b}b", "h\u{e9}", &"h".repeat(MAX_HOST + 1)] {
            assert!(check_host(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn foreign_values_are_not_tokens() {
        for s in ["", "abc", "a-b-c", "0123456789abcdef0123456789abcdeg.1.2.h", "x.1.2.host"] {
            assert!(s.parse::<Token>().is_err(), "{s}");
        }
        let t: Token =
            "0123456789abcdef0123456789abcdef.42.1700000000000.web-1.example.com".parse().unwrap();
        assert_eq!((t.pid, t.host.as_str()), (42, "web-1.example.com"));
        assert_eq!((t.mode.slot(), t.mode.limit()), (1, 1));
    }

    #[test]
    fn an_acquire_token_names_its_caller_and_says_so() {
        let plain = Token::new();
        let caller = Token { caller: true, pid: 4121, ..plain.clone() };
        let text = caller.to_string();
        assert!(text.starts_with(&format!("{:032x}-acquire.4121.", plain.random)), "{text}");
        assert_eq!(text.parse::<Token>(), Ok(caller.clone()));
        let place = Mode::Place { slot: 2, limit: 3 };
        for mode in [place, Mode::Shared] {
            let t = Token { mode, ..caller.clone() };
            assert_eq!(t.to_string().parse::<Token>(), Ok(t.clone()));
        }
        // The queue's script finds a shared waiter by `-shared.`.
        let shared = Token { mode: Mode::Shared, ..caller };
        assert!(shared.to_string().contains("-acquire-shared."));
        // Tokens of earlier versions read as before: a run's.
        let old: Token = format!("{:032x}-2of3.7.1.h", plain.random).parse().unwrap();
        assert!(!old.caller && old.mode.slot() == 2);
    }

    #[test]
    fn a_note_and_a_job_travel_in_the_token_and_old_tokens_still_read() {
        let plain = Token::new();
        let job = "https://github.com/o/r-1/actions/runs/42".to_owned();
        let t = plain.clone().with_note(Some("deploy v1.2 ~ -shared. 100%".into()), Some(job));
        let text = t.to_string();
        let head = plain.to_string();
        assert!(text.starts_with(&format!("{head}~note=")), "{text}");
        assert!(text.contains("~job=https://github%2Ecom/o/r%2D1/actions/runs/42"), "{text}");
        assert!(!text.contains("-shared.") && !text.contains(' '), "{text}");
        assert_eq!(text.parse::<Token>(), Ok(t.clone()));
        let job_only = plain.clone().with_note(None, t.job.clone());
        assert_eq!(job_only.to_string().parse::<Token>(), Ok(job_only));
        // A token without them reads as it always did.
        assert_eq!(head.parse::<Token>(), Ok(plain.clone()));
        // Only the exact encoding reads: the token written again is the same.
        for bad in [
            "~note=",
            "~note=a%2e",
            "~note=a.b",
            "~note=a%2",
            "~note=%0A",
            "~job=a~note=b",
            "~note=a~note=b",
            "~what=a",
            "~note",
        ] {
            let s = format!("{head}{bad}");
            assert!(s.parse::<Token>().is_err(), "{s}");
        }
        let long = format!("{head}~note={}", "a".repeat(MAX_NOTE + 1));
        assert!(long.parse::<Token>().is_err());
    }

    #[test]
    fn a_freeze_says_when_it_ends_and_old_tokens_still_read() {
        let plain = Token::new().with_note(Some("Black Friday, ask alice".into()), None);
        let t = plain.clone().with_until(Some(1_795_975_200_000));
        let text = t.to_string();
        assert!(text.ends_with("~until=1795975200000"), "{text}");
        assert!(text.starts_with(&plain.to_string()), "{text}");
        assert_eq!(text.parse::<Token>(), Ok(t.clone()));
        assert_eq!(t.freeze_end(), Some(UNIX_EPOCH + Duration::from_millis(1_795_975_200_000)));
        let bare = Token::new().with_until(Some(7));
        assert_eq!(bare.to_string().parse::<Token>(), Ok(bare.clone()));
        // A token without it is no freeze, as it always was.
        assert_eq!(plain.to_string().parse::<Token>().map(|t| t.until), Ok(None));
        let head = Token::new().to_string();
        for bad in [
            "~until=",
            "~until=0",
            "~until=012",
            "~until=+12",
            "~until=-1",
            "~until=1.5",
            "~until=99999999999999999999",
            "~until=1~until=2",
            "~until=1~note=a",
            "~until=1~job=a",
            "~until",
        ] {
            let s = format!("{head}{bad}");
            assert!(s.parse::<Token>().is_err(), "{s}");
        }
    }

    #[test]
    fn no_field_carries_a_control_or_formatting_character() {
        let head = Token::new().to_string();
        // Written by another client: a bidi override, an isolate, ESC, C1.
        for bad in
            ["~job=https://x/%E2%80%AEexe", "~note=a%E2%81%A6b", "~note=%1B%5B2J", "~note=%C2%9B"]
        {
            let s = format!("{head}{bad}");
            assert!(s.parse::<Token>().is_err(), "{s}");
        }
        // Made here: escaped, bounded, and the token reads back.
        let t = Token::new().with_note(Some("exe\u{202e}txt".into()), Some("\u{200b}".into()));
        assert_eq!(t.note.as_deref(), Some("exe\\u{202e}txt"));
        assert_eq!(t.job.as_deref(), Some("\\u{200b}"));
        assert_eq!(t.to_string().parse::<Token>(), Ok(t.clone()));
        let t = Token::new().with_note(Some("\u{202e}".repeat(66)), None);
        assert!(t.note.as_ref().is_some_and(|n| n.len() <= MAX_NOTE && n.starts_with("\\u{202e}")));
        assert_eq!(t.to_string().parse::<Token>(), Ok(t.clone()));
        assert_eq!(Token::new().with_note(Some(String::new()), None).note, None);
    }

    #[test]
    fn places_round_trip_and_the_mode_is_read_once_from_any_value() {
        let plain = Token::new();
        let t = Token { mode: Mode::Place { slot: 2, limit: 3 }, ..plain.clone() };
        let text = t.to_string();
        assert!(text.starts_with(&format!("{:032x}-2of3.", plain.random)), "{text}");
        assert_eq!(text.parse::<Token>(), Ok(t.clone()));
        assert_eq!((t.mode.slot(), t.mode.limit()), (2, 3));
        assert_eq!(Mode::of(&text), t.mode);
        // Another client's value holds as the one holder, in place 1.
        assert_eq!(Mode::of("another-clients-value"), Mode::Exclusive);
        assert_eq!(Mode::Exclusive.slot(), 1);
        let shared = Token { mode: Mode::Shared, ..plain.clone() };
        assert_eq!(Mode::of(&shared.to_string()), Mode::Shared);
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
            let mode = if limit > 1 { Mode::Place { slot: slot.min(limit), limit } } else { Mode::Exclusive };
            let t = Token { random, pid, created_ms, host, mode, caller, note: None, job: None, until: None };
            prop_assert_eq!(t.to_string().parse::<Token>(), Ok(t));
        }

        #[test]
        fn notes_round_trip_as_one_printable_word(note in "[^\\p{Cc}]{1,60}", job in proptest::option::of("[ -~]{1,80}"), until in proptest::option::of(1u64..)) {
            let t = Token::new().with_note(Some(note), job).with_until(until);
            let text = t.to_string();
            prop_assert!(text.bytes().all(|b| b.is_ascii_graphic()), "{}", text);
            prop_assert_eq!(text.matches('.').count(), 3 + t.host.matches('.').count());
            prop_assert!(!text.contains("-shared."));
            prop_assert_eq!(text.parse::<Token>(), Ok(t));
        }
    }
}
