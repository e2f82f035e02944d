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

/// Every comment of `src/` names things that exist: each `src/...` path
/// (and each `scripts/NAME.lua` or bare `NAME.lua`), each item in a
/// path-like form in backticks (`lock::Tick`, `Call::on`, `settle()`,
/// an intra-doc link [`Name`]), and each item a comment places in a file
/// (`src/lock/ops.rs`, then `Numbers`: defined in that file). An item is
/// found by a definition in `src/` (fn, struct, enum, const, static, mod,
/// trait, type, macro, an enum variant or struct field, a file's module, a
/// Lua `local`): a rename or a deletion leaves the comment's name without
/// one. Items of other crates are allowed by name ([`EXTERNAL`]).
#[test]
fn comments_name_paths_and_items_that_exist() {
    let files = source_files();
    let defs = Definitions::of(&files);
    let found = dangling(&files, &defs);
    let known =
        |f: &String| KNOWN.iter().any(|(file, name)| f.starts_with(file) && f.contains(name));
    let new: Vec<&String> = found.iter().filter(|f| !known(f)).collect();
    assert!(
        new.is_empty(),
        "comments name what src/ does not have (fix the comment, or add an external \
         name to EXTERNAL in tests/integration/docs.rs):\n{}",
        new.iter().map(|f| f.as_str()).collect::<Vec<_>>().join("\n")
    );
    let gone: Vec<_> = KNOWN
        .iter()
        .filter(|(file, name)| !found.iter().any(|f| f.starts_with(file) && f.contains(name)))
        .collect();
    assert!(gone.is_empty(), "fixed, so remove from KNOWN in tests/integration/docs.rs: {gone:?}");
}

/// Dangling references not fixed yet, each (file, name): the files are
/// being rewritten on other branches; once they merge, the comment is
/// fixed and its entry goes (the test fails while an entry finds
/// nothing). Keep this empty.
const KNOWN: &[(&str, &str)] = &[];

/// The check sees what it claims to: a fixture naming a missing file, a
/// missing item in each form, and an item in the wrong file fails it, once
/// each; the same fixture naming things that exist passes.
#[test]
fn the_comment_check_fails_on_a_broken_reference() {
    let defs = Definitions::of(&source_files());
    let check = |path: &str, text: &str| dangling(&[(path.to_owned(), text.to_owned())], &defs);
    let good = "//! See src/lock/record.rs, `lock::Tick`, [`RECORD_LIFE`], `Tick::last_grant_ms`,\n\
                //! `wake_channel()` and (src/lock/ops.rs `Numbers`); put_back.lua.\nfn f() {}\n";
    assert_eq!(check("src/fixture.rs", good), Vec::<String>::new());
    let bad = "//! See src/lock/nowhere.rs, `lock::Tock`, [`RECORD_DEATH`], `Tick::first_grant_ms`,\n\
               //! `sleep_channel()` and (src/lock/keys.rs `Numbers`); put_away.lua.\nfn f() {}\n";
    let found = check("src/fixture.rs", bad);
    assert_eq!(found.len(), 7, "{found:#?}");
    for name in [
        "src/lock/nowhere.rs",
        "lock::Tock",
        "RECORD_DEATH",
        "Tick::first_grant_ms",
        "sleep_channel()",
        "src/lock/keys.rs: `Numbers`",
        "put_away.lua",
    ] {
        assert!(found.iter().any(|f| f.contains(name)), "{name} not reported: {found:#?}");
    }
    let lua = "-- `announce()` calls the first waiter (`queue::CALL_GRACE`), src/queue.rs.\n";
    assert_eq!(check("src/scripts/fixture.lua", lua), Vec::<String>::new());
    let lua = "-- `announced()` calls the first waiter (`queue::CALL_GRACES`), src/queues.rs.\n";
    assert_eq!(check("src/scripts/fixture.lua", lua).len(), 3);
    // A path-like name is looked for in its module: `queue` has no `Tick`.
    assert_eq!(check("src/scripts/fixture.lua", "-- `queue::Tick`\n").len(), 1);
    let bare = "// What crate::noscript does, as Fleet::drained does.\n";
    assert_eq!(check("src/fixture.rs", bare).len(), 2, "{:?}", check("src/fixture.rs", bare));
    // A string holding `//` is no comment.
    assert_eq!(check("src/fixture.rs", "const U: &str = \"redis://`lock::Tock`\";\n").len(), 0);
}

