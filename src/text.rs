//! Small text helpers every layer uses: durations and keys for people,
//! durations in whole milliseconds for Redis and JSON.

use std::time::Duration;

/// A duration for people: `850ms`, `12.3s`, `5m 3s`.
pub fn fmt_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

/// Milliseconds to the microsecond (three decimals), for the JSON that
/// shows fractions of a millisecond: `1.401`, not `1.4009639999999999`.
pub fn ms_f64(d: Duration) -> f64 {
    round_ms(d.as_secs_f64() * 1000.0)
}

/// A number of milliseconds rounded to the microsecond ([`ms_f64`]).
pub fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// Whole milliseconds, as Redis and the JSON events want them (saturating;
/// TTLs are validated far below the limit).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A key (or value) for messages: one line, control characters escaped,
/// at most 80 characters.
pub fn display_key(key: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(key).escape_debug().collect();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_for_people() {
        assert_eq!(fmt_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(fmt_duration(Duration::from_millis(12_345)), "12.3s");
        assert_eq!(fmt_duration(Duration::from_secs(303)), "5m 3s");
        assert_eq!(display_key(b"a\nb"), "a\\nb");
        assert_eq!(display_key(&[b'x'; 100]).chars().count(), 81);
    }
}
