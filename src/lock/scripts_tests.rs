//! The constants the scripts of `src/scripts/` share with the Rust side,
//! checked: Lua cannot import a Rust constant, so each script spells the
//! number or the word again, and these tests read the scripts and fail when
//! one side changes without the other. The Rust side is the source: a test
//! names the constant, the script line must show its value.

#![cfg(test)]

use super::ops::{Numbers, Untaken};
use super::{RECORD_LIFE, TICK_MARGIN, WAKE_TAG, release_channel, wake_channel};
use crate::text::millis;
use crate::token::{Mode, SHARED_MARKER, Token};

/// Every script of `src/scripts/`, by file name, read when the test runs
/// (a script added later is checked too).
fn scripts() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scripts");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("src/scripts is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "lua"))
        .map(|p| {
            let name = p.file_name().expect("a file name").to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("a script is text"))
        })
        .collect();
    out.sort();
    assert!(out.len() >= 10, "found only {out:?} in {}", dir.display());
    out
}

/// The script as the servers get it (build.rs): no whole-line comment.
fn code(lua: &str) -> String {
    lua.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n")
}

/// The code of one script of `src/scripts/`.
fn script(name: &str) -> String {
    let (_, text) = scripts().into_iter().find(|(n, _)| n == name).expect("the script exists");
    code(&text)
}

/// The single-quoted string literals of Lua code, in order.
fn lua_literals(code: &str) -> Vec<&str> {
    code.split('\'').skip(1).step_by(2).collect()
}

/// The double-quoted string literals of Rust code, in order (no raw
/// strings, no escaped quote: enough for the files read here).
fn rust_literals(code: &str) -> Vec<&str> {
    code.split('"').skip(1).step_by(2).collect()
}

/// Rust code without its `//` comments.
fn rust_code(source: &str) -> String {
    let strip = |l: &str| l.split_once("//").map_or(l, |(code, _)| code).to_owned();
    source.lines().map(strip).collect::<Vec<_>>().join("\n")
}

/// The text inside each call that starts with `head` (up to its matching
/// closing parenthesis).
fn calls<'a>(code: &'a str, head: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(head) {
        let rest = &code[at + head.len()..];
        let mut depth = 1;
        for (i, c) in rest.char_indices() {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            if depth == 0 {
                out.push(&rest[..i]);
                break;
            }
        }
    }
    out
}

/// A literal that names a field: lowercase letters only.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase())
}

/// The grant record's lifetimes: [`RECORD_LIFE`] without a tick, and
/// [`TICK_MARGIN`] past the tick's end with one (`noscript.rs` computes
/// the same from the constants).
#[test]
fn the_record_lives_record_life_and_tick_margin_as_in_rust() {
    let line = format!(
        "redis.call('PEXPIRE', record, math.max({}, tonumber(te) - now + {}))",
        millis(RECORD_LIFE),
        millis(TICK_MARGIN)
    );
    assert!(script("acquire.lua").contains(&line), "acquire.lua lacks {line:?}");
}

/// The value the lock key holds for shared holders is
/// [`SHARED_MARKER`] in every script that writes or compares it, and no
/// script spells another marker-like word.
#[test]
fn every_script_spells_the_shared_marker_as_token_rs() {
    let tag = shared_waiter_tag();
    let mut users = Vec::new();
    for (name, text) in scripts() {
        let code = code(&text);
        for literal in lua_literals(&code) {
            let marker_like = literal.contains("shared") || literal.starts_with("redlock");
            assert!(
                !marker_like || literal == SHARED_MARKER || literal == tag,
                "{name}: '{literal}' is neither token::SHARED_MARKER ({SHARED_MARKER:?}) nor the \
                 shared waiter's tag ({tag:?})"
            );
            if literal == SHARED_MARKER {
                users.push(name.clone());
            }
        }
    }
    users.dedup();
    for name in [
        "acquire.lua",
        "extend.lua",
        "release.lua",
        "set_ttl.lua",
        "shared_extend.lua",
        "shared_force.lua",
        "shared_status.lua",
        "withdraw.lua",
    ] {
        assert!(users.iter().any(|u| u == name), "{name} no longer names {SHARED_MARKER:?}");
    }
}

/// The word acquire.lua finds a shared waiter's queue member by.
fn shared_waiter_tag() -> String {
    let code = script("acquire.lua");
    let found = calls(&code, "string.find(m, ");
    let [args] = found.as_slice() else { panic!("one string.find in acquire.lua: {found:?}") };
    lua_literals(args).first().expect("a literal pattern").to_string()
}

/// acquire.lua tells a shared waiter by a word its queue member carries
/// and no other member can: the token's text for `--shared`.
#[test]
fn the_shared_waiter_tag_is_in_shared_members_only() {
    let tag = shared_waiter_tag();
    assert!(crate::queue::entry(Mode::Shared, None, None).to_string().contains(&tag), "{tag:?}");
    for member in [
        crate::queue::entry(Mode::Exclusive, None, None),
        Token::new(),
        Token { mode: Mode::Place { slot: 2, limit: 3 }, ..Token::new() },
        Token::new().with_note(Some(format!("x{tag}y")), None),
    ] {
        assert!(!member.to_string().contains(&tag), "{member} carries {tag:?}");
    }
}

/// announce.lua publishes on the channel [`wake_channel`] names: the
/// release channel, a newline and the member's first [`WAKE_TAG`]
/// characters.
#[test]
fn the_wake_channel_is_the_announcement_scripts() {
    let line = format!(
        "redis.pcall('PUBLISH', channel .. '\\n' .. string.sub(first, 1, {WAKE_TAG}), message)"
    );
    assert!(script("announce.lua").contains(&line), "announce.lua lacks {line:?}");
    let member = "0123456789abcdef";
    assert_eq!(
        wake_channel("k", member),
        format!("{}\n{}", release_channel("k"), &member[..WAKE_TAG])
    );
}

