//! The no-script path: the lock's operations for a
//! server that refuses scripts (`EVALSHA` renamed away or disabled, or an
//! ACL user without `@scripting`), made of plain commands with the same
//! guarantees as the scripts in `src/scripts/`.
//!
//! # When it is used
//! The scripts stay the default: one round trip each. The first call whose
//! script a server refuses ([`refuses_scripts`]) marks the [`Server`]
//! ([`Server::refuse_scripts`]), and is answered here; every later call to
//! that server comes here directly (`Call::invoke`, the hook in
//! `src/lock/mod.rs`). The reply has the shape the script's would have, so the
//! rest of redlock reads it unchanged.
//!
//! # How: WATCH, MULTI, EXEC on a connection of its own
//! Each operation is a compare-and-set: read the lock (and its counter),
//! decide, write only if nothing changed. `WATCH k` makes the `EXEC` that
//! follows fail (a nil reply, nothing written) when any watched key was
//! written, deleted or expired since the `WATCH` (Redis docs,
//! "Transactions": optimistic locking; expiry counts since Redis 6.0.9:
//! on older servers a lock that expires between the read and the `EXEC`
//! can make an extend answer 1 for a key that is gone, which the next
//! renewal then finds lost).
//! So "read under WATCH, then `MULTI` ... `EXEC`" either applies the writes
//! to exactly the state that was read, with no command of anyone else's in
//! between (a transaction runs as one step, like a script), or applies
//! nothing. That is the atomicity the scripts have: a script is one step
//! from its first read to its last write; here the reads and writes are
//! separated in time, but any change in between voids the writes.
//!
//! WATCH state belongs to the connection, so every operation runs on a
//! fresh connection of its own ([`Server::dedicated`]), never on the shared
//! multiplexed one: another task's commands there could land between
//! `MULTI` and `EXEC` (inside our transaction) or `UNWATCH` our keys.
//!
//! # When EXEC returns nil
//! Someone touched a watched key between our read and our `EXEC`: nothing
//! was written. The operation reads again and decides again (the lock may
//! now be held by another, and the answer is then "held"), at most
//! `TRIES` (5) times; after that it fails like a server error, which the
//! quorum counts as a lost vote (never as a grant).
//!
//! # When the connection fails in the middle
//! Before `EXEC` was sent, the server drops the transaction (and the WATCH)
//! with the connection: nothing was written. After `EXEC` was sent but
//! before its reply, the writes may or may not have happened, exactly as a
//! script whose reply was lost: redlock treats it as an error that may have
//! set the key (an acquire round withdraws it; a release is retried by the
//! user or expires with its TTL). Every call is bounded by the node
//! timeout of the caller (`Server::call_on`), which drops the connection.
//!
//! # When the ACL user may not run WATCH, MULTI or EXEC
//! Then there is no way to lock on that server, and waiting cannot cure
//! it: the NOPERM is the server's failure, reported at once (exit 69 when
//! it costs the quorum), never counted as "busy". `MULTI` is sent alone
//! and the writes only after its `OK` (`transaction` below): a refused `MULTI`
//! must not leave the writes after it to run one by one, outside any
//! transaction. A refused `EXEC` discards the queued writes (Redis 7.0
//! answers EXECABORT naming the NOPERM, which `Failure::from_redis` reads
//! as the NOPERM). `status` needs no `WATCH`, so a user without it can
//! still read the lock.
//!
//! # What the no-script path does not do
//! - The wait queue (`src/queue.rs`) is skipped: waiters on such a server go
//!   unordered; a release names no first waiter, so every waiter tries.
//! - Shared locks (`--shared`) and the run history need their scripts: on a
//!   no-script server they fail with one line naming it (history writes
//!   then degrade to `run`'s usual warning).
//! - Native compare-and-set commands (`SET k v IFEQ old` on Valkey 8.1 and
//!   Redis 8.4, `DELIFEQ` on Valkey 9) are not used yet: WATCH/MULTI/EXEC
//!   works on every server since Redis 2.2.

use redis::aio::MultiplexedConnection;
use redis::{ErrorKind, Pipeline, RedisError, RedisResult, Value};

