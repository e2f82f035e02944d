//! `redlock release`: give a lock back with its token, or delete it whoever
//! holds it with `--force` (a value that is not a redlock token only with
//! `--force-any-value`). `--force` frees every place of a `--limit` key
//! ([`crate::slots::force_release`]).

use crate::error::Error;
use crate::exit;
use crate::lock::{Fleet, Held};
use crate::lock::{ServerView, describe_value};
use crate::output::{Level, Log};
use crate::token::SHARED_MARKER;

/// Releases the lock; `token: None` forces, and `any_value` deletes even a
/// value that redlock did not write; `limit` says how many places to free
/// (`None`: as many as the holders' tokens say).
pub async fn release(
    fleet: &Fleet,
    key: &str,
    token: Option<&str>,
    any_value: bool,
    limit: Option<u32>,
    log: &Log,
) -> Result<u8, Error> {
    match token {
        Some(token) => {
            // A token given on the command line: a shared holder's says so.
            let servers = fleet.release(key, Held::of(token)).await?;
            super::released(log, key, fleet.quorum(), &servers);
        }
        None => forced(fleet, key, any_value, limit, log).await?,
    }
    Ok(exit::OK)
}

/// `release --force`: the shared holders and every place deleted at once
/// (a server that does not answer costs one node timeout, not one per
/// round; two with `--force-any-value`), then one line saying on how many
/// servers, how many answered, and whose lock it was, shown without `-v`
/// when it names a holder. A server that did not answer may keep the lock
/// until it expires there: then the line is a warning.
async fn forced(
    fleet: &Fleet,
    key: &str,
    any_value: bool,
    limit: Option<u32>,
    log: &Log,
) -> Result<(), Error> {
    let (shared, places) = if any_value {
        // With `--force-any-value` a place read before the shared round
        // deleted the marker would delete the marker itself, and the shared
        // round, finding no marker, would leave the shared holders' entries
        // to expire: the shared holders go first, at the cost of a second
        // node timeout when a server does not answer.
        let shared = crate::shared::force_release(fleet, key).await;
        (shared, crate::slots::force_release(fleet, key, limit, any_value).await)
    } else {
        tokio::join!(
            crate::shared::force_release(fleet, key),
            crate::slots::force_release(fleet, key, limit, any_value)
        )
    };
    let places = match places {
        // Place 1 was read while it still held the shared holders' marker,
        // which is no token: the shared round has deleted it since.
        Err(Error::Usage(_)) if shared.deleted > 0 => {
            crate::slots::force_release(fleet, key, limit, any_value).await?
        }
        other => other?,
    };
    let mut holders: Vec<&str> = Vec::new();
    for (_, view) in &places.read.servers {
        if let ServerView::Held { value, .. } = view
            && !holders.contains(&value.as_str())
        {
            holders.push(value);
        }
    }
    if shared.deleted > 0 && !holders.contains(&SHARED_MARKER) {
        holders.push(SHARED_MARKER);
    }
    let total = fleet.servers().len();
    // Place 1 is the lock key, where the shared holders' marker lives too.
    let mut per_place = places.deleted;
    match per_place.first_mut() {
        Some(first) => *first += shared.deleted,
        None => per_place.push(shared.deleted),
    }
    let deleted = match per_place.as_slice() {
        [one] => format!("deleted on {one} of {total}"),
        all => {
            let each: Vec<String> = all
                .iter()
                .enumerate()
                .map(|(i, n)| format!("place {} on {n} of {total}", i + 1))
                .collect();
            format!("deleted {}", each.join(", "))
        }
    };
    let mut message = format!(
        "force-released {}: {deleted} servers, {} of {total} answered",
        crate::text::display_key(key.as_bytes()),
        shared.answered
    );
    if !shared.failures.0.is_empty() {
        message += &format!(" ({})", shared.failures);
    }
    if !holders.is_empty() {
        let named: Vec<String> = holders.iter().map(|v| describe_value(v)).collect();
        // The read that names them is place 1's (the lock key).
        let whose = if per_place.len() > 1 { "place 1" } else { "it" };
        message += &format!("; {whose} was held by {}", named.join(" and by "));
    }
    // Deleting a holder's lock is a destructive act on another's work:
    // whose it was (host, pid, age, note) is shown without `-v` (Notice),
    // so that the CI log or the terminal keeps it; only `-q` hides it.
    let level = match (shared.answered < total, holders.is_empty()) {
        (true, _) => Level::Warn,
        (false, false) => Level::Notice,
        (false, true) => Level::Info,
    };
    log.event(
        level,
        "force_released",
        &message,
        serde_json::json!({
            "key": key,
            "deleted": per_place.iter().sum::<usize>(),
            "places": per_place,
            "answered": shared.answered,
            "servers": total,
            "holders": holders,
            "failures": shared.failures.0.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }),
    );
    Ok(())
}
