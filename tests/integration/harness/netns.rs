//! Network namespaces of the tests' own, for real partitions: packets
//! dropped on a link, not connections refused or stalled by a proxy.
//!
//! A [`Netns`] is a namespace `rl-PID-I` joined to the root namespace by a
//! veth pair: `rlPIDhI` in the root namespace with `198.18.x.1/30`, and
//! `veth0` inside with `198.18.x.2/30` (198.18.0.0/15 is reserved for
//! network tests, RFC 2544, so no real network of the machine uses it; a
//! /30 some interface already has is skipped). Processes started with
//! [`Netns::enter`] live inside and reach a server of the root namespace
//! at [`Netns::host`], which the server must listen on. [`Netns::cut`]
//! drops the packets between them and some of its ports with nftables
//! rules inside the namespace, on `veth0`'s ingress and egress hooks: the
//! wire cut, so TCP sees loss (retransmits, then late delivery once
//! healed), never a reset or an error. Nothing is written to the root
//! namespace but the veth end and its address: no firewall rule, no route
//! beyond the /30's own.
//!
//! Names carry the process id, so parallel test binaries never collide.
//! Drop deletes the veth pair and the namespace (also when a test panics);
//! a namespace left by a test binary that was killed (no drop ran) is
//! deleted by the next [`Netns::create`], once its process id is gone.
//! Creating one needs `CAP_NET_ADMIN` and `CAP_SYS_ADMIN` (root): without
//! them [`Netns::create`] fails with [`Unavailable`], and callers skip.

use std::fs::File;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// The interface inside each namespace.
const INSIDE: &str = "veth0";

/// The /30 blocks of 198.18.0.0/15.
const SLOTS: u32 = 1 << 15;

/// The nftables table of a cut, inside the namespace.
const TABLE: &str = "netdev rlcut";

/// Why namespaces cannot be made here (no privilege): the reason, for the
/// line that says what is skipped.
#[derive(Debug)]
pub struct Unavailable(pub String);

/// A network namespace of this process, with its veth pair (see the
/// module doc).
pub struct Netns {
    name: String,
    host_if: String,
    host: Ipv4Addr,
    /// `/run/netns/NAME`, open for `setns(2)` in [`Netns::enter`].
    file: File,
}

