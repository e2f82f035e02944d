//! `redlock release`: give a lock back with its token, or delete it whoever
//! holds it with `--force` (a value that is not a redlock token only with
//! `--force-any-value`). `--force` frees every place of a `--limit` key
//! ([`crate::slots::force_release`]).

use crate::error::Error;
use crate::exit;
use crate::lock::Fleet;
use crate::output::{Level, Log};

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
            let servers = fleet.release(key, token, crate::lock::is_shared(token)).await?;
            super::released(log, key, fleet.quorum(), &servers);
        }
        None => {
            let shared = crate::shared::force_release(fleet, key).await;
            let deleted =
                shared + crate::slots::force_release(fleet, key, limit, any_value).await?;
            log.event(
                Level::Info,
                "force_released",
                &format!(
                    "force-released {}: deleted on {deleted} of {} servers",
                    crate::display_key(key.as_bytes()),
                    fleet.servers().len()
                ),
                serde_json::json!({ "key": key, "deleted": deleted }),
            );
        }
    }
    Ok(exit::OK)
}