/// acquire.lua unpacks as many doubles as [`Numbers::pack`] writes, and
/// names as many locals.
#[test]
fn the_acquire_numbers_are_as_many_as_rust_packs() {
    let code = script("acquire.lua");
    let found = calls(&code, "struct.unpack(");
    let [args] = found.as_slice() else { panic!("one struct.unpack in acquire.lua: {found:?}") };
    let format = lua_literals(args)[0];
    let doubles = format.strip_prefix('<').expect("little-endian").len();
    assert_eq!(format, format!("<{}", "d".repeat(doubles)));
    let assigned = code.split("struct.unpack(").next().expect("text before");
    let locals = assigned.rsplit("local ").next().expect("the locals").split(',').count();
    assert_eq!(locals, doubles, "locals named for {format}");
    let numbers = Numbers {
        ttl_ms: 1,
        proposal: None,
        window_us: 0,
        life_ms: 1,
        join: false,
        order: false,
        queue_life_ms: 0,
        since_ms: 0,
        skew_ms: 0,
        places: 1,
        shared: false,
        untaken: Untaken::Off,
        tick: None,
    };
    assert_eq!(numbers.pack().len(), 8 * doubles);
}

/// The grant record's fields: the scripts (acquire.lua, put_back.lua) and
/// the plain-command path (`noscript.rs`, which spells them as literals)
/// read and write the same names, and each `HMGET` of `noscript.rs` reads
/// the fields in the order of one of the scripts' (both decode by place).
#[test]
fn the_record_fields_are_noscript_rs_s() {
    let mut lua_names = Vec::new();
    let mut lua_reads = Vec::new();
    for name in ["acquire.lua", "put_back.lua"] {
        let code = script(name);
        for call in ["redis.call(", "redis.pcall("] {
            for args in calls(&code, call) {
                let Some(fields) = args
                    .strip_prefix("'HMGET', record, ")
                    .or_else(|| args.strip_prefix("'HSET', record, "))
                else {
                    continue;
                };
                let names: Vec<String> = lua_literals(fields)
                    .into_iter()
                    .filter(|s| is_name(s))
                    .map(str::to_owned)
                    .collect();
                if args.starts_with("'HMGET'") {
                    lua_reads.push(names.clone());
                }
                lua_names.extend(names);
            }
        }
    }
    let rust = rust_code(include_str!("noscript.rs"));
    let mut rust_names = Vec::new();
    let mut rust_reads = Vec::new();
    // `.arg("name")` and every array of literals (`["at", "tok"]`).
    for piece in rust.split(".arg(\"").skip(1) {
        rust_names.extend(piece.split('"').next().filter(|s| is_name(s)).map(str::to_owned));
    }
    for piece in rust.split('[').skip(1) {
        let Some((inside, _)) = piece.split_once(']') else { continue };
        let literals = rust_literals(inside);
        if literals.is_empty() || !inside.trim().starts_with('"') {
            continue;
        }
        rust_names.extend(literals.into_iter().filter(|s| is_name(s)).map(str::to_owned));
    }
    for piece in rust.split("cmd(\"HMGET\")").skip(1) {
        let list = piece.split_once(".arg(&[").and_then(|(_, r)| r.split_once(']'));
        let (inside, _) = list.expect("an HMGET's fields as `.arg(&[...])`");
        rust_reads.push(rust_literals(inside).into_iter().map(str::to_owned).collect::<Vec<_>>());
    }
    for names in [&mut lua_names, &mut rust_names] {
        names.sort_unstable();
        names.dedup();
    }
    assert!(lua_names.iter().any(|n| n == "sch") && lua_names.len() >= 10, "{lua_names:?}");
    assert_eq!(lua_names, rust_names, "record fields: scripts (left), noscript.rs (right)");
    assert!(!rust_reads.is_empty());
    for read in rust_reads {
        assert!(lua_reads.contains(&read), "noscript.rs reads {read:?}; the scripts {lua_reads:?}");
    }
}

/// shared_extend.lua's exact setting (`run --keep`) is the word hold.rs
/// sends.
#[test]
fn the_exact_word_is_hold_rs_s() {
    let code = script("shared_extend.lua");
    let words: Vec<&str> =
        code.split("ARGV[4] == '").skip(1).filter_map(|r| r.split('\'').next()).collect();
    assert!(
        !words.is_empty() && words.iter().all(|w| *w == "exact"),
        "shared_extend.lua: {words:?}"
    );
    assert!(
        rust_code(include_str!("hold.rs")).contains("if exact { \"exact\" } else { \"\" }"),
        "hold.rs sends another word for an exact setting"
    );
}

/// The skips hash: every field `history/mod.rs` reads (`"name" =>`), and every
/// kind name it writes (`=> "name"`), is one skip.lua spells.
#[test]
fn the_skip_fields_history_rs_reads_are_skip_lua_s() {
    let lua = script("skip.lua");
    let written = lua_literals(&lua);
    let rust = rust_code(include_str!("../history/mod.rs"));
    let mut named = Vec::new();
    for (at, _) in rust.match_indices("\" =>") {
        let before = &rust[..at];
        named.extend(before.rsplit('"').next().filter(|s| is_name(s)));
    }
    for piece in rust.split("=> \"").skip(1) {
        named.extend(piece.split('"').next().filter(|s| is_name(s)));
    }
    named.sort_unstable();
    named.dedup();
    assert!(named.contains(&"count") && named.contains(&"unavailable"), "{named:?}");
    for name in named {
        assert!(
            written.contains(&name),
            "history/mod.rs reads the skips field or kind {name:?}; skip.lua never writes it"
        );
    }
}
