//! Time zones by their IANA names: the one `--cron` and `--once-per` are
//! read in ([`Zone::resolve`]), and instants shown with their offset there
//! ([`format_instant`]).

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// A time zone by its IANA name, as hosts compare it.
#[derive(Clone, Debug)]
pub struct Zone {
    /// The name, as the tz database spells it (`Europe/London`).
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
        let shown: String = name.chars().filter(|c| !c.is_control()).collect();
        Zone::lookup(name, &format!("{origin} {}", shown.trim()))
    }

    /// The zone named `name`; errors begin with `label`.
    fn lookup(name: &str, label: &str) -> Result<Zone, String> {
        let name = name.trim();
        if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
            return Err(format!("{label}: not a time zone name"));
        }
        match TimeZone::get(name) {
            Ok(tz) => Ok(Zone { name: tz.iana_name().unwrap_or(name).to_string(), tz }),
            Err(_) => Err(format!("{label}: no such time zone")),
        }
    }

    /// The zone `--cron` and `--once-per` of a day or more are read in:
    /// `explicit` (`(origin, name)`: `--tz`, or else the configuration
    /// file's `tz`), then `CRON_TZ` (cronie hands a crontab's to its jobs),
    /// then `TZ` (a leading `:` and a path through a `zoneinfo` directory
    /// are taken off), then the host's `/etc/localtime`, then UTC. `env`
    /// reads the environment. An unknown zone from any of them is an error
    /// naming it; so is an `/etc/localtime` that does not say its zone's
    /// name (a copied file: hosts could not compare it).
    pub fn resolve(
        explicit: Option<(&str, &str)>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Zone, String> {
        Zone::resolve_from(explicit, env, std::path::Path::new("/etc/localtime"))
    }

    /// [`Zone::resolve`] with the host's zone read from `localtime`.
    pub(super) fn resolve_from(
        explicit: Option<(&str, &str)>,
        env: impl Fn(&str) -> Option<String>,
        localtime: &std::path::Path,
    ) -> Result<Zone, String> {
        if let Some((origin, name)) = explicit {
            return Zone::named(name, origin);
        }
        for var in ["CRON_TZ", "TZ"] {
            if let Some(value) = env(var).filter(|v| !v.is_empty()) {
                let shown: String = value.chars().filter(|c| !c.is_control()).collect();
                return Zone::lookup(zone_name_of(&value), &format!("{var}={shown}"));
            }
        }
        let shown = localtime.display();
        match std::fs::symlink_metadata(localtime) {
            Err(_) => Ok(Zone::utc()),
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(localtime).map_err(|e| format!("{shown}: {e}"))?;
                let target = target.to_string_lossy();
                match target.rsplit_once("zoneinfo/") {
                    Some((_, name)) => Zone::lookup(name, &format!("{shown} -> {target}")),
                    None => Err(format!(
                        "{shown}: links to {target}, not into a zoneinfo directory; set --tz"
                    )),
                }
            }
            Ok(_) => {
                Err(format!("{shown}: a copied zone file does not say its zone's name; set --tz"))
            }
        }
    }

    /// The zone's name (`Europe/London`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The zone name in a `TZ` value: `:Europe/London` and
/// `/usr/share/zoneinfo/Europe/London` both name `Europe/London`.
fn zone_name_of(value: &str) -> &str {
    let value = value.strip_prefix(':').unwrap_or(value);
    match value.rsplit_once("zoneinfo/") {
        Some((_, name)) => name,
        None => value,
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