use super::ops::{Numbers, Untaken};
use super::{AcquireOp, Call, ExtendOp, Operation, RaiseFenceOp, SetTtlOp, StatusOp};
use crate::server::{NEEDS_SCRIPTS, Server};

/// Whether `value`, read from a lock key, is `token`'s hold: never for the
/// marker of shared holders, which is no token (`crate::shared`), as in
/// the scripts.
fn held_by(value: Option<&[u8]>, token: &[u8]) -> bool {
    token != crate::token::SHARED_MARKER.as_bytes() && value == Some(token)
}

/// How many times an operation reads and decides again after `EXEC`
/// returned nil (a watched key changed): each nil means another client
/// wrote the lock, so a handful suffices for the answer to be "held".
const TRIES: usize = 5;

/// Whether `e` says the server refuses scripts: an unknown `EVALSHA`,
/// `EVAL` or `SCRIPT` (renamed away, or a build without Lua), or NOPERM for
/// one of them (an ACL user with `-@scripting`). A NOPERM for a command a
/// script calls, or any other error, is not a refusal.
pub fn refuses_scripts(e: &RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    let names_scripting =
        ["'evalsha'", "'eval'", "'script'", "'script|load'"].iter().any(|name| text.contains(name));
    names_scripting
        && (text.contains("unknown command")
            || e.code() == Some("NOPERM")
            || text.contains("no permissions"))
}

/// Runs `call` (a script call) on `server` without scripts; the reply has
/// the script's shape. Operations that need their script (the shared
/// lock's, the history's) fail with one line.
pub(crate) async fn invoke(server: &Server, call: &Call) -> RedisResult<Value> {
    // A shared holder's acquire and fence write-back (the shared holders as
    // one more key), a shared holder's release and the scripts of their
    // own have no transaction here.
    let shared = match &call.operation {
        Operation::Acquire(AcquireOp { readers, .. })
        | Operation::RaiseFence(RaiseFenceOp { readers, .. }) => readers.is_some(),
        Operation::Withdraw(_) | Operation::Scripted { .. } => true,
        _ => false,
    };
    if shared {
        return Err(needs_scripts(call));
    }
    let mut c = server.dedicated(call.operation.first_key().as_bytes()).await?;
    match &call.operation {
        Operation::Acquire(op) => acquire(&mut c, op).await,
        Operation::Extend(op) => extend(&mut c, op).await,
        Operation::SetTtl(op) => set_ttl(&mut c, op).await,
        Operation::Release(op) => {
            release(&mut c, &op.lock, op.token.as_bytes(), Some(op.channel.as_bytes())).await
        }
        Operation::Status(op) => status(&mut c, op).await,
        Operation::RaiseFence(op) => raise_fence(&mut c, op).await,
        Operation::Withdraw(_) | Operation::Scripted { .. } => Err(needs_scripts(call)),
    }
}

/// The error of an operation that needs its script (`--shared`, the run
/// history) on a server that refuses scripts.
fn needs_scripts(call: &Call) -> RedisError {
    RedisError::from((
        ErrorKind::Client,
        NEEDS_SCRIPTS,
        format!("{} (--shared, the run history) has no way without EVALSHA", call.op),
    ))
}

