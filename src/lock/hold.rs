//! Holding and letting go: extend, set the TTL (`--keep`), release and
//! `release --force`, each a compare-and-set round on the holder's token.

use super::*;

impl Fleet {
    /// Makes a lock held by `token` last at least `ttl` from now on every
    /// server, never shortening it. The new validity counts from the start
    /// of the round and assumes only `ttl`.
    pub async fn extend(&self, key: &str, held: Held<'_>, ttl: Duration) -> Result<Lock, Error> {
        let operation = if held.shares() {
            self.shared_retime(key, held.token, ttl, false)
        } else {
            Operation::Extend(ExtendOp {
                lock: self.layout.held_key(key, held),
                fence: self.layout.fence_key(key),
                token: held.token.to_owned(),
                ttl_ms: crate::text::millis(ttl),
                life_ms: crate::text::millis(crate::fence::lifetime(ttl)),
            })
        };
        self.retime(operation, key, held, ttl).await
    }

    /// A shared holder's renewal (`scripts/shared_extend.lua`): its entry
    /// among the shared holders to at least `ttl` from now, or exactly
    /// (`--keep`) when `exact`; the marker never below the latest entry.
    fn shared_retime(&self, key: &str, token: &str, ttl: Duration, exact: bool) -> Operation {
        Operation::Scripted {
            script: &SCRIPTS.shared_extend,
            keys: vec![
                self.layout.lock_key(key),
                self.layout.readers_key(key),
                self.layout.fence_key(key),
            ],
            args: vec![
                token.into(),
                crate::text::millis(ttl).to_string().into(),
                crate::text::millis(crate::fence::lifetime(ttl)).to_string().into_bytes(),
                if exact { "exact" } else { "" }.into(),
            ],
        }
    }

    /// Sets the TTL of a lock held by `token` to exactly `ttl` on every
    /// server, shortening it if need be (`run --keep`).
    pub async fn set_ttl(&self, key: &str, held: Held<'_>, ttl: Duration) -> Result<Lock, Error> {
        let operation = if held.shares() {
            self.shared_retime(key, held.token, ttl, true)
        } else {
            Operation::SetTtl(SetTtlOp {
                lock: self.layout.held_key(key, held),
                token: held.token.to_owned(),
                ttl_ms: crate::text::millis(ttl),
            })
        };
        self.retime(operation, key, held, ttl).await
    }

    /// One compare-and-set round on a holder's TTL ([`Fleet::extend`],
    /// [`Fleet::set_ttl`]): `operation` sets `held`'s lock to `ttl` and
    /// answers 1 where the token holds.
    async fn retime(
        &self,
        operation: Operation,
        key: &str,
        held: Held<'_>,
        ttl: Duration,
    ) -> Result<Lock, Error> {
        let refused = if held.shares() { NO_SHARED_HOLD } else { NOT_HELD };
        let start = BootInstant::now();
        let call = Call { op: Op::Extend, key: key.to_owned(), operation };
        let round = self.round(call, parse_int, done_here).await;
        let shown = crate::text::display_key(key.as_bytes());
        match round.outcome() {
            // A renewal counted on one server listed twice could hold the
            // lock on a minority: refused, as the acquire round refuses it.
            Outcome::Won if let Some(twin) = self.twin_among(&round, key).await => Err(twin),
            Outcome::Won => {
                let validity = quorum::validity(ttl, start.elapsed(), self.drift_factor)
                    .ok_or_else(|| {
                        self.unavailable(
                            format!("extend {shown}: too slow to leave any validity"),
                            &round,
                        )
                    })?;
                Ok(Lock {
                    key: key.to_owned(),
                    token: held.token.to_owned(),
                    mode: held.mode,
                    ttl,
                    since: start,
                    validity,
                    granted: (round.tally.yes, round.tally.total),
                    fence: None,
                })
            }
            Outcome::Refused => Err(Error::Lost(format!(
                "extend {shown}: {refused} ({} of {} servers say so)",
                round.tally.no, round.tally.total
            ))),
            Outcome::Unreachable => Err(self.unavailable(format!("extend {shown}"), &round)),
        }
    }

    /// Deletes the key on every server where `held` holds it, announcing
    /// the release to waiters. Returns once a quorum has deleted it (the
    /// other servers' deletes go on in the background, see
    /// [`Fleet::drain`]), with each server's part.
    /// A shared holder's token leaves the shared holders (the withdrawal
    /// script, with the release channel).
    pub async fn release(&self, key: &str, held: Held<'_>) -> Result<Vec<ServerResult>, Error> {
        let refused = if held.shares() { NO_SHARED_HOLD } else { NOT_HELD };
        let call = self.release_call(key, held);
        let round = self.round(call, parse_int, done_here).await;
        let shown = crate::text::display_key(key.as_bytes());
        match round.outcome() {
            Outcome::Won => {
                Ok(self.results(&round, |n| if *n == 1 { "deleted" } else { "not held" }))
            }
            Outcome::Refused => Err(Error::Lost(format!(
                "release {shown}: {refused} ({} of {} servers say so)",
                round.tally.no, round.tally.total
            ))),
            Outcome::Unreachable => Err(self.unavailable(format!("release {shown}"), &round)),
        }
    }

