//! `redlock status`: per-server view of a key, the holder a quorum agrees
//! on, and a verdict; exit 0 held, 1 free, 69 when too few servers answered
//! to tell (then the text says "unknown" and the JSON's `held` is null).
//! A `--limit` key lists every place: slot, token fingerprint, host, pid,
//! since, fence and TTL of each holder; the key is held when any place is.
//! What the servers hold was written by whoever can write to them: texts
//! that are no redlock token's checked fields go through
//! [`crate::text::printable`], the JSON through [`crate::text::json`].

use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use crate::error::Error;
use crate::exit;
use crate::history::Entry;
use crate::lock::{Fleet, ServerView, Status, describe_value};
use crate::queue::Waiter;
use crate::shared::SharedHolder;
use crate::token::{Mode, Token};

/// Reads the key everywhere and prints a table (or JSON) on stdout;
/// `limit` is how many places to read (`None`: as the holders' tokens say).
pub async fn status(fleet: &Fleet, key: &str, json: bool, limit: Option<u32>) -> Result<u8, Error> {
    let queue_keys = fleet.key_layout().queue_keys(key);
    let lists = crate::queue::list(fleet.servers(), key, &queue_keys);
    let history = crate::history::read(fleet, key, crate::history::MAX_ENTRIES);
    let (places, lists, votes, history) =
        tokio::join!(crate::slots::status(fleet, key, limit), lists, fleet.votes(), history);
    // The newest run that belonged to a tick (`run --once-per`).
    let last_tick = history.entries.iter().find(|e| e.tick().is_some());
    let queue = crate::queue::agreed(&lists, fleet.quorum());
    if places.is_empty() {
        return Err(Error::Usage("status: no place read".to_owned()));
    }
    let places = own_fences(places);
    // Shared holders ([`crate::shared`]) hold place 1 with the marker.
    let marked = places[0].1.servers.iter().any(
        |(_, v)| matches!(v, ServerView::Held { value, .. } if crate::shared::is_marker(value)),
    );
    let shared = if marked { crate::shared::holders(fleet, key).await } else { Vec::new() };
    // The place shown in the single-lock fields: the first held one.
    let first = &places[0].1;
    let status = places.iter().map(|(_, s)| s).find(|s| s.holder.is_some()).unwrap_or(first);
    let ended = ended_run(status, &history.entries);
    let text = if json {
        let mut out = render_json(key, status, &queue, ended.as_ref());
        if marked {
            // The marker is no token: the holders are listed one by one.
            out["holder"] = json!({
                "shared": true,
                "count": shared.len(),
                "token": null,
                "host": null,
                "pid": null,
                "acquired_at": null,
                "held_ms": null,
                "fence": status.fence,
            });
        }
        out["limit"] = json!(places.len());
        out["holders"] = if marked {
            json!(shared.iter().map(shared_json).collect::<Vec<_>>())
        } else {
            json!(places.iter().filter_map(|(n, s)| holder_json(*n, s)).collect::<Vec<_>>())
        };
        out["shared"] = json!(marked);
        out["last_tick"] = json!(last_tick.map(|e| json!({
            "tick": e.tick().map(|t| t.describe()),
            "host": e.host,
            "pid": e.pid,
            "exit_code": e.exit_code,
        })));
        // Why a server's grant would count towards no quorum now (`null`:
        // it would count).
        if let Some(servers) = out["servers"].as_array_mut() {
            for (entry, vote) in servers.iter_mut().zip(&votes) {
                entry["no_vote"] = json!(vote);
            }
        }
        crate::text::json(&out)
    } else if marked {
        render_shared(key, first, &shared, &queue)
    } else if places.len() == 1 {
        render_table(key, status, &queue, ended.as_ref())
    } else {
        render_places(key, &places, &queue)
    };
    let text = match last_tick.and_then(|e| Some((e, e.tick()?))) {
        Some((e, tick)) if !json => format!(
            "{text}\nlast tick: {} ran on {} (pid {}), {}",
            tick.describe(),
            crate::text::printable(&e.host),
            e.pid,
            e.describe_outcome()
        ),
        _ => text,
    };
    let text = fleet.servers().iter().zip(&votes).fold(text, |text, (server, vote)| match vote {
        Some(why) if !json => format!("{text}\n{}: no vote: {why}", server.name()),
        _ => text,
    });
    // A closed stdout (`| head -0`) loses only the report; the verdict is
    // the exit code. `guarded` catches a server's text quoted raw (an
    // error reply in the table).
    let _ = writeln!(std::io::stdout().lock(), "{}", crate::text::guarded(&text));
    let held = places.iter().any(|(_, s)| s.holder.is_some());
    match places.iter().find(|(_, s)| s.holder.is_none() && !s.known) {
        _ if held => Ok(exit::OK),
        None => Ok(exit::FREE_OR_WARNINGS),
        Some((_, unknown)) => Err(unknown.unknown(format!(
            "status {}: too few servers answered to tell held from free (quorum {})",
            crate::text::display_key(key.as_bytes()),
            unknown.quorum
        ))),
    }
}

