//! The configuration file and the layering of the global options: a flag
//! wins over the environment, the environment over the file, the file over
//! the default. The file is `$REDLOCK_CONFIG`, else
//! `$XDG_CONFIG_HOME/redlock/config.toml` (`~/.config/redlock/config.toml`),
//! else `/etc/redlock/config.toml`; TOML, one key per global option with a
//! flag, spelled as the flag without its dashes, and the fleet's default
//! `ttl` and `wait` (for the subcommands that take `--ttl` and `--wait`;
//! their flags, and `-n`, win):
//!
//! ```toml
//! servers = ["redis://redis-a:6379", "redis://redis-b:6379", "redis://redis-c:6379"]
//! password-file = "/etc/redlock/password"
//! node-timeout = "200ms"
//! ttl = "1m"
//! wait = "15m"
//! ```
//!
//! Every value keeps where it came from ([`Origin`]), so that a bad value
//! names its file, line and key, and `redlock config` can show the source
//! of each setting.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::cli::{Given, Global, LogFormat, Parsed};
use crate::error::Error;

/// Where the file is looked for when `$REDLOCK_CONFIG` is not set, after
/// the user's own (`$XDG_CONFIG_HOME` or `~/.config`).
pub const SYSTEM_FILE: &str = "/etc/redlock/config.toml";

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A command-line flag.
    Flag,
    /// This environment variable.
    Env(String),
    /// This line of this configuration file.
    File(PathBuf, usize),
    /// redlock's default.
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag => f.write_str("flag"),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::File(path, line) => write!(f, "{}:{line}", path.display()),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// A value and where it came from.
#[derive(Clone, Debug)]
pub struct Setting<T> {
    /// The value.
    pub value: T,
    /// Its source.
    pub origin: Origin,
}

impl<T> Setting<T> {
    /// How messages name this setting: the flag, the variable, or
    /// `FILE:LINE: key` for a value from the configuration file.
    pub fn label(&self, flag: &str) -> String {
        match &self.origin {
            Origin::Env(var) => var.clone(),
            Origin::File(path, line) => {
                format!("{}:{line}: {}", path.display(), flag.trim_start_matches('-'))
            }
            Origin::Flag | Origin::Default => flag.to_owned(),
        }
    }
}

/// The global options after layering, each with its origin.
#[derive(Clone, Debug)]
pub struct Globals {
    /// The configuration file read, if any.
    pub file: Option<PathBuf>,
    /// `--servers`, comma-separated.
    pub servers: Setting<String>,
    /// `--quorum`.
    pub quorum: Setting<Option<usize>>,
    /// `--node-timeout`, unparsed.
    pub node_timeout: Setting<Option<String>>,
    /// `--drift-factor`, unparsed.
    pub drift_factor: Setting<String>,
    /// `--password-file`.
    pub password_file: Setting<Option<PathBuf>>,
    /// `--tls-ca`.
    pub tls_ca: Setting<Option<PathBuf>>,
    /// `--tls-cert`.
    pub tls_cert: Setting<Option<PathBuf>>,
    /// `--tls-key`.
    pub tls_key: Setting<Option<PathBuf>>,
    /// `-v` count.
    pub verbose: Setting<u8>,
    /// `-q`.
    pub quiet: Setting<bool>,
    /// `--log-format`.
    pub log_format: Setting<LogFormat>,
    /// `--raw-key`.
    pub raw_key: Setting<bool>,
    /// `--max-ttl`, unparsed.
    pub max_ttl: Setting<String>,
    /// `--trust-restarts`.
    pub trust_restarts: Setting<bool>,
    /// The file's `ttl`, unparsed: the default of `--ttl` (`None`: the
    /// flag's own default, or the flag given).
    pub ttl: Setting<Option<String>>,
    /// The file's `wait`, unparsed: the default of `--wait` (`None`: wait
    /// until acquired, or `--wait`/`-n` given).
    pub wait: Setting<Option<String>>,
}

/// The file's keys: the global options' long flags without dashes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Keys {
    servers: Option<Spanned<OneOrMany>>,
    quorum: Option<Spanned<usize>>,
    node_timeout: Option<Spanned<Number>>,
    drift_factor: Option<Spanned<Number>>,
    password_file: Option<Spanned<PathBuf>>,
    tls_ca: Option<Spanned<PathBuf>>,
    tls_cert: Option<Spanned<PathBuf>>,
    tls_key: Option<Spanned<PathBuf>>,
    verbose: Option<Spanned<u8>>,
    quiet: Option<Spanned<bool>>,
    raw_key: Option<Spanned<bool>>,
    log_format: Option<Spanned<String>>,
    max_ttl: Option<Spanned<Number>>,
    trust_restarts: Option<Spanned<bool>>,
    ttl: Option<Spanned<Number>>,
    wait: Option<Spanned<Number>>,
}

/// `servers = "a,b"` or `servers = ["a", "b"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of strings")]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// A duration or factor as a string (`"500ms"`) or a number (`5`, `0.01`).
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or a number")]
enum Number {
    Text(String),
    Int(i64),
    Float(f64),
}

