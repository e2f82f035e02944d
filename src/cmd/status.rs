//! `redlock status`: per-server view of a key, the holder a quorum agrees
//! on, and a verdict; exit 0 held, 1 free, 69 when too few servers answered
//! to tell (then the text says "unknown" and the JSON's `held` is null).

use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use crate::error::Error;
use crate::exit;
use crate::lock::{Fleet, ServerView, Status, describe_value};
use crate::queue::Waiter;
use crate::token::Token;

/// Reads the key everywhere and prints a table (or JSON) on stdout.
pub async fn status(fleet: &Fleet, key: &str, json: bool) -> Result<u8, Error> {
    let queue_keys = fleet.key_layout().queue_keys(key);
    let lists = crate::queue::list(fleet.servers(), key, &queue_keys);
    let (status, lists) = tokio::join!(fleet.status(key), lists);
    let queue = crate::queue::agreed(&lists, fleet.quorum());
    let text = if json {
        render_json(key, &status, &queue).to_string()
    } else {
        render_table(key, &status, &queue)
    };
    // A closed stdout (`| head -0`) loses only the report; the verdict is the exit code.
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    match (&status.holder, status.known) {
        (Some(_), _) => Ok(exit::OK),
        (None, true) => Ok(exit::FREE_OR_WARNINGS),
        (None, false) => Err(status.unknown(format!(
            "status {}: too few servers answered to tell held from free (quorum {})",
            crate::display_key(key.as_bytes()),
            status.quorum
        ))),
    }
}

fn ttl_text(ttl: Option<Duration>) -> String {
    ttl.map_or_else(|| "no expiry".to_owned(), crate::fmt_duration)
}

fn ttl_ms(ttl: Option<Duration>) -> serde_json::Value {
    ttl.map_or(serde_json::Value::Null, |d| json!(crate::millis(d)))
}

/// One queued waiter's facts: host, pid (from its token-shaped entry) and
/// since when it waits.
fn waiter_facts(w: &Waiter) -> (Option<String>, Option<u32>, String) {
    let token = w.member.parse::<Token>().ok();
    let since = UNIX_EPOCH + Duration::from_millis(w.since_ms);
    (
        token.as_ref().map(|t| t.host.clone()),
        token.as_ref().map(|t| t.pid),
        humantime::format_rfc3339_millis(since).to_string(),
    )
}

fn render_table(key: &str, status: &Status, queue: &[Waiter]) -> String {
    let rows: Vec<[String; 4]> = status
        .servers
        .iter()
        .map(|(name, view)| match view {
            ServerView::Held { value, ttl, .. } => {
                [name.clone(), "held".into(), ttl_text(*ttl), describe_value(value)]
            }
            ServerView::Free => [name.clone(), "free".into(), "-".into(), "-".into()],
            ServerView::Error(e) => {
                [name.clone(), "error".into(), "-".into(), e.failure.to_string()]
            }
        })
        .collect();
    let header = ["SERVER".to_owned(), "STATE".into(), "TTL".into(), "HOLDER".into()];
    let width = |i: usize| rows.iter().chain([&header]).map(|r| r[i].len()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let mut out = String::new();
    for r in std::iter::once(&header).chain(&rows) {
        out.push_str(&format!("{:w0$}  {:w1$}  {:w2$}  {}\n", r[0], r[1], r[2], r[3]));
    }
    let shown = crate::display_key(key.as_bytes());
    let total = status.servers.len();
    match &status.holder {
        Some((value, ttl)) => {
            let on = status
                .servers
                .iter()
                .filter(|(_, v)| matches!(v, ServerView::Held { value: h, .. } if h == value))
                .count();
            out.push_str(&format!(
                "held: {shown} is held by {} on {on}/{total} servers (quorum {}), {} left{}",
                describe_value(value),
                status.quorum,
                ttl_text(*ttl),
                status.fence.map_or_else(String::new, |f| format!(", fence {f}"))
            ));
        }
        None if status.known => {
            // Values on a minority each: contenders mid-attempt, or the
            // votes of one that crashed, never a holder.
            let mut votes: Vec<(&str, usize)> = Vec::new();
            for (_, view) in &status.servers {
                if let ServerView::Held { value, .. } = view {
                    match votes.iter_mut().find(|(v, _)| v == value) {
                        Some((_, n)) => *n += 1,
                        None => votes.push((value, 1)),
                    }
                }
            }
            out.push_str(&format!(
                "free: {shown} is not held (a holder needs {} of the {total} servers)",
                status.quorum
            ));
            if !votes.is_empty() {
                let counts: Vec<String> = votes.iter().map(|(_, n)| n.to_string()).collect();
                out.push_str(&format!(
                    "; contended by {} token(s) without a quorum ({} server(s))",
                    votes.len(),
                    counts.join(", ")
                ));
            }
        }
        None => {
            let answered =
                status.servers.iter().filter(|(_, v)| !matches!(v, ServerView::Error(_))).count();
            out.push_str(&format!(
                "unknown: only {answered} of {total} servers answered, too few to tell held from free (quorum {})",
                status.quorum
            ));
        }
    }
    for (i, w) in queue.iter().enumerate() {
        let (host, pid, since) = waiter_facts(w);
        out.push_str(&format!(
            "\nqueued {}: {} pid {}, waiting since {since}",
            i + 1,
            host.as_deref().unwrap_or("?"),
            pid.map_or_else(|| "?".to_owned(), |p| p.to_string())
        ));
    }
    out
}

fn render_json(key: &str, status: &Status, queue: &[Waiter]) -> serde_json::Value {
    let servers: Vec<serde_json::Value> = status
        .servers
        .iter()
        .map(|(name, view)| match view {
            ServerView::Held { ttl, .. } => {
                json!({ "server": name, "state": "held", "ttl_ms": ttl_ms(*ttl), "error": null })
            }
            ServerView::Free => {
                json!({ "server": name, "state": "free", "ttl_ms": null, "error": null })
            }
            ServerView::Error(e) => json!({
                "server": name, "state": "error", "ttl_ms": null, "error": e.failure.to_string()
            }),
        })
        .collect();
    let holder = status.holder.as_ref().map(|(value, _)| {
        let token = value.parse::<Token>().ok();
        json!({
            "token": value,
            "host": token.as_ref().map(|t| t.host.clone()),
            "pid": token.as_ref().map(|t| t.pid),
            "acquired_at": token.as_ref().map(|t| humantime::format_rfc3339_millis(t.created()).to_string()),
            "held_ms": token.as_ref().map(|t| crate::millis(t.held_for())),
            "fence": status.fence,
        })
    });
    // `held` is null when too few servers answered to tell: a script that
    // reads `.held` must not take "unknown" for "free".
    let held = if status.holder.is_some() || status.known {
        json!(status.holder.is_some())
    } else {
        serde_json::Value::Null
    };
    json!({
        "key": key,
        "held": held,
        "quorum": status.quorum,
        "ttl_ms": status.holder.as_ref().map_or(serde_json::Value::Null, |(_, ttl)| ttl_ms(*ttl)),
        "holder": holder,
        "servers": servers,
        "queue": queue.iter().enumerate().map(|(i, w)| {
            let (host, pid, since) = waiter_facts(w);
            json!({ "position": i + 1, "host": host, "pid": pid, "waiting_since": since })
        }).collect::<Vec<_>>(),
    })
}
