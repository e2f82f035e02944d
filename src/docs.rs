//! Generated documentation: man pages (clap_mangen) and shell completions
//! (clap_complete), built from the clap definitions in [`crate::cli`].
//!
//! `cargo run --example gen-docs` writes them into `man/` and
//! `completions/`; an integration test fails when the committed files
//! differ from what [`files`] produces, so they never go stale.

use clap_complete::Shell;

/// One generated file: its path relative to the repository root, and its content.
pub struct Generated {
    /// Path relative to the repository root.
    pub path: String,
    /// The bytes it must hold.
    pub content: Vec<u8>,
}

/// DESIGN.md's exit-code table, as (code, meaning).
pub const EXIT_CODES: &[(&str, &str)] = &[
    ("the child's", "run: the command exited by itself with that status."),
    (
        "128+N",
        "run: the command was ended by signal N (not by redlock's lost-lock action); run or acquire: signal N came while waiting for the lock (nothing is left held).",
    ),
    ("0", "Success. status: the lock is held. doctor: the servers are fit."),
    ("1", "status: the lock is free. doctor: the servers work, with warnings (it says which)."),
    (
        "64",
        "Usage: a bad flag, duration, URL or key, or no command after \\-\\-; nothing was sent to any server.",
    ),
    (
        "69",
        "Unavailable: a quorum of servers could not be reached, refused authentication, or answered with errors.",
    ),
    (
        "70",
        "Lost: run stopped the command because the lock could no longer be renewed; extend or release found the lock not held by that token.",
    ),
    (
        "75",
        "Busy: the lock is held elsewhere and \\-n or \\-\\-wait ran out (change with \\-E/\\-\\-conflict\\-exit\\-code).",
    ),
    ("124", "run: the command was stopped because \\-\\-max\\-hold ran out."),
    ("126", "run: the command could not be executed."),
    ("127", "run: the command was not found."),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "REDLOCK_SERVERS",
        "Comma\\-separated server URLs, used when \\-\\-servers is not given. Keeps passwords out of crontabs and ps(1).",
    ),
    (
        "REDLOCK_KEY",
        "Set by run for the command: the lock's key. A nested redlock run on the same key runs its command directly.",
    ),
    (
        "REDLOCK_TOKEN",
        "Set by run for the command: the lock's token. Read by extend when \\-\\-token is not given, and by a nested run.",
    ),
    (
        "REDLOCK_FENCE",
        "Set by run for the command (unless \\-\\-no\\-fence): the fencing number of this acquisition, larger than that of every earlier acquisition of the key.",
    ),
    ("SHELL", "The shell that runs \\-c commands (default /bin/sh)."),
];

const EXAMPLES: &str = r#".TP
Cron on every host of a fleet; one host runs each tick, the others skip silently:
.EX
*/5 * * * * redlock run \-n \-E 0 \-\-keep 1m \-\-key nightly\-report \-\- /usr/local/bin/report
.EE
.TP
A CI deploy step that waits at most 15 minutes for another pipeline's deploy:
.EX
redlock run \-\-key deploy\-prod \-\-wait 15m \-\- ./deploy.sh
.EE
.TP
A script holding a lock across several steps:
.EX
TOKEN=$(redlock acquire \-\-key maint \-\-ttl 1h) || exit
trap 'redlock release \-\-key maint \-\-token "$TOKEN"' EXIT
do_maintenance
.EE
.TP
Who holds a lock, on which servers, for how long:
.EX
redlock status \-\-key maint
.EE
"#;

/// Escapes text for roff: backslashes, and hyphens as real minus signs.
fn roff_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('-', "\\-")
}

fn section(title: &str, entries: &[(&str, &str)], escape_term: bool) -> String {
    let mut out = format!(".SH \"{title}\"\n");
    for (term, text) in entries {
        let term = if escape_term { roff_escape(term) } else { (*term).to_owned() };
        out.push_str(&format!(".TP\n\\fB{term}\\fR\n{text}\n"));
    }
    out
}

fn render_page(cmd: &clap::Command, extra: &str) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    let _ = man.render_options_section(&mut out);
    if cmd.get_subcommands().next().is_some() {
        let _ = man.render_subcommands_section(&mut out);
    }
    out.extend_from_slice(extra.as_bytes());
    let _ = man.render_version_section(&mut out);
    out
}

/// Every generated file, in a stable order.
pub fn files() -> Vec<Generated> {
    let mut cmd = crate::cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut files = Vec::new();

    let subpages: Vec<String> =
        cmd.get_subcommands().map(|s| format!("\\fBredlock\\-{}\\fR(1)", s.get_name())).collect();
    let see_also = |own: Option<&str>| {
        let mut refs: Vec<String> = subpages
            .iter()
            .filter(|r| own.is_none_or(|o| !r.contains(&format!("redlock\\-{o}\\"))))
            .cloned()
            .collect();
        if own.is_some() {
            refs.insert(0, "\\fBredlock\\fR(1)".to_owned());
        }
        refs.extend(["\\fBflock\\fR(1)".to_owned(), "\\fBredis\\-server\\fR(1)".to_owned()]);
        format!(".SH \"SEE ALSO\"\n{}\n", refs.join(", "))
    };
    let main_extra = format!(
        "{}{}.SH EXAMPLES\n{EXAMPLES}{}",
        section("EXIT STATUS", EXIT_CODES, false),
        section("ENVIRONMENT", ENVIRONMENT, false),
        see_also(None)
    );
    files.push(Generated { path: "man/redlock.1".into(), content: render_page(&cmd, &main_extra) });
    for sub in cmd.get_subcommands() {
        let name = format!("redlock-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .display_name(name.clone())
            .bin_name(format!("redlock {}", sub.get_name()));
        let examples = sub
            .get_after_help()
            .map(|h| {
                let body: Vec<String> =
                    h.to_string().lines().skip(1).map(|l| roff_escape(l.trim())).collect();
                format!(".SH EXAMPLES\n.EX\n{}\n.EE\n", body.join("\n"))
            })
            .unwrap_or_default();
        let extra = format!(
            "{}{examples}{}",
            section("EXIT STATUS", EXIT_CODES, false),
            see_also(Some(sub.get_name()))
        );
        files
            .push(Generated { path: format!("man/{name}.1"), content: render_page(&page, &extra) });
    }

    for (shell, file) in [
        (Shell::Bash, "redlock.bash"),
        (Shell::Zsh, "_redlock"),
        (Shell::Fish, "redlock.fish"),
        (Shell::Elvish, "redlock.elv"),
        (Shell::PowerShell, "_redlock.ps1"),
    ] {
        let mut content = Vec::new();
        clap_complete::generate(shell, &mut crate::cli::command(), "redlock", &mut content);
        files.push(Generated { path: format!("completions/{file}"), content });
    }
    files
}