impl Number {
    fn text(&self) -> String {
        match self {
            Number::Text(s) => s.clone(),
            Number::Int(i) => i.to_string(),
            Number::Float(f) => f.to_string(),
        }
    }
}

/// A parsed configuration file.
#[derive(Debug)]
pub struct File {
    path: PathBuf,
    text: String,
    keys: Keys,
}

impl File {
    /// Parses `text`, read from `path`; an unknown key or a value of the
    /// wrong type is a usage error naming the file, the line and the key.
    pub fn parse(path: &Path, text: String) -> Result<File, Error> {
        match toml::from_str::<Keys>(&text) {
            Ok(keys) => Ok(File { path: path.to_owned(), text, keys }),
            Err(e) => {
                let line = e.span().map_or(1, |s| line_of(&text, s.start));
                let key = key_on_line(&text, line);
                let key = key.map(|k| format!(" {k}:")).unwrap_or_default();
                let message =
                    unknown_key(e.message()).unwrap_or_else(|| e.message().replace('\n', " "));
                Err(Error::Usage(format!("{}:{line}:{key} {message}", path.display())))
            }
        }
    }

    fn origin<T>(&self, spanned: &Spanned<T>) -> Origin {
        Origin::File(self.path.clone(), line_of(&self.text, spanned.span().start))
    }
}

/// serde's "unknown field `node-timout`, expected one of `servers`, ..."
/// as "unknown key `node-timout`; did you mean `node-timeout`?", when one
/// key is near enough ([`crate::cli::did_you_mean`]); `None` for any other
/// message, or a key near none (whose message lists them all).
fn unknown_key(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let typed = rest.split('`').next()?;
    let known = rest.split('`').skip(2).step_by(2);
    let meant = crate::cli::did_you_mean(typed, known)?;
    Some(format!("unknown key `{typed}`; did you mean `{meant}`?"))
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).map_or(1, |head| head.matches('\n').count() + 1)
}

/// The key set on `line` (`key = value`), for messages.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let (key, _) = l.split_once('=')?;
    Some(key.trim().to_owned()).filter(|k| !k.is_empty())
}

/// Finds and parses the configuration file: `$REDLOCK_CONFIG` (which must
/// exist), else the user's, else the system's; `None` when neither exists.
pub fn load() -> Result<Option<File>, Error> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(path) = var("REDLOCK_CONFIG") {
        return read(&path, "REDLOCK_CONFIG=").map(Some);
    }
    let user_dir = var("XDG_CONFIG_HOME").or_else(|| var("HOME").map(|h| h.join(".config")));
    let candidates = user_dir.map(|d| d.join("redlock/config.toml")).into_iter();
    for path in candidates.chain([PathBuf::from(SYSTEM_FILE)]) {
        match std::fs::metadata(&path) {
            Ok(_) => return read(&path, "").map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::Usage(format!(
                    "config file {}: cannot read: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(None)
}

fn read(path: &Path, named_by: &str) -> Result<File, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Usage(format!("config file {named_by}{}: cannot read: {e}", path.display()))
    })?;
    File::parse(path, text)
}

