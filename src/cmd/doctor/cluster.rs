//! The cluster check of a `redis+cluster://` member: each seed's
//! `cluster_state` and slot map, and the probe key's slot.

use super::{PROBE_KEY, within};
use crate::lock::Fleet;
use crate::server::cluster::{SlotMap, key_slot};
use crate::server::{Failure, Server};

/// What one seed said: its `cluster_state` and slot map, or the error.
pub type SeedAnswer = Result<(String, SlotMap), String>;

/// What the seeds of one cluster said.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterCheck {
    /// The cluster's display name.
    pub group: String,
    /// Each seed's address and answer: its `cluster_state` and slot map,
    /// or the error.
    pub seeds: Vec<(String, SeedAnswer)>,
    /// The probe key's hash slot (where the status round went).
    pub probe_slot: u16,
}

impl ClusterCheck {
    /// The first slot map a seed gave.
    pub fn map(&self) -> Option<&SlotMap> {
        self.seeds.iter().find_map(|(_, a)| a.as_ref().ok().map(|(_, map)| map))
    }

    /// How many seeds answered.
    pub fn answered(&self) -> usize {
        self.seeds.iter().filter(|(_, a)| a.is_ok()).count()
    }

    /// True when every seed that answered gave the same slot map.
    pub fn agreed(&self) -> bool {
        let maps: Vec<&SlotMap> =
            self.seeds.iter().filter_map(|(_, a)| a.as_ref().ok().map(|(_, m)| m)).collect();
        maps.windows(2).all(|w| w[0].ranges == w[1].ranges)
    }
}

/// Asks each seed of `server`'s cluster for its state and slot map, each
/// call bounded by the node timeout.
pub async fn check_cluster(fleet: &Fleet, server: &Server) -> Option<ClusterCheck> {
    let cluster = server.cluster()?;
    let config = server.connection_config();
    let timeout = server.timeout();
    let asks = cluster.seeds().enumerate().map(|(i, seed)| {
        let config = &config;
        async move {
            let work = async {
                let info: String =
                    cluster.ask(i, redis::cmd("CLUSTER").arg("INFO"), config).await?;
                let state = info
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("cluster_state:"))
                    .unwrap_or("unknown")
                    .to_owned();
                Ok::<_, Failure>((state, cluster.slots(i, config).await?))
            };
            (seed.to_owned(), within(timeout, work).await)
        }
    });
    let probe_key = fleet.key_layout().lock_key(PROBE_KEY);
    Some(ClusterCheck {
        group: server.name().to_owned(),
        seeds: futures_util::future::join_all(asks).await,
        probe_slot: key_slot(probe_key.as_bytes()),
    })
}
