//! A history entry: one finished run, or a freeze's gap ([`Outcome::Gap`]),
//! as stored (JSON) and shown; how it ended, for people; and the tick and
//! schedule it belonged to, as `check` lists the expected ticks by.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The command exited by itself (its code is the entry's `exit_code`).
    Exited,
    /// The command was ended by a signal not sent by redlock (exit 128+N).
    Signaled,
    /// redlock stopped the command because the lock was lost (exit 70).
    Lost,
    /// redlock stopped the command because `--max-hold` ran out (exit 124).
    MaxHold,
    /// The command could not be executed (126) or was not found (127).
    CannotExecute,
    /// No run: a freeze (`redlock hold`) lost the lock at the entry's
    /// start and took it back `duration_ms` later; the entry's
    /// `meanwhile` names whoever held the key in between.
    Gap,
}

impl Outcome {
    /// The outcome of a `run` that held the lock, from its result; `signaled`
    /// says whether the command's own status was a signal. `None` for the
    /// errors that are no outcome of the command.
    pub fn of(result: &Result<u8, Error>, signaled: bool) -> Option<(Outcome, u8)> {
        let outcome = match result {
            Ok(code) if signaled => return Some((Outcome::Signaled, *code)),
            Ok(code) => return Some((Outcome::Exited, *code)),
            Err(Error::Lost(_)) => Outcome::Lost,
            Err(Error::MaxHold(_)) => Outcome::MaxHold,
            Err(Error::CannotRun { .. }) => Outcome::CannotExecute,
            Err(_) => return None,
        };
        result.as_ref().err().map(|e| (outcome, e.exit_code()))
    }
}

/// One finished run, as stored (JSON) and shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The run's lock token: unique, so copies on several servers merge.
    pub token: String,
    /// The host redlock ran on.
    pub host: String,
    /// redlock's process id.
    pub pid: u32,
    /// When the lock was acquired, in ms since the epoch.
    pub start_ms: u64,
    /// How long the lock was held, in ms.
    pub duration_ms: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// The exit code redlock ended with.
    pub exit_code: u8,
    /// The run's fencing number, when fencing was on.
    pub fence: Option<u64>,
    /// The tick the run belonged to (`--once-per`): its start, ms since
    /// the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_start_ms: Option<u64>,
    /// The length of that tick, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_ms: Option<u64>,
    /// The offset of the tick's zone at its start, seconds (shown so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_offset_s: Option<i32>,
    /// The tick's schedule (`crate::schedule::Schedule::identity`): what
    /// `check` lists the expected ticks by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Where the run ran, as its `--note` said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The CI job the run ran in (its URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// A freeze's gap ([`Outcome::Gap`]): who held the key while the
    /// freeze did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meanwhile: Vec<Meanwhile>,
}

/// A holder of a key during a freeze's gap, from its token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meanwhile {
    /// Its token (another client's value, for one that is no redlock token).
    pub token: String,
    /// Its host, when the token says.
    pub host: Option<String>,
    /// Its process, when the token says.
    pub pid: Option<u32>,
    /// Its `--note`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its CI job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

impl Meanwhile {
    /// The holder that `value` (a lock's value) names.
    pub fn of(value: &str) -> Meanwhile {
        let token = value.parse::<crate::token::Token>().ok();
        Meanwhile {
            token: value.to_owned(),
            host: token.as_ref().map(|t| t.host.clone()),
            pid: token.as_ref().map(|t| t.pid),
            note: token.as_ref().and_then(|t| t.note.clone()),
            job: token.and_then(|t| t.job),
        }
    }

