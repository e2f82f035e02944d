//! `run --metrics-file PATH`: a Prometheus text-format file for
//! node_exporter's textfile collector, rewritten after each run.
//!
//! The file is written whole to a temporary file in the same directory and
//! renamed over PATH, so the collector never reads half a file. The
//! counters (`redlock_runs_total`, `redlock_skips_total`) and the last run's
//! figures are carried over from the previous file: a skip updates the
//! skip counter and `redlock_last_ran` and keeps the last run's figures.
//! Both counters are written from a key's first invocation on, at 0 if
//! need be, so a host that only ever skipped has `redlock_runs_total 0`
//! (an `absent()` or per-host rule sees it). Under `--once-per`,
//! `redlock_last_tick_ran` says whether the last tick this host saw
//! (`redlock_last_tick_seen_timestamp_seconds`, its start) ran, here or
//! elsewhere: 0 when the host could not take it and nobody had (the lock
//! held by an earlier run at the tick's end, no quorum, or a freeze).
//! `redlock_last_tick_paused` is 1 when a freeze (`redlock hold`) held
//! the key past that tick's end ([`Invocation::Paused`]): the tick did not
//! run, on purpose, and a missed-tick alert leaves it out, as `check`
//! does; 0 for any other tick. Both are written for every tick, so no
//! series comes and goes with a freeze. The tick is a value, never a
//! label: a label per tick would be a new series per tick.
//!
//! One file may serve several jobs (node_exporter's habit is one textfile
//! per host): each key has its own series (`{key="..."}`), and an update
//! touches only its own key's and keeps the others as it read them. Two
//! redlock processes updating the file at once take turns: the read, the
//! update and the rename happen under an exclusive `flock` on a sidecar
//! (`.PATH.lock` beside PATH, never renamed or deleted, so every process
//! locks the same inode), so neither loses the other's series. The wait
//! for that lock is bounded ([`LOCK_WAIT`]); a process that holds it
//! longer (frozen with SIGSTOP) costs the others this update, with a
//! warning, never their job.
//!
//! The directory may hold names someone else chose. The temporary file
//! gets a random name and is created only if nothing has that name
//! (`O_EXCL`, which follows no symbolic link), and the sidecar is opened
//! with `O_NOFOLLOW`: a link planted at either name is never followed, so
//! the file it points to is neither written nor created (a link at the
//! sidecar's name fails the update with a warning). Both the file and the
//! sidecar are opened only if regular files, without waiting: a FIFO
//! planted at either name fails the update instead of blocking the run
//! for ever. A directory that others may write and that has no sticky
//! bit is refused ([`check_dir`]): anyone could rename their own file
//! over PATH there. Group write is the owner's choice of who may, and is
//! allowed.
//!
//! Server health comes from the last acquire attempt of the invocation
//! ([`observe`]): how many servers answered it with a vote, how many
//! answered without one yet (in their restart window, or a clock too far
//! off: routine after a restart, and it passes), and how many failed, of
//! how many. A server the attempt did not wait for (the verdict was
//! settled without it) is none of these: on a healthy fleet of 3, 2
//! answered, 0 failed is normal. `redlock_last_servers_failed > 0` is the
//! alert: the lock was taken (or found busy) with a server refusing,
//! timing out or erring, so fewer failures than before would stop the job.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::history::SkipKind;

/// What one invocation of `run` did.
#[derive(Clone, Debug)]
pub struct Sample {
    /// The lock key (the `key` label).
    pub key: String,
    /// What the invocation did.
    pub invocation: Invocation,
    /// The tick it belonged to (`--once-per`), and whether that ran.
    pub tick: Option<TickSeen>,
    /// Time spent waiting for the lock (until acquired, or until busy).
    pub wait: Duration,
    /// When this invocation ended.
    pub at: SystemTime,
    /// The servers as the last acquire attempt saw them, when one was made.
    pub servers: Option<Servers>,
}

