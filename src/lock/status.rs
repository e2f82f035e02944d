//! `status`: what a quorum of servers says about a lock.

use super::*;

/// One server's view of a key, for `status`.
#[derive(Clone, Debug)]
pub enum ServerView {
    /// The key holds `value`, expiring in `ttl` (`None`: no expiry).
    Held {
        /// The value.
        value: String,
        /// Remaining TTL.
        ttl: Option<Duration>,
        /// The key's fencing counter on this server.
        fence: Option<u64>,
    },
    /// The key is absent.
    Free,
    /// The server could not be read.
    Error(ServerError),
}

/// What `status` found on every server.
#[derive(Clone, Debug)]
pub struct Status {
    /// One entry per server, in `--servers` order: name and view.
    pub servers: Vec<(String, ServerView)>,
    /// The value held on at least a quorum, and the TTL the quorum still
    /// guarantees (the quorum-th longest); `None` when no value has a quorum.
    pub holder: Option<(String, Option<Duration>)>,
    /// The holder's fencing number: the counter a quorum of its servers
    /// agree on ([`fence::holder_fence`]); `None` when unknown.
    pub fence: Option<u64>,
    /// True when enough servers answered to say the lock is free.
    pub known: bool,
    /// The quorum used.
    pub quorum: usize,
}

impl Status {
    /// The servers that could not be read, with their errors.
    pub fn failures(&self) -> quorum::Failures {
        quorum::Failures(
            self.servers
                .iter()
                .filter_map(|(_, view)| match view {
                    ServerView::Error(e) => Some(e.clone()),
                    _ => None,
                })
                .collect(),
        )
    }

    /// The error for a read that cannot tell held from free; `what` names
    /// what needed to know.
    pub fn unknown(&self, what: String) -> Error {
        let failures = self.failures();
        Error::Unavailable { what, config: failures.any_config(), failures }
    }
}

impl Fleet {
    /// Why each server's grant would count towards no quorum now (it
    /// restarted too recently, or its clock is too far from this host's:
    /// `vote::restarted`, `vote::no_vote`), `None` where it would
    /// count or cannot be asked; one `TIME` per server.
    pub async fn votes(&self) -> Vec<Option<String>> {
        let window = self.restart_window;
        let asks = self.servers.iter().map(|server| async move {
            let sent = std::time::SystemTime::now();
            let time: (u64, u64) = server
                .call(Op::Status, b"", async |c| redis::cmd("TIME").query_async(c).await)
                .await
                .ok()?;
            let answered = std::time::SystemTime::now();
            let clock = super::vote::server_time(Some(time.0), Some(time.1))?;
            let facts = server.current_facts(server.deadline()).await;
            super::vote::no_vote(Some(clock), (sent, answered)).or_else(|| {
                super::vote::restarted(
                    facts.as_ref(),
                    super::vote::restart_window(window, None, None),
                )
            })
        });
        futures_util::future::join_all(asks).await
    }

    /// Reads the key's value, TTL and fencing counter on every server.
    pub async fn status(&self, key: &str) -> Status {
        self.status_of(key, 1).await
    }

    /// [`Fleet::status`] of place `slot` of a `--limit` lock ([`crate::slots`]).
    pub async fn status_of(&self, key: &str, slot: u32) -> Status {
        let call = Call {
            op: Op::Status,
            key: key.to_owned(),
            operation: Operation::Status(StatusOp {
                lock: self.layout.slot_key(key, slot),
                fence: self.layout.fence_key(key),
            }),
        };
        let round = self.round(call, parse_status, |_| Vote::Yes).await;
        let servers: Vec<(String, ServerView)> = self
            .servers
            .iter()
            .zip(round.replies)
            .map(|(server, reply)| {
                let view = match reply {
                    Reply::Answered(view) => view,
                    Reply::Failed(e) => ServerView::Error(e),
                    Reply::NotAwaited => ServerView::Error(server.bad_reply(
                        Op::Status,
                        key,
                        "not awaited".to_owned(),
                    )),
                };
                (server.name().to_owned(), view)
            })
            .collect();
        summarize(servers, self.quorum)
    }
}