    /// Deletes the lock whoever holds it (`release --force`). Returns how
    /// many servers had it.
    ///
    /// It reads every server first ([`Fleet::status`]) and then deletes,
    /// per server, only the value it read there (compare-and-delete, so a
    /// lock that changed hands in between is left alone). A value that is
    /// not a redlock token is refused, and nothing is deleted, unless
    /// `any_value`: with the key as given ([`KeyLayout::Raw`]) it may be
    /// another client's lock or an application's data.
    pub async fn force_release(&self, key: &str, any_value: bool) -> Result<usize, Error> {
        self.force_release_of(key, 1, any_value).await
    }

    /// [`Fleet::force_release`] of place `slot` of a `--limit` lock.
    pub async fn force_release_of(
        &self,
        key: &str,
        slot: u32,
        any_value: bool,
    ) -> Result<usize, Error> {
        let shown = crate::text::display_key(key.as_bytes());
        let status = self.status_of(key, slot).await;
        let failures = status.failures();
        if failures.0.len() > self.servers.len() - self.quorum {
            return Err(Error::Unavailable {
                what: format!(
                    "release --force {shown}: {} of {} servers answered, quorum {}",
                    self.servers.len() - failures.0.len(),
                    self.servers.len(),
                    self.quorum
                ),
                config: failures.any_config(),
                failures,
            });
        }
        let mut values: Vec<(&str, Vec<Arc<Server>>)> = Vec::new();
        for (server, (name, view)) in self.servers.iter().zip(&status.servers) {
            let ServerView::Held { value, .. } = view else { continue };
            if !any_value && value.parse::<Token>().is_err() {
                return Err(Error::Usage(format!(
                    "release --force {shown}: {name} holds a value that is not a redlock lock ({:?}); \
                     nothing deleted (--force-any-value deletes it anyway)",
                    crate::text::display_key(value.as_bytes())
                )));
            }
            match values.iter_mut().find(|(v, _)| v == value) {
                Some((_, servers)) => servers.push(Arc::clone(server)),
                None => values.push((value, vec![Arc::clone(server)])),
            }
        }
        let mut deleted = 0;
        for (value, servers) in values {
            // A value read on the servers: its mode, read once here.
            let call = Call { op: Op::ForceRelease, ..self.release_call(key, Held::of(value)) };
            let round = self.round_on(&servers, call, parse_int, |_| Vote::Yes).await;
            deleted += round.replies.iter().filter(|r| matches!(r, Reply::Answered(1))).count();
        }
        Ok(deleted)
    }
}

impl Fleet {
    /// Two members that answered `round` and are one server, or a twin an
    /// acquire round met late ([`Fleet::late_twin`]), as an error. Each
    /// member that answered has read its server's `INFO` on connecting, so
    /// nothing is waited for; a cluster member is not compared (its twin
    /// meets its own token instead).
    async fn twin_among<T>(&self, round: &Round<T>, key: &str) -> Option<Error> {
        if let Some(twin) = self.late_twin(key) {
            return Some(twin);
        }
        let now = tokio::time::Instant::now();
        let facts = futures_util::future::join_all(self.servers.iter().zip(&round.replies).map(
            |(s, reply)| async move {
                match reply {
                    Reply::Answered(_) if s.cluster().is_none() => s.current_facts(now).await,
                    _ => None,
                }
            },
        ))
        .await;
        self.same_server(&facts, Op::Extend, key)
    }

    /// The compare-and-delete of `held` on `key`, announcing the release.
    /// A shared holder's token ([`crate::shared`]) leaves the shared
    /// holders instead: the withdrawal script, with the release channel.
    fn release_call(&self, key: &str, held: Held<'_>) -> Call {
        let [order, deadlines] = self.layout.queue_keys(key);
        let token = held.token;
        let operation = if held.shares() {
            Operation::Withdraw(WithdrawOp {
                lock: self.layout.lock_key(key),
                order,
                deadlines,
                readers: Some(self.layout.readers_key(key)),
                record: None,
                token: token.to_owned(),
                entry: None,
                channel: Some(release_channel(key)),
            })
        } else {
            Operation::Release(ReleaseOp {
                lock: self.layout.held_key(key, held),
                order,
                deadlines,
                token: token.to_owned(),
                channel: release_channel(key),
                record: self.layout.record_key(key),
                put_back: false,
            })
        };
        Call { op: Op::Release, key: key.to_owned(), operation }
    }
}