/// What one invocation of `run` did with the lock.
#[derive(Clone, Copy, Debug)]
pub enum Invocation {
    /// The command ran under the lock: its figures.
    Ran(Ran),
    /// The lock was busy, or its tick ran elsewhere: a skip.
    Skipped,
    /// A freeze (`redlock hold`) held the key past its tick's end: a skip,
    /// on purpose ([`SkipKind::Paused`]).
    Paused,
    /// Too few servers answered (exit 69), or the key's record names
    /// another schedule (exit 64): neither a run nor a skip.
    Unavailable,
}

impl Invocation {
    /// The invocation a skip of `kind` was.
    pub fn of_skip(kind: SkipKind) -> Invocation {
        match kind {
            SkipKind::Ran | SkipKind::Busy => Invocation::Skipped,
            SkipKind::Paused => Invocation::Paused,
            SkipKind::Unavailable | SkipKind::Elsewhere => Invocation::Unavailable,
        }
    }
}

/// The tick an invocation belonged to, as it saw it.
#[derive(Clone, Copy, Debug)]
pub struct TickSeen {
    /// The tick's start.
    pub start: SystemTime,
    /// Whether the tick ran: here, or (as the skip found) elsewhere.
    pub ran: bool,
}

/// How the servers took part in an acquire attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Servers {
    /// Servers that answered with a vote (granted, or held by another).
    pub answered: usize,
    /// Servers that answered but may not vote yet (`Part::NoVote`).
    pub no_vote: usize,
    /// Servers that failed (refused, timed out, answered an error).
    pub failed: usize,
    /// Servers configured.
    pub total: usize,
}

/// The last acquire attempt's servers in this process ([`observe`]).
static OBSERVED: std::sync::Mutex<Option<Servers>> = std::sync::Mutex::new(None);

/// Records how the servers took part in an acquire attempt.
pub fn observe(servers: Servers) {
    // A panic elsewhere while holding the lock leaves the value usable.
    *OBSERVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(servers);
}

/// What the last acquire attempt of this process saw ([`observe`]).
pub fn observed() -> Option<Servers> {
    *OBSERVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The figures of a run that held the lock.
#[derive(Clone, Copy, Debug)]
pub struct Ran {
    /// When the lock was acquired.
    pub start: SystemTime,
    /// How long it was held.
    pub duration: Duration,
    /// The exit code redlock ended with.
    pub exit_code: u8,
    /// The start of the tick the run belonged to (`--once-per`).
    pub tick: Option<SystemTime>,
}

/// The metrics, their type and help, in the order they are written.
const METRICS: [(&str, &str, &str); 17] = [
    ("redlock_runs_total", "counter", "Runs that held the lock and ran the command."),
    ("redlock_skips_total", "counter", "Runs that found the lock busy and skipped."),
    ("redlock_last_ran", "gauge", "1 when the last invocation ran the command, 0 when it skipped."),
    ("redlock_last_invocation_timestamp_seconds", "gauge", "When the last invocation ended."),
    ("redlock_last_wait_seconds", "gauge", "Time the last invocation waited for the lock."),
    ("redlock_last_start_timestamp_seconds", "gauge", "When the last run acquired the lock."),
    ("redlock_last_end_timestamp_seconds", "gauge", "When the last run ended."),
    ("redlock_last_duration_seconds", "gauge", "How long the last run held the lock."),
    ("redlock_last_exit_code", "gauge", "The exit code of the last run."),
    (
        "redlock_last_tick_timestamp_seconds",
        "gauge",
        "The start of the tick the last run belonged to (run --once-per).",
    ),
    (
        "redlock_last_tick_ran",
        "gauge",
        "1 when the last tick this host saw ran (here or elsewhere), 0 when nobody ran it as far as it saw.",
    ),
    (
        "redlock_last_tick_paused",
        "gauge",
        "1 when a freeze (redlock hold) held the key past the end of the last tick this host saw (not run, on purpose), 0 otherwise.",
    ),
    (
        "redlock_last_tick_seen_timestamp_seconds",
        "gauge",
        "The start of the last tick this host saw, ran or skipped (run --once-per).",
    ),
    ("redlock_last_servers", "gauge", "Servers configured, at the last invocation."),
    (
        "redlock_last_servers_answered",
        "gauge",
        "Servers that answered the last invocation's last acquire attempt with a vote.",
    ),
    (
        "redlock_last_servers_no_vote",
        "gauge",
        "Servers that answered the last invocation's last acquire attempt without a vote yet (restarted within the longest TTL, or a clock too far off).",
    ),
    (
        "redlock_last_servers_failed",
        "gauge",
        "Servers that failed (refused, timed out, erred) in the last invocation's last acquire attempt.",
    ),
];

fn seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}

