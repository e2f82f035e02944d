//! The fleet's settings, the same for every command: the servers (each
//! listed once, the password given to those that name none), the TLS
//! material, `--host`, the quorum, the drift factor, `--max-ttl` and the
//! TTLs it bounds, the validity left after the drift, the node timeout;
//! and where the configuration file exposes a password.

use std::path::PathBuf;
use std::time::Duration;

use crate::config_file::{self, Origin, Setting};
use crate::error::Error;
use crate::server::{ServerUrl, Tls};

use super::values::{duration, listed_once, nonempty, parse_servers, usage};

/// The node timeout when none is given: a tenth of the TTL, at most this.
pub const MAX_DEFAULT_NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// The one line for a command that needs servers when none are named.
pub const NO_SERVERS: &str = "no servers configured: name them with --servers URL[,URL...], \
     REDLOCK_SERVERS, or `servers = [...]` in --config FILE, $REDLOCK_CONFIG, \
     ~/.config/redlock/config.toml or /etc/redlock/config.toml (there is no default: a local \
     Redis is no lock across machines)";

fn read_file(flag: &str, path: &std::path::Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path)
        .map_err(|e| Error::Usage(format!("{flag} {}: cannot read: {e}", path.display())))
}

/// The password file's first line (a trailing newline is not part of it).
fn read_password(label: &str, path: &std::path::Path) -> Result<String, Error> {
    let text = String::from_utf8(read_file(label, path)?)
        .map_err(|_| Error::Usage(format!("{label} {}: not UTF-8 text", path.display())))?;
    let password = text.lines().next().unwrap_or("").to_owned();
    if password.is_empty() {
        return usage(format!("{label} {}: empty", path.display()));
    }
    Ok(password)
}

/// The password: the `--password-file`'s first line, or the environment's.
pub(super) fn password(
    g: &config_file::Globals,
    env_password: Option<&str>,
) -> Result<Option<String>, Error> {
    match &g.password_file.value {
        Some(path) => Ok(Some(read_password(&g.password_file.label("--password-file"), path)?)),
        None => Ok(env_password.map(str::to_owned)),
    }
}

/// The servers, with the password given to those that name none; none
/// when none were named anywhere.
pub(super) fn servers(
    g: &config_file::Globals,
    password: Option<&str>,
) -> Result<Vec<ServerUrl>, Error> {
    let named = !(g.servers.value.is_empty() && g.servers.origin == Origin::Default);
    match parse_servers(&g.servers.label("--servers"), &g.servers.value) {
        Ok(servers) => {
            listed_once(&g.servers.label("--servers"), &g.servers.value)?;
            servers
        }
        // There is no default server: a Redis on this host is never a
        // lock across machines, and a host whose configuration was not
        // deployed yet would lock on its own Redis (every such host
        // runs the job) or wait for ever on nothing. `config` shows
        // the rest of the configuration all the same; the others say it
        // after any other mistake of the command line or the file.
        Err(_) if !named => Vec::new(),
        Err(e) => return Err(e),
    }
    .into_iter()
    .map(|url| match password {
        Some(pw) => url.with_default_password(pw).map_err(Error::Usage),
        None => Ok(url),
    })
    .collect()
}

/// `--host`: a key's rule ([`nonempty`]) and a token's host field's
/// ([`crate::token::check_host`]), or `None` for the kernel's name.
pub(super) fn host(g: &config_file::Globals) -> Result<Option<String>, Error> {
    let Some(raw) = &g.host.value else { return Ok(None) };
    let label = g.host.label("--host");
    let name = nonempty(&label, raw.clone())?;
    crate::token::check_host(&name)
        .map_err(|m| Error::Usage(format!("{label} {:?}: {m}", crate::text::printable(&name))))?;
    Ok(Some(name))
}

/// The TLS material named by `--tls-ca`, `--tls-cert` and `--tls-key`.
pub(super) fn tls(g: &config_file::Globals) -> Result<Tls, Error> {
    let tls_file = |s: &Setting<Option<PathBuf>>, flag: &str| {
        s.value.as_deref().map(|p| read_file(&s.label(flag), p)).transpose()
    };
    Ok(Tls {
        ca: tls_file(&g.tls_ca, "--tls-ca")?,
        client: match (tls_file(&g.tls_cert, "--tls-cert")?, tls_file(&g.tls_key, "--tls-key")?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return usage(
                    "--tls-cert and --tls-key: give both or neither (a client certificate and its key)"
                        .to_owned(),
                );
            }
        },
    })
}

