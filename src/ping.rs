//! `run --ping URL`: the pings a run sends to a cron monitor, in
//! healthchecks.io's protocol (<https://healthchecks.io/docs/http_api/>),
//! which Cronitor and others accept:
//! - `URL/start?rid=R` when the job starts,
//! - `URL?rid=R` when it exits 0, `URL/N?rid=R` when it exits `N`.
//!
//! The run id `R` ([`Rid`]) ties a start to its end. For a tick of
//! `--once-per` it is derived from the key and the tick, so every host
//! computes the same one and only the host that runs the tick sends it;
//! a run without a tick draws one at random.
//!
//! A ping never fails outward: each try is bounded by [`PING_TIMEOUT`],
//! a failed try is tried once more ([`TRIES`]), and the result is a
//! [`Outcome`] the caller logs and records, never an error. So a ping
//! delays the job's start by at most `PING_TIMEOUT * TRIES` and never
//! changes its exit status.
//!
//! The URL is a secret (a check's UUID, or a project's ping key and a
//! slug, is in its path): [`Ping`]'s `Display` shows its scheme and host
//! only, and every failure's text is scrubbed of its path and query.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::lock::Tick;

/// The longest one try of a ping may take, connection, TLS and answer
/// included (ureq's global timeout); a try still running then failed.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// How many times a ping is tried: once, and once more after a failure
/// that another try may not repeat.
pub const TRIES: u32 = 2;

/// How long past its own bound a try is waited for before it is left
/// behind ([`Ping::bound`]).
const OVERRUN: Duration = Duration::from_millis(250);

/// The namespace of the run ids derived from a tick (UUID v5, RFC 9562
/// section 5.5): a fixed, random UUID of redlock's own, so that the same
/// key and tick give the same id on every host and in every version.
const RID_NAMESPACE: uuid::Uuid = uuid::uuid!("6b1f3c52-93a4-4c1e-8f0d-2a7e5c9b4d81");

/// Where a ping URL came from, for messages (the URL itself is never shown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The `--ping` flag.
    Flag,
    /// An environment variable, by name.
    Env(String),
    /// A file, whose first line is the URL.
    File(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag => f.write_str("--ping"),
            Source::Env(name) => f.write_str(name),
            Source::File(path) => {
                write!(f, "the ping file {}", crate::text::printable(&path.to_string_lossy()))
            }
        }
    }
}

/// A monitor's ping URL, validated: `http` or `https`, with a host, no
/// fragment. Its `Display` and `Debug` are redacted: `https://hc-ping.com/***`.
#[derive(Clone)]
pub struct Ping {
    /// The URL as given (less a fragment), with its secret.
    url: url::Url,
    /// Where it came from.
    source: Source,
    /// The bound of one try: [`PING_TIMEOUT`] unless a test shortens it.
    timeout: Duration,
}

/// What a ping says of the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// The job starts: `URL/start`.
    Start,
    /// The job exited with this status: `URL` for 0, `URL/N` otherwise.
    Exit(u8),
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signal::Start => f.write_str("start"),
            Signal::Exit(code) => write!(f, "exit {code}"),
        }
    }
}

/// A run id: the UUID healthchecks.io takes as `rid`, to pair a start with
/// its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rid(pub uuid::Uuid);

impl Rid {
    /// The run id of `key`'s tick: a UUID v5 (SHA-1, in redlock's
    /// namespace) of the tick's start in ms (8 bytes, big-endian) followed
    /// by the key's bytes, so the same on every host that computes it. The
    /// fixed-length prefix keeps two (key, tick) pairs from giving one name.
    pub fn of_tick(key: &str, tick: Tick) -> Rid {
        let mut name = Vec::with_capacity(8 + key.len());
        name.extend_from_slice(&tick.start_ms.to_be_bytes());
        name.extend_from_slice(key.as_bytes());
        Rid(uuid::Uuid::new_v5(&RID_NAMESPACE, &name))
    }

    /// A run id for a run without a tick: a random UUID v4.
    pub fn random() -> Rid {
        Rid(uuid::Uuid::new_v4())
    }

    /// The run id of a run: of its tick with `--once-per`, random otherwise.
    pub fn of_run(key: &str, tick: Option<Tick>) -> Rid {
        tick.map_or_else(Rid::random, |tick| Rid::of_tick(key, tick))
    }
}

