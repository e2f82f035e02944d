//! `redlock acquire`: take the lock and print its token alone on stdout.

use std::io::Write;
use std::time::Duration;

use crate::config::Wait;
use crate::error::Error;
use crate::exit;
use crate::lock::Fleet;
use crate::output::Log;

/// Takes the lock (retrying as `wait` allows) and prints the token.
pub async fn acquire(
    fleet: &Fleet,
    key: &str,
    ttl: Duration,
    wait: Wait,
    log: &Log,
) -> Result<u8, Error> {
    let lock = crate::wait::acquire(fleet, key, ttl, wait, log, None).await?;
    let printed = writeln!(std::io::stdout().lock(), "{}", lock.token);
    if printed.is_err() {
        // Nobody can learn the token, so nobody could release it: give it back.
        let _ = fleet.release(key, &lock.token).await;
        return Err(Error::Usage(
            "acquire: could not write the token to stdout".to_owned(),
        ));
    }
    Ok(exit::OK)
}