/// Withdraws a failed acquire attempt's vote: deletes the lock key while it
/// holds `token`, without a word to waiters (as `withdraw.lua`; there is no
/// queue entry to put back, the no-script acquire keeps none).
///
/// The attempt ran on a connection of its own, now dropped, and this runs
/// on a new one, so there is no order between them on one connection (as
/// `lock::withdraw` has for scripts). Nothing is lost by it: an attempt cut
/// off before its `EXEC` was sent wrote nothing (the server discards the
/// transaction with the connection); one whose `EXEC` was sent was read by
/// the server before it saw the close, which is before this new connection
/// was accepted, except for bytes still unread in the server's buffer, a
/// window of one turn of its event loop. Lost in that window, the vote
/// stays until its TTL: a delay for the next holder, never a second one.
///
/// The grant record goes back with it, as `withdraw.lua` puts it back: in
/// the same transaction, while it still names `token`.
pub(crate) async fn withdraw(
    server: &Server,
    lock_key: &str,
    record: Option<&str>,
    token: &[u8],
) -> RedisResult<Value> {
    let mut c = server.dedicated(lock_key.as_bytes()).await?;
    let Some(record) = record else { return release(&mut c, lock_key, token, None).await };
    for _ in 0..TRIES {
        let (value, _) = watch_lock(&mut c, lock_key, &[record]).await?;
        if !held_by(value.as_deref(), token) {
            unwatch(&mut c).await?;
            return Ok(Value::Int(0));
        }
        let fields: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
            .arg(record)
            .arg(&["tok", "pat", "ptok", "pts", "pte", "ptt"])
            .query_async(&mut c)
            .await?;
        let mut tx = redis::pipe();
        tx.cmd("DEL").arg(lock_key);
        if fields.first().and_then(Option::as_deref) == Some(token) {
            let field = |i: usize| fields.get(i).cloned().flatten().unwrap_or_default();
            if field(1).is_empty() || field(1) == b"-1" {
                tx.cmd("DEL").arg(record);
            } else {
                tx.cmd("HSET").arg(record);
                for (i, name) in ["at", "tok", "ts", "te", "tt"].iter().enumerate() {
                    tx.arg(*name).arg(field(i + 1));
                }
                tx.arg(&["pat", "-1", "ptok", "", "pts", "-1", "pte", "-1", "ptt", ""]);
            }
        }
        if !aborted(&transaction(&mut c, tx).await?) {
            return Ok(Value::Int(1));
        }
    }
    Err(contended("withdraw"))
}

/// The error after `TRIES` nil `EXEC`s in a row.
fn contended(what: &str) -> RedisError {
    RedisError::from((
        ErrorKind::Client,
        "contended",
        format!("{what}: the lock changed under WATCH {TRIES} times in a row"),
    ))
}

/// Whether an `EXEC` reply is nil: a watched key changed, nothing written.
fn aborted(reply: &Value) -> bool {
    matches!(reply, Value::Nil)
}

/// `WATCH lock also...`, then the lock's value and PTTL, read under that
/// WATCH.
async fn watch_lock(
    c: &mut MultiplexedConnection,
    lock: &str,
    also: &[&str],
) -> RedisResult<(Option<Vec<u8>>, i64)> {
    let mut pipe = redis::pipe();
    pipe.cmd("WATCH").arg(lock).arg(also).ignore();
    pipe.cmd("GET").arg(lock).cmd("PTTL").arg(lock);
    pipe.query_async(c).await.map_err(first_error)
}

/// Runs `cmds` as one transaction: `MULTI` alone, then `cmds` and `EXEC`
/// in one pipeline. Returns `EXEC`'s reply: nil when a watched key changed
/// (nothing written), else the commands' replies in order.
///
/// Why not `redis::pipe().atomic()`: a refused `MULTI` (NOPERM for an ACL
/// user without `multi`) leaves the commands after it to run one by one,
/// outside any transaction and unguarded by the `WATCH` (a `SET` of the
/// fence that could lower it, a lock written while its `EXEC` fails), so
/// nothing may follow `MULTI` before its `OK`. The redis crate (1.8.1)
/// also counts an atomic pipeline's replies on the belief that `MULTI`
/// succeeded: its error reply underflows that count
/// (`aio/multiplexed_connection.rs:358`), which panics in a debug build
/// and kills the connection (a "broken pipe" in place of the NOPERM). One
/// round trip more, on the no-script path only.
async fn transaction(c: &mut MultiplexedConnection, mut cmds: Pipeline) -> RedisResult<Value> {
    redis::cmd("MULTI").query_async::<()>(c).await?;
    // Each command answers QUEUED, or an error (NOPERM for a key or a
    // command) after which `EXEC` answers EXECABORT: nothing written.
    // A refused `EXEC` (the user has `multi` but not `exec`) writes nothing
    // either; the transaction dies with this connection, which is dropped.
    let mut replies: Vec<Value> = cmds.cmd("EXEC").query_async(c).await.map_err(first_error)?;
    match replies.pop() {
        Some(Value::Nil) => Ok(Value::Nil),
        // A command that failed while the transaction ran (WRONGTYPE...).
        Some(reply @ Value::Array(_)) => reply.extract_error(),
        other => Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "EXEC answered neither nil nor an array",
            format!("{other:?}"),
        ))),
    }
}

