//! Time zones by their IANA names: the one `--cron` and `--once-per` are
//! read in ([`Zone::resolve`]) and where it came from ([`ZoneFrom`]), and
//! instants shown with their offset there ([`format_instant`]).
//!
//! A zone has one name, whatever name it was given: a link of the tz
//! database (`US/Eastern`, `Europe/Kiev`) is its target's name
//! (`super::links`), and every name of UTC (`Etc/UTC`, `UCT`, `Zulu`,
//! `GMT`, `Etc/GMT+0`, `Greenwich`...) is `UTC`: `Etc/GMT` and `Etc/UTC`
//! differ only in their abbreviation, which no tick reads. Hosts compare
//! zones by that name, so a scratch container (UTC, the default) and a
//! Debian host (`/etc/localtime` -> `Etc/UTC`) read one zone.

use std::path::Path;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::links::LINKS;

/// The names that stand for each host's own zone rather than one zone:
/// `localtime` (Debian links `/usr/share/zoneinfo/localtime` to
/// `/etc/localtime`) and `posixrules` (zic's template, usually a copy of
/// `America/New_York` or of the host's zone). Two hosts giving one of
/// them would compare equal while reading two zones.
const HOSTS_OWN: [&str; 2] = ["localtime", "posixrules"];

/// The longest zone name accepted, in bytes (the longest in the tz
/// database is 32).
const MAX_NAME_LEN: usize = 100;

/// A time zone by its one name ([`Zone::name`]), as hosts compare it.
#[derive(Clone, Debug)]
pub struct Zone {
    /// Its one name (`Europe/Kyiv` for `Europe/Kiev`, `UTC` for `Etc/UTC`).
    name: String,
    /// Its rules.
    pub(super) tz: TimeZone,
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

/// Where the zone `--cron` and `--once-per` of a day or more read came
/// from, for `redlock config`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneFrom {
    /// `--tz`, or the configuration file's `tz`: its label (`--tz`,
    /// `/etc/redlock/config.toml:3: tz`).
    Given(String),
    /// This environment variable (`CRON_TZ`, `TZ`) with this value.
    Env(&'static str, String),
    /// The host's zone: this link and where it points
    /// (`/etc/localtime -> /usr/share/zoneinfo/Etc/UTC`).
    Host(String),
    /// Nothing named one (no `/etc/localtime`): UTC.
    Default,
}

impl std::fmt::Display for ZoneFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZoneFrom::Given(label) => f.write_str(label),
            ZoneFrom::Env(var, value) => {
                write!(f, "env {var}={}", crate::text::printable(value))
            }
            ZoneFrom::Host(link) => f.write_str(link),
            ZoneFrom::Default => {
                f.write_str("default (no --tz, tz, CRON_TZ, TZ or /etc/localtime: UTC)")
            }
        }
    }
}

impl Zone {
    /// UTC.
    pub fn utc() -> Zone {
        Zone { name: "UTC".to_string(), tz: TimeZone::UTC }
    }

    /// The zone named `name` in the tz database (the system's, or the
    /// bundled copy on a host without one); `origin` names where the name
    /// came from for the error (`--tz`, `tz in /etc/redlock.toml`):
    /// `--tz Mars/Olympus: no such time zone`.
    pub fn named(name: &str, origin: &str) -> Result<Zone, String> {
        Zone::lookup(name, &format!("{origin} {}", crate::text::printable(name.trim())))
    }

    /// The zone named `name`; errors begin with `label`.
    fn lookup(name: &str, label: &str) -> Result<Zone, String> {
        let name = name.trim();
        if name.is_empty() || name.len() > MAX_NAME_LEN || name.chars().any(crate::text::is_unsafe)
        {
            return Err(format!("{label}: not a time zone name"));
        }
        let last = name.rsplit('/').next().unwrap_or(name);
        if HOSTS_OWN.iter().any(|own| own.eq_ignore_ascii_case(last)) {
            return Err(format!(
                "{label}: names each host's own zone, which hosts cannot compare; \
                 name the zone (--tz Europe/London)"
            ));
        }
        if canonical(name) == "UTC" {
            return Ok(Zone::utc());
        }
        // An older database may know only the zone's other name (a host
        // from before `Europe/Kiev` became `Europe/Kyiv`), a newer one
        // only its new name: any of its names reads its rules.
        let one = canonical(name);
        let names = std::iter::once(name)
            .chain(std::iter::once(one))
            .chain(LINKS.iter().filter(|(_, to)| *to == one).map(|(link, _)| *link));
        for candidate in names {
            if let Ok(tz) = TimeZone::get(candidate) {
                let spelled = tz.iana_name().unwrap_or(candidate);
                return Ok(Zone { name: canonical(spelled).to_string(), tz });
            }
        }
        Err(format!("{label}: no such time zone"))
    }