/// Runs `tool` with `args` (and `stdin`), inside `ns` when given; its
/// stderr when it fails. A missing tool fails the test with how to
/// install it (the tools are the test's dependencies, never a skip).
fn tool(tool: &str, args: &[&str], stdin: &str, ns: Option<&Netns>) -> Result<(), String> {
    let mut cmd = Command::new(tool);
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped());
    if let Some(ns) = ns {
        ns.enter(&mut cmd);
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        let package = if tool == "nft" { "nftables" } else { "iproute2" };
        panic!("{tool}: {e}; install it: apt-get install -y {package}")
    });
    // A tool that exits without reading its input says why on stderr.
    let mut input = child.stdin.take().expect("stdin piped");
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    let out = child.wait_with_output().map_err(|e| format!("{tool}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{tool} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    tool("ip", args, "", None)
}

/// The text `ip` prints for `args`.
fn ip_output(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Deletes the namespaces `rl-PID-I` whose process is gone (a test binary
/// killed before its drops ran). Their veth pairs go with them.
fn sweep() {
    for line in ip_output(&["netns", "list"]).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let mut parts = name.split('-');
        let (Some("rl"), Some(pid), Some(i), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), i.parse::<u32>()) else { continue };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// A free /30 of 198.18.0.0/15 for namespace `index` of this process:
/// from a place its process id and index pick, the first whose addresses
/// no interface has (another test binary's, most likely).
fn free_block(index: usize) -> Option<u32> {
    let used = ip_output(&["-4", "-o", "addr", "show"]);
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    let start = std::process::id().wrapping_mul(8).wrapping_add(index as u32);
    (0..SLOTS).map(|k| base + (start.wrapping_add(k) % SLOTS) * 4).find(|block| {
        (1..=2).all(|h| !used.contains(&format!("inet {}/", Ipv4Addr::from(block + h))))
    })
}

impl Netns {
    /// Creates namespace `index` of this process, its veth pair and their
    /// addresses, both ends up. [`Unavailable`] when the machine does not
    /// let this process make namespaces.
    pub fn create(index: usize) -> Result<Netns, Unavailable> {
        sweep();
        let block = free_block(index).ok_or_else(|| Unavailable("198.18.0.0/15 is full".into()))?;
        let pid = std::process::id();
        let name = format!("rl-{pid}-{index}");
        ip(&["netns", "add", &name]).map_err(Unavailable)?;
        let file = match File::open(format!("/run/netns/{name}")) {
            Ok(file) => file,
            Err(e) => {
                let _ = ip(&["netns", "del", &name]);
                return Err(Unavailable(format!("/run/netns/{name}: {e}")));
            }
        };
        // From here on, a failure drops what exists so far.
        let host_if = format!("rl{pid}h{index}");
        let ns = Netns { name, host_if, host: Ipv4Addr::from(block + 1), file };
        let host = format!("{}/30", ns.host);
        let inside = format!("{}/30", Ipv4Addr::from(block + 2));
        let n = ns.name.clone();
        let steps: [&[&str]; 6] = [
            &["link", "add", &ns.host_if, "type", "veth", "peer", "name", INSIDE, "netns", &n],
            &["addr", "add", &host, "dev", &ns.host_if],
            &["link", "set", &ns.host_if, "up"],
            &["-n", &n, "addr", "add", &inside, "dev", INSIDE],
            &["-n", &n, "link", "set", INSIDE, "up"],
            &["-n", &n, "link", "set", "lo", "up"],
        ];
        for step in steps {
            ip(step).map_err(Unavailable)?;
        }
        // The cut's rules need nftables' netdev egress hook (Linux 5.16):
        // tried once now, so that a kernel without it skips the family
        // rather than failing in the middle of a run.
        ns.cut(&[1]).map_err(Unavailable)?;
        ns.cut(&[]).map_err(Unavailable)?;
        Ok(ns)
    }

    /// The root namespace's end of the veth pair: where processes inside
    /// reach a server of the root namespace that listens on it.
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    /// The namespace's name (`ip netns exec NAME ...`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Makes `cmd` start inside the namespace (`setns(2)` between fork and
    /// exec; the rest of the process, mounts included, is the caller's).
    pub fn enter<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        let fd = self.file.as_raw_fd();
        // SAFETY: setns is async-signal-safe; `fd` is open in the parent
        // (self outlives the spawn) and so in the forked child.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        }
    }

    /// Drops every packet between the namespace and [`Netns::host`]'s
    /// `ports`, both ways, until the next call; `cut(&[])` heals. The
    /// table is replaced in one nftables transaction, so a cut never
    /// passes through a state with no rules.
    pub fn cut(&self, ports: &[u16]) -> Result<(), String> {
        // Declaring the table first makes its deletion safe when absent.
        let mut script = format!("table {TABLE}\ndelete table {TABLE}\n");
        if !ports.is_empty() {
            let set: Vec<String> = ports.iter().map(u16::to_string).collect();
            let set = set.join(", ");
            let host = self.host;
            script += &format!(
                "table {TABLE} {{\n\
                 chain egress {{ type filter hook egress device \"{INSIDE}\" priority 0; \
                 ip daddr {host} tcp dport {{ {set} }} drop; }}\n\
                 chain ingress {{ type filter hook ingress device \"{INSIDE}\" priority 0; \
                 ip saddr {host} tcp sport {{ {set} }} drop; }}\n}}\n"
            );
        }
        tool("nft", &["-f", "-"], &script, Some(self))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The veth first: deleting it removes both ends at once, while the
        // namespace's own deletion frees them only later, in the kernel's
        // cleanup.
        let _ = ip(&["link", "del", &self.host_if]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}