/// The first server error of a pipeline that failed, on its own: the crate
/// wraps them all in "Pipeline failure: [(Index 0, error: ...)]", whose
/// code is the first one's but whose text is no one-line reason.
fn first_error(e: RedisError) -> RedisError {
    match e.clone().into_server_errors().as_deref() {
        Some([(_, first), ..]) => first.clone().into(),
        _ => e,
    }
}

/// `UNWATCH`: the operation writes nothing after all.
async fn unwatch(c: &mut MultiplexedConnection) -> RedisResult<()> {
    redis::cmd("UNWATCH").query_async(c).await
}

/// The acquire script's work without the queue: `SET NX PX` and the fence
/// draw in one transaction.
///
/// `WATCH lock fence; GET lock; GET fence; TIME` then, if free, `MULTI;
/// SET lock token NX PX ttl; SET fence draw PX life; EXEC`. Why this is the
/// script's step: the EXEC applies only if neither the lock nor the counter
/// changed since the WATCH, so the lock was free and the counter was the
/// one read (or absent) at the moment of the writes. The draw is
/// `max(counter + 1, clamp(proposal, now, now + window))` (src/fence.rs)
/// with `now` read by `TIME` *after* the counter: if the counter was absent
/// when read (expired, or lost), `now` is later than that, which is what
/// the argument's lower bound (2) needs; if it was present, the draw is
/// above it. `now` is at most one node timeout older than the EXEC, which
/// only lowers the draw's upper bound (1). A nil EXEC: another client took
/// the lock or drew a fence meanwhile; read and decide again.
async fn acquire(c: &mut MultiplexedConnection, op: &AcquireOp) -> RedisResult<Value> {
    let (lock, fence_key, token) = (&op.lock, &op.fence, &op.token);
    let Numbers { ttl_ms: ttl, proposal, window_us: window, life_ms: life, .. } = op.numbers;
    let record = op.record.as_deref();
    let watched: Vec<&str> = std::iter::once(fence_key.as_str()).chain(record).collect();
    for _ in 0..TRIES {
        let (value, pttl) = watch_lock(c, lock, &watched).await?;
        if let Some(holder) = value {
            unwatch(c).await?;
            // Another schedule is refused while a holder runs too, as
            // acquire.lua does.
            if let (Some(record), Some(schedule)) = (record, op.schedule.as_deref()) {
                let rec: Vec<Option<String>> = redis::cmd("HMGET")
                    .arg(record)
                    .arg(&["tt", "sch", "te"])
                    .query_async(c)
                    .await?;
                let field = |i: usize| rec.get(i).cloned().flatten().unwrap_or_default();
                let recorded = field(1);
                if !recorded.is_empty() && recorded != schedule {
                    let text = |s: String| Value::BulkString(s.into_bytes());
                    let end = field(2).parse().unwrap_or(-1);
                    return Ok(Value::Array(vec![
                        Value::Int(5),
                        text(field(0)),
                        text(recorded),
                        Value::Int(end),
                    ]));
                }
            }
            return Ok(refused(holder, pttl));
        }
        let mut tx = redis::pipe();
        tx.cmd("SET").arg(lock).arg(token).arg("NX").arg("PX").arg(ttl);
        // The server's clock goes back with the grant, as the script's
        // does (the grant of a clock far from ours counts towards no
        // quorum), and draws the fence; the grant record is read under
        // the same WATCH.
        let (counter, (secs, micros), rec): (Option<u64>, (u64, u64), Vec<Option<String>>) =
            redis::pipe()
                .cmd("GET")
                .arg(fence_key)
                .cmd("TIME")
                .cmd("HMGET")
                .arg(record.unwrap_or(fence_key))
                .arg(&["at", "tok", "ts", "te", "tt", "sch"])
                .query_async(c)
                .await
                .map_err(first_error)?;
        let now_ms = secs * 1000 + micros / 1000;
        let mut replaced = (Value::Int(-1), Value::BulkString(Vec::new()));
        if let Some(record) = record {
            let rec = Record::read(&rec);
            if let Some(refusal) = rec.refuses(&op.numbers, op.schedule.as_deref(), now_ms) {
                unwatch(c).await?;
                return Ok(refusal);
            }
            rec.write(&mut tx, record, token, op, now_ms);
            replaced = rec.replaced();
        }
        let drawn = proposal.map(|proposal| {
            let now = secs * 1_000_000 + micros;
            let draw = proposal.clamp(now, now + window);
            draw.max(counter.unwrap_or(0) + 1)
        });
        if let Some(drawn) = drawn {
            tx.cmd("SET").arg(fence_key).arg(drawn).arg("PX").arg(life);
        }
        let reply = transaction(c, tx).await?;
        if aborted(&reply) {
            continue;
        }
        // Under WATCH the key was free and untouched: `SET NX` has set it.
        let fence = drawn.map_or(-1, |f| i64::try_from(f).unwrap_or(i64::MAX));
        let text = |n: u64| Value::BulkString(n.to_string().into_bytes());
        return Ok(Value::Array(vec![
            Value::Int(1),
            Value::Int(fence),
            Value::Int(-1),
            Value::Int(-1),
            text(secs),
            text(micros),
            replaced.0,
            replaced.1,
        ]));
    }
    Err(contended("acquire"))
}