/// How long an update waits for another process's update of the same
/// file ([`write()`]) before it gives up with an error.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Each key's values by metric name; keys in label order, so the file's
/// order does not depend on which job wrote last.
type Series = BTreeMap<String, BTreeMap<String, f64>>;

/// Updates `sample.key`'s series in the file at `path`, keeping every other
/// key's: under the sidecar lock (`lock`), reads the previous values (a
/// missing or unreadable file starts from zero), applies the sample, writes
/// a temporary file beside it and renames it over `path`.
pub fn write(path: &Path, sample: &Sample) -> std::io::Result<()> {
    check_dir(path).map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
    let dir = dir(path);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Dot-files: node_exporter reads only *.prom, so it never sees these.
    let _held = lock(&dir.join(format!(".{name}.lock")))?;
    let mut all = read_previous(path)?;
    apply(all.entry(sample.key.clone()).or_default(), sample);
    let text = render(&all);
    // `.NAME.XXXXXX.tmp`, created new with the mode `File::create` gives
    // (0666 less the umask): node_exporter runs as another user.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    // A failed rename drops (and so deletes) the temporary file.
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

/// The directory `path` is in (`.` for a bare file name).
fn dir(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Refuses a metrics file whose directory others may write (mode `o+w`)
/// without the sticky bit: there anyone may rename a file of theirs over
/// the metrics file or delete the sidecar. A sticky directory (`/tmp`'s
/// 1777) lets each user rename and delete only their own. A directory
/// that cannot be read yet (missing) passes; writing then fails with a
/// warning.
pub fn check_dir(path: &Path) -> Result<(), String> {
    let dir = dir(path);
    let Ok(meta) = std::fs::metadata(dir) else { return Ok(()) };
    let mode = meta.permissions().mode();
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Err(format!(
            "--metrics-file {}: its directory {} may be written by anyone and has no sticky \
             bit (mode {:o}), so anyone could replace the file; use a directory only its \
             owners may write (or chmod +t it)",
            path.display(),
            dir.display(),
            mode & 0o7777
        ));
    }
    Ok(())
}

/// Takes the exclusive lock on the sidecar at `path` (created if need be,
/// never through a symbolic link), waiting at most [`LOCK_WAIT`]; the lock
/// goes with the returned file. `flock` locks are released by the kernel
/// when the process dies, so a killed writer leaves no stale lock.
fn lock(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    let file = match regular(path, &mut options, libc::O_NOFOLLOW) {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{}: is a symbolic link, which is not followed", path.display()),
            ));
        }
        other => other?,
    };
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "{}: another process held the lock for {}; this update is not written",
                        path.display(),
                        crate::text::fmt_duration(LOCK_WAIT)
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Opens `path` as `options` say with `flags` added, only if it is a
/// regular file, and without waiting: `O_NONBLOCK`, since opening a FIFO
/// (which anyone may plant where the name is free, as in `/tmp`) waits
/// for its other end for ever. The flag changes nothing for a regular file.
fn regular(
    path: &Path,
    options: &mut std::fs::OpenOptions,
    flags: i32,
) -> std::io::Result<std::fs::File> {
    let not_regular = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: not a regular file", path.display()),
        )
    };
    let file = match options.custom_flags(libc::O_NONBLOCK | flags).open(path) {
        // A FIFO opened to write with no reader.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Err(not_regular()),
        opened => opened?,
    };
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// The values of the file at `path` as the last update left them
/// ([`previous`]): none when there is no file or its text is not UTF-8.
/// Read through a symbolic link (the rename replaces the link), from
/// nothing but a regular file.
fn read_previous(path: &Path) -> std::io::Result<Series> {
    use std::io::Read;
    let mut file = match regular(path, std::fs::OpenOptions::new().read(true), 0) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Series::new()),
        opened => opened?,
    };
    let mut text = String::new();
    Ok(file.read_to_string(&mut text).map(|_| previous(&text)).unwrap_or_default())
}