    /// For people: `web-2 pid 4242 (note "hotfix")`, or another client's.
    pub fn describe(&self) -> String {
        let printable = |t: &str| crate::text::printable(t).into_owned();
        let mut out = match (&self.host, self.pid) {
            (Some(host), Some(pid)) => format!("{} pid {pid}", printable(host)),
            _ => format!(
                "another client (value {:?})",
                crate::text::display_key(self.token.as_bytes())
            ),
        };
        let mut more = Vec::new();
        if let Some(job) = &self.job {
            more.push(format!("CI job {}", printable(job)));
        }
        if let Some(note) = &self.note {
            more.push(format!("note \"{}\"", printable(note)));
        }
        if !more.is_empty() {
            out += &format!(" ({})", more.join(", "));
        }
        out
    }
}

impl Entry {
    /// True for a run's entry; false for a freeze's gap ([`Outcome::Gap`]),
    /// which `check` does not judge as a run.
    pub fn is_run(&self) -> bool {
        self.outcome != Outcome::Gap
    }

    /// The tick the run belonged to (`--once-per`).
    pub fn tick(&self) -> Option<crate::lock::Tick> {
        let (start_ms, len) = (self.tick_start_ms?, self.tick_ms?);
        let offset_s = self.tick_offset_s.unwrap_or(0);
        Some(crate::lock::Tick { start_ms, end_ms: start_ms.checked_add(len)?, offset_s })
    }

    /// The identity of the schedule the run's tick came from
    /// ([`crate::schedule::Schedule::identity`], canonical). An older redlock's entry
    /// names none, only its `--once-per` length: epoch-aligned slots, the
    /// same as `--once-per` of that length in UTC below a day or in whole
    /// days (days count from 1970-01-01 too); its weeks began on a
    /// Thursday, not a Monday, so those (and other lengths) name none.
    pub fn schedule_identity(&self) -> Option<String> {
        // Written in the canonical form of its version, and read in this
        // one's: `cron @daily in Etc/UTC` is `cron 0 0 * * * in UTC`.
        if let Some(identity) = &self.schedule {
            let schedule = crate::schedule::Schedule::from_identity(identity);
            return Some(schedule.map_or_else(|_| identity.clone(), |s| s.identity()));
        }
        let len = self.tick_ms.filter(|ms| *ms < DAY_MS || ms % (7 * DAY_MS) != 0)?;
        let utc = crate::schedule::Zone::utc();
        crate::schedule::Schedule::once_per(Duration::from_millis(len), utc)
            .ok()
            .map(|s| s.identity())
    }

    /// When the run started.
    pub fn start(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.start_ms)
    }

    /// Whether the run succeeded: the command exited by itself with 0.
    /// `None` for a freeze's gap ([`Outcome::Gap`]): no run, so neither
    /// a success nor a failure.
    pub fn succeeded(&self) -> Option<bool> {
        self.is_run().then(|| self.outcome == Outcome::Exited && self.exit_code == 0)
    }

    /// How it ended, for people: `exit 0`, `killed by SIGTERM`, `lost the
    /// lock`, `--max-hold ran out`, `could not execute (127)`.
    pub fn describe_outcome(&self) -> String {
        match self.outcome {
            Outcome::Exited => format!("exit {}", self.exit_code),
            Outcome::Signaled => format!(
                "killed by {}",
                crate::signals::name(i32::from(self.exit_code.saturating_sub(128)))
            ),
            Outcome::Lost => "lost the lock".to_owned(),
            Outcome::MaxHold => "--max-hold ran out".to_owned(),
            Outcome::CannotExecute => format!("could not execute ({})", self.exit_code),
            Outcome::Gap => {
                let end = self.start_ms.saturating_add(self.duration_ms);
                let who = match self.meanwhile.as_slice() {
                    [] => "nobody held it meanwhile".to_owned(),
                    held => format!(
                        "held meanwhile by {}",
                        held.iter().map(Meanwhile::describe).collect::<Vec<_>>().join(" and by ")
                    ),
                };
                format!("a freeze's gap, taken back at {}: {who}", crate::lock::freeze_instant(end))
            }
        }
    }
}

