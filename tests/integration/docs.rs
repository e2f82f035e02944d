//! The generated man pages and completions: committed, current, renderable
//! and loadable.

use std::process::Command;

use crate::harness::root;

/// rust-analyzer's `ensure_file_contents`: a stale file fails the test with
/// the command that regenerates it.
#[test]
fn generated_files_are_committed_and_current() {
    let mut stale = Vec::new();
    for file in redlock::docs::files() {
        let on_disk = std::fs::read(root().join(&file.path)).unwrap_or_default();
        if on_disk != file.content {
            stale.push(file.path);
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run `cargo run --example gen-docs` and commit the result"
    );
}

#[test]
fn man_pages_render_without_warnings() {
    let pages: Vec<_> =
        redlock::docs::files().into_iter().filter(|f| f.path.starts_with("man/")).collect();
    assert!(pages.len() >= 7, "one page per subcommand plus redlock(1)");
    for page in pages {
        let out = Command::new("groff")
            .args(["-man", "-ww", "-z", "-Tutf8"])
            .arg(root().join(&page.path))
            .output()
            .expect("groff (Debian package groff-base) must be installed");
        assert!(out.status.success(), "{}: groff failed", page.path);
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(warnings.is_empty(), "{}: {warnings}", page.path);
    }
    let text = Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(root().join("man/redlock.1"))
        .env("MANWIDTH", "100")
        .output()
        .expect("man (Debian package man-db) must be installed");
    let text = String::from_utf8_lossy(&text.stdout);
    for heading in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "EXAMPLES",
        "SEE ALSO",
    ] {
        assert!(text.lines().any(|l| l == heading), "redlock(1) lacks {heading}:\n{text}");
    }
    assert!(text.contains("REDLOCK_SERVERS") && text.contains("flock(1)"));
}

#[test]
fn completions_load_in_bash_and_zsh() {
    let bash = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p redlock",
            root().join("completions/redlock.bash").display()
        ))
        .output()
        .expect("bash");
    assert!(bash.status.success(), "bash: {}", String::from_utf8_lossy(&bash.stderr));
    assert!(String::from_utf8_lossy(&bash.stdout).contains("redlock"));

    let script = format!(
        "autoload -U compinit && compinit -u -D && source {} && whence -w _redlock",
        root().join("completions/_redlock").display()
    );
    let zsh = Command::new("zsh")
        .args(["-f", "-c", &script])
        .output()
        .expect("zsh must be installed (apt-get install -y zsh)");
    assert!(zsh.status.success(), "zsh: {}", String::from_utf8_lossy(&zsh.stderr));
    assert!(String::from_utf8_lossy(&zsh.stdout).contains("_redlock: function"));
}

/// The man page's ACL grants what the README's does (the README's runs in
/// `secrets::the_documented_acl_is_enough_for_every_lock_operation`).
#[test]
fn the_man_page_acl_is_the_readme_s() {
    let acl_line = |text: &str| -> String {
        let line = text.lines().find(|l| l.starts_with("ACL SETUSER locker on ")).unwrap_or("");
        line.replace("\\-", "-").replace(">PASSWORD", ">CHANGE-ME")
    };
    let readme = acl_line(&std::fs::read_to_string(root().join("README.md")).unwrap());
    let man = acl_line(&std::fs::read_to_string(root().join("man/redlock-run.1")).unwrap());
    assert!(!readme.is_empty(), "README.md has no ACL line");
    assert_eq!(man, readme, "man/redlock-run.1's ACL differs from README.md's");
}

/// Packages name the project, not an address nobody reads: no
/// Maintainer, author or contact on a reserved `.example` domain.
#[test]
fn packages_carry_no_invented_address() {
    for file in ["Cargo.toml", "dist/build", "pkg/copyright", "pkg/redlock.spec"] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for line in text.lines() {
            let lower = line.to_ascii_lowercase();
            let names_a_person = ["authors", "maintainer", "packager", "upstream-contact"]
                .iter()
                .any(|field| lower.trim_start().starts_with(field));
            assert!(
                !(names_a_person && (line.contains(".example") || line.contains('@'))),
                "{file}: {line}"
            );
        }
    }
}

/// A subcommand's SYNOPSIS gathers the global options in `[GLOBAL
/// OPTIONS]` and lists its own in `--help`'s order, each with its value.
#[test]
fn the_synopsis_lists_a_subcommand_s_own_options_with_their_values() {
    let page = std::fs::read_to_string(root().join("man/redlock-run.1")).unwrap();
    let synopsis = page.lines().skip_while(|l| *l != ".SH SYNOPSIS").nth(1).unwrap_or("");
    assert!(synopsis.contains("[\\fIGLOBAL OPTIONS\\fR] \\fBrun\\fR"), "{synopsis}");
    assert!(synopsis.contains("[\\fB\\-\\-ttl\\fR \\fIDUR\\fR]"), "{synopsis}");
    assert!(synopsis.contains("[\\fB\\-\\-once\\-per\\fR \\fIDUR\\fR]"), "{synopsis}");
    assert!(!synopsis.contains("servers"), "the global options are gathered: {synopsis}");
    let ttl = synopsis.find("ttl").unwrap();
    assert!(ttl < synopsis.find("keep").unwrap(), "in --help's order: {synopsis}");
}