/// Applies `sample` to its key's values.
fn apply(values: &mut BTreeMap<String, f64>, sample: &Sample) {
    let mut set = |name: &str, v: f64| {
        values.insert(name.to_owned(), v);
    };
    set("redlock_last_invocation_timestamp_seconds", seconds(sample.at));
    set("redlock_last_wait_seconds", sample.wait.as_secs_f64());
    if let Some(servers) = sample.servers {
        set("redlock_last_servers", servers.total as f64);
        set("redlock_last_servers_answered", servers.answered as f64);
        set("redlock_last_servers_failed", servers.failed as f64);
        set("redlock_last_servers_no_vote", servers.no_vote as f64);
    }
    if let Some(tick) = sample.tick {
        let paused = matches!(sample.invocation, Invocation::Paused);
        set("redlock_last_tick_ran", if tick.ran { 1.0 } else { 0.0 });
        set("redlock_last_tick_paused", if paused { 1.0 } else { 0.0 });
        set("redlock_last_tick_seen_timestamp_seconds", seconds(tick.start));
    }
    match sample.invocation {
        Invocation::Ran(ran) => {
            set("redlock_last_ran", 1.0);
            set("redlock_last_start_timestamp_seconds", seconds(ran.start));
            set("redlock_last_end_timestamp_seconds", seconds(ran.start + ran.duration));
            set("redlock_last_duration_seconds", ran.duration.as_secs_f64());
            set("redlock_last_exit_code", f64::from(ran.exit_code));
            if let Some(tick) = ran.tick {
                set("redlock_last_tick_timestamp_seconds", seconds(tick));
            }
        }
        Invocation::Skipped | Invocation::Paused | Invocation::Unavailable => {
            set("redlock_last_ran", 0.0);
        }
    }
    for counter in ["redlock_runs_total", "redlock_skips_total"] {
        values.entry(counter.to_owned()).or_insert(0.0);
    }
    let counter = match sample.invocation {
        Invocation::Ran(_) => Some("redlock_runs_total"),
        Invocation::Skipped | Invocation::Paused => Some("redlock_skips_total"),
        Invocation::Unavailable => None,
    };
    if let Some(counter) = counter {
        *values.entry(counter.to_owned()).or_insert(0.0) += 1.0;
    }
}

