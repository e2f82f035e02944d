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

/// The exit-code table of the man pages and the README, as (code, meaning).
pub const EXIT_CODES: &[(&str, &str)] = &[
    ("the child's", "run: the command exited by itself with that status."),
    (
        "128+N",
        "run: the command was ended by signal N (not by redlock's lost-lock action); run, acquire or hold: signal N came while waiting for the lock (nothing is left held).",
    ),
    (
        "0",
        "Success. hold: the freeze ended (its end came, or SIGTERM, SIGINT or SIGHUP). status: the lock is held. doctor: the servers are fit.",
    ),
    (
        "1",
        "status: the lock is free. doctor: the servers work, with warnings (it says which). check: the last run is older than \\-\\-max\\-age, or failed (with \\-\\-require\\-success).",
    ),
    ("2", "check: no run is recorded, or fewer than a quorum of the servers answered."),
    (
        "64",
        "Usage: a bad flag, duration, URL or key, or no command after \\-\\-; nothing was sent to any server. Also a server listed twice, however its URL is spelled (found by asking the servers).",
    ),
    (
        "69",
        "Unavailable: a quorum of servers could not be reached, refused authentication, or answered with errors.",
    ),
    (
        "70",
        "Lost: run stopped the command because the lock could no longer be renewed, or found the lock gone when the command exited (the line names the command's status); extend or release found the lock not held by that token; hold: the freeze was deleted by release \\-\\-force, or its end came while it was lost.",
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
        "REDLOCK_PASSWORD",
        "The password for every server whose URL has none, when \\-\\-password\\-file is not given. It is not passed on to the command that run starts.",
    ),
    (
        "REDLOCK_TLS_CA, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY",
        "As \\-\\-tls\\-ca, \\-\\-tls\\-cert and \\-\\-tls\\-key: PEM files for rediss:// servers.",
    ),
    (
        "REDLOCK_HOST",
        "As \\-\\-host: the name of this host in tokens, status and history, instead of the kernel's host name.",
    ),
    (
        "REDLOCK_CONFIG",
        "The configuration file to read instead of the ones under FILES, when \\-\\-config is not given; it must exist.",
    ),
    ("XDG_CONFIG_HOME, HOME", "Where the user's configuration file is looked for (see FILES)."),
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
    (
        "REDLOCK_SLOT",
        "Set by run for the command: which of the \\-\\-limit N places it holds, 1 to N (1 for an ordinary lock).",
    ),
    ("SHELL", "The shell that runs \\-c commands (default /bin/sh)."),
    (
        "GITHUB_SERVER_URL, GITHUB_REPOSITORY, GITHUB_RUN_ID, CI_JOB_URL",
        "Read by run and acquire to record the CI job the holder runs in (GitHub Actions' run, or GitLab's job), shown with the holder by waiters, status and history; credentials in the URL are masked. No other variable is recorded.",
    ),
];

const FILES: &[(&str, &str)] = &[
    (
        "$XDG_CONFIG_HOME/redlock/config.toml (default ~/.config/redlock/config.toml)",
        "The user's configuration file, read when neither \\-\\-config nor REDLOCK_CONFIG names one.",
    ),
    (
        "/etc/redlock/config.toml",
        "The system's configuration file, read when neither of the above exists. TOML, one key per global option named as its flag without dashes: servers (a string or an array), quorum, node\\-timeout, drift\\-factor, max\\-ttl, trust\\-restarts, raw\\-key, host, password\\-file, tls\\-ca, tls\\-cert, tls\\-key, log\\-format, verbose, quiet; the zone \\-\\-cron reads (tz); and a default ttl and wait for the fleet, for run, acquire, extend and doctor, and hold's ttl within \\-\\-max\\-ttl (their \\-\\-ttl, \\-\\-wait and \\-n win). Flags win over the environment, the environment over the file. An unknown key (with the key meant, when one is near) or a bad value is a usage error (64) naming the file, line and key; \\fBredlock config\\fR shows each setting and its source. The package installs an example as /usr/share/doc/redlock/config.toml.example.",
    ),
];