impl fmt::Display for Rid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

/// What became of one ping: sent, or why not, after how many tries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// What the ping said.
    pub signal: Signal,
    /// The tries made, 1 or [`TRIES`].
    pub tries: u32,
    /// `None` when the monitor answered 2xx; else the last try's failure,
    /// one line, the URL redacted.
    pub error: Option<String>,
}

impl Outcome {
    /// True when the monitor took the ping.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// The outcome as a history entry or a JSON event records it:
    /// `{"signal": "start" | "exit", "code": N (exit only), "tries": N,
    /// "error": "..." (failed only)}`.
    pub fn json(&self) -> serde_json::Value {
        let mut value = serde_json::json!({ "tries": self.tries });
        match self.signal {
            Signal::Start => value["signal"] = "start".into(),
            Signal::Exit(code) => {
                value["signal"] = "exit".into();
                value["code"] = code.into();
            }
        }
        if let Some(error) = &self.error {
            value["error"] = error.as_str().into();
        }
        value
    }

    /// The one stderr line of a failed ping to `ping`, `None` for one that
    /// went through: `ping https://hc-ping.com/*** (start) failed after 2
    /// tries: timed out after 5.0s`.
    pub fn failure_line(&self, ping: &Ping) -> Option<String> {
        let error = self.error.as_deref()?;
        let tries = match self.tries {
            1 => "1 try".to_owned(),
            n => format!("{n} tries"),
        };
        Some(format!("ping {ping} ({}) failed after {tries}: {error}", self.signal))
    }
}

