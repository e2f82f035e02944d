//! Build facts for `redlock --version`: the commit (`git rev-parse --short
//! HEAD`, or "unknown" outside a git checkout, e.g. from a source tarball)
//! and the cargo features this build was made with.

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
}
