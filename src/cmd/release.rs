//! `redlock release`: give a lock back with its token, or delete it whoever
//! holds it with `--force`.

use crate::error::Error;
use crate::exit;
use crate::lock::Fleet;
use crate::output::Log;

/// Releases the lock; `token: None` forces.
pub async fn release(
    fleet: &Fleet,
    key: &str,
    token: Option<&str>,
    log: &Log,
) -> Result<u8, Error> {
    match token {
        Some(token) => {
            let servers = fleet.release(key, token).await?;
            super::released(log, key, &servers);
        }
        None => {
            let deleted = fleet.force_release(key).await?;
            log.info(&format!(
                "force-released {}: deleted on {deleted}/{} servers",
                crate::display_key(key.as_bytes()),
                fleet.servers().len()
            ));
        }
    }
    Ok(exit::OK)
}
