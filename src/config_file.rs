//! The configuration file and the layering of the global options: a flag
//! wins over the environment, the environment over the file, the file over
//! the default. The file is `--config FILE`, else `$REDLOCK_CONFIG`, else
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

use std::collections::BTreeMap;
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
    /// `--host`, unchecked (`None`: the kernel's host name).
    pub host: Setting<Option<String>>,
    /// The file's `tz`: the default of `--tz` (`None`: the environment's,
    /// or `--tz` given).
    pub tz: Setting<Option<String>>,
}

/// The file's keys: the global options' long flags without dashes, and
/// the defaults of `--ttl` and `--wait`.
pub const KEYS: &[&str] = &[
    "servers",
    "quorum",
    "node-timeout",
    "drift-factor",
    "password-file",
    "tls-ca",
    "tls-cert",
    "tls-key",
    "verbose",
    "quiet",
    "raw-key",
    "log-format",
    "max-ttl",
    "trust-restarts",
    "host",
    "ttl",
    "wait",
    "tz",
];

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

/// A parsed configuration file: the values of its known keys, and what
/// else it held (a syntax error, unknown keys), so that `redlock config`
/// reports every problem at once and still shows the rest.
#[derive(Debug)]
pub struct File {
    path: PathBuf,
    text: String,
    values: BTreeMap<String, Spanned<toml::Value>>,
    problems: Vec<Error>,
}

impl File {
    /// Parses `text`, read from `path`. A syntax error or an unknown key is
    /// a problem ([`File::problems`]) naming the file, the line and the
    /// key; the keys around an unknown one are still read.
    pub fn parse(path: &Path, text: String) -> File {
        let mut file =
            File { path: path.to_owned(), text, values: BTreeMap::new(), problems: Vec::new() };
        let table = match toml::from_str::<BTreeMap<String, Spanned<toml::Value>>>(&file.text) {
            Ok(table) => table,
            Err(e) => {
                let line = e.span().map_or(1, |s| line_of(&file.text, s.start));
                let key =
                    key_on_line(&file.text, line).map(|k| format!(" {k}:")).unwrap_or_default();
                let message = e.message().replace('\n', " ");
                file.problems
                    .push(Error::Usage(format!("{}:{line}:{key} {message}", path.display())));
                return file;
            }
        };
        let mut unknown = Vec::new();
        for (key, value) in table {
            if KEYS.contains(&key.as_str()) {
                file.values.insert(key, value);
            } else {
                unknown.push((line_of(&file.text, value.span().start), key));
            }
        }
        unknown.sort();
        for (line, key) in unknown {
            let message = unknown_key(&key);
            file.problems
                .push(Error::Usage(format!("{}:{line}: {key}: {message}", path.display())));
        }
        file
    }

    /// What is wrong with the file as a whole (a syntax error, each unknown
    /// key), in the order of its lines; a value of a known key is judged
    /// when it is layered ([`layer_all`]).
    pub fn problems(&self) -> &[Error] {
        &self.problems
    }

    fn origin<T>(&self, spanned: &Spanned<T>) -> Origin {
        Origin::File(self.path.clone(), line_of(&self.text, spanned.span().start))
    }
}

/// An unknown key's message: the key meant when one is near enough
/// ([`crate::cli::did_you_mean`]), else the list of keys.
fn unknown_key(typed: &str) -> String {
    match crate::cli::did_you_mean(typed, KEYS.iter().copied()) {
        Some(meant) => format!("unknown key `{typed}`; did you mean `{meant}`?"),
        None => format!("unknown key `{typed}`; the keys are `{}`", KEYS.join("`, `")),
    }
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

/// Finds and parses the configuration file: `--config` (`flag`), else
/// `$REDLOCK_CONFIG`, either of which must exist; else the user's, else the
/// system's; `None` when neither exists. The flag is above the variable as
/// every flag is above its variable: a crontab's `REDLOCK_CONFIG` does not
/// override a `--config` typed on one job's line.
pub fn load(flag: Option<&Path>) -> Result<Option<File>, Error> {
    if let Some(path) = flag {
        return read(path, "--config ").map(Some);
    }
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
    Ok(File::parse(path, text))
}

/// Layers the command line (flags and environment, as clap saw them) over
/// the file over the defaults; the first problem of the file or of a value
/// in it is the error.
pub fn layer(parsed: &Parsed, file: Option<&File>) -> Result<Globals, Error> {
    let (globals, problems) = layer_all(parsed, file);
    match problems.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(globals),
    }
}

