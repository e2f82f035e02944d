//! One server's part in an acquire round: the attempt on its connection,
//! its reply read once (`granted`), the answer to the round (without a
//! vote where `vote` says so), then the verdict: the vote kept, or the
//! attempt withdrawn on the same connection, after it.

use super::granted::{Granted, parse_acquire};
use super::ops::Untaken;
use super::vote::{OWN_TOKEN, RestartWindow, evicting, no_vote, restarted};
use super::*;

/// How long a `-n` contender that lost before a server answered waits for
/// that answer before it withdraws there blindly (`contend`); less if the
/// process settles to exit first ([`Fleet::settle`], which then makes it
/// withdraw at once, before the exit's flush can end the process).
const ANSWER_GRACE: Duration = Duration::from_millis(50);

/// Waits for an acquire round's verdict: true keeps the votes, false
/// withdraws them. A verdict that never comes (the round was abandoned)
/// withdraws.
async fn decided(verdict: &mut watch::Receiver<Option<bool>>) -> bool {
    match verdict.wait_for(Option::is_some).await {
        Ok(keep) => keep.unwrap_or(false),
        Err(_) => false,
    }
}

/// One server's part in an acquire round: the attempt, its answer to the
/// round, then the verdict, and when the verdict is "withdraw", the
/// withdrawal on the same connection, after the attempt.
///
/// The order is the point. Redis executes one
/// connection's commands in the order they arrive. The attempt's future is
/// dropped (or done) before the withdrawal is sent, so every request it
/// wrote is ahead of the withdrawal, even when the server is frozen and
/// answers both an hour later. (redis-rs writes a request handed to the
/// connection unless its caller gave up before the connection took it
/// from its queue; the withdrawal's bound is at [`withdraw`].) The
/// connection is the server's shared one, opened once for all callers
/// ([`Server::connect`]); a timed-out attempt makes the server forget it
/// for new calls, but this task keeps its handle, and so does the release
/// of a round won without this server ([`Server::late_vote`]).
pub(super) async fn contend(
    server: Arc<Server>,
    call: Arc<Call>,
    answer: Answer<Granted>,
    mut verdict: watch::Receiver<Option<bool>>,
    restart_window: Option<RestartWindow>,
    twin: Arc<std::sync::Mutex<Option<ServerError>>>,
    exit: Option<tokio_util::sync::CancellationToken>,
) {
    let key = call.key();
    let Operation::Acquire(op) = &call.operation else {
        let why = "an acquire round ran another operation".to_owned();
        return answer.send(Err(server.bad_reply(Op::Acquire, key, why)));
    };
    // Until this attempt is done, releases here wait.
    let _attempting = server.attempting().await;
    let deadline = server.deadline();
    let Some(conn) = connection(&server, key, deadline, &mut verdict).await else {
        return;
    };
    let conn = match conn {
        Ok(conn) => conn,
        Err(e) => return answer.send(Err(e)),
    };
    let mut set = Box::pin(attempt_here(&server, &conn, &call, op, deadline, restart_window));
    // The queue entry a grant here removed, to put back on a withdrawal.
    let mut entry = None;
    let keep = tokio::select! {
        result = &mut set => {
            // "Held by another value": this attempt set nothing here. Any
            // other answer (granted, an error, a timeout) may have set it.
            let refused_here = refused(&result);
            let timed_out = matches!(&result, Err(e) if matches!(e.failure, Failure::Timeout(_)));
            if let Ok((Granted::Yes(grant), _)) = &result {
                entry = grant.entry;
            }
            answer.send(counted(&server, key, result));
            let won = decided(&mut verdict).await;
            if refused_here {
                if won {
                    leave_here(&server, &conn, key, op).await;
                }
                return;
            }
            // Won while this server timed out (before the verdict, which
            // may wait for the twins and the fence): its vote may still
            // land, as in `land_late`. Any other failure set nothing, or broke the
            // connection.
            if won && timed_out {
                server.expect_late_vote(&op.lock, &op.token, &conn);
            }
            won
        }
        keep = decided(&mut verdict) => {
            if keep {
                return land_late(&server, &conn, key, op, set, &twin).await;
            }
            // Lost before this server answered. A contender that attempts
            // again withdraws at once, so that the withdrawal goes ahead
            // of its next attempt on this connection. One that is done
            // (`-n`: `After::Nothing`, in `tally`; `exit` is then its process's exit)
            // has no next attempt to overtake: it gives the answer
            // [`ANSWER_GRACE`], or until the process settles to exit
            // ([`Fleet::settle`], which is why it cannot be cut off), and
            // withdraws only what may have been set, so that a burst's
            // losers do not send a withdrawal script to every server a
            // little slower than the quorum. A server that does not answer
            // in that time (frozen, far) gets the withdrawal all the same,
            // queued behind the attempt on this connection, so that it
            // runs both in order when it wakes and keeps no dead vote.
            if let Some(exiting) = &exit
                && let Some(late) = answer_in_grace(&mut set, exiting).await
            {
                if refused(&late) {
                    return;
                }
                if let Ok((Granted::Yes(grant), _)) = &late {
                    entry = grant.entry;
                }
            }
            false
        }
    };
    drop(set);
    if !keep {
        withdraw(&server, &conn, key, op, entry).await;
    }
}