/// redlock-run(1)'s sections beyond the options: what README.md says about
/// supervision and safety, for readers of the man page alone.
const RUN_SECTIONS: &str = r#".SH "PROCESS GROUP AND SIGNALS"
The command starts only once a quorum granted the lock, with REDLOCK_KEY, REDLOCK_TOKEN, REDLOCK_FENCE and REDLOCK_SLOT in its environment, in a process group of its own; it inherits stdin, stdout, stderr and the terminal.
SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to redlock (Ctrl\-C at a terminal too) reach the command exactly once; redlock then waits for it, releases the lock and exits with its status (128+N when signal N ended it).
When the command exits, whatever it left running in its group, and daemons that left the group with setsid (redlock adopts them as their reaper), are stopped: SIGTERM, then SIGKILL after up to 1s.
The command's environment gets no password of redlock's: REDLOCK_PASSWORD is withheld and REDLOCK_SERVERS reaches it with passwords masked; a command that calls redlock itself uses \-\-password\-file.
At a terminal, Ctrl\-Z suspends the job as in any shell (fg and bg resume it); redlock's own messages never stop it (stty tostop).
.SH "WHEN REDLOCK IS KILLED, FROZEN OR SUSPENDED"
Before the command starts, redlock forks \fBredlock\-guard\fR, a small process in a group of its own. After every renewal that wins a quorum redlock sends it the new deadline; the guard SIGKILLs the command's group and every other process descended from redlock half the kill margin before the lock's validity ends unless a later deadline arrived, and at once if redlock dies.
So a redlock frozen by SIGSTOP or a debugger, stopped by Ctrl\-Z for longer than the validity, or killed, never leaves the command running without the lock; on SIGCONT or fg redlock exits 70.
If redlock dies, the command also gets SIGKILL through its parent\-death signal. The lock is then not released: it expires on the servers after at most its TTL.
Only a daemon that left the group with setsid escapes a \fBkill \-9\fR of redlock.
.SH "WHEN THE LOCK IS LOST"
The lock is renewed every third of the TTL (\-\-renew\-every); a failed renewal is retried at once, with backoff.
If a quorum no longer holds the token, or renewals keep failing, the timeline is:
.IP 1. 4
at the latest grace + margin before the lock's validity ends, the \-\-on\-lost signal (default TERM) goes to the command's whole process group;
.IP 2. 4
the grace (\-\-kill\-after, default a third of the TTL, at most 10s) lets it exit cleanly;
.IP 3. 4
SIGKILL follows at the latest the margin (a twentieth of the TTL, 5ms to 1s) before the validity ends, so the command is dead before anyone else can take the lock;
.IP 4. 4
redlock exits 70.
.PP
Validity is counted on CLOCK_BOOTTIME (time the machine spent suspended counts) from before the first request, minus the drift allowance (TTL \(mu \-\-drift\-factor + 2ms); after a resume past the deadline the command is stopped at once.
\-\-ttl, \-\-renew\-every, \-\-kill\-after, \-\-node\-timeout and \-\-drift\-factor must satisfy renew\-every + 2 \(mu node\-timeout + drift allowance + grace + margin < TTL, so that a healthy job is never stopped; run refuses other combinations with 64. With the defaults that holds for every TTL from 60ms up.
\-\-on\-lost ignore keeps the command running with a warning: for locks that only save work, never for ones that protect data.
.SH "SERVERS: ACL AND PERSISTENCE"
An ACL user needs, on its keys redlock:{KEY}, redlock:{KEY}:fence, redlock:{KEY}:history, redlock:{KEY}:skips, redlock:{KEY}:queue and redlock:{KEY}:queue\-deadlines, and on the release channels redlock:released:KEY and the waiters\(aq own channels redlock:released:KEY followed by a newline and 8 characters (a pattern ending in * covers both; here every key starting with lock\-):
.EX
ACL SETUSER locker on >PASSWORD resetkeys ~redlock:{lock\-* resetchannels &redlock:released:lock\-* \-@all +evalsha +script|load +set +get +pttl +pexpire +del +time +publish +subscribe +lpush +ltrim +lrange +hincrby +hsetnx +hset +hmget +hgetall +zadd +zrem +zrank +zrange +zrangebyscore +zcard +zscore +exists +info
.EE
doctor also wants +ping +config|get.
Give the password with \-\-password\-file or REDLOCK_PASSWORD rather than in the URL.
.PP
A server that restarts with an empty dataset forgets its locks, and a second holder could then win a quorum.
Run the servers with appendonly yes and appendfsync always, or restart a crashed server only after the longest TTL in use has passed (delayed restart).
Use maxmemory\-policy noeviction (or no maxmemory), and independent servers, not replicas of each other.
\fBredlock doctor\fR checks these.
.SH "COMING FROM FLOCK(1)"
.TP
\fBflock \-n /run/lock/report.lock report\fR
is \fBredlock run \-n \-\-key report \-\- report\fR: the lock file becomes a key on the servers. Options of run go after \fBrun\fR; one typed before it is refused (64) with a line saying to move it, since only the global options (\-v, \-q, \-\-servers...) may stand before the subcommand.
.TP
Busy is 75, not 1
A lock held elsewhere exits 75 (EX_TEMPFAIL) where flock exits 1, so that a busy lock is told from a command that failed; \fB\-E 1\fR gives flock's code, \fB\-E 0\fR makes a skip a success.
.TP
\-n prints the holder
Where flock \-n is silent, redlock prints one line on stderr saying who holds the lock and for how long, unless \fB\-E 0\fR (then only with \-v) or \fB\-q\fR. On a fleet, a crontab line with a bare \-n sends a mail from every host that skipped, on every tick: cron jobs use \fB\-E 0\fR.
.TP
\-w SECS
is \-w (\-\-wait); a bare number is seconds, and \-w 0 tries once, as in flock.
.TP
\-s and \-x
\-s (\-\-shared) holds the lock shared and \-x (\-\-exclusive) exclusive, the default, as in flock: any number of shared holders at once or one exclusive holder, never both.
.TP
\-c
runs the command by $SHELL \-c (else /bin/sh \-c), as flock \-c does.
.TP
\-u, \-o and a held file descriptor
There is no descriptor to hold, close or unlock: the lock is held by redlock, which renews it while the command runs and releases it when the command ends. To hold one across several commands of a script, \fBTOKEN=$(redlock acquire \-\-key K)\fR, then \fBredlock release \-\-key K \-\-token "$TOKEN"\fR.
"#;

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

/// A subcommand's SYNOPSIS: the global options as one `[GLOBAL OPTIONS]`
/// (each is under OPTIONS), then the subcommand's own options in the
/// order `--help` lists them (key and TTL, waiting, mode, the run's
/// options), each with its value, then its arguments. clap_mangen's lists
/// every option, globals among them, in no order and without values.
fn synopsis(cmd: &clap::Command) -> String {
    let name = cmd.get_name().trim_start_matches("redlock-");
    let mut words =
        vec!["\\fBredlock\\fR [\\fIGLOBAL OPTIONS\\fR]".to_owned(), format!("\\fB{name}\\fR")];
    let mut positional = Vec::new();
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if a.is_global_set() || a.is_hide_set() || id == "help" || id == "version" {
            continue;
        }
        let value = a
            .get_value_names()
            .map(|v| v.iter().map(|n| format!(" \\fI{n}\\fR")).collect::<String>())
            .unwrap_or_default();
        let value = if a.get_action().takes_values() { value } else { String::new() };
        let flag = match (a.get_short(), a.get_long()) {
            (_, Some(long)) => format!("\\fB\\-\\-{}\\fR", roff_escape(long)),
            (Some(short), None) => format!("\\fB\\-{short}\\fR"),
            (None, None) => {
                let names = a.get_value_names().map(|v| v.join(" ")).unwrap_or_default();
                positional.push(format!("[\\fB\\-\\-\\fR \\fI{}\\fR...]", roff_escape(&names)));
                continue;
            }
        };
        let word = format!("{flag}{value}");
        words.push(if a.is_required_set() { word } else { format!("[{word}]") });
    }
    words.extend(positional);
    format!(".SH SYNOPSIS\n{}\n", words.join(" "))
}

fn render_page(cmd: &clap::Command, extra: &str) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    if cmd.get_subcommands().next().is_some() {
        let _ = man.render_synopsis_section(&mut out);
    } else {
        out.extend_from_slice(synopsis(cmd).as_bytes());
    }
    let _ = man.render_description_section(&mut out);
    let _ = man.render_options_section(&mut out);
    if cmd.get_subcommands().next().is_some() {
        let _ = man.render_subcommands_section(&mut out);
    }
    out.extend_from_slice(extra.as_bytes());
    let _ = man.render_version_section(&mut out);
    out
}

/// clap_complete's bash script offers options after `--`; there a command
/// and its arguments follow (`redlock run -k K -- CMD ARGS`), so complete
/// them as bash-completion does for `sudo` (or command names without it).
fn bash_command_after_dashes(script: &[u8]) -> Vec<u8> {
    const AFTER_DASHES: &str = r#"_redlock() {
    local word
    for (( word = 1; word < COMP_CWORD; word++ )); do
        if [[ "${COMP_WORDS[word]}" == "--" ]]; then
            if declare -F _command_offset >/dev/null; then
                _command_offset $(( word + 1 ))
            elif (( word + 1 == COMP_CWORD )); then
                COMPREPLY=( $(compgen -c -- "${COMP_WORDS[COMP_CWORD]}") )
            else
                COMPREPLY=( $(compgen -f -- "${COMP_WORDS[COMP_CWORD]}") )
            fi
            return 0
        fi
    done
"#;
    String::from_utf8_lossy(script).replacen("_redlock() {\n", AFTER_DASHES, 1).into_bytes()
}

/// Every generated file, in a stable order.
pub fn files() -> Vec<Generated> {
    // The commit in --version changes with every commit; the generated
    // files must not (they are committed).
    let mut cmd = crate::cli::command().disable_help_subcommand(true).long_version(None);
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
        "{}{}{}.SH EXAMPLES\n{EXAMPLES}{}",
        section("EXIT STATUS", EXIT_CODES, false),
        section("ENVIRONMENT", ENVIRONMENT, false),
        section("FILES", FILES, false),
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
            .get_after_long_help()
            .or_else(|| sub.get_after_help())
            .map(|h| {
                let body: Vec<String> =
                    h.to_string().lines().skip(1).map(|l| roff_escape(l.trim())).collect();
                format!(".SH EXAMPLES\n.EX\n{}\n.EE\n", body.join("\n"))
            })
            .unwrap_or_default();
        let own = match sub.get_name() {
            "run" => RUN_SECTIONS,
            _ => "",
        };
        let extra = format!(
            "{own}{}{}{examples}{}",
            section("EXIT STATUS", EXIT_CODES, false),
            section("ENVIRONMENT", ENVIRONMENT, false),
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
        let mut cmd = crate::cli::command().long_version(None);
        clap_complete::generate(shell, &mut cmd, "redlock", &mut content);
        if shell == Shell::Bash {
            content = bash_command_after_dashes(&content);
        }
        files.push(Generated { path: format!("completions/{file}"), content });
    }
    files
}