/// Names of other crates' items and of the C and shell functions comments
/// name: a path whose first part is one of these is not looked for in
/// `src/`, nor is a function call `name()` of one.
const EXTERNAL: &[&str] = &[
    // Crates and their modules.
    "std",
    "core",
    "alloc",
    "tokio",
    "tokio_util",
    "jiff",
    "redis",
    "serde",
    "serde_json",
    "clap",
    "clap_complete",
    "clap_mangen",
    "libc",
    "uuid",
    "rustls",
    "humantime",
    "croner",
    "ureq",
    "url",
    "proptest",
    "futures_util",
    "tempfile",
    "toml",
    "thiserror",
    "fastrand",
    "sha1_smol",
    "prometheus_parse",
    // std's types, named without their path.
    "Duration",
    "File",
    // croner's internals (src/schedule/cron.rs says why it does not use them).
    "component",
    "CronComponent",
    // PromQL's function (src/metrics.rs).
    "absent",
];

/// The `.rs` and `.lua` files of `src/`, by path from the repository root.
fn source_files() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "lua") {
                let rel = path.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("src"), &mut out);
    out.sort();
    assert!(out.len() > 50, "src/ read: {} files", out.len());
    out
}

/// A file split into its code and its comments (each comment's line and
/// text, the comment marker removed).
fn split_comments(path: &str, text: &str) -> (String, Vec<(usize, String)>) {
    let mut code = String::new();
    let mut comments = Vec::new();
    if path.ends_with(".lua") {
        for (i, line) in text.lines().enumerate() {
            match line.split_once("--") {
                Some((before, comment)) if !before.contains('\'') => {
                    code.push_str(before);
                    comments.push((i + 1, comment.to_owned()));
                }
                _ => code.push_str(line),
            }
            code.push('\n');
        }
        return (code, comments);
    }
    // Rust: strings (plain, raw, byte) and char literals are code, never
    // a comment's start; a lifetime is not a char literal.
    let chars: Vec<char> = text.chars().collect();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            let start = i;
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            let comment: String = chars[start..i].iter().collect();
            comments
                .push((line, comment.trim_start_matches('/').trim_start_matches('!').to_owned()));
            continue;
        }
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '"' || (c == 'r' && !ident_before && matches!(next, Some('"' | '#'))) {
            // A raw string r#"..."#: as many hashes close it as opened it.
            let mut hashes = 0;
            let raw = c == 'r';
            if raw {
                i += 1;
                while chars.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if chars.get(i) != Some(&'"') {
                    code.push('r');
                    continue;
                }
            }
            code.push('"');
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                if d == '\n' {
                    line += 1;
                    code.push('\n');
                }
                if d == '\\' && !raw {
                    i += 2;
                    continue;
                }
                if d == '"' && (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            code.push('"');
            continue;
        }
        if c == '\'' {
            // 'x', '\n', '\u{..}': a char literal; 'a (no closing quote
            // right after one char): a lifetime.
            let close = if next == Some('\\') {
                chars[i + 2..].iter().position(|&d| d == '\'').map(|p| i + 2 + p)
            } else {
                (chars.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            if let Some(end) = close {
                code.push_str("' '");
                i = end + 1;
                continue;
            }
        }
        if c == '\n' {
            line += 1;
        }
        code.push(c);
        i += 1;
    }
    (code, comments)
}

/// What `src/` defines: every name, and the names each file defines.
struct Definitions {
    names: std::collections::HashSet<String>,
    by_file: std::collections::HashMap<String, std::collections::HashSet<String>>,
    /// By module name (a file's stem, a folder's `mod.rs`): what its files
    /// define or import (`use`), so `module::Item` is looked for there.
    modules: std::collections::HashMap<String, std::collections::HashSet<String>>,
    lua_functions: std::collections::HashSet<String>,
}

impl Definitions {
    fn of(files: &[(String, String)]) -> Definitions {
        let mut names = std::collections::HashSet::new();
        let mut by_file =
            std::collections::HashMap::<String, std::collections::HashSet<String>>::new();
        let mut lua_functions = std::collections::HashSet::new();
        let mut modules =
            std::collections::HashMap::<String, std::collections::HashSet<String>>::new();
        for (path, text) in files {
            let (code, _) = split_comments(path, text);
            let mut here = std::collections::HashSet::new();
            // The file's module, and its folder's.
            for part in path.trim_end_matches(".rs").split('/').skip(1) {
                if part != "mod" {
                    here.insert(part.to_owned());
                }
            }
            let tokens = words(&code);
            for pair in tokens.windows(2) {
                let kinds =
                    ["fn", "struct", "enum", "const", "static", "mod", "trait", "type", "union"];
                if kinds.contains(&pair[0].as_str()) || pair[0] == "macro_rules!" {
                    here.insert(pair[1].clone());
                }
                if path.ends_with(".lua") && (pair[0] == "function" || pair[0] == "local") {
                    here.insert(pair[1].clone());
                    if pair[0] == "function" {
                        lua_functions.insert(pair[1].clone());
                    }
                }
            }
            // Enum variants and struct fields: a line that starts with a
            // name and goes on with `,` `{` `(` `=` or `:` (not `::`).
            for line in code.lines() {
                let line = line.trim_start();
                let line = line
                    .strip_prefix("pub(crate) ")
                    .or_else(|| line.strip_prefix("pub "))
                    .unwrap_or(line);
                let name: String =
                    line.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let rest = line[name.len()..].trim_start();
                let field = rest.starts_with(':') && !rest.starts_with("::");
                if !name.is_empty()
                    && (field || rest.is_empty() || rest.starts_with([',', '{', '(', '=']))
                {
                    here.insert(name);
                }
            }
            names.extend(here.iter().cloned());
            if let Some(stem) = path.strip_suffix(".rs") {
                let module = stem.trim_end_matches("/mod").rsplit('/').next().unwrap_or(stem);
                let scope = modules.entry(module.to_owned()).or_default();
                scope.extend(here.iter().cloned());
                for statement in code.split("use ").skip(1) {
                    scope.extend(words(statement.split(';').next().unwrap_or("")));
                }
            }
            by_file.insert(path.clone(), here);
        }
        Definitions { names, by_file, modules, lua_functions }
    }
}

/// The identifiers of some code, with `macro_rules!` kept whole.
fn words(code: &str) -> Vec<String> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
        .filter(|w| !w.is_empty())
        .map(
            |w| if w == "macro_rules!" { w.to_owned() } else { w.trim_end_matches('!').to_owned() },
        )
        .collect()
}