/// Decides `status` from the per-server views: a value held on a quorum is
/// the holder, with the TTL that a quorum still guarantees.
fn summarize(servers: Vec<(String, ServerView)>, quorum: usize) -> Status {
    let mut best: Option<(&str, Vec<Option<Duration>>)> = None;
    let mut values: Vec<(&str, Vec<Option<Duration>>)> = Vec::new();
    for (_, view) in &servers {
        if let ServerView::Held { value, ttl, .. } = view {
            match values.iter_mut().find(|(v, _)| v == value) {
                Some((_, ttls)) => ttls.push(*ttl),
                None => values.push((value, vec![*ttl])),
            }
        }
    }
    for (value, ttls) in values {
        if best.as_ref().is_none_or(|(_, b)| ttls.len() > b.len()) {
            best = Some((value, ttls));
        }
    }
    let failed = servers.iter().filter(|(_, v)| matches!(v, ServerView::Error(_))).count();
    let best_count = best.as_ref().map_or(0, |(_, t)| t.len());
    let holder = best.filter(|(_, ttls)| ttls.len() >= quorum).map(|(value, mut ttls)| {
        // Longest first, `None` (no expiry) before all; the quorum-th longest
        // is what a quorum guarantees.
        ttls.sort_by(|a, b| match (a, b) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, _) => std::cmp::Ordering::Less,
            (_, None) => std::cmp::Ordering::Greater,
            (Some(a), Some(b)) => b.cmp(a),
        });
        (value.to_owned(), ttls[quorum - 1])
    });
    // Free is only known when even the failed servers could not make up a quorum.
    let known = holder.is_some() || best_count + failed < quorum;
    let fence = holder.as_ref().and_then(|(value, _)| {
        let counters: Vec<Option<u64>> = servers
            .iter()
            .filter_map(|(_, v)| match v {
                ServerView::Held { value: h, fence, .. } if h == value => Some(*fence),
                _ => None,
            })
            .collect();
        fence::holder_fence(&counters, quorum)
    });
    Status { servers, holder, fence, known, quorum }
}

/// Reads the status script's reply.
fn parse_status(reply: Value) -> Result<ServerView, String> {
    let Value::Array(items) = reply else {
        return Err(format!("unexpected status reply {reply:?}"));
    };
    let fence = match items.get(2) {
        Some(Value::BulkString(f)) => String::from_utf8_lossy(f).parse().ok(),
        _ => None,
    };
    match items.as_slice() {
        [Value::Nil, ..] | [] => Ok(ServerView::Free),
        [Value::BulkString(v), Value::Int(pttl), ..] => Ok(ServerView::Held {
            value: String::from_utf8_lossy(v).into_owned(),
            ttl: ttl_of(*pttl),
            fence,
        }),
        other => Err(format!("unexpected status reply {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(value: &str, ms: i64) -> (String, ServerView) {
        let fence = u64::try_from(ms).ok();
        ("s".into(), ServerView::Held { value: value.into(), ttl: ttl_of(ms), fence })
    }

    #[test]
    fn status_needs_a_quorum_of_one_value() {
        let s = summarize(vec![held("a", 900), held("a", 500), held("b", 700)], 2);
        assert_eq!(s.holder, Some(("a".into(), Some(Duration::from_millis(500)))));
        assert_eq!(s.fence, None, "no counter that a quorum of the holder's servers agree on");
        let s = summarize(vec![held("a", 900), held("a", 900), held("a", 950)], 2);
        assert_eq!(s.fence, Some(900), "the holder's own fence, not the late server's larger one");
        let s = summarize(
            vec![held("a", 900), held("a", 500), held("a", 700), ("s".into(), ServerView::Free)],
            3,
        );
        assert_eq!(s.holder, Some(("a".into(), Some(Duration::from_millis(500)))));
        let s = summarize(vec![held("a", 900), held("b", 500), ("s".into(), ServerView::Free)], 2);
        assert!(s.holder.is_none() && s.known);
    }
}
