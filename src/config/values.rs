//! One setting's value at a time: a duration, a TTL, a wait, a key, a
//! token, a note, the server list, `--on-lost`, each parsed and bounded,
//! or a usage error naming its flag (or the file's line). The fleet's
//! settings, the commands' and the checks across them are built from these.

use std::time::Duration;

use crate::cli;
use crate::config_file;
use crate::error::Error;
use crate::lock::Wait;
use crate::server::ServerUrl;

/// The longest TTL accepted: beyond it, timers and Redis' PX limits get
/// close, and no job needs a lock that outlives a year without renewal.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// The TTL assumed by subcommands that take none (it sets the node timeout).
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// What `run` does to its child when the lock is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnLost {
    /// Send this signal, then SIGKILL after the grace period.
    Signal(i32),
    /// Keep the child running and warn.
    Ignore,
}

pub(super) fn usage<T>(message: String) -> Result<T, Error> {
    Err(Error::Usage(message))
}

/// `--ttl` as given (or its default), or the file's `ttl` when the
/// command line gave none.
pub(super) fn ttl_or_file(raw: &str, g: &config_file::Globals) -> Result<Duration, Error> {
    match &g.ttl.value {
        Some(file) => ttl_named(&ttl_label(g), file),
        None => ttl(raw),
    }
}

/// How messages name the TTL: `--ttl`, or the file's line.
pub(super) fn ttl_label(g: &config_file::Globals) -> String {
    g.ttl.label("--ttl")
}

fn ttl(raw: &str) -> Result<Duration, Error> {
    ttl_named("--ttl", raw)
}

pub(super) fn ttl_named(label: &str, raw: &str) -> Result<Duration, Error> {
    let d = duration(label, raw)?;
    if d > MAX_TTL {
        return usage(format!("{label} {raw}: longer than the maximum of 365 days"));
    }
    if d < Duration::from_millis(10) {
        return usage(format!("{label} {raw}: shorter than the minimum of 10ms"));
    }
    Ok(d)
}

/// A `--note`: at most [`MAX_NOTE`](crate::token::MAX_NOTE) bytes (the
/// token carries it to every server and every busy message), without
/// control characters (it is printed to waiters' terminals); empty is none.
pub(super) fn note(raw: Option<String>) -> Result<Option<String>, Error> {
    let Some(text) = raw.filter(|t| !t.is_empty()) else { return Ok(None) };
    if text.len() > crate::token::MAX_NOTE {
        return usage(format!(
            "--note: {} bytes, longer than the {} a note may have",
            text.len(),
            crate::token::MAX_NOTE
        ));
    }
    if let Some(c) = text.chars().find(|c| crate::text::is_unsafe(*c)) {
        let kind = if c.is_control() { "control" } else { "formatting (bidi, zero-width)" };
        return usage(format!(
            "--note {}: must not contain a {kind} character (found U+{:04X})",
            crate::text::printable(&text),
            u32::from(c)
        ));
    }
    Ok(Some(text))
}

/// The CI job's URL as a token may carry it: any credentials in it
/// redacted (`https://user:***@host/...`), and left out when it is longer
/// than a note may be or holds a control character (it comes from the
/// environment, which no message may echo unchecked).
pub(super) fn ci_job(url: &str) -> Option<String> {
    let url = crate::server::redact(url.trim());
    (url.len() <= crate::token::MAX_NOTE && !url.chars().any(char::is_control)).then_some(url)
}

/// A `--token`: not empty, and never the marker that shared holders keep
/// in the lock key ([`crate::token::SHARED_MARKER`]): it is no holder's
/// token, and releasing or extending it would let a writer in beside
/// live readers, or keep writers out for as long as it was extended.
pub(super) fn token_arg(value: String) -> Result<String, Error> {
    if crate::shared::is_marker(&value) {
        return usage(format!(
            "--token {value}: that is the marker of the shared holders (--shared), not a token; \
             each shared holder has its own (REDLOCK_TOKEN, or `redlock status --key K`)"
        ));
    }
    nonempty("--token", value)
}

/// A `--key` or `--token` as typed: not empty, and without control
/// characters. A key's channels are its name with a suffix after a newline
/// (`lock::wake_channel`), so a key `a\nb` would announce on another key's
/// per-waiter channel; and a control character in a key or token would
/// reach logs and terminals as a command to them.
pub(super) fn nonempty(flag: &str, value: String) -> Result<String, Error> {
    if value.is_empty() {
        return usage(format!("{flag}: must not be empty"));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return usage(format!(
            "{flag} {:?}: must not contain a control character (found U+{:04X})",
            crate::text::display_key(value.as_bytes()),
            u32::from(c)
        ));
    }
    Ok(value)
}

/// The longest `--jitter`: a sleep before the first attempt longer than a
/// day (the longest period a cron job usually has) is a typo, not a spread.
pub const MAX_JITTER: Duration = Duration::from_secs(24 * 3600);

/// `--jitter`: at most [`MAX_JITTER`].
pub(super) fn jitter(raw: &Option<String>) -> Result<Option<Duration>, Error> {
    match optional("--jitter", raw)? {
        Some(d) if d > MAX_JITTER => usage(format!(
            "--jitter {:?}: at most 1 day (a random sleep before the first attempt)",
            raw.as_deref().unwrap_or_default()
        )),
        d => Ok(d),
    }
}

