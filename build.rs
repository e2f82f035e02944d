//! Build facts for `redlock --version`: the commit (`git rev-parse --short
//! HEAD`, or "unknown" outside a git checkout, e.g. from a source tarball)
//! and the cargo features this build was made with; and, on glibc, the
//! unwinder linked in rather than loaded from `libgcc_s.so.1`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned()).filter(|t| out.status.success() && !t.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    // Rebuild when HEAD moves: HEAD itself, and the branch it points to.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_").map(|f| f.to_lowercase().replace('_', "-"))
        })
        .collect();
    features.sort();
    let features = if features.is_empty() { "none".to_owned() } else { features.join(",") };
    println!("cargo:rustc-env=REDLOCK_COMMIT={commit}");
    println!("cargo:rustc-env=REDLOCK_FEATURES={features}");
    static_unwinder();
}

/// Links the unwinder from libgcc_eh.a instead of loading libgcc_s.so.1 at
/// every start (every cron tick pays process start-up). Rust's std asks
/// for `-lgcc_s`; a file of that name found first, a linker script naming
/// libgcc_eh.a, answers it with the static archive: no library to open and
/// map, no relocations for it, and none of its constructor's CPUID probes,
/// each a trap to the hypervisor on a VM (the figures:
/// docs/performance.md). Only for a native glibc build whose compiler has libgcc_eh.a;
/// otherwise the usual dynamic link stands (a warning says so). The cost:
/// the binary needs what that archive needs of the C library (gcc 12's,
/// `_dl_find_object`: glibc 2.35, where 2.34 did before), which a binary
/// built where it runs, or the Debian package (its dependency says so),
/// always has.
///
/// Not for a build with a linker of its own (cargo sets RUSTC_LINKER): the
/// release's portable binary (dist/build) is linked by cargo-zigbuild,
/// which turns `-lgcc_s` into zig's static LLVM libunwind, so that binary
/// loads no libgcc_s.so.1 either and needs glibc 2.28 only (measured:
/// docs/performance.md, "The portable binary").
fn static_unwinder() {
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" || !native {
        return;
    }
    if !var("RUSTC_LINKER").is_empty() {
        return;
    }
    // CC may carry arguments ("ccache gcc").
    let cc = std::env::var("CC").ok().filter(|cc| !cc.trim().is_empty());
    let cc = cc.unwrap_or_else(|| "cc".to_owned());
    let mut words = cc.split_whitespace();
    let archive = words
        .next()
        .and_then(|program| {
            Command::new(program).args(words).arg("-print-file-name=libgcc_eh.a").output().ok()
        })
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|path| PathBuf::from(path.trim()))
        .filter(|path| path.is_absolute() && path.is_file());
    let Some(archive) = archive else {
        println!(
            "cargo:warning=no libgcc_eh.a from {cc}: libgcc_s.so.1 stays a dynamic dependency"
        );
        return;
    };
    // A compiler upgrade that removes the archive reruns this, rather than
    // leaving the link pointed at a missing file.
    println!("cargo:rerun-if-changed={}", archive.display());
    let dir = Path::new(&var("OUT_DIR")).join("static-unwinder");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    // Quoted: a path may hold spaces.
    std::fs::write(dir.join("libgcc_s.a"), format!("INPUT(\"{}\")\n", archive.display()))
        .expect("OUT_DIR is writable");
    println!("cargo:rustc-link-search=native={}", dir.display());
}