/// The grant record as read (`scripts/acquire.lua` keeps it; the same
/// fields and rules here, for servers without scripts).
struct Record {
    /// The fields `at`, `tok`, `ts`, `te`, `tt`, `sch` as read (empty:
    /// absent).
    fields: [String; 6],
}

impl Record {
    fn read(rec: &[Option<String>]) -> Record {
        let field = |i: usize| rec.get(i).cloned().flatten().unwrap_or_default();
        Record { fields: [field(0), field(1), field(2), field(3), field(4), field(5)] }
    }

    fn number(&self, i: usize) -> Option<i64> {
        self.fields[i].parse().ok().filter(|n| *n >= 0)
    }

    /// The grant this record holds (when, to whom), as the script's grant
    /// reply gives the record it replaced: -1 and '' for none.
    fn replaced(&self) -> (Value, Value) {
        let at = self.number(0).unwrap_or(-1);
        (Value::Int(at), Value::BulkString(self.fields[1].as_bytes().to_vec()))
    }

    /// The script's refusal of an attempt, if its terms refuse it: the
    /// tick is over, or (on a free key) it ran or the key was taken since.
    fn refuses(&self, numbers: &Numbers, schedule: Option<&str>, now_ms: u64) -> Option<Value> {
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let whole = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let recorded = &self.fields[5];
        if let Some(schedule) = schedule
            && !recorded.is_empty()
            && recorded != schedule
        {
            let end = self.number(3).unwrap_or(-1);
            return Some(Value::Array(vec![
                Value::Int(5),
                text(&self.fields[4]),
                text(recorded),
                Value::Int(end),
            ]));
        }
        if let Some(tick) = numbers.tick
            && now_ms > tick.last_grant_ms()
        {
            return Some(Value::Array(vec![
                Value::Int(4),
                Value::Int(whole(tick.start_ms)),
                Value::Int(whole(tick.end_ms)),
                Value::Int(whole(now_ms)),
            ]));
        }
        if let (Some(tick), Some(end)) = (numbers.tick, self.number(3))
            && end > whole(tick.start_ms)
        {
            let start = self.number(2).unwrap_or(0);
            return Some(Value::Array(vec![
                Value::Int(2),
                text(&self.fields[4]),
                Value::Int(start),
                Value::Int(end),
            ]));
        }
        let from = match numbers.untaken {
            Untaken::Since(ms) => Some(whole(ms)),
            Untaken::For { .. } => {
                numbers.untaken.look_back_ms().map(|ms| whole(now_ms) - whole(ms))
            }
            Untaken::Off => None,
        };
        if let (Some(from), Some(at)) = (from, self.number(0))
            && at >= from
        {
            return Some(Value::Array(vec![Value::Int(3), text(&self.fields[1]), Value::Int(at)]));
        }
        None
    }

