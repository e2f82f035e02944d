//! `redlock history`: the last runs of a lock, merged from every server
//! ([`crate::history`] states the rule), newest first, and the skips.
//! Exit 0; 69 when fewer than a quorum answered (what they had is still
//! printed, as it may lack runs recorded only on the others). Whoever can
//! write to the servers wrote what it prints: every text of an entry goes
//! through [`crate::text::printable`] (the JSON through [`crate::text::json`]).

use std::io::Write;

use serde_json::json;

use crate::error::Error;
use crate::exit;
use crate::history::{self, Entry, History, Skips};
use crate::lock::Fleet;
use crate::text::printable;

/// Reads and prints the newest `count` runs of `key`.
pub async fn history(fleet: &Fleet, key: &str, count: usize, json: bool) -> Result<u8, Error> {
    let found = history::read(fleet, key, count).await;
    let text =
        if json { crate::text::json(&render_json(key, &found)) } else { render_table(key, &found) };
    // A closed stdout loses only the report.
    let _ = writeln!(std::io::stdout().lock(), "{}", crate::text::guarded(&text));
    if found.known() { Ok(exit::OK) } else { Err(found.unavailable(key)) }
}

fn time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

fn render_table(key: &str, found: &History) -> String {
    let header = ["START", "TICK", "HOST", "PID", "HELD", "OUTCOME", "FENCE", "WHERE"];
    let rows: Vec<[String; 8]> = found
        .entries
        .iter()
        .map(|e: &Entry| {
            [
                time(e.start_ms),
                e.tick().map_or_else(|| "-".to_owned(), |t| t.describe()),
                printable(&e.host).into_owned(),
                e.pid.to_string(),
                crate::text::fmt_duration(std::time::Duration::from_millis(e.duration_ms)),
                e.describe_outcome(),
                e.fence.map_or_else(|| "-".to_owned(), |f| f.to_string()),
                whereabouts(e),
            ]
        })
        .collect();
    let shown = crate::text::display_key(key.as_bytes());
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str(&format!("no runs of {shown} recorded\n"));
    } else {
        out.push_str(&super::table::render(header, &rows));
    }
    match &found.skips {
        Some(s) => out.push_str(&format!(
            "skips: {} since {}; the last at {} on {}: {}",
            s.count,
            time(s.since_ms),
            time(s.last_ms),
            printable(&s.last_host),
            printable(&s.last_holder)
        )),
        None => out.push_str("skips: none recorded"),
    }
    if !found.known() {
        out.push_str(&format!(
            "\nincomplete: only {} of {} servers answered (quorum {})",
            found.answered, found.total, found.quorum
        ));
    }
    out
}

/// Where a run ran: its CI job and its note (quoted), or `-`.
fn whereabouts(e: &Entry) -> String {
    let job = e.job.iter().map(|j| printable(j).into_owned());
    let parts: Vec<String> =
        job.chain(e.note.iter().map(|n| format!("\"{}\"", printable(n)))).collect();
    if parts.is_empty() { "-".to_owned() } else { parts.join(" ") }
}

fn skips_json(s: &Skips) -> serde_json::Value {
    json!({
        "count": s.count,
        "since": time(s.since_ms),
        "last_at": time(s.last_ms),
        "last_host": s.last_host,
        "last_holder": s.last_holder,
    })
}

fn render_json(key: &str, found: &History) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = found
        .entries
        .iter()
        .map(|e| {
            let mut v = json!(e);
            v["start"] = json!(time(e.start_ms));
            if let Some(tick) = e.tick() {
                v["tick"] = json!(tick.describe());
            }
            // A freeze's gap is no run: null, neither success nor failure.
            v["succeeded"] = json!(e.succeeded());
            // A freeze's gap: when the freeze took the key back.
            if !e.is_run() {
                v["end"] = json!(time(e.start_ms.saturating_add(e.duration_ms)));
            }
            v
        })
        .collect();
    json!({
        "key": key,
        "entries": entries,
        "skips": found.skips.as_ref().map(skips_json),
        "complete": found.known(),
        "servers_answered": found.answered,
        "quorum": found.quorum,
    })
}
