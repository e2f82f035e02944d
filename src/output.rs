//! Messages on stderr: text lines prefixed `redlock:`, or one JSON object
//! per line with `--log-format json`. Data meant for scripts (a token, a
//! status table) goes to stdout from the subcommands, never through here.

use std::io::Write;

/// How messages on stderr are written (`--log-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per message.
    Text,
    /// One JSON object per line.
    Json,
}

/// How much to say and in which format.
#[derive(Clone, Copy, Debug)]
pub struct Log {
    /// -1 quiet, 0 normal, 1+ verbose.
    level: i8,
    format: LogFormat,
}

/// How important a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Always shown.
    Error,
    /// Shown unless `-q` (busy lock, warnings).
    Warn,
    /// Shown unless `-q`: progress a user waits on (a wait begins, lasts, ends).
    Notice,
    /// Shown with `-v`.
    Info,
    /// Shown with `-vv`.
    Debug,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Notice => "notice",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    fn min_log_level(self) -> i8 {
        match self {
            Level::Error => i8::MIN,
            Level::Warn | Level::Notice => 0,
            Level::Info => 1,
            Level::Debug => 2,
        }
    }
}

impl Log {
    /// From `-v` (count), `-q` and `--log-format`.
    pub fn new(verbose: u8, quiet: bool, format: LogFormat) -> Log {
        let level = if quiet { -1 } else { i8::try_from(verbose).unwrap_or(i8::MAX) };
        Log { level, format }
    }

    /// True when a message of `level` would be written. In JSON mode the
    /// info level (the lock's events) is on unless `-q`: that output is for
    /// machines, which want every phase.
    pub fn enabled(&self, level: Level) -> bool {
        let shift = i8::from(self.format == LogFormat::Json && level == Level::Info);
        self.level + shift >= level.min_log_level()
    }

    /// True with `-v` (or more).
    pub fn verbose(&self) -> bool {
        self.level >= 1
    }

    /// One phase of the lock's life: in JSON mode an object with `event`
    /// and `fields`; in text mode the message alone.
    pub fn event(&self, level: Level, event: &str, message: &str, fields: serde_json::Value) {
        let mut all = serde_json::json!({ "event": event });
        if let (Some(all), serde_json::Value::Object(extra)) = (all.as_object_mut(), fields) {
            all.extend(extra);
        }
        self.emit(level, message, all);
    }

    /// Writes one message; `fields` are extra JSON members (ignored in text
    /// mode). In JSON mode every line has an `event`, so that a pipeline
    /// routing on it drops none: a message written without one is the
    /// event named after its level (`error`, `warning`, `notice`, `info`,
    /// `debug`).
    pub fn emit(&self, level: Level, message: &str, fields: serde_json::Value) {
        if !self.enabled(level) {
            return;
        }
        let line = match self.format {
            LogFormat::Text => format!("redlock: {}", crate::text::guarded(message)),
            LogFormat::Json => {
                let ts_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                let event = match level {
                    Level::Warn => "warning",
                    other => other.name(),
                };
                let mut obj = serde_json::json!({
                    "ts_ms": ts_ms, "level": level.name(), "event": event, "msg": message
                });
                if let (Some(obj), serde_json::Value::Object(extra)) = (obj.as_object_mut(), fields)
                {
                    obj.extend(extra);
                }
                // A message may quote what a server or the environment said.
                crate::text::json(&obj)
            }
        };
        // stderr may be closed (a cron job's output discarded); nothing to do then.
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }

    /// The line of the error that ends the process: the `error` event with
    /// `kind` ([`crate::error::Error::kind`]) and `exit_code`; a signal
    /// that ended a wait is the `interrupted` warning; a busy lock is the
    /// `busy` warning (with `-E 0`, or for a tick that ran elsewhere, a
    /// `-v` message: cron mails nothing); a tick paused by a freeze is a
    /// `-v` message too.
    pub fn failed(&self, e: &crate::error::Error) {
        let code = e.exit_code();
        let fields = serde_json::json!({ "kind": e.kind(), "exit_code": code });
        let (level, event) = match e {
            crate::error::Error::Busy { code: 0, .. }
            | crate::error::Error::Busy { quiet: true, .. } => (Level::Info, "busy"),
            // A freeze paused the job on purpose: nobody need be mailed.
            crate::error::Error::Paused { .. } => (Level::Info, "paused"),
            crate::error::Error::Busy { .. } => (Level::Warn, "busy"),
            crate::error::Error::Interrupted(..) => (Level::Warn, "interrupted"),
            crate::error::Error::Problems(problems) => {
                for problem in problems {
                    self.event(Level::Error, "error", problem, fields.clone());
                }
                return;
            }
            _ => (Level::Error, "error"),
        };
        self.event(level, event, &e.to_string(), fields);
    }

    /// A very verbose message.
    pub fn debug(&self, message: &str) {
        self.emit(Level::Debug, message, serde_json::Value::Null);
    }
}
