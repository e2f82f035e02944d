//! `redlock acquire`: take the lock and print its token alone on stdout
//! (or, with `--json`, the token, fence and validity).

use std::io::Write;

use crate::config::Request;
use crate::error::Error;
use crate::exit;
use crate::lock::Fleet;
use crate::output::Log;

/// Takes the lock (retrying as the request allows) and prints the token.
pub async fn acquire(fleet: &Fleet, request: &Request, json: bool, log: &Log) -> Result<u8, Error> {
    let lock = crate::wait::acquire(fleet, request, log, None).await?;
    let line = if json {
        serde_json::json!({
            "token": lock.token,
            "fence": lock.fence,
            "validity_ms": crate::millis(lock.validity),
        })
        .to_string()
    } else {
        lock.token.clone()
    };
    if writeln!(std::io::stdout().lock(), "{line}").is_err() {
        // Nobody can learn the token, so nobody could release it: give it back.
        let _ = fleet.release(&request.key, &lock.token).await;
        return Err(Error::Usage("acquire: could not write the token to stdout".to_owned()));
    }
    Ok(exit::OK)
}