/// `--quorum` (more than half of the `n` servers, at most all), or N/2+1.
pub(super) fn quorum(g: &config_file::Globals, n: usize) -> Result<usize, Error> {
    match g.quorum.value {
        None => Ok(n / 2 + 1),
        Some(_) if n == 0 => Ok(1),
        Some(q) if q * 2 > n && q <= n => Ok(q),
        Some(q) => usage(format!(
            "{} {q}: must be more than half of the {n} server(s) and at most all of them",
            g.quorum.label("--quorum")
        )),
    }
}

/// `--drift-factor`: from 0 to below 0.5.
pub(super) fn drift_factor(g: &config_file::Globals) -> Result<f64, Error> {
    let raw = &g.drift_factor.value;
    raw.parse().ok().filter(|f: &f64| (0.0..0.5).contains(f)).ok_or_else(|| {
        Error::Usage(format!(
            "{} {raw:?}: must be a number from 0 to below 0.5",
            g.drift_factor.label("--drift-factor")
        ))
    })
}

/// `--max-ttl`.
pub(super) fn max_ttl(g: &config_file::Globals) -> Result<Duration, Error> {
    duration(&g.max_ttl.label("--max-ttl"), &g.max_ttl.value)
}

/// A TTL a lock may be left with (`--ttl`, `--keep`, named by `label`) is
/// at most `--max-ttl`: a restarted server is kept out of the quorum that
/// long, so a longer lock could be granted twice.
pub(super) fn within_max_ttl(
    label: &str,
    ttl: Duration,
    g: &config_file::Globals,
    max_ttl: Duration,
) -> Result<(), Error> {
    if ttl <= max_ttl {
        return Ok(());
    }
    usage(format!(
        "{label} {}: above {} {}, the longest TTL a restarted server is kept out of the \
         quorum for; raise max-ttl in every host's configuration (and a restarted server \
         waits that long before it votes again)",
        crate::text::fmt_duration(ttl),
        g.max_ttl.label("--max-ttl"),
        crate::text::fmt_duration(max_ttl),
    ))
}

/// Some validity is left of `ttl` after the clock-drift allowance `drift`.
pub(super) fn validity_budget(ttl: Duration, drift: Duration) -> Result<Duration, Error> {
    ttl.checked_sub(drift).filter(|v| !v.is_zero()).ok_or_else(|| {
        Error::Usage(format!(
            "--ttl {}: too short to leave any validity after the clock-drift allowance",
            crate::text::fmt_duration(ttl)
        ))
    })
}

/// `--node-timeout` (shorter than the TTL), or a tenth of the TTL, at most
/// [`MAX_DEFAULT_NODE_TIMEOUT`].
pub(super) fn node_timeout(g: &config_file::Globals, ttl: Duration) -> Result<Duration, Error> {
    match &g.node_timeout.value {
        Some(raw) => {
            let label = g.node_timeout.label("--node-timeout");
            let d = duration(&label, raw)?;
            if d >= ttl {
                return usage(format!(
                    "{label} {raw}: must be shorter than the TTL ({})",
                    crate::text::fmt_duration(ttl)
                ));
            }
            Ok(d)
        }
        None => Ok((ttl / 10).clamp(Duration::from_millis(1), MAX_DEFAULT_NODE_TIMEOUT)),
    }
}

/// What the docs say never to do with a password, found by the gate
/// alone (a command still runs with it): a password in a URL of the file
/// is a problem when others can read the file and a warning (returned)
/// when it is private; a `password-file` others can read is a problem.
/// "Others" is the mode's o+r: the owner and the group are the file's
/// intended readers. Never the password itself, only where it is.
pub(super) fn exposed(g: &config_file::Globals, problems: &mut Vec<Error>) -> Vec<String> {
    let mut warnings = Vec::new();
    if let (Some(file), Origin::File(..)) = (&g.file, &g.servers.origin)
        && crate::server::redact(&g.servers.value) != g.servers.value
    {
        let what = format!("{}: a password in a URL", g.servers.label("--servers"));
        match others_read(file) {
            Some(mode) => problems.push(Error::Usage(format!(
                "{what} of a file others can read (mode {mode:03o}): move it to a password-file \
                 of mode 0600, or chmod o-r {}",
                file.display()
            ))),
            None => warnings.push(format!(
                "{what} of a private file (a warning): a password-file of mode 0600 keeps it \
                 out of a file that is copied, diffed and shown"
            )),
        }
    }
    if let Some(path) = &g.password_file.value
        && let Some(mode) = others_read(path)
    {
        problems.push(Error::Usage(format!(
            "{} {}: others can read it (mode {mode:03o}): chmod 600 {}",
            g.password_file.label("--password-file"),
            path.display(),
            path.display()
        )));
    }
    warnings
}

/// The permission bits of `path` when others (o+r) may read it.
fn others_read(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
    (mode & 0o004 != 0).then_some(mode)
}