/// The run that the holder's token took the lock for, when that run has
/// ended and the lock outlives it (`run --keep`): its history entry
/// ([`crate::history`]). `None` for a token of `acquire` or `--shared`, for
/// another client's value, while the run goes on, and when the history
/// cannot be read (servers without scripts).
fn ended_run(status: &Status, history: &[Entry]) -> Option<Entry> {
    let (value, _) = status.holder.as_ref()?;
    let token = value.parse::<Token>().ok()?;
    if token.caller || token.mode == Mode::Shared {
        return None;
    }
    history.iter().find(|e| e.token == *value).cloned()
}

/// When a run ended.
fn end_of(run: &Entry) -> std::time::SystemTime {
    run.start() + Duration::from_millis(run.duration_ms)
}

/// The places with each holder's fence only where it is known to be its
/// own. All places share the key's one counter ([`crate::slots`]), so the
/// counter a place's servers hold is the latest fence drawn for any place:
/// it is a holder's own fence only while that holder is the only one.
/// Each holder knows its own (`REDLOCK_FENCE`, `acquire --json`).
fn own_fences(mut places: Vec<(u32, Status)>) -> Vec<(u32, Status)> {
    if places.iter().filter(|(_, s)| s.holder.is_some()).count() > 1 {
        for (_, s) in &mut places {
            s.fence = None;
        }
    }
    places
}

/// A short, stable name for a token in tables: the first 8 hex digits of
/// its random part (of the value, for another client's, which may hold
/// anything: a table shows it through [`crate::text::printable`]).
fn fingerprint(value: &str) -> String {
    value.chars().take(8).collect()
}

/// One place's holder for `--json`, when the place is held.
fn holder_json(slot: u32, status: &Status) -> Option<serde_json::Value> {
    let (value, ttl) = status.holder.as_ref()?;
    let token = value.parse::<Token>().ok();
    Some(json!({
        "slot": slot,
        "token": value,
        "fingerprint": fingerprint(value),
        "host": token.as_ref().map(|t| t.host.clone()),
        "pid": token.as_ref().map(|t| t.pid),
        "caller": token.as_ref().map(|t| t.caller),
        "acquired_at": token.as_ref().map(|t| humantime::format_rfc3339_millis(t.created()).to_string()),
        "note": token.as_ref().and_then(|t| t.note.clone()),
        "job": token.as_ref().and_then(|t| t.job.clone()),
        "freeze_until": token.as_ref().and_then(freeze_until),
        "fence": status.fence,
        "ttl_ms": ttl_ms(*ttl),
    }))
}

/// When the freeze a token holds ends (`redlock hold`), as every line
/// shows it ([`crate::lock::freeze_instant`]); `None`: no freeze.
fn freeze_until(t: &Token) -> Option<String> {
    t.until.map(crate::lock::freeze_instant)
}