/// A day in milliseconds.
const DAY_MS: u64 = 86_400_000;

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A run's entry that exited 0, started at `start_ms`.
    pub(in crate::history) fn entry(token: &str, start_ms: u64) -> Entry {
        Entry {
            token: token.into(),
            host: "h".into(),
            pid: 1,
            start_ms,
            duration_ms: 5,
            outcome: Outcome::Exited,
            exit_code: 0,
            fence: None,
            tick_start_ms: None,
            tick_ms: None,
            tick_offset_s: None,
            schedule: None,
            note: None,
            job: None,
            meanwhile: Vec::new(),
        }
    }

    #[test]
    fn a_freeze_s_gap_names_who_held_the_key_and_is_no_run() {
        let other = crate::token::Token::new().with_note(Some("hotfix".into()), None);
        let gap = Entry {
            outcome: Outcome::Gap,
            duration_ms: 4_000,
            meanwhile: vec![Meanwhile::of(&other.to_string()), Meanwhile::of("raw")],
            ..entry("t", 1_795_975_200_000)
        };
        assert!(!gap.is_run() && entry("r", 1).is_run());
        assert_eq!((gap.succeeded(), entry("r", 1).succeeded()), (None, Some(true)));
        let text = gap.describe_outcome();
        assert!(
            text.starts_with(
                "a freeze's gap, taken back at 2026-11-29T18:00:04+00:00: held meanwhile by "
            ),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} pid {} (note \"hotfix\")", other.host, other.pid)),
            "{text}"
        );
        assert!(text.contains("and by another client (value \"raw\")"), "{text}");
        let json = serde_json::to_string(&gap).unwrap();
        assert!(json.contains(r#""outcome":"gap""#) && json.contains(r#""meanwhile":["#), "{json}");
        assert_eq!(serde_json::from_str::<Entry>(&json).unwrap(), gap);
        // A run's entry is written as before: no `meanwhile`.
        assert!(!serde_json::to_string(&entry("r", 1)).unwrap().contains("meanwhile"));
    }

    #[test]
    fn outcomes_follow_the_result() {
        assert_eq!(Outcome::of(&Ok(3), false), Some((Outcome::Exited, 3)));
        assert_eq!(Outcome::of(&Ok(143), true), Some((Outcome::Signaled, 143)));
        assert_eq!(Outcome::of(&Err(Error::Lost("x".into())), false), Some((Outcome::Lost, 70)));
        assert_eq!(Outcome::of(&Err(Error::MaxHold("x".into())), false).unwrap().1, 124);
        assert_eq!(Outcome::of(&Err(Error::Usage("x".into())), false), None);
        let e = Entry { outcome: Outcome::Signaled, exit_code: 143, ..entry("t", 1) };
        assert_eq!(e.describe_outcome(), "killed by SIGTERM");
    }

    /// An entry names its schedule as its version spelled it; `check`
    /// compares them in this version's canonical form, so a line or zone
    /// spelled another way by an older redlock is the same schedule.
    #[test]
    fn an_entry_s_schedule_is_read_in_the_canonical_form() {
        use crate::schedule::{Schedule, Zone};
        let canonical = Schedule::cron("0 0 * * *", Zone::utc()).unwrap().identity();
        let old = Entry { schedule: Some("cron @daily in Etc/UTC".into()), ..entry("a", 1) };
        assert_eq!(old.schedule_identity(), Some(canonical));
        let unknown = Entry { schedule: Some("a later version's".into()), ..entry("b", 1) };
        assert_eq!(unknown.schedule_identity().as_deref(), Some("a later version's"));
    }

    #[test]
    fn entries_round_trip_as_json() {
        let e = Entry { fence: Some(9), outcome: Outcome::MaxHold, ..entry("t", 1) };
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains(r#""outcome":"max-hold""#), "{json}");
        assert_eq!(serde_json::from_str::<Entry>(&json).unwrap(), e);
    }
}
