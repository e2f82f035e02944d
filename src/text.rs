//! Small text helpers every layer uses: durations and keys for people,
//! durations in whole milliseconds for Redis and JSON, and the one rule
//! for text that came from elsewhere (a server, the environment) on its
//! way to a terminal ([`printable`], [`json`]).

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

/// True for a character that must not reach a terminal as it is: a
/// control character (C0, DEL, C1: a terminal acts on `ESC [`, `CSI`,
/// `OSC`...) or an invisible formatting character that reorders or hides
/// the text around it (the bidirectional overrides, embeddings and
/// isolates, U+061C, U+200E/F; the zero-width characters; U+2028/9,
/// which some terminals take for a line break).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}')
        || matches!(c, '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// Text that came from elsewhere (a server, a token, the environment) as
/// a message or a table shows it: every [`is_unsafe`] character and `\`
/// written as Rust writes them (`\n`, `\u{1b}`, `\u{202e}`, `\\`), so the
/// line is one line, shows every character and moves no cursor. The
/// escapes are unambiguous: a `\` in the text is always shown doubled.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    escape_where(text, |c| c == '\\' || is_unsafe(c))
}

/// A message on its way to a terminal, checked once more: every
/// [`is_unsafe`] character but the newline written as [`printable`]
/// writes it, nothing else changed, so a message built from
/// [`printable`] parts is left as it is. It catches a part that should
/// have gone through [`printable`] and did not (a server's error reply
/// quoted in a message).
pub fn guarded(message: &str) -> std::borrow::Cow<'_, str> {
    escape_where(message, |c| c != '\n' && is_unsafe(c))
}

/// `text` with the characters `escape` picks written as Rust writes them.
fn escape_where(text: &str, escape: impl Fn(char) -> bool) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(&escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escape(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `value` as one line of JSON for a terminal: serde's text, with every
/// [`is_unsafe`] character it leaves as it is (DEL, C1, the formatting
/// characters; it escapes only those below U+0020) written `\uXXXX`. Such
/// characters occur only inside strings, where the escape is the same
/// string to any JSON parser: a script reads the text as stored.
pub fn json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    if !text.chars().any(is_unsafe) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A key (or value) for messages: [`printable`], on one line, at most 80
/// characters.
pub fn display_key(key: &[u8]) -> String {
    let text = printable(&String::from_utf8_lossy(key)).into_owned();
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

    #[test]
    fn text_from_elsewhere_reaches_no_terminal_raw() {
        assert_eq!(printable("web-1 \"é\" ünï"), "web-1 \"é\" ünï");
        assert_eq!(printable("a\u{1b}[31mb\u{9b}c\u{7f}"), "a\\u{1b}[31mb\\u{9b}c\\u{7f}");
        assert_eq!(
            printable("exe\u{202e}txt\u{2066}\u{200b}"),
            "exe\\u{202e}txt\\u{2066}\\u{200b}"
        );
        assert_eq!(printable("a\\u{1b}\n"), "a\\\\u{1b}\\n", "a written escape is no escape");
        assert_eq!(guarded("k: a\\b \u{1b}[2J\u{202e}\nnext"), "k: a\\b \\u{1b}[2J\\u{202e}\nnext");
        let parts = printable("x\\\u{1b}");
        assert_eq!(guarded(&parts), parts, "a printable message is left as it is");
        let value = serde_json::json!({ "host": "w\u{1b}\u{9b}\u{202e}\u{7f}é\"\\" });
        let line = json(&value);
        assert!(!line.chars().any(is_unsafe), "{line}");
        assert!(line.contains("\\u001b\\u009b\\u202e\\u007fé"), "{line}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&line).ok(), Some(value));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn no_text_reaches_a_terminal_raw_and_json_keeps_it_whole(text in "\\PC*|.*|[\\x00-\\x{9f}\\x{2000}-\\x{206f}\\x{feff}]{0,40}") {
            prop_assert!(!printable(&text).chars().any(is_unsafe));
            let value = serde_json::json!({ "text": text });
            let line = json(&value);
            prop_assert!(!line.chars().any(is_unsafe), "{}", line);
            prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&line).ok(), Some(value));
        }
    }
}