    /// The grant's record, in the transaction `tx`, as the script writes it.
    fn write(&self, tx: &mut Pipeline, key: &str, token: &str, op: &AcquireOp, now_ms: u64) {
        let or = |s: &str, absent: &'static str| {
            if s.is_empty() { absent.to_owned() } else { s.to_owned() }
        };
        let numbers = &op.numbers;
        let [at, tok, ts, te, tt, _] = &self.fields;
        let (ts_new, te_new, tt_new) = match numbers.tick {
            Some(t) => (t.start_ms.to_string(), t.end_ms.to_string(), token.to_owned()),
            None => (or(ts, "-1"), or(te, "-1"), tt.clone()),
        };
        let end: u64 = te_new.parse().unwrap_or(0);
        let life = crate::text::millis(super::RECORD_LIFE)
            .max((end + crate::text::millis(super::TICK_MARGIN)).saturating_sub(now_ms));
        tx.cmd("HSET").arg(key);
        tx.arg("at").arg(now_ms).arg("tok").arg(token);
        tx.arg("ts").arg(ts_new).arg("te").arg(te_new).arg("tt").arg(tt_new);
        tx.arg("pat").arg(or(at, "-1")).arg("ptok").arg(tok);
        tx.arg("pts").arg(or(ts, "-1")).arg("pte").arg(or(te, "-1")).arg("ptt").arg(tt);
        if let Some(schedule) = &op.schedule {
            tx.arg("sch").arg(schedule);
        }
        tx.cmd("PEXPIRE").arg(key).arg(life);
    }
}

/// The acquire script's "not set" reply, without a queue.
fn refused(holder: Vec<u8>, pttl: i64) -> Value {
    Value::Array(vec![
        Value::Int(0),
        Value::BulkString(holder),
        Value::Int(pttl),
        Value::Int(-1),
        Value::Int(0),
        Value::BulkString(Vec::new()),
    ])
}

/// extend.lua: `WATCH lock fence; GET lock; PTTL lock; PTTL fence` and,
/// while the token holds the lock, `MULTI; PEXPIRE` (only those that would
/// grow) `EXEC`. The EXEC runs even with nothing to raise: a non-nil reply
/// proves that the token still held the lock at that moment, as the
/// script's read does. Nil: the lock changed; decide again.
async fn extend(c: &mut MultiplexedConnection, op: &ExtendOp) -> RedisResult<Value> {
    let (lock, fence_key, token) = (&op.lock, &op.fence, op.token.as_bytes());
    let whole = |ms: u64| i64::try_from(ms).unwrap_or(i64::MAX);
    let (ttl, life) = (whole(op.ttl_ms), whole(op.life_ms));
    for _ in 0..TRIES {
        let (value, left) = watch_lock(c, lock, &[fence_key]).await?;
        if !held_by(value.as_deref(), token) {
            unwatch(c).await?;
            return Ok(Value::Int(0));
        }
        let counter: i64 = redis::cmd("PTTL").arg(fence_key).query_async(c).await?;
        // PTTL inside: a transaction with no command would not be sent at
        // all, and its EXEC is the proof that the token still held the lock.
        let mut tx = redis::pipe();
        tx.cmd("PTTL").arg(lock);
        if left >= 0 && left < ttl {
            tx.cmd("PEXPIRE").arg(lock).arg(ttl);
        }
        if counter >= 0 && counter < life {
            tx.cmd("PEXPIRE").arg(fence_key).arg(life);
        }
        let reply = transaction(c, tx).await?;
        if !aborted(&reply) {
            return Ok(Value::Int(1));
        }
    }
    Err(contended("extend"))
}