/// The connection to `server` for an attempt on `key`, by `deadline`;
/// `None` when the verdict withdraws first.
///
/// Nothing is sent before the connection is there: a "withdraw" that
/// comes first leaves nothing to withdraw on this server. A "keep" that
/// comes first does not stop the connect: the round was won without
/// this server, and its vote must land all the same (as in `contend`, once
/// connected), or the lock rests on a bare quorum with nothing here for
/// renewals to extend. A server slow to connect is the usual case: a
/// Sentinel group resolves its master (every Sentinel, then ROLE)
/// while plain servers have long granted.
async fn connection(
    server: &Server,
    key: &str,
    deadline: tokio::time::Instant,
    verdict: &mut watch::Receiver<Option<bool>>,
) -> Option<Result<Conn, ServerError>> {
    let connect = server.connect(Op::Acquire, key.as_bytes(), deadline);
    tokio::pin!(connect);
    tokio::select! {
        conn = &mut connect => Some(conn),
        keep = decided(verdict) => {
            if !keep {
                return None;
            }
            Some(connect.await)
        }
    }
}

/// A round won without this server's answer (`set`, the attempt on
/// `conn`): its vote lands all the same, and the release follows it on
/// this connection.
async fn land_late(
    server: &Server,
    conn: &Conn,
    key: &str,
    op: &AcquireOp,
    set: impl Future<Output = Answered>,
    twin: &std::sync::Mutex<Option<ServerError>>,
) {
    server.expect_late_vote(&op.lock, &op.token, conn);
    let late = set.await;
    if refused(&late) {
        leave_here(server, conn, key, op).await;
    }
    // A twin slower than the round: the lock's holder learns
    // it from the fleet (`Fleet::late_twin`).
    if let Err(e) = late
        && matches!(&e.failure, Failure::Unfit(why) if why == OWN_TOKEN)
    {
        *twin.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
    }
}

/// One server's answer to an attempt ([`attempt_here`]): what it said,
/// and why it has no vote, if it has none.
type Answered = Result<(Granted, Option<String>), ServerError>;

/// The answer of a `-n` loser's attempt, if it comes within
/// [`ANSWER_GRACE`] and before the process settles to exit
/// ([`Fleet::settle`]: `exiting`).
async fn answer_in_grace(
    set: &mut (impl Future<Output = Answered> + Unpin),
    exiting: &tokio_util::sync::CancellationToken,
) -> Option<Answered> {
    tokio::select! {
        late = tokio::time::timeout(ANSWER_GRACE, set) => late.ok(),
        () = exiting.cancelled() => None,
    }
}

/// Whether this server refused (and so set nothing, and kept or refreshed
/// the waiter's entry).
fn refused(result: &Answered) -> bool {
    matches!(
        result,
        Ok((
            Granted::No { .. }
                | Granted::Ran(_)
                | Granted::Taken(_)
                | Granted::Over(_)
                | Granted::Elsewhere(_),
            _
        ))
    )
}

/// What a server's answer counts for in the round: a server without a vote
/// answers as a failure (`attempt_here`), whatever it said.
fn counted(server: &Server, key: &str, result: Answered) -> Result<Granted, ServerError> {
    let (granted, no_vote) = result?;
    match no_vote {
        Some(why) => Err(ServerError {
            server: server.name().to_owned(),
            op: Op::Acquire,
            key: crate::text::display_key(key.as_bytes()),
            failure: Failure::NoVote(why),
        }),
        None => Ok(granted),
    }
}