/// [`layer`] with every problem: the file's own ([`File::problems`]), then
/// each of its values that does not fit its key, in the order below; such a
/// value is left at the default.
pub fn layer_all(parsed: &Parsed, file: Option<&File>) -> (Globals, Vec<Error>) {
    let g: &Global = &parsed.cli.global;
    let given = |id: &str| parsed.given.get(id).cloned().unwrap_or(Given::No);
    let mut problems: Vec<Error> = Vec::new();
    if let Some(file) = file {
        problems.extend(file.problems.iter().map(|p| Error::Usage(p.to_string())));
    }
    let mut l = Layering { file, problems: &mut problems };
    let path = |p: PathBuf| Ok(Some(p));
    let text = |n: Number| Ok(n.text());
    let globals = Globals {
        file: file.map(|f| f.path.clone()),
        servers: l.pick(given("servers"), "servers", g.servers.clone().unwrap_or_default(), |v| {
            Ok(match v {
                OneOrMany::One(s) => s,
                OneOrMany::Many(list) => list.join(","),
            })
        }),
        quorum: l.pick(given("quorum"), "quorum", g.quorum, |q: usize| Ok(Some(q))),
        node_timeout: l.pick(given("node_timeout"), "node-timeout", g.node_timeout.clone(), |n| {
            Ok(Some(Number::text(&n)))
        }),
        drift_factor: l.pick(given("drift_factor"), "drift-factor", g.drift_factor.clone(), text),
        password_file: l.pick(
            given("password_file"),
            "password-file",
            g.password_file.clone(),
            path,
        ),
        tls_ca: l.pick(given("tls_ca"), "tls-ca", g.tls_ca.clone(), path),
        tls_cert: l.pick(given("tls_cert"), "tls-cert", g.tls_cert.clone(), path),
        tls_key: l.pick(given("tls_key"), "tls-key", g.tls_key.clone(), path),
        verbose: l.pick(given("verbose"), "verbose", g.verbose, Ok),
        quiet: l.pick(given("quiet"), "quiet", g.quiet, Ok),
        raw_key: l.pick(given("raw_key"), "raw-key", g.raw_key, Ok),
        max_ttl: l.pick(given("max_ttl"), "max-ttl", g.max_ttl.clone(), text),
        trust_restarts: l.pick(given("trust_restarts"), "trust-restarts", g.trust_restarts, Ok),
        host: l.pick(given("host"), "host", g.host.clone(), |h: String| Ok(Some(h))),
        ttl: l.pick(given("ttl"), "ttl", None, |n| Ok(Some(Number::text(&n)))),
        wait: l.pick(
            // `-n` is a wait given on the command line too.
            if given("no_wait") == Given::Flag { Given::Flag } else { given("wait") },
            "wait",
            None,
            |n| Ok(Some(Number::text(&n))),
        ),
        tz: l.pick(given("tz"), "tz", None, |z: String| Ok(Some(z))),
        log_format: l.pick(given("log_format"), "log-format", g.log_format, |f: String| {
            <LogFormat as clap::ValueEnum>::from_str(&f, false)
                .map_err(|_| format!("log-format {f:?}: must be \"text\" or \"json\""))
        }),
    };
    (globals, problems)
}

/// The file under the command line, and the problems its values had.
struct Layering<'a> {
    file: Option<&'a File>,
    problems: &'a mut Vec<Error>,
}

impl Layering<'_> {
    /// The clap value when `given`; else the file's `key`, read as an `F`
    /// and converted (a wrong type, or a conversion's message, is a
    /// problem naming the file's line, and the clap value stays); else the
    /// clap value (the default).
    fn pick<T, F: serde::de::DeserializeOwned>(
        &mut self,
        given: Given,
        key: &str,
        clap: T,
        convert: impl FnOnce(F) -> Result<T, String>,
    ) -> Setting<T> {
        let origin = match given {
            Given::Flag => Origin::Flag,
            Given::Env(var) => Origin::Env(var),
            Given::No => match self.file.and_then(|f| Some((f, f.values.get(key)?))) {
                Some((file, spanned)) => {
                    let origin = file.origin(spanned);
                    let read = F::deserialize(spanned.get_ref().clone())
                        .map_err(|e| format!("{key}: {}", e.message().replace('\n', " ")))
                        .and_then(convert);
                    match read {
                        Ok(value) => return Setting { value, origin },
                        Err(m) => {
                            self.problems.push(Error::Usage(format!("{origin}: {m}")));
                            Origin::Default
                        }
                    }
                }
                None => Origin::Default,
            },
        };
        Setting { value: clap, origin }
    }
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
        let file = File::parse(Path::new("/etc/redlock/config.toml"), file.to_owned());
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
        assert!(m.contains("unknown key `colour`; the keys are `servers`"), "{m}");
        let m = usage(&[], "\nquorum = \"two\"\n");
        assert!(m.starts_with("/etc/redlock/config.toml:2: quorum: "), "{m}");
        let m = usage(&[], "log-format = \"xml\"\n");
        assert!(m.starts_with("/etc/redlock/config.toml:1: log-format \"xml\""), "{m}");
        let m = usage(&[], "servers = [\n");
        assert!(m.starts_with("/etc/redlock/config.toml:"), "{m}");
    }

    #[test]
    fn every_problem_of_the_file_is_found_and_the_rest_is_read() {
        let text = "colour = true\nservers = \"redis://a\"\nquorum = \"two\"\nnode-timout = 1\n\
                    log-format = \"xml\"\nquiet = true\n";
        let file = File::parse(Path::new("/f.toml"), text.to_owned());
        let parsed = crate::cli::parse_with_env(["redlock", "config"], |_| None).unwrap();
        let (g, problems) = layer_all(&parsed, Some(&file));
        let problems: Vec<String> = problems.iter().map(Error::to_string).collect();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].starts_with("/f.toml:1: colour: unknown key `colour`"), "{problems:?}");
        assert!(problems[1].starts_with("/f.toml:4: node-timout: unknown key"), "{problems:?}");
        assert!(problems[2].starts_with("/f.toml:3: quorum: "), "{problems:?}");
        assert!(problems[3].starts_with("/f.toml:5: log-format \"xml\""), "{problems:?}");
        // The values around them are read; the ones in error keep their default.
        assert_eq!(g.servers.value, "redis://a");
        assert!(g.quiet.value);
        assert_eq!((g.quorum.value, &g.quorum.origin), (None, &Origin::Default));
    }
}