/// set_ttl.lua: `WATCH lock; GET lock` and, while the token holds it,
/// `MULTI; PEXPIRE lock ttl; EXEC`. Nil: the lock changed; decide again.
async fn set_ttl(c: &mut MultiplexedConnection, op: &SetTtlOp) -> RedisResult<Value> {
    let (lock, token, ttl) = (&op.lock, op.token.as_bytes(), op.ttl_ms);
    for _ in 0..TRIES {
        let (value, _) = watch_lock(c, lock, &[]).await?;
        if !held_by(value.as_deref(), token) {
            unwatch(c).await?;
            return Ok(Value::Int(0));
        }
        let mut tx = redis::pipe();
        tx.cmd("PEXPIRE").arg(lock).arg(ttl);
        let reply = transaction(c, tx).await?;
        if let Value::Array(items) = reply {
            return Ok(items.into_iter().next().unwrap_or(Value::Int(0)));
        }
    }
    Err(contended("set-ttl"))
}

/// release.lua (and withdraw.lua without `channel`): `WATCH lock; GET lock`
/// and, while `token` holds it, `MULTI; DEL lock; EXEC`, then `PUBLISH
/// channel "\ntoken"`. The DEL applies only if the key still held the token
/// at EXEC: never anyone else's lock. The announcement names no first
/// waiter (there is no queue here), so every waiter tries; it goes after
/// the EXEC and its failure is ignored, as release.lua's `redis.pcall`: a
/// user the ACL denies the channel must still release (inside the
/// transaction a refused PUBLISH aborted the DEL). Nil: the key changed
/// (expired, or taken); decide again, which then answers 0.
async fn release(
    c: &mut MultiplexedConnection,
    lock: &str,
    token: &[u8],
    channel: Option<&[u8]>,
) -> RedisResult<Value> {
    for _ in 0..TRIES {
        let (value, _) = watch_lock(c, lock, &[]).await?;
        if !held_by(value.as_deref(), token) {
            unwatch(c).await?;
            return Ok(Value::Int(0));
        }
        let mut tx = redis::pipe();
        tx.cmd("DEL").arg(lock);
        let reply = transaction(c, tx).await?;
        if !aborted(&reply) {
            if let Some(channel) = channel {
                let mut message = b"\n".to_vec();
                message.extend_from_slice(token);
                let _: RedisResult<Value> =
                    redis::cmd("PUBLISH").arg(channel).arg(message).query_async(c).await;
            }
            return Ok(Value::Int(1));
        }
    }
    Err(contended("release"))
}

/// status.lua: `MULTI; GET lock; PTTL lock; GET fence; EXEC`, one
/// consistent read (a transaction runs as one step; no WATCH needed, it
/// writes nothing).
async fn status(c: &mut MultiplexedConnection, op: &StatusOp) -> RedisResult<Value> {
    let mut tx = redis::pipe();
    tx.cmd("GET").arg(&op.lock).cmd("PTTL").arg(&op.lock).cmd("GET").arg(&op.fence);
    transaction(c, tx).await
}

/// raise_fence.lua: `WATCH lock fence; GET lock; GET fence` and, while the
/// token holds the lock, `MULTI; SET fence wanted PX life` (only when it
/// raises the counter) `EXEC`. Never lowers: the comparison is with the
/// counter as read, and the EXEC applies only if it is still that.
async fn raise_fence(c: &mut MultiplexedConnection, op: &RaiseFenceOp) -> RedisResult<Value> {
    let (lock, fence_key, token) = (&op.lock, &op.fence, op.token.as_bytes());
    let parse = |b: &[u8]| String::from_utf8_lossy(b).parse::<i64>().ok();
    let wanted = i64::try_from(op.value).unwrap_or(i64::MAX);
    for _ in 0..TRIES {
        let (value, _) = watch_lock(c, lock, &[fence_key]).await?;
        if !held_by(value.as_deref(), token) {
            unwatch(c).await?;
            return Ok(Value::Int(-1));
        }
        let counter: Option<Vec<u8>> = redis::cmd("GET").arg(fence_key).query_async(c).await?;
        let current = counter.as_deref().and_then(parse).unwrap_or(0);
        let mut tx = redis::pipe();
        tx.cmd("PTTL").arg(lock);
        let after = if wanted > current {
            tx.cmd("SET").arg(fence_key).arg(wanted).arg("PX").arg(op.life_ms);
            wanted
        } else {
            current
        };
        let reply = transaction(c, tx).await?;
        if !aborted(&reply) {
            return Ok(Value::Int(after));
        }
    }
    Err(contended("raise-fence"))
}
