//! Where a server's URL leads, and how the node a call goes to is found
//! there (redis-rs's `SentinelClient` shape): a fixed address, the master
//! a Sentinel group names, or the master of a cluster's hash slot.
//! [`super::Server`] owns the connection and its lifecycle; it asks its
//! [`Target`] which node to connect to, whether that node may still be
//! used, and what a failure there means.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ErrorKind, RedisError};

use super::cluster::{self, Cluster};
use super::sentinel::{self, Group};
use super::{Failure, ServerUrl, Tls, open_client};

/// What a server's URL leads to.
pub(super) enum Target {
    /// One server at a fixed address.
    Direct(Client),
    /// The current master of a Sentinel group, found again at each connect.
    Sentinel(Group),
    /// The master of the lock's hash slot in a Redis Cluster, found again
    /// at each connect.
    Cluster(Cluster),
}

/// The node a Sentinel group or a cluster named for a connection.
#[derive(Clone, Debug)]
pub(super) struct Found {
    /// The master's `host:port`.
    pub address: String,
    /// For a cluster: the hash slot it was confirmed the master of.
    pub slot: Option<u16>,
    /// For a Sentinel group: how many replicas a write there must reach
    /// before its vote counts ([`sentinel::Master::replicas`]).
    pub replicas: usize,
}

impl Target {
    /// The target `url` names; `tls` for `rediss` URLs.
    pub fn new(url: &ServerUrl, tls: &Tls, timeout: Duration) -> Result<Target, String> {
        Ok(match (&url.sentinel, &url.cluster) {
            (Some(sentinel), _) => Target::Sentinel(Group::new(sentinel.clone(), tls, timeout)?),
            (None, Some(cluster)) => Target::Cluster(Cluster::new(cluster.clone(), tls, timeout)?),
            (None, None) => Target::Direct(open_client(&url.secret, tls).map_err(|e| {
                if e.starts_with("not a valid") {
                    format!("server URL {:?} is not a valid Redis URL", url.name())
                } else {
                    format!("{}: {e}", url.name())
                }
            })?),
        })
    }

    /// Whether calls go to the master of their key's hash slot (a cluster).
    pub fn routes_by_slot(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }

    /// Whether a write whose answer is a vote counts only once replicas
    /// have it (a Sentinel group: [`sentinel`], "Why a vote waits for the
    /// replicas").
    pub fn confirms_votes(&self) -> bool {
        matches!(self, Target::Sentinel(_))
    }

    /// The failure a redis crate error stands for here: through a cluster,
    /// a redirect is a broken connection (never a vote, never followed:
    /// the module doc of [`cluster`]).
    pub fn failure(&self, e: &RedisError) -> Failure {
        if let Target::Cluster(_) = self {
            if let Some(why) = cluster::redirect(e) {
                return Failure::Connection(why);
            }
            // Every key of one call is in the lock's slot (crate::lock's
            // key layout; raw keys that cannot be are refused up front).
            if e.code() == Some("CROSSSLOT") {
                return Failure::Unfit(format!(
                    "CROSSSLOT: the keys of one call are in different hash slots, which redlock \
                     never sends; please report it ({})",
                    e.detail().unwrap_or_default()
                ));
            }
        }
        Failure::from_redis(e)
    }

    /// Whether a connection to `found`, confirmed less than a node timeout
    /// ago when `fresh`, may serve a call about `slot` without asking
    /// again. `found` is `None` when nothing was confirmed for the
    /// connection.
    ///
    /// Why confirm again: a master can lose its role while redlock's
    /// connection to it stays open and keeps working. After `SENTINEL
    /// FAILOVER`, or a failover while it was cut off, the old master goes on
    /// accepting writes until the Sentinels reconfigure it (seconds later),
    /// while other clients, asking the Sentinels, already lock on the new
    /// one. Asking again before a call, at most once a node timeout, moves
    /// redlock to the new master within one node timeout of the Sentinels'
    /// switch; what it writes on the old one meanwhile is no vote, since no
    /// replica confirms it ([`sentinel`], "Why a vote waits for the
    /// replicas").
    ///
    /// For a cluster, the same for the master of `slot`: a connection is
    /// bound to the node it was made for, and used for a slot only while
    /// the seeds confirmed, less than a node timeout ago, that this node is
    /// the slot's master. A call that names no key (`slot` `None`) may use
    /// any node's.
    pub fn trusts(&self, found: Option<&Found>, fresh: bool, slot: Option<u16>) -> bool {
        match self {
            Target::Direct(_) => true,
            Target::Sentinel(_) => found.is_some() && fresh,
            Target::Cluster(_) => found.is_some_and(|found| match slot {
                None => true,
                Some(slot) => found.slot == Some(slot) && fresh,
            }),
        }
    }

    /// Whether a connection that is no longer trusted for `slot` can be
    /// confirmed again ([`Target::reconfirm`]) instead of replaced: a
    /// Sentinel group's, and a cluster's for a call that names a key.
    pub fn rechecks(&self, slot: Option<u16>) -> bool {
        match self {
            Target::Direct(_) => false,
            Target::Sentinel(_) => true,
            Target::Cluster(_) => slot.is_some(),
        }
    }

