//! `redlock release`: give a lock back with its token, or delete it whoever
//! holds it with `--force` (a value that is not a redlock token only with
//! `--force-any-value`).

use crate::error::Error;
use crate::exit;
use crate::lock::Fleet;
use crate::output::Log;

/// Releases the lock; `token: None` forces, and `any_value` deletes even a
/// value that redlock did not write.
pub async fn release(
    fleet: &Fleet,
    key: &str,
    token: Option<&str>,
    any_value: bool,
    log: &Log,
) -> Result<u8, Error> {
    match token {
        Some(token) => {
            let servers = fleet.release(key, token).await?;
            super::released(log, key, &servers);
        }
        None => {
            let deleted = fleet.force_release(key, any_value).await?;
            log.info(&format!(
                "force-released {}: deleted on {deleted}/{} servers",
                crate::display_key(key.as_bytes()),
                fleet.servers().len()
            ));
        }
    }
    Ok(exit::OK)
}