/// A key as a label value: `\`, `"` and newline escaped (the text format's
/// three escapes).
fn escape(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The file's text: per known metric, HELP and TYPE once, then one sample
/// per key that has it (the text format wants a metric's samples together).
fn render(all: &Series) -> String {
    let mut out = String::new();
    for (name, kind, help) in METRICS {
        let mut samples =
            all.iter().filter_map(|(k, values)| Some((k, values.get(name)?))).peekable();
        if samples.peek().is_none() {
            continue;
        }
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for (key, v) in samples {
            out.push_str(&format!("{name}{{key=\"{}\"}} {v}\n", escape(key)));
        }
    }
    out
}

/// Reads a sample line `NAME{key="LABEL"} VALUE` (the form [`render`]
/// writes): the name, the unescaped key and the value.
fn sample(line: &str) -> Option<(&str, String, f64)> {
    let (name, rest) = line.split_once("{key=\"")?;
    let mut key = String::new();
    let mut chars = rest.char_indices();
    let end = loop {
        match chars.next()? {
            (i, '"') => break i,
            (_, '\\') => match chars.next()?.1 {
                'n' => key.push('\n'),
                c => key.push(c),
            },
            (_, c) => key.push(c),
        }
    };
    let value = rest[end..].strip_prefix("\"}")?.trim();
    Some((name.trim(), key, value.parse().ok()?))
}

/// The values of the known metrics in a previous file, by key. A line in
/// another form (without the `key` label, or with more labels) is
/// dropped: its series restarts from zero.
fn previous(text: &str) -> Series {
    let mut all = Series::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, key, value)) = sample(line) else { continue };
        if METRICS.iter().any(|(m, _, _)| *m == name) {
            all.entry(key).or_default().insert(name.to_owned(), value);
        }
    }
    all
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn counters_carry_over_and_labels_are_escaped() {
        let mut all = Series::new();
        all.entry("a\"b\\c\nd".to_owned())
            .or_default()
            .insert("redlock_runs_total".to_owned(), 4.0);
        all.entry("other".to_owned()).or_default().insert("redlock_runs_total".to_owned(), 2.0);
        let text = render(&all);
        assert!(text.contains("redlock_runs_total{key=\"a\\\"b\\\\c\\nd\"} 4\n"), "{text}");
        assert_eq!(text.matches("# TYPE redlock_runs_total").count(), 1, "{text}");
        assert_eq!(previous(&text), all);
    }

    #[test]
    fn a_directory_others_may_write_needs_the_sticky_bit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("job.prom");
        for (mode, ok) in
            [(0o755, true), (0o775, true), (0o1777, true), (0o777, false), (0o757, false)]
        {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(check_dir(&file).is_ok(), ok, "{mode:o}");
        }
        let err = check_dir(&file).unwrap_err();
        assert!(err.contains("sticky") && err.contains("job.prom") && !err.contains('\n'), "{err}");
        assert_eq!(check_dir(&dir.path().join("missing/job.prom")), Ok(()));
    }

    #[test]
    fn a_skip_writes_both_counters_and_what_it_saw_of_its_tick() {
        let tick =
            TickSeen { start: SystemTime::UNIX_EPOCH + Duration::from_secs(600), ran: false };
        let sample = |invocation| Sample {
            key: "k".into(),
            invocation,
            tick: Some(tick),
            wait: Duration::ZERO,
            at: SystemTime::UNIX_EPOCH,
            servers: None,
        };
        let mut values = BTreeMap::new();
        apply(&mut values, &sample(Invocation::Skipped));
        assert_eq!(values["redlock_runs_total"], 0.0);
        assert_eq!(values["redlock_skips_total"], 1.0);
        assert_eq!(values["redlock_last_tick_ran"], 0.0);
        assert_eq!(values["redlock_last_tick_paused"], 0.0);
        assert_eq!(values["redlock_last_tick_seen_timestamp_seconds"], 600.0);
        apply(&mut values, &sample(Invocation::Unavailable));
        assert_eq!((values["redlock_runs_total"], values["redlock_skips_total"]), (0.0, 1.0));
        assert_eq!(values["redlock_last_ran"], 0.0);
    }

    /// A tick a freeze paused did not run, and says it was paused (a
    /// skip); every other tick says 0 there, so the series never comes and
    /// goes.
    #[test]
    fn a_paused_tick_is_not_run_and_paused() {
        let sample = |kind| Sample {
            key: "k".into(),
            invocation: Invocation::of_skip(kind),
            tick: Some(TickSeen { start: SystemTime::UNIX_EPOCH, ran: kind == SkipKind::Ran }),
            wait: Duration::ZERO,
            at: SystemTime::UNIX_EPOCH,
            servers: None,
        };
        let mut values = BTreeMap::new();
        let seen = |values: &BTreeMap<String, f64>| {
            (values["redlock_last_tick_ran"], values["redlock_last_tick_paused"])
        };
        apply(&mut values, &sample(SkipKind::Paused));
        assert_eq!(seen(&values), (0.0, 1.0));
        assert_eq!((values["redlock_skips_total"], values["redlock_last_ran"]), (1.0, 0.0));
        apply(&mut values, &sample(SkipKind::Ran));
        assert_eq!(seen(&values), (1.0, 0.0));
        for kind in [SkipKind::Busy, SkipKind::Unavailable, SkipKind::Elsewhere] {
            apply(&mut values, &sample(kind));
            assert_eq!(seen(&values), (0.0, 0.0), "{kind:?}");
        }
    }

    #[test]
    fn a_line_of_another_form_is_dropped() {
        let all =
            previous("redlock_runs_total 3\nredlock_runs_total{key=\"k\"} 2\nnoise{key=\"k\"} 1\n");
        assert_eq!(all.len(), 1);
        assert_eq!(all["k"].get("redlock_runs_total"), Some(&2.0));
        assert_eq!(all["k"].len(), 1);
    }
}