impl Ping {
    /// The URL `raw` (surrounding whitespace ignored) from `source`, or why
    /// it is not one; the reason never quotes the URL.
    pub fn parse(raw: &str, source: Source) -> Result<Ping, String> {
        let bad = |why: String| format!("{source}: {why}");
        let mut url = url::Url::parse(raw.trim()).map_err(|e| bad(format!("not a URL ({e})")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!("a ping URL is http or https, not {}", scheme_shown(&url))));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("a ping URL needs a host".to_owned()));
        }
        url.set_fragment(None);
        Ok(Ping { url, source, timeout: PING_TIMEOUT })
    }

    /// The URL in the file at `path`: its first line. The file may hold
    /// nothing else but blank lines, so a file with the wrong content
    /// (two URLs, a script) is refused rather than half read.
    pub fn from_file(path: &Path) -> Result<Ping, String> {
        let source = Source::File(path.to_owned());
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{source}: cannot read it: {e}"))?;
        let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
        let first = lines.next().ok_or_else(|| format!("{source}: it is empty"))?;
        if lines.next().is_some() {
            return Err(format!(
                "{source}: it holds more than one line; a ping file holds one URL"
            ));
        }
        Ping::parse(first, source)
    }

    /// The same ping with another bound per try (tests; a monitor that is
    /// known to be slow).
    pub fn with_timeout(self, timeout: Duration) -> Ping {
        Ping { timeout, ..self }
    }

    /// The longest a ping may take, all tries included: what it may
    /// delay the job's start by.
    pub fn bound(&self) -> Duration {
        (self.timeout + OVERRUN) * TRIES
    }

    /// Where the URL came from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The URL a ping of `signal` for run `rid` goes to, with its secret:
    /// the path extended by `start` or the status (none for 0), the
    /// query's parameters kept and `rid` added.
    pub fn url_of(&self, signal: Signal, rid: Rid) -> url::Url {
        let mut url = self.url.clone();
        let segment = match signal {
            Signal::Start => Some("start".to_owned()),
            Signal::Exit(0) => None,
            Signal::Exit(code) => Some(code.to_string()),
        };
        if let Some(segment) = segment {
            // An http(s) URL always has a path to extend (`Ping::parse`
            // refused every other scheme); `Err` is a URL that cannot be a base.
            if let Ok(mut path) = url.path_segments_mut() {
                path.pop_if_empty().push(&segment);
            }
        }
        url.query_pairs_mut().append_pair("rid", &rid.to_string());
        url
    }

    /// Pings the monitor that the job starts.
    pub async fn start(&self, rid: Rid) -> Outcome {
        self.send(Signal::Start, rid).await
    }

    /// [`Ping::start`], waited for at most `limit` (what the lock's
    /// validity allows before the job must start): past it the job goes
    /// first and the outcome says the ping was given up, whatever became of
    /// it. Its try goes on, unheard, on its thread until its own bound; a
    /// runtime dropped before then waits for it (tokio waits for blocking
    /// threads), so a job shorter than that bound may delay redlock's exit,
    /// never the job's start or the lock's release.
    pub async fn start_within(&self, rid: Rid, limit: Duration) -> Outcome {
        match tokio::time::timeout(limit, self.start(rid)).await {
            Ok(outcome) => outcome,
            Err(_) => Outcome {
                signal: Signal::Start,
                tries: 1,
                error: Some(format!(
                    "given up after {}, so that the job starts in time",
                    crate::text::fmt_duration(limit)
                )),
            },
        }
    }

    /// Pings the monitor that the job exited with `code` (redlock's exit
    /// code: 128+N for a signal N).
    pub async fn end(&self, rid: Rid, code: u8) -> Outcome {
        self.send(Signal::Exit(code), rid).await
    }

    /// Sends one ping: up to [`TRIES`] tries, each bounded by the timeout,
    /// on a blocking thread (ureq is blocking) so the runtime goes on.
    async fn send(&self, signal: Signal, rid: Rid) -> Outcome {
        let url = self.url_of(signal, rid);
        let mut tries = 0;
        loop {
            tries += 1;
            let result = self.try_once(&url).await;
            match result {
                Ok(()) => return Outcome { signal, tries, error: None },
                Err(failure) if tries >= TRIES || !failure.worth_retrying() => {
                    return Outcome { signal, tries, error: Some(self.scrub(&failure.text)) };
                }
                Err(_) => {}
            }
        }
    }

    /// One try: a GET bounded by the timeout. The blocking call is bounded
    /// by ureq's global timeout; the wait for it by the same plus a
    /// moment, so a call that overruns its own bound (a resolver that
    /// ignores it) is left behind, not waited for.
    async fn try_once(&self, url: &url::Url) -> Result<(), Failure> {
        let agent = agent(self.timeout);
        let target = url.as_str().to_owned();
        let call = tokio::task::spawn_blocking(move || agent.get(&target).call().map(drop));
        let limit = self.timeout + OVERRUN;
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(Failure::of(&e, self.timeout)),
            Ok(Err(join)) => {
                Err(Failure { text: format!("the ping's thread failed: {join}"), retry: true })
            }
            Err(_) => Err(Failure::timed_out(self.timeout)),
        }
    }

    /// `text` without the URL's secret parts (path, query, user
    /// information), whole or encoded as they are on the wire, in case a
    /// message quoted them; then made printable, one line.
    fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        let mut secrets = vec![self.url.as_str().to_owned()];
        if self.url.path() != "/" {
            secrets.push(self.url.path().to_owned());
        }
        secrets.extend(self.url.query().map(str::to_owned));
        secrets.extend(self.url.password().map(str::to_owned));
        secrets.push(self.url.username().to_owned());
        for secret in secrets.iter().filter(|s| s.len() > 1) {
            text = text.replace(secret.as_str(), "/***");
        }
        crate::text::printable(&text).into_owned()
    }
}

impl fmt::Display for Ping {
    /// Scheme, host and port, and `/***` for the path and query, which hold
    /// the secret: `https://hc-ping.com/***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = self.url.host_str().unwrap_or_default();
        write!(f, "{}://{}", self.url.scheme(), crate::text::printable(host))?;
        if let Some(port) = self.url.port() {
            write!(f, ":{port}")?;
        }
        f.write_str("/***")
    }
}

impl fmt::Debug for Ping {
    /// As `Display`: a configuration printed with `{:?}` shows no secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ping")
            .field("url", &format_args!("{self}"))
            .field("source", &self.source)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The scheme of a refused URL, as a message may show it.
fn scheme_shown(url: &url::Url) -> std::borrow::Cow<'_, str> {
    crate::text::printable(url.scheme())
}

