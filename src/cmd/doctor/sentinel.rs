//! The Sentinel check of a `redis+sentinel://` group: what each of its
//! Sentinels names as the master, and that master's `ROLE`.

use super::within;
use crate::server::Server;
use crate::server::sentinel::Answer;

/// What one Sentinel said: the master's `host:port` and how many replicas
/// it sees up, `None` when it does not monitor the service, or the error.
pub type SentinelAnswer = Result<Option<(String, usize)>, String>;

/// What the Sentinels of one group said, and what their master is.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupCheck {
    /// The group's display name.
    pub group: String,
    /// The service name.
    pub service: String,
    /// Each Sentinel's address and answer.
    pub answers: Vec<(String, SentinelAnswer)>,
    /// The master more than half of the listed Sentinels name, if one is.
    pub master: Option<String>,
    /// That master's `ROLE` and online replicas, or why it could not be read.
    pub master_role: Result<(String, usize), String>,
}

impl GroupCheck {
    /// The Sentinels' distinct answers (addresses), in order, with how
    /// many name each.
    pub fn named(&self) -> Vec<(&str, usize)> {
        let mut named: Vec<(&str, usize)> = Vec::new();
        for (_, answer) in &self.answers {
            if let Ok(Some((m, _))) = answer {
                match named.iter_mut().find(|(n, _)| n == m) {
                    Some((_, count)) => *count += 1,
                    None => named.push((m, 1)),
                }
            }
        }
        named
    }

    /// How many Sentinels answered (a master or none).
    pub fn answered(&self) -> usize {
        self.answers.iter().filter(|(_, a)| a.is_ok()).count()
    }

    /// The most replicas a Sentinel that names the master sees up.
    pub fn replicas_seen(&self) -> usize {
        self.answers
            .iter()
            .filter_map(|(_, a)| match a {
                Ok(Some((m, n))) if Some(m) == self.master.as_ref() => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}

/// `a:1 (2), b:2 (1)`: addresses and how many Sentinels name each.
pub fn shown_names(named: &[(&str, usize)]) -> String {
    named.iter().map(|(m, n)| format!("{m} ({n})")).collect::<Vec<_>>().join(", ")
}

/// Asks each Sentinel of `server`'s group for the master and the replicas
/// it sees, and the master more than half of them name for its `ROLE`;
/// each call bounded by the node timeout.
pub async fn check_group(server: &Server) -> Option<GroupCheck> {
    let group = server.sentinel()?;
    let config = server.connection_config();
    let timeout = server.timeout();
    let asks = group.sentinels().enumerate().map(|(i, address)| {
        let config = &config;
        async move {
            let answer = within(timeout, group.ask(i, config)).await.map(|answer| match answer {
                Answer::Master { address, replicas } => Some((address, replicas)),
                Answer::Unknown => None,
            });
            (address.to_owned(), answer)
        }
    });
    let answers = futures_util::future::join_all(asks).await;
    let mut check = GroupCheck {
        group: server.name().to_owned(),
        service: group.service().to_owned(),
        answers,
        master: None,
        master_role: Err("no master named by a majority of the Sentinels".to_owned()),
    };
    // The same rule as a lock operation's (`Group::named`): more than half
    // of the listed Sentinels.
    let need = check.answers.len() / 2 + 1;
    let master = check.named().into_iter().find(|(_, n)| *n >= need).map(|(m, _)| (*m).to_owned());
    if let Some(master) = master {
        check.master_role = within(timeout, group.role_of(&master, &config))
            .await
            .map(|(_, _, role)| (role.role, role.replicas));
        check.master = Some(master);
    }
    Some(check)
}