/// Whether `s` is an identifier.
fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// Each comment's reference to a path or an item that does not exist, as
/// `file:line: ...`.
fn dangling(files: &[(String, String)], defs: &Definitions) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        let (_, comments) = split_comments(path, text);
        // Consecutive comment lines are one text: a name may wrap.
        let mut blocks: Vec<(usize, String)> = Vec::new();
        let mut last = 0;
        for (line, comment) in comments {
            match blocks.last_mut() {
                Some((_, block)) if line == last + 1 => {
                    block.push(' ');
                    block.push_str(comment.trim());
                }
                _ => blocks.push((line, comment.trim().to_owned())),
            }
            last = line;
        }
        for (line, block) in blocks {
            for problem in block_problems(&block, defs) {
                found.push(format!("{path}:{line}: {problem}"));
            }
        }
    }
    found
}

/// The dangling references of one comment text.
fn block_problems(block: &str, defs: &Definitions) -> Vec<String> {
    let mut problems = Vec::new();
    // Paths: src/..., scripts/NAME.lua, NAME.lua; with the item named
    // right after a file, in backticks, defined in that file.
    let chars: Vec<char> = block.chars().collect();
    let is_path_char = |c: char| c.is_alphanumeric() || "_./-*".contains(c);
    let mut i = 0;
    while i < chars.len() {
        let starts =
            i == 0 || !(is_path_char(chars[i - 1]) || chars[i - 1] == '/' || chars[i - 1] == ':');
        if !starts || !is_path_char(chars[i]) {
            i += 1;
            continue;
        }
        let end = (i..chars.len()).find(|&j| !is_path_char(chars[j])).unwrap_or(chars.len());
        let token: String = chars[i..end].iter().collect();
        let token = token.trim_end_matches(['.', '-']).to_owned();
        let top = ["src/", "docs/", "tests/", "benches/", ".ci/", "examples/"];
        let file = if top.iter().any(|t| token.starts_with(t)) {
            Some(token.clone())
        } else if token.starts_with("scripts/") && token.ends_with(".lua") {
            Some(format!("src/{token}"))
        } else if token.ends_with(".lua")
            && !token.contains('/')
            && is_ident(token.trim_end_matches(".lua"))
        {
            Some(format!("src/scripts/{token}"))
        } else {
            None
        };
        if let Some(file) = file {
            let exists = if file.contains('*') {
                root().join(file.rsplit_once('/').unwrap().0).is_dir()
            } else {
                root().join(&file).exists()
            };
            if !exists {
                problems.push(format!("names {token}, which does not exist"));
            } else if file.ends_with(".rs") && file.starts_with("src/") {
                // `src/x.rs, `Item``: the item is defined there.
                let after: String = chars[end..].iter().collect();
                let after = after.trim_start_matches([',', ':', ' ']);
                if let Some(rest) = after.strip_prefix('`')
                    && let Some((item, _)) = rest.split_once('`')
                {
                    let first = item.trim_end_matches("()").split("::").next().unwrap_or("");
                    let defined = defs.by_file.get(&file).is_some_and(|d| d.contains(first));
                    if is_ident(first) && !defined {
                        problems.push(format!(
                            "places in {file}: `{item}`, which that file does not define"
                        ));
                    }
                }
            }
        }
        i = end;
    }
    // Items in backticks.
    let spans: Vec<&str> = block.split('`').skip(1).step_by(2).collect();
    for (n, span) in spans.iter().enumerate() {
        let linked = block.split('`').nth(2 * n).is_some_and(|before| before.ends_with('['))
            && block.split('`').nth(2 * n + 2).is_some_and(|after| after.starts_with(']'));
        if let Some(problem) = item_problem(span, linked, defs) {
            problems.push(problem);
        }
    }
    // Paths written without backticks (`crate::lock`, `Type::method`).
    let bare: String = block.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    for token in bare.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
        let token = token.trim_matches(':');
        if token.contains("::")
            && let Some(problem) = item_problem(token, false, defs)
        {
            problems.push(problem);
        }
    }
    problems
}