/// Layers the command line (flags and environment, as clap saw them) over
/// the file over the defaults.
pub fn layer(parsed: &Parsed, file: Option<&File>) -> Result<Globals, Error> {
    let g: &Global = &parsed.cli.global;
    let given = |id: &str| parsed.given.get(id).cloned().unwrap_or(Given::No);
    // The clap value when given; else the file's; else the clap value (the default).
    fn pick<T, F>(
        given: Given,
        clap: T,
        from_file: Option<&Spanned<F>>,
        file: Option<&File>,
        convert: impl Fn(&F) -> Result<T, String>,
    ) -> Result<Setting<T>, Error> {
        let origin = match given {
            Given::Flag => Origin::Flag,
            Given::Env(var) => Origin::Env(var),
            Given::No => match (from_file, file) {
                (Some(spanned), Some(file)) => {
                    let origin = file.origin(spanned);
                    let value = convert(spanned.get_ref())
                        .map_err(|m| Error::Usage(format!("{origin}: {m}")))?;
                    return Ok(Setting { value, origin });
                }
                _ => Origin::Default,
            },
        };
        Ok(Setting { value: clap, origin })
    }
    let keys = file.map(|f| &f.keys);
    let k = |f: fn(&Keys) -> Option<&Spanned<PathBuf>>| keys.and_then(f);
    let path = |p: &PathBuf| Ok(Some(p.clone()));
    Ok(Globals {
        file: file.map(|f| f.path.clone()),
        servers: pick(
            given("servers"),
            g.servers.clone().unwrap_or_default(),
            keys.and_then(|k| k.servers.as_ref()),
            file,
            |v| {
                Ok(match v {
                    OneOrMany::One(s) => s.clone(),
                    OneOrMany::Many(list) => list.join(","),
                })
            },
        )?,
        quorum: pick(given("quorum"), g.quorum, keys.and_then(|k| k.quorum.as_ref()), file, |q| {
            Ok(Some(*q))
        })?,
        node_timeout: pick(
            given("node_timeout"),
            g.node_timeout.clone(),
            keys.and_then(|k| k.node_timeout.as_ref()),
            file,
            |n| Ok(Some(n.text())),
        )?,
        drift_factor: pick(
            given("drift_factor"),
            g.drift_factor.clone(),
            keys.and_then(|k| k.drift_factor.as_ref()),
            file,
            |n| Ok(n.text()),
        )?,
        password_file: pick(
            given("password_file"),
            g.password_file.clone(),
            k(|k| k.password_file.as_ref()),
            file,
            path,
        )?,
        tls_ca: pick(given("tls_ca"), g.tls_ca.clone(), k(|k| k.tls_ca.as_ref()), file, path)?,
        tls_cert: pick(
            given("tls_cert"),
            g.tls_cert.clone(),
            k(|k| k.tls_cert.as_ref()),
            file,
            path,
        )?,
        tls_key: pick(given("tls_key"), g.tls_key.clone(), k(|k| k.tls_key.as_ref()), file, path)?,
        verbose: pick(
            given("verbose"),
            g.verbose,
            keys.and_then(|k| k.verbose.as_ref()),
            file,
            |v| Ok(*v),
        )?,
        quiet: pick(given("quiet"), g.quiet, keys.and_then(|k| k.quiet.as_ref()), file, |q| {
            Ok(*q)
        })?,
        raw_key: pick(
            given("raw_key"),
            g.raw_key,
            keys.and_then(|k| k.raw_key.as_ref()),
            file,
            |r| Ok(*r),
        )?,
        max_ttl: pick(
            given("max_ttl"),
            g.max_ttl.clone(),
            keys.and_then(|k| k.max_ttl.as_ref()),
            file,
            |n| Ok(n.text()),
        )?,
        trust_restarts: pick(
            given("trust_restarts"),
            g.trust_restarts,
            keys.and_then(|k| k.trust_restarts.as_ref()),
            file,
            |t| Ok(*t),
        )?,
        ttl: pick(given("ttl"), None, keys.and_then(|k| k.ttl.as_ref()), file, |n| {
            Ok(Some(n.text()))
        })?,
        wait: pick(
            // `-n` is a wait given on the command line too.
            if given("no_wait") == Given::Flag { Given::Flag } else { given("wait") },
            None,
            keys.and_then(|k| k.wait.as_ref()),
            file,
            |n| Ok(Some(n.text())),
        )?,
        log_format: pick(
            given("log_format"),
            g.log_format,
            keys.and_then(|k| k.log_format.as_ref()),
            file,
            |f| {
                <LogFormat as clap::ValueEnum>::from_str(f, false)
                    .map_err(|_| format!("log-format {f:?}: must be \"text\" or \"json\""))
            },
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globals(args: &[&str], file: &str) -> Result<Globals, Error> {
        let parsed = crate::cli::parse_with_env(
            ["redlock"].iter().chain(args).copied().chain(["status", "-k", "k"]),
            |_| None,
        )
        .unwrap();
        let file = File::parse(Path::new("/etc/redlock/config.toml"), file.to_owned())?;
        layer(&parsed, Some(&file))
    }

    fn usage(args: &[&str], file: &str) -> String {
        match globals(args, file) {
            Err(Error::Usage(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn the_file_fills_what_flags_leave_unset() {
        let text =
            "# fleet\nservers = [\"redis://a\", \"redis://b\"]\nnode-timeout = 2\nquiet = true\n";
        let g = globals(&["--quorum", "2"], text).unwrap();
        assert_eq!(g.servers.value, "redis://a,redis://b");
        assert_eq!(g.servers.origin, Origin::File("/etc/redlock/config.toml".into(), 2));
        assert_eq!(g.node_timeout.value.as_deref(), Some("2"));
        assert_eq!(g.servers.label("--servers"), "/etc/redlock/config.toml:2: servers");
        assert!(g.quiet.value);
        assert_eq!(g.quorum.origin, Origin::Flag);
        assert_eq!(g.drift_factor.origin, Origin::Default);
        // A flag wins over the file.
        let g = globals(&["--servers", "redis://c"], text).unwrap();
        assert_eq!((g.servers.value.as_str(), &g.servers.origin), ("redis://c", &Origin::Flag));
    }

    #[test]
    fn a_bad_file_names_file_line_and_key() {
        let m = usage(&[], "servers = \"redis://a\"\nnode-timout = \"1s\"\n");
        assert_eq!(
            m,
            "/etc/redlock/config.toml:2: node-timout: unknown key `node-timout`; did you mean `node-timeout`?"
        );
        // A key near none: the list of keys.
        let m = usage(&[], "colour = true\n");
        assert!(m.contains("unknown field `colour`, expected one of `servers`"), "{m}");
        let m = usage(&[], "\nquorum = \"two\"\n");
        assert!(m.starts_with("/etc/redlock/config.toml:2: quorum: "), "{m}");
        let m = usage(&[], "log-format = \"xml\"\n");
        assert!(m.starts_with("/etc/redlock/config.toml:1: log-format \"xml\""), "{m}");
        let m = usage(&[], "servers = [\n");
        assert!(m.starts_with("/etc/redlock/config.toml:"), "{m}");
    }
}