/// One shared holder for `--json`.
fn shared_json(h: &SharedHolder) -> serde_json::Value {
    let token = h.token.parse::<Token>().ok();
    json!({
        "slot": null,
        "shared": true,
        "token": h.token,
        "fingerprint": fingerprint(&h.token),
        "host": token.as_ref().map(|t| t.host.clone()),
        "pid": token.as_ref().map(|t| t.pid),
        "caller": token.as_ref().map(|t| t.caller),
        "acquired_at": token.as_ref().map(|t| humantime::format_rfc3339_millis(t.created()).to_string()),
        "note": token.as_ref().and_then(|t| t.note.clone()),
        "job": token.as_ref().and_then(|t| t.job.clone()),
        "fence": null,
        "ttl_ms": crate::text::millis(h.ttl),
    })
}

/// The table of a key held shared: the per-server view of the lock key
/// (the marker), then one row per shared holder.
fn render_shared(key: &str, status: &Status, holders: &[SharedHolder], queue: &[Waiter]) -> String {
    let mut out = render_table(key, status, queue, None);
    out.push_str(&format!("\n{} shared holder(s):", holders.len()));
    for h in holders {
        out.push_str(&format!(
            "\nshared  {}  {}, {} left",
            crate::text::printable(&fingerprint(&h.token)),
            describe_value(&h.token),
            crate::text::fmt_duration(h.ttl)
        ));
    }
    out
}