/// Why a backticked name is dangling, if it is: a path (`a::b`), a call
/// (`name()`) or an intra-doc link ([`Name`]) that names nothing `src/`
/// defines.
fn item_problem(span: &str, linked: bool, defs: &Definitions) -> Option<String> {
    let (name, call) = match span.split_once('(') {
        Some((name, ")")) => (name, true),
        Some(_) => return None,
        None => (span.trim_end_matches('!'), false),
    };
    let parts: Vec<&str> = name.split("::").collect();
    if !parts.iter().all(|p| is_ident(p)) {
        return None;
    }
    // `crate::x`: a module of the crate root (or an item of lib.rs).
    if parts.len() > 1
        && parts[0] == "crate"
        && !defs.by_file.get("src/lib.rs").is_some_and(|root| root.contains(parts[1]))
    {
        return Some(format!("names `{span}`: the crate root has no {}", parts[1]));
    }
    let parts: Vec<&str> =
        parts.into_iter().filter(|p| !["crate", "self", "super", "Self"].contains(p)).collect();
    if parts.len() == 1 && !call && !linked && !name.contains("::") {
        return None;
    }
    let first = parts.first()?;
    if EXTERNAL.contains(first) {
        return None;
    }
    if parts.len() == 1 && call {
        let known = defs.names.contains(*first) || defs.lua_functions.contains(*first);
        return (!known).then(|| format!("names `{span}`, which src/ does not define"));
    }
    let missing: Vec<&&str> = parts.iter().filter(|p| !defs.names.contains(**p)).collect();
    if !missing.is_empty() {
        return Some(format!("names `{span}`: src/ defines no {missing:?}"));
    }
    // `module::item`: the item is the module's (defined or imported there).
    for pair in parts.windows(2) {
        if let Some(scope) = defs.modules.get(pair[0])
            && !scope.contains(pair[1])
        {
            return Some(format!("names `{span}`: module {} has no {}", pair[0], pair[1]));
        }
    }
    None
}