/// `-n`, `--wait`, or the file's `wait` when the command line gave
/// neither, or waiting until acquired.
pub(super) fn wait(w: &cli::Waiting, g: &config_file::Globals) -> Result<Wait, Error> {
    match (&w.wait, w.no_wait, &g.wait.value) {
        (_, true, _) => Ok(Wait::Once),
        (Some(raw), false, _) => wait_for("--wait", raw),
        (None, false, Some(file)) => wait_for(&g.wait.label("--wait"), file),
        (None, false, None) => Ok(Wait::Forever),
    }
}

/// A `--wait` value: `0` tries once, as flock's `-w 0` does; `forever`
/// waits until acquired (to override a configuration file's `wait`).
pub(super) fn wait_for(label: &str, raw: &str) -> Result<Wait, Error> {
    if raw.trim().eq_ignore_ascii_case("forever") {
        return Ok(Wait::Forever);
    }
    if parse_duration(raw).is_ok_and(|d| d.is_zero()) {
        return Ok(Wait::Once);
    }
    duration(label, raw).map(Wait::For)
}

pub(super) fn optional(flag: &str, raw: &Option<String>) -> Result<Option<Duration>, Error> {
    raw.as_deref().map(|r| duration(flag, r)).transpose()
}

/// The longest duration any flag takes: monotonic deadlines are computed
/// as `now + duration`, which must not overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A humantime duration (`500ms`, `30s`, `1h30m`), or a bare number of
/// seconds (`5`, `0.5`) as flock(1) and timeout(1) take it.
fn parse_duration(raw: &str) -> Result<Duration, ()> {
    let raw = raw.trim();
    if raw.bytes().all(|b| b.is_ascii_digit() || b == b'.') && raw.bytes().any(|b| b != b'.') {
        let secs: f64 = raw.parse().map_err(|_| ())?;
        return Duration::try_from_secs_f64(secs).map_err(|_| ());
    }
    humantime::parse_duration(raw).map_err(|_| ())
}

/// A positive duration (`500ms`, `30s`, `1h30m`, or bare seconds), at most 10 years.
pub fn duration(flag: &str, raw: &str) -> Result<Duration, Error> {
    if raw.trim().starts_with('-') {
        return usage(format!("{flag} {raw:?}: must not be negative"));
    }
    match parse_duration(raw) {
        Ok(d) if d.is_zero() => usage(format!("{flag} {raw:?}: must be longer than zero")),
        Ok(d) if d > MAX_DURATION => usage(format!("{flag} {raw:?}: longer than 10 years")),
        Ok(d) if d.as_millis() == 0 => usage(format!("{flag} {raw:?}: must be at least 1ms")),
        Ok(d) => Ok(d),
        Err(()) => usage(format!(
            "{flag} {raw:?}: not a duration (e.g. 500ms, 30s, 1h30m, or 5 for seconds)"
        )),
    }
}

/// The entries of a comma-separated server list, split as the server
/// layer reads them ([`crate::server::split_list`]: a Sentinel's or a
/// cluster's host list, and a password written raw, keep their commas), so
/// that each entry's messages hide its whole password.
pub fn split_servers(raw: &str) -> Vec<&str> {
    crate::server::split_list(raw)
}

pub(super) fn parse_servers(label: &str, raw: &str) -> Result<Vec<ServerUrl>, Error> {
    if raw.trim().is_empty() {
        return usage(format!("{label}: no server given"));
    }
    split_servers(raw)
        .into_iter()
        .map(|part| {
            let part = part.trim();
            if part.is_empty() {
                return usage(format!("{label}: empty entry in the list"));
            }
            ServerUrl::parse(part).map_err(|e| Error::Usage(format!("{label}: {e}")))
        })
        .collect()
}

/// Each URL of the list once, as written: a server listed twice counts its
/// vote twice (the lock refuses such a fleet when it meets its own token
/// twice; this finds the verbatim case before any server is asked, for
/// every command). Two spellings of one server are found only by asking.
pub(super) fn listed_once(label: &str, raw: &str) -> Result<(), Error> {
    let entries: Vec<&str> = split_servers(raw).into_iter().map(str::trim).collect();
    for (i, entry) in entries.iter().enumerate() {
        if entries[..i].contains(entry) {
            return usage(format!(
                "{label}: {} is listed twice: list each server once (one server would vote twice)",
                crate::server::redact(entry)
            ));
        }
    }
    Ok(())
}

pub(super) fn on_lost(raw: &str) -> Result<OnLost, Error> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "ignore" => Ok(OnLost::Ignore),
        "kill" => Ok(OnLost::Signal(libc::SIGKILL)),
        _ => crate::signals::parse(raw).map(OnLost::Signal).ok_or_else(|| {
            Error::Usage(format!(
                "--on-lost {raw:?}: not a signal (e.g. TERM, SIGINT, 9), kill or ignore"
            ))
        }),
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any text is a positive duration or a usage error naming the flag.
        #[test]
        fn durations_never_panic(raw in "\\PC{0,40}") {
            match duration("--ttl", &raw) {
                Ok(d) => prop_assert!(d >= Duration::from_millis(1)),
                Err(Error::Usage(m)) => prop_assert!(m.starts_with("--ttl ")),
                Err(other) => prop_assert!(false, "{other:?}"),
            }
        }

        #[test]
        fn numbers_with_units_near_the_limits(n: u64, unit in "(ms|s|m|h|d|y)") {
            let raw = format!("{n}{unit}");
            let _ = duration("--wait", &raw);
            if let Ok(d) = ttl(&raw) {
                prop_assert!(d <= MAX_TTL && d >= Duration::from_millis(10));
            }
        }
    }
}
