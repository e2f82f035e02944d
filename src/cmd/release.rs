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
    let shown = crate::display_key(key.as_bytes());
    let total = fleet.servers().len();
    match token {
        Some(token) => {
            let deleted = fleet.release(key, token).await?;
            log.info(&format!("released {shown} on {deleted}/{total} servers"));
        }
        None => {
            let deleted = fleet.force_release(key).await?;
            log.info(&format!(
                "force-released {shown}: deleted on {deleted}/{total} servers"
            ));
        }
    }
    Ok(exit::OK)
}