    /// Asks again whether `found`, the node `conn` goes to, is still the
    /// one for calls about `slot`: what is confirmed now, or `None` when
    /// it is not (the connection must then go).
    ///
    /// A Sentinel group: a majority of the Sentinels still name it, and it
    /// still says `master` to `ROLE` (with how many replicas a write there
    /// must now reach). A cluster: a majority of the seeds still name it
    /// the master of `slot`. No majority answering is no confirmation: a
    /// master cut off from its Sentinels may have been failed away from,
    /// and keeps no vote; a master cut off from the rest of its cluster
    /// names itself the owner until another node replaces it.
    pub async fn reconfirm(
        &self,
        found: &Found,
        conn: &MultiplexedConnection,
        slot: Option<u16>,
        config: &AsyncConnectionConfig,
    ) -> Option<Found> {
        match self {
            Target::Direct(_) => Some(found.clone()),
            Target::Sentinel(group) => {
                let mut c = conn.clone();
                let (named, role) = tokio::join!(group.named(config), sentinel::role(&mut c));
                match (named, role) {
                    (Ok(named), Ok(role))
                        if named.address == found.address && role.role == "master" =>
                    {
                        Some(Found { replicas: named.replicas.max(role.replicas), ..found.clone() })
                    }
                    _ => None,
                }
            }
            Target::Cluster(cluster) => {
                let slot = slot?;
                let owner = cluster.owner_named(slot, config).await;
                owner
                    .is_ok_and(|owner| owner == found.address)
                    .then(|| Found { slot: Some(slot), ..found.clone() })
            }
        }
    }

    /// A new connection to the node calls about `slot` go to now, and what
    /// was found there (`None` for a fixed address). A Sentinel group's
    /// master is asked afresh; a cluster's, that of `slot` (a call that
    /// names no key goes to the master of slot 0).
    pub async fn locate(
        &self,
        slot: Option<u16>,
        config: &AsyncConnectionConfig,
        timeout: Duration,
    ) -> Result<(MultiplexedConnection, Option<Found>), Failure> {
        match self {
            Target::Direct(client) => {
                let conn = client.get_multiplexed_async_connection_with_config(config).await;
                let conn = conn.map_err(|e| {
                    if e.is_timeout() { Failure::Timeout(timeout) } else { Failure::from_redis(&e) }
                })?;
                Ok((conn, None))
            }
            Target::Sentinel(group) => {
                let master = group.master(config).await?;
                let found =
                    Found { address: master.address, slot: None, replicas: master.replicas };
                Ok((master.conn, Some(found)))
            }
            Target::Cluster(cluster) => {
                let slot = slot.unwrap_or(0);
                let owner = cluster.owner(slot, config).await?;
                let found = Found { address: owner.address, slot: Some(slot), replicas: 0 };
                Ok((owner.conn, Some(found)))
            }
        }
    }

    /// A new connection of its own for a write about `routed` (a
    /// server-side key name), and, when that write's vote must be
    /// confirmed on it, how many replicas must have it. For a Sentinel
    /// group, the master the Sentinels name now; for a cluster, the master
    /// of `routed`'s slot: `bound` (the node the current connection goes
    /// to, while it is confirmed for that slot), else the one the seeds
    /// name now.
    pub async fn dedicated(
        &self,
        routed: &[u8],
        bound: Option<&str>,
        config: &AsyncConnectionConfig,
    ) -> redis::RedisResult<(MultiplexedConnection, Option<usize>)> {
        match self {
            Target::Direct(client) => {
                Ok((client.get_multiplexed_async_connection_with_config(config).await?, None))
            }
            Target::Sentinel(group) => {
                let master = group.master(config).await.map_err(|f| {
                    RedisError::from((ErrorKind::Io, "no Sentinel master", f.to_string()))
                })?;
                Ok((master.conn, Some(master.replicas)))
            }
            Target::Cluster(cluster) => {
                let failed = |f: Failure| {
                    RedisError::from((ErrorKind::Io, "no cluster master", f.to_string()))
                };
                let conn = match bound {
                    Some(address) => {
                        let client = cluster.client(address).map_err(failed)?;
                        client.get_multiplexed_async_connection_with_config(config).await?
                    }
                    None => {
                        let slot = cluster::key_slot(routed);
                        cluster.owner(slot, config).await.map(|o| o.conn).map_err(failed)?
                    }
                };
                Ok((conn, None))
            }
        }
    }

    /// The client to subscribe to `channel` on. Pub/sub only wakes waiters
    /// early: through a Sentinel group, the master found now is the one to
    /// listen on (a stale one costs a wake-up). A cluster passes every
    /// PUBLISH to all its nodes (the release scripts publish; SPUBLISH,
    /// sharded, would need Redis 7 and a channel in the lock's slot): any
    /// node hears it; the master of the channel's slot is the one asked
    /// for.
    pub async fn listener(
        &self,
        channel: &str,
        config: &AsyncConnectionConfig,
    ) -> Result<Client, Failure> {
        Ok(match self {
            Target::Direct(client) => client.clone(),
            Target::Sentinel(group) => group.master(config).await?.client,
            Target::Cluster(cluster) => {
                cluster.owner(cluster::key_slot(channel.as_bytes()), config).await?.client
            }
        })
    }
}
