//! The nodes a connection kind asks before it can reach its server (a
//! Sentinel group's Sentinels, a cluster's seeds): one client each, and
//! the connection to each kept for the next question, since a `run` asks
//! again before every renewal; a connection that fails is dropped and made
//! again at the next question.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};

use super::Failure;

/// Nodes to ask, in URL order, with their kept connections.
pub struct Kept {
    /// Each node's `host:port` and client.
    nodes: Vec<(String, Client)>,
    /// Each node's open connection, if any.
    open: Vec<Mutex<Option<MultiplexedConnection>>>,
    /// Whether the nodes are reached over TLS, and the connect timeout:
    /// a TLS connection that times out is said as such ([`connect_failure`]).
    tls: Option<Duration>,
}

impl Kept {
    /// The nodes at these addresses, with these clients; nothing connected.
    /// `tls`: the connect timeout, when the nodes speak TLS.
    pub fn new(nodes: Vec<(String, Client)>, tls: Option<Duration>) -> Kept {
        let open = nodes.iter().map(|_| Mutex::new(None)).collect();
        Kept { nodes, open, tls }
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The address of node `index`.
    pub fn address(&self, index: usize) -> &str {
        &self.nodes[index].0
    }

    /// The nodes' addresses.
    pub fn addresses(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|(a, _)| a.as_str())
    }

    /// Runs `command` on node `index` (its kept connection, or a new one);
    /// `failure` reads an error.
    pub async fn ask<T: redis::FromRedisValue>(
        &self,
        index: usize,
        command: &redis::Cmd,
        config: &AsyncConnectionConfig,
        failure: fn(&RedisError) -> Failure,
    ) -> Result<T, Failure> {
        let mut conn = self.connection(index, config, failure).await?;
        command.query_async(&mut conn).await.map_err(|e| self.drop_failed(index, &e, failure))
    }

    /// [`Kept::ask`] for a pipeline: its commands in one round trip.
    pub async fn ask_pipe<T: redis::FromRedisValue>(
        &self,
        index: usize,
        pipeline: &redis::Pipeline,
        config: &AsyncConnectionConfig,
        failure: fn(&RedisError) -> Failure,
    ) -> Result<T, Failure> {
        let mut conn = self.connection(index, config, failure).await?;
        pipeline.query_async(&mut conn).await.map_err(|e| self.drop_failed(index, &e, failure))
    }

    /// Node `index`'s kept connection, or a new one (then kept).
    async fn connection(
        &self,
        index: usize,
        config: &AsyncConnectionConfig,
        failure: fn(&RedisError) -> Failure,
    ) -> Result<MultiplexedConnection, Failure> {
        let (_, client) = &self.nodes[index];
        if let Some(conn) = self.slot(index).clone() {
            return Ok(conn);
        }
        let conn = client
            .get_multiplexed_async_connection_with_config(config)
            .await
            .map_err(|e| connect_failure(&e, self.tls).unwrap_or_else(|| failure(&e)))?;
        *self.slot(index) = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets node `index`'s connection after `e`, so that the next
    /// question connects afresh; the failure `e` stands for.
    fn drop_failed(
        &self,
        index: usize,
        e: &RedisError,
        failure: fn(&RedisError) -> Failure,
    ) -> Failure {
        *self.slot(index) = None;
        failure(e)
    }

    fn slot(&self, index: usize) -> std::sync::MutexGuard<'_, Option<MultiplexedConnection>> {
        // A poisoned slot only means a panic mid-assignment of an Option.
        self.open[index].lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The failure of a TLS connect (`tls`: its timeout) that timed out: most
/// likely a plain port, which waits for a command instead of answering
/// the handshake, or a silent one; `None` for any other error.
pub fn connect_failure(e: &RedisError, tls: Option<Duration>) -> Option<Failure> {
    let timeout = tls?;
    (e.is_timeout() || e.to_string().contains("timed out")).then_some(Failure::TlsTimeout(timeout))
}
