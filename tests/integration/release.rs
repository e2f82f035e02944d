//! The release: one version everywhere a user reads one (Cargo.toml's, in
//! the action's and the component's examples and the README's recipes),
//! and a workflow that, on that version's tag, builds and attaches the
//! files the action and the component download.

use crate::harness::root;
use crate::readme::yaml;

fn cargo_version() -> String {
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = cargo.lines().find(|l| l.starts_with("version = ")).expect("a version");
    line.trim_start_matches("version = ").trim_matches('"').to_owned()
}

/// Every `N.N.N` in `text` that follows one of `markers`.
fn versions_after(text: &str, markers: &[&str]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for marker in markers {
            for (at, _) in line.match_indices(marker) {
                let rest = &line[at + marker.len()..];
                let version: String =
                    rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
                if version.split('.').count() == 3 && version.split('.').all(|p| !p.is_empty()) {
                    found.push((n + 1, version));
                }
            }
        }
    }
    found
}

/// The action's and the component's examples, the README's recipes and
/// the docs name the version Cargo.toml has: a user copying one gets the
/// release that the tag of that version makes.
#[test]
fn one_version_everywhere() {
    let version = cargo_version();
    let markers = ["redlock@v", "/run@", "version: ", "releases/v", "download/v", "(", "tag (v"];
    let mut checked = 0;
    for file in ["action.yml", "templates/run.yml", "README.md", "docs/recipes.md"] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for (line, found) in versions_after(&text, &markers) {
            assert_eq!(found, version, "{file}:{line} names {found}, Cargo.toml {version}");
            checked += 1;
        }
    }
    assert!(checked >= 6, "too few versions found ({checked}): has the wording changed?");
}

/// A pushed tag `vX.Y.Z` runs dist/build and attaches the tarball, the
/// .deb, the .rpm and SHA256SUMS to that tag's release, where the action
/// (dist/install) and the component download them.
#[test]
fn a_version_tag_releases_what_the_action_and_the_component_download() {
    let path = root().join(".github/workflows/release.yml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}: no release workflow", path.display()));
    let workflow = yaml(&text);
    // PyYAML reads the key `on` as true.
    let on = workflow.get("on").or_else(|| workflow.get("true")).expect("on:");
    let tags = on["push"]["tags"].as_array().expect("on: push: tags:");
    assert!(tags.iter().any(|t| t.as_str().unwrap().starts_with("v")), "{tags:?}");
    assert!(text.contains("dist/build"), "the release is dist/build's");
    for attached in ["*.tar.gz", "*.deb", "*.rpm", "SHA256SUMS"] {
        assert!(text.contains(attached), "the release lacks {attached}");
    }
    assert!(text.contains("Cargo.toml"), "the tag is checked against Cargo.toml's version");
}