/// The table of a `--limit` key: one row per place.
fn render_places(key: &str, places: &[(u32, Status)], queue: &[Waiter]) -> String {
    let header = ["SLOT", "TOKEN", "HOST", "PID", "SINCE", "FENCE", "TTL"];
    let rows: Vec<[String; 7]> = places
        .iter()
        .map(|(slot, s)| match &s.holder {
            Some((value, ttl)) => {
                let token = value.parse::<Token>().ok();
                [
                    slot.to_string(),
                    crate::text::printable(&fingerprint(value)).into_owned(),
                    token.as_ref().map_or_else(|| "?".to_owned(), |t| t.host.clone()),
                    token.as_ref().map_or_else(|| "?".to_owned(), |t| t.pid.to_string()),
                    token.as_ref().map_or_else(
                        || "?".to_owned(),
                        |t| humantime::format_rfc3339_seconds(t.created()).to_string(),
                    ),
                    s.fence.map_or_else(|| "-".to_owned(), |f| f.to_string()),
                    ttl_text(*ttl),
                ]
            }
            None => {
                let state = if s.known { "free" } else { "unknown" };
                [
                    slot.to_string(),
                    state.to_owned(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ]
            }
        })
        .collect();
    let mut out = super::table::render(header, &rows);
    let held = places.iter().filter(|(_, s)| s.holder.is_some()).count();
    let quorum = places.first().map_or(0, |(_, s)| s.quorum);
    let total = places.first().map_or(0, |(_, s)| s.servers.len());
    out.push_str(&format!(
        "{}: {held} of {} places of {} held (each on a quorum of {quorum} of {total} servers)",
        if held > 0 { "held" } else { "free" },
        places.len(),
        crate::text::display_key(key.as_bytes()),
    ));
    out.push_str(&queue_lines(queue));
    out
}

/// A line for each queued waiter, each after a newline: who waits, where
/// it runs (its CI job, its note), since when.
fn queue_lines(queue: &[Waiter]) -> String {
    let mut out = String::new();
    for (i, w) in queue.iter().enumerate() {
        let (host, pid, since) = waiter_facts(w);
        let whereabouts = w
            .member
            .parse::<Token>()
            .map_or_else(|_| String::new(), |t| crate::lock::whereabouts(&t));
        out.push_str(&format!(
            "\nqueued {}: {} pid {}{whereabouts}, waiting since {since}",
            i + 1,
            host.as_deref().unwrap_or("?"),
            pid.map_or_else(|| "?".to_owned(), |p| p.to_string())
        ));
    }
    out
}

fn ttl_text(ttl: Option<Duration>) -> String {
    ttl.map_or_else(|| "no expiry".to_owned(), crate::text::fmt_duration)
}

fn ttl_ms(ttl: Option<Duration>) -> serde_json::Value {
    ttl.map_or(serde_json::Value::Null, |d| json!(crate::text::millis(d)))
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

fn render_table(key: &str, status: &Status, queue: &[Waiter], ended: Option<&Entry>) -> String {
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
    let mut out = super::table::render(["SERVER", "STATE", "TTL", "HOLDER"], &rows);
    let shown = crate::text::display_key(key.as_bytes());
    let total = status.servers.len();
    match &status.holder {
        Some((value, ttl)) => {
            let on = status
                .servers
                .iter()
                .filter(|(_, v)| matches!(v, ServerView::Held { value: h, .. } if h == value))
                .count();
            let fence = status.fence.map_or_else(String::new, |f| format!(", fence {f}"));
            match (ended, ttl) {
                // Its process has ended: say what keeps the lock, and until when.
                (Some(run), Some(left)) => out.push_str(&format!(
                    "held: {shown} is kept by --keep until {} ({} left): the run of {} pid {} \
                     ended at {} ({}); on {on}/{total} servers (quorum {}){fence}",
                    humantime::format_rfc3339_seconds(std::time::SystemTime::now() + *left),
                    crate::text::fmt_duration(*left),
                    crate::text::printable(&run.host),
                    run.pid,
                    humantime::format_rfc3339_seconds(end_of(run)),
                    run.describe_outcome(),
                    status.quorum,
                )),
                _ => out.push_str(&format!(
                    "held: {shown} is held by {} on {on}/{total} servers (quorum {}), {} left{fence}",
                    describe_value(value),
                    status.quorum,
                    ttl_text(*ttl),
                )),
            }
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
    out.push_str(&queue_lines(queue));
    out
}

fn render_json(
    key: &str,
    status: &Status,
    queue: &[Waiter],
    ended: Option<&Entry>,
) -> serde_json::Value {
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
    let holder = status.holder.as_ref().map(|(value, ttl)| {
        let token = value.parse::<Token>().ok();
        let here = token.as_ref().filter(|t| t.host == crate::token::hostname());
        json!({
            "token": value,
            "host": token.as_ref().map(|t| t.host.clone()),
            "pid": token.as_ref().map(|t| t.pid),
            // The pid is the caller of `redlock acquire` (which holds the
            // token), not a redlock process.
            "caller": token.as_ref().map(|t| t.caller),
            // Whether that process is gone; null on another host.
            "process_ended": here.map(crate::lock::process_ended),
            "acquired_at": token.as_ref().map(|t| humantime::format_rfc3339_millis(t.created()).to_string()),
            "held_ms": token.as_ref().map(|t| crate::text::millis(t.held_for())),
            // Where it runs: its `--note`, its CI job.
            "note": token.as_ref().and_then(|t| t.note.clone()),
            "job": token.as_ref().and_then(|t| t.job.clone()),
            // A freeze's end (`redlock hold`), null for any other holder.
            "freeze_until": token.as_ref().and_then(freeze_until),
            "freeze_until_ms": token.as_ref().and_then(|t| t.until),
            "fence": status.fence,
            // The run the lock outlives (`--keep`), and until when.
            "run_ended": ended.map(|run| json!({
                "at": humantime::format_rfc3339_millis(end_of(run)).to_string(),
                "outcome": run.describe_outcome(),
                "exit_code": run.exit_code,
            })),
            "kept_until": ended.zip(*ttl).map(|(_, left)| {
                humantime::format_rfc3339_millis(std::time::SystemTime::now() + left).to_string()
            }),
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
            let token = w.member.parse::<Token>().ok();
            json!({
                "position": i + 1,
                "host": host,
                "pid": pid,
                "waiting_since": since,
                "note": token.as_ref().and_then(|t| t.note.clone()),
                "job": token.and_then(|t| t.job),
            })
        }).collect::<Vec<_>>(),
    })
}