/// The HTTP agent of one try: the timeout over the whole call, the
/// TLS roots built in (webpki-roots, as for the servers), redirects
/// followed (a monitor may move) within the same bound.
fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .user_agent(concat!("redlock/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// Why one try failed, in words that do not quote the URL, and whether
/// another try may fare better.
struct Failure {
    /// One line, before [`Ping::scrub`].
    text: String,
    /// False for an answer another try would get again (a 4xx but 408 and
    /// 429: a wrong URL, a check that does not exist).
    retry: bool,
}

impl Failure {
    /// The failure of a try that ran out of its time.
    fn timed_out(timeout: Duration) -> Failure {
        Failure {
            text: format!("timed out after {}", crate::text::fmt_duration(timeout)),
            retry: true,
        }
    }

    /// ureq's error in words of its own kind. ureq's `Display` may quote
    /// the URL (a bad URI, a redirect); the kinds it gives here do not,
    /// and [`Ping::scrub`] catches what is left.
    fn of(error: &ureq::Error, timeout: Duration) -> Failure {
        let text = match error {
            ureq::Error::StatusCode(status) => {
                let retry = !(400..500).contains(status) || matches!(status, 408 | 429);
                return Failure { text: format!("the monitor answered HTTP {status}"), retry };
            }
            ureq::Error::Timeout(_) => return Failure::timed_out(timeout),
            ureq::Error::HostNotFound => "host not found".to_owned(),
            ureq::Error::ConnectionFailed => "connection failed".to_owned(),
            ureq::Error::Io(e) => format!("i/o error: {e}"),
            ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => {
                "redirected too often, or to a bad URL".to_owned()
            }
            ureq::Error::Rustls(e) => format!("TLS: {e}"),
            other => other.to_string(),
        };
        Failure { text, retry: true }
    }

    /// True when another try may fare better.
    fn worth_retrying(&self) -> bool {
        self.retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0f7d3c2e-5b1a-4a8e-9c6d-123456789abc";

    fn ping(raw: &str) -> Ping {
        Ping::parse(raw, Source::Flag).unwrap()
    }

    fn tick(start_ms: u64) -> Tick {
        Tick { start_ms, end_ms: start_ms + 300_000, offset_s: 0 }
    }

    #[test]
    fn a_tick_has_one_run_id_on_every_call_and_another_tick_another() {
        let a = Rid::of_tick("nightly", tick(1_700_000_100_000));
        assert_eq!(a, Rid::of_tick("nightly", tick(1_700_000_100_000)));
        assert_eq!(a, Rid::of_run("nightly", Some(tick(1_700_000_100_000))));
        assert_ne!(a, Rid::of_tick("nightly", tick(1_700_000_400_000)));
        assert_ne!(a, Rid::of_tick("nightly2", tick(1_700_000_100_000)));
        let text = a.to_string();
        let parsed = uuid::Uuid::parse_str(&text).unwrap();
        assert_eq!(parsed.get_version_num(), 5);
        assert_eq!(text.len(), 36);
        assert_eq!(text, text.to_lowercase());
    }

    #[test]
    fn the_run_id_of_a_tick_is_fixed_across_versions() {
        // Hosts of a fleet on different versions must agree: a change of
        // the namespace or of the name's bytes fails here (the figure: SHA-1
        // of the namespace, the start as 8 bytes big-endian, then the key).
        let rid = Rid::of_tick("nightly", tick(1_700_000_100_000));
        assert_eq!(rid.to_string(), "46cb2f2e-ad78-58e0-bf37-a9186a36c569");
    }

    #[test]
    fn a_run_without_a_tick_draws_a_random_run_id() {
        let (a, b) = (Rid::of_run("k", None), Rid::of_run("k", None));
        assert_ne!(a, b);
        assert_eq!(a.0.get_version_num(), 4);
    }

    #[test]
    fn each_signal_has_its_url() {
        let rid = Rid::of_tick("k", tick(0));
        let base = format!("https://hc-ping.com/{SECRET}");
        let p = ping(&base);
        assert_eq!(p.url_of(Signal::Start, rid).as_str(), format!("{base}/start?rid={rid}"));
        assert_eq!(p.url_of(Signal::Exit(0), rid).as_str(), format!("{base}?rid={rid}"));
        assert_eq!(p.url_of(Signal::Exit(3), rid).as_str(), format!("{base}/3?rid={rid}"));
        assert_eq!(p.url_of(Signal::Exit(143), rid).as_str(), format!("{base}/143?rid={rid}"));
        // A trailing slash and a query of the user's own are kept in order.
        let p = ping("https://hc-ping.com/KEY/backup/?create=1#frag");
        assert_eq!(
            p.url_of(Signal::Start, rid).as_str(),
            format!("https://hc-ping.com/KEY/backup/start?create=1&rid={rid}")
        );
        assert_eq!(
            p.url_of(Signal::Exit(0), rid).as_str(),
            format!("https://hc-ping.com/KEY/backup/?create=1&rid={rid}")
        );
    }

    #[test]
    fn only_http_and_https_with_a_host_are_taken() {
        for bad in
            ["ftp://h/x", "file:///etc/passwd", "hc-ping.com/x", "", "https://", "mailto:a@b"]
        {
            let e = Ping::parse(bad, Source::Env("REDLOCK_PING".into())).unwrap_err();
            assert!(e.starts_with("REDLOCK_PING: "), "{bad}: {e}");
        }
        assert!(Ping::parse(" http://127.0.0.1:9/p \n", Source::Flag).is_ok());
    }

    #[test]
    fn the_url_is_shown_without_its_path_query_or_user() {
        let p = ping(&format!("https://user:pw@hc-ping.com:8443/{SECRET}?token=t0k#f"));
        assert_eq!(p.to_string(), "https://hc-ping.com:8443/***");
        assert_eq!(ping("http://h").to_string(), "http://h/***");
        let debug = format!("{p:?}");
        assert!(
            !debug.contains(SECRET) && !debug.contains("t0k") && !debug.contains("pw"),
            "{debug}"
        );
        let outcome = Outcome { signal: Signal::Exit(2), tries: 2, error: Some("HTTP 503".into()) };
        assert_eq!(
            outcome.failure_line(&p).unwrap(),
            "ping https://hc-ping.com:8443/*** (exit 2) failed after 2 tries: HTTP 503"
        );
        assert_eq!(
            outcome.json(),
            serde_json::json!({"signal": "exit", "code": 2, "tries": 2, "error": "HTTP 503"})
        );
        assert_eq!(Outcome { error: None, ..outcome }.failure_line(&p), None);
        let e = Ping::parse(&format!("ftp://h/{SECRET}"), Source::Flag).unwrap_err();
        assert!(!e.contains(SECRET), "{e}");
        let e = Ping::parse(&format!("https://h:99999/{SECRET}"), Source::Flag).unwrap_err();
        assert!(!e.contains(SECRET), "{e}");
    }

    #[test]
    fn a_failure_s_text_loses_the_secret_parts() {
        let p = ping(&format!("https://u:pw-secret@h/{SECRET}/x?k=qsecret"));
        let text = format!("error for {} at /{SECRET}/x with k=qsecret and pw-secret\n", p.url);
        let scrubbed = p.scrub(&text);
        for secret in [SECRET, "qsecret", "pw-secret"] {
            assert!(!scrubbed.contains(secret), "{scrubbed}");
        }
        assert!(!scrubbed.contains('\n'), "{scrubbed}");
    }

    #[test]
    fn a_ping_file_holds_one_url() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ping");
        std::fs::write(&path, format!("\nhttps://hc-ping.com/{SECRET}\n\n")).unwrap();
        let p = Ping::from_file(&path).unwrap();
        assert_eq!(p.source(), &Source::File(path.clone()));
        assert_eq!(p.url.path(), format!("/{SECRET}"));
        std::fs::write(&path, "https://a/1\nhttps://b/2\n").unwrap();
        assert!(Ping::from_file(&path).unwrap_err().contains("more than one line"));
        std::fs::write(&path, "\n").unwrap();
        assert!(Ping::from_file(&path).unwrap_err().contains("empty"));
        let e = Ping::from_file(&dir.path().join("none")).unwrap_err();
        assert!(e.contains("cannot read it"), "{e}");
    }

    #[test]
    fn a_client_error_is_not_tried_again_and_a_server_error_is() {
        let t = Duration::from_secs(1);
        assert!(!Failure::of(&ureq::Error::StatusCode(404), t).worth_retrying());
        assert!(Failure::of(&ureq::Error::StatusCode(429), t).worth_retrying());
        assert!(Failure::of(&ureq::Error::StatusCode(503), t).worth_retrying());
        assert!(Failure::of(&ureq::Error::HostNotFound, t).worth_retrying());
    }
}
