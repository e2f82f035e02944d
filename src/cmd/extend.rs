//! `redlock extend`: reset the TTL of a lock held with a token.

use std::time::Duration;

use crate::error::Error;
use crate::exit;
use crate::lock::{Fleet, Held};
use crate::output::{Level, Log};

/// Extends the lock; 70 when the token does not hold it.
pub async fn extend(
    fleet: &Fleet,
    key: &str,
    token: &str,
    ttl: Duration,
    log: &Log,
) -> Result<u8, Error> {
    // A token given on the command line: a shared holder's says so.
    let lock = fleet.extend(key, Held::of(token), ttl).await?;
    log.event(
        Level::Info,
        "extended",
        &format!(
            "extended {}: confirmed by {} of {} (quorum {}); valid for {}",
            crate::text::display_key(key.as_bytes()),
            lock.granted.0,
            lock.granted.1,
            fleet.quorum(),
            crate::text::fmt_duration(lock.validity)
        ),
        serde_json::json!({
            "key": key,
            "extended": lock.granted.0,
            "servers": lock.granted.1,
            "quorum": fleet.quorum(),
            "validity_ms": crate::text::millis(lock.validity),
        }),
    );
    Ok(exit::OK)
}
