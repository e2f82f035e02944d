//! `redlock acquire`: take the lock and print its token alone on stdout
//! (or, with `--json`, the token, fence and validity).

use std::io::Write;

use crate::error::Error;
use crate::exit;
use crate::lock::Fleet;
use crate::lock::Request;
use crate::output::Log;
use crate::signals::Signals;

/// Takes the lock (retrying as the request allows) and prints the token.
/// A signal (Ctrl-C, a CI runner's cancel) ends a wait between attempts,
/// and one that came during the winning attempt gives the lock back, so an
/// interrupted `acquire` never leaves a lock nobody knows the token of.
pub async fn acquire(fleet: &Fleet, request: &Request, json: bool, log: &Log) -> Result<u8, Error> {
    // Without the handlers (they cannot fail in practice) a signal simply
    // ends the process, as it would any other program.
    let mut signals = Signals::install().ok();
    // The token names the caller, which holds it once this process exits.
    crate::token::hold_for_caller();
    let lock = crate::wait::acquire(fleet, request, log, signals.as_mut()).await?;
    if let Some(signal) = signals.as_mut().and_then(Signals::try_recv) {
        let _ = fleet.release(&request.key, lock.held()).await;
        return Err(Error::Interrupted(signal, "before the token was printed".to_owned()));
    }
    let line = if json {
        serde_json::json!({
            "token": lock.token,
            "fence": lock.fence,
            "validity_ms": crate::text::millis(lock.validity),
            "slot": lock.mode.slot(),
        })
        .to_string()
    } else {
        lock.token.clone()
    };
    if writeln!(std::io::stdout().lock(), "{line}").is_err() {
        // Nobody can learn the token, so nobody could release it: give it back.
        let _ = fleet.release(&request.key, lock.held()).await;
        return Err(Error::Usage("acquire: could not write the token to stdout".to_owned()));
    }
    // A member slower than the round that answers with its own token is
    // the same server as another: the lock rests on a fleet that counts a
    // server twice, so it is given back and the command fails. The calls
    // still in flight end within a node timeout (the process waits for
    // them before it exits in any case).
    fleet.drain().await;
    if let Some(twin) = fleet.late_twin(&request.key) {
        let _ = fleet.release(&request.key, lock.held()).await;
        return Err(twin);
    }
    Ok(exit::OK)
}