/// One server's answer to the attempt `call` on `conn`, by `deadline`: the
/// acquire script's reply, with why the server has no vote where its clock
/// is off or it restarted within `restart_window` ([`no_vote`],
/// [`restarted`]), and this attempt's own token met here refused as a
/// server listed twice.
///
/// A server without a vote counts for nobody, whatever it answers. Its
/// grant is kept but not counted; its refusal ("held by X", "X took it
/// since you began", "the tick ran") is not counted either: X could not
/// win with that server, so X's quorum, which every quorum this contender
/// could win shares a server with, is made of voting servers, and one of
/// those refuses too. Counted, it could make a burst's hosts all skip as
/// busy behind a holder that then loses its round: a tick nobody runs.
/// The cost: such a refusal is a failure, so a round that needed it ends
/// "unavailable" (retried by a wait, and by `-n` while the rest only
/// timed out), not "busy".
async fn attempt_here(
    server: &Server,
    conn: &Conn,
    call: &Call,
    op: &AcquireOp,
    deadline: tokio::time::Instant,
    restart_window: Option<RestartWindow>,
) -> Answered {
    let key = call.key();
    // When the attempt was sent and answered, on this host's clock:
    // the server's clock in its answer is compared with their middle.
    let sent = SystemTime::now();
    let reply = server
        .call_on(conn, Op::Acquire, key.as_bytes(), deadline, async |c| {
            call.invoke(server, c).await
        })
        .await?;
    let answered = SystemTime::now();
    let granted = parse_acquire(reply).map_err(|msg| server.bad_reply(Op::Acquire, key, msg))?;
    // The server's own account of itself came in the same round trip, on
    // a new connection; on an old one it is known.
    let records = op.numbers.tick.is_some() || op.numbers.untaken != Untaken::Off;
    let facts = match restart_window.is_some() || records {
        true => server.facts(conn, deadline).await,
        false => None,
    };
    let no_vote = no_vote(granted.clock(), (sent, answered))
        .or_else(|| restarted(facts.as_ref(), restart_window))
        .or_else(|| evicting(facts.as_ref().filter(|_| records)));
    // This attempt's own token, fresh and random, already here: another
    // member of the fleet is this same server (one URL listed twice, a
    // cluster listed once per node, a Sentinel group beside its own
    // master). Counted as "held elsewhere", the lock would look busy,
    // held by this very attempt, on every try: a cron job skipped for
    // ever. It is a configuration that waiting cannot cure. Exclusion
    // is safe either way: one server grants one SET NX.
    if let Granted::No { holder: Some(holder), .. } = &granted
        && op.token == *holder
    {
        return Err(server.unfit(Op::Acquire, key, OWN_TOKEN.to_owned()));
    }
    Ok((granted, no_vote))
}

/// Takes the waiter's entry out of this server's queue, after an attempt
/// that won elsewhere but was refused here (and so kept or refreshed the
/// entry, which would otherwise stand first for others until it expires).
/// Best effort, on the attempt's connection: after the attempt.
async fn leave_here(server: &Server, conn: &Conn, key: &str, op: &AcquireOp) {
    if op.member.is_empty() {
        return;
    }
    let mut pipe = redis::pipe();
    pipe.cmd("ZREM").arg(&op.order).arg(&op.member).ignore();
    pipe.cmd("ZREM").arg(&op.deadlines).arg(&op.member).ignore();
    let send = async |c: &mut MultiplexedConnection| pipe.query_async::<()>(c).await;
    let _ = server.call_on(conn, Op::Queue, key.as_bytes(), server.deadline(), send).await;
}

/// Deletes the token of `call`, a failed attempt, from its lock key on
/// `conn`, the connection of the attempt being withdrawn, in one round
/// trip ([`Call::run_script`]: the body goes with the connection's first
/// withdrawal only), so that no second round trip (after NOSCRIPT) is
/// left for a process exiting to cut off: once written, it runs on the
/// server even if this process is gone by then. Best effort: errors
/// change nothing about the verdict, which is already known.
///
/// The bound: it is written only if the connection takes it before its
/// deadline (redis-rs drops a queued request whose caller gave up), that
/// is while the socket still takes bytes. A server that does not read
/// (frozen, or behind a slow link) takes the TCP window's worth (64 KiB
/// or more) before that; each round adds a few hundred bytes to it once
/// the scripts went with the first. A round whose attempt fills the
/// window leaves its withdrawal unwritten and its vote to the TTL.
///
/// When the connection broke, the server has closed it or will read no
/// more from it than it already holds, so the delete goes on a fresh one;
/// it could overtake only bytes of the dead connection still unread in the
/// server's buffer, a window of one turn of the server's event loop.
///
/// `entry` is the waiter's queue entry (join score, deadline) that the
/// grant being withdrawn removed: it goes back, so that a head whose
/// attempt failed keeps its place.
async fn withdraw(
    server: &Server,
    conn: &Conn,
    key: &str,
    op: &AcquireOp,
    entry: Option<(u64, u64)>,
) {
    // No-script hook: the same compare-and-delete without a script.
    if server.scripts_refused() {
        let send = async |_: &mut MultiplexedConnection| {
            crate::lock::noscript::withdraw(
                server,
                &op.lock,
                op.record.as_deref(),
                op.token.as_bytes(),
            )
            .await
        };
        let _ = Box::pin(server.call(Op::Withdraw, key.as_bytes(), send)).await;
        return;
    }
    // A shared attempt withdraws its entry among the shared holders
    // (announcing nothing).
    let withdrawal = Operation::Withdraw(WithdrawOp {
        lock: op.lock.clone(),
        order: op.order.clone(),
        deadlines: op.deadlines.clone(),
        readers: op.readers.clone(),
        record: op.record.clone(),
        token: op.token.clone(),
        entry: entry.map(|(score, deadline)| (op.member.clone(), score, deadline)),
        channel: None,
    });
    let call = Call { op: Op::Withdraw, key: key.to_owned(), operation: withdrawal };
    let send = async |c: &mut MultiplexedConnection| call.run_script(c).await;
    let first = server.call_on(conn, Op::Withdraw, key.as_bytes(), server.deadline(), send).await;
    if let Err(e) = first
        && matches!(e.failure, Failure::Connection(_))
    {
        let _ = server.call(Op::Withdraw, key.as_bytes(), send).await;
    }
}