    /// The zone `--cron` and `--once-per` of a day or more are read in,
    /// and where it came from: `explicit` (`(origin, name)`: `--tz`, or
    /// else the configuration file's `tz`), then `CRON_TZ` (cronie hands a
    /// crontab's to its jobs), then `TZ` (a name, a path into a `zoneinfo`
    /// directory, or another file, `:/etc/localtime`, read as a link),
    /// then the host's `/etc/localtime`, then UTC. `env` reads the
    /// environment.
    /// An unknown zone from any of them is an error naming it; so is an
    /// `/etc/localtime` that does not say its zone's name (a copied file:
    /// hosts could not compare it).
    pub fn resolve(
        explicit: Option<(&str, &str)>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(Zone, ZoneFrom), String> {
        Zone::resolve_from(explicit, env, Path::new("/etc/localtime"))
    }

    /// [`Zone::resolve`] with the host's zone read from `localtime`.
    pub(super) fn resolve_from(
        explicit: Option<(&str, &str)>,
        env: impl Fn(&str) -> Option<String>,
        localtime: &Path,
    ) -> Result<(Zone, ZoneFrom), String> {
        if let Some((origin, name)) = explicit {
            return Ok((Zone::named(name, origin)?, ZoneFrom::Given(origin.to_owned())));
        }
        for var in ["CRON_TZ", "TZ"] {
            if let Some(value) = env(var).filter(|v| !v.is_empty()) {
                let label = format!("{var}={}", crate::text::printable(&value));
                let zone = match TzValue::of(&value) {
                    TzValue::Name(name) => Zone::lookup(name, &label)?,
                    TzValue::File(path) => {
                        Zone::linked(path)
                            .map_err(|e| format!("{label}: {e}"))?
                            .ok_or_else(|| format!("{label}: no such file"))?
                            .0
                    }
                };
                return Ok((zone, ZoneFrom::Env(var, value)));
            }
        }
        match Zone::linked(localtime)? {
            Some((zone, link)) => Ok((zone, ZoneFrom::Host(link))),
            None => Ok((Zone::utc(), ZoneFrom::Default)),
        }
    }

    /// The zone the file `path` links to through a `zoneinfo` directory
    /// (as `/etc/localtime` does), with the link for messages
    /// (`/etc/localtime -> /usr/share/zoneinfo/Etc/UTC`); `None` when
    /// there is no such file. A regular file is an error: a copied zone
    /// file does not say its zone's name, so hosts could not compare it.
    fn linked(path: &Path) -> Result<Option<(Zone, String)>, String> {
        let shown = crate::text::printable(&path.to_string_lossy()).into_owned();
        match std::fs::symlink_metadata(path) {
            Err(_) => Ok(None),
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(path).map_err(|e| format!("{shown}: {e}"))?;
                let target = target.to_string_lossy();
                let link = format!("{shown} -> {}", crate::text::printable(&target));
                match target.rsplit_once("zoneinfo/") {
                    Some((_, name)) => Ok(Some((Zone::lookup(name, &link)?, link))),
                    None => Err(format!("{link}: not a link into a zoneinfo directory; set --tz")),
                }
            }
            Ok(_) => {
                Err(format!("{shown}: a copied zone file does not say its zone's name; set --tz"))
            }
        }
    }

    /// The zone's one name (`Europe/London`, `UTC`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The one name of the zone `name` names: a link's target, `UTC` for
/// every name of UTC, else `name` itself (`posix/` taken off: the tz
/// database's copy of its zones without leap seconds). The table is read
/// ASCII case ignored, as zone lookups are.
fn canonical(name: &str) -> &str {
    let name = name.strip_prefix("posix/").unwrap_or(name);
    let target =
        LINKS.iter().find(|(link, _)| link.eq_ignore_ascii_case(name)).map_or(name, |(_, to)| *to);
    if ["Etc/UTC", "Etc/GMT"].iter().any(|utc| utc.eq_ignore_ascii_case(target)) {
        "UTC"
    } else {
        target
    }
}

/// What a `TZ` (or `CRON_TZ`) value names, as glibc reads one that names
/// a file: `:Europe/London` and `Europe/London` a zone by name;
/// `/usr/share/zoneinfo/Europe/London` the zone it ends in; another
/// absolute path (`:/etc/localtime`, glibc's "the host's zone") the zone
/// that file links to, as the `/etc/localtime` fallback reads it.
#[derive(Debug, PartialEq, Eq)]
enum TzValue<'a> {
    /// A zone's name.
    Name(&'a str),
    /// A file outside any `zoneinfo` directory.
    File(&'a Path),
}

impl TzValue<'_> {
    fn of(value: &str) -> TzValue<'_> {
        let value = value.strip_prefix(':').unwrap_or(value);
        match value.rsplit_once("zoneinfo/") {
            Some((_, name)) => TzValue::Name(name),
            None if value.starts_with('/') => TzValue::File(Path::new(value)),
            None => TzValue::Name(value),
        }
    }
}

/// `at` with its offset in `zone`, to the second (with a fraction only when
/// it has one): `2027-03-29T00:30:00+01:00`. The one format of a tick
/// everywhere (`REDLOCK_TICK`, history, status, check, the skip line).
pub fn format_instant(at: Timestamp, zone: &Zone) -> String {
    format_in(at, zone.tz.clone())
}

/// `ms` since the Unix epoch at the UTC offset `offset_s` (seconds), in
/// [`format_instant`]'s format: a tick as a record of it keeps it.
pub fn format_at_offset(ms: u64, offset_s: i32) -> String {
    let offset = jiff::tz::Offset::from_seconds(offset_s).unwrap_or(jiff::tz::Offset::UTC);
    match i64::try_from(ms).ok().and_then(|ms| Timestamp::from_millisecond(ms).ok()) {
        Some(at) => format_in(at, jiff::tz::TimeZone::fixed(offset)),
        None => format!("{ms}ms"),
    }
}

fn format_in(at: Timestamp, tz: jiff::tz::TimeZone) -> String {
    at.to_zoned_datetime(tz).strftime("%Y-%m-%dT%H:%M:%S%.f%:z").to_string()
}
