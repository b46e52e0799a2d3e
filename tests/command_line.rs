//! The command line as an operator meets it, on the real binary: no flag accepted and
//! ignored, every exit code of every command in its `--help`, guard(8) and the README,
//! completions that offer only what `--help` shows, and the commands that promise to
//! write nothing writing nothing. No containerd: none of it needs one.

use testkit as support;

use containerd_guard::cli::{exit_codes, Meaning, NPD_EXIT_CODES};
use containerd_guard::command::Command;
use containerd_guard::exit::Exit;
use support::{root_or_skip, Guard, TempRoot};

/// `guard ARGS` exits 2, names `flag` and why it does not apply, prints nothing on stdout.
#[track_caller]
fn refused(g: &Guard, args: &[&str], flag: &str) {
    let out = g.run(args);
    assert_eq!(
        out.code,
        2,
        "a flag that does nothing is a usage error:\n{}",
        out.dump()
    );
    let said = format!("{flag} does not apply here");
    assert!(
        out.stderr.contains(&said),
        "stderr lacks {said:?}:\n{}",
        out.dump()
    );
    assert!(out.stdout.is_empty(), "{}", out.dump());
}

#[test]
fn every_flag_that_would_do_nothing_is_a_usage_error_naming_why() {
    let t = TempRoot::new();
    let cfg = t.write_guard_config().display().to_string();
    let image = t.path().display().to_string();
    let g = Guard::bare();
    refused(
        &g,
        &["--config", &cfg, "lint", "--root", &image],
        "--config",
    );
    refused(
        &g,
        &["lint", "--root", &image, "--sysroot", "/"],
        "--sysroot",
    );
    refused(
        &g,
        &["--config", &cfg, "verify", "--npd", "--json"],
        "--json",
    );
    refused(&g, &["--config", &cfg, "-v", "verify", "--npd"], "-v");
    refused(&g, &["--config", &cfg, "--json", "reset"], "--json");
    refused(&g, &["man", "--config", &cfg], "--config");
    refused(&g, &["--json", "man"], "--json");
    refused(&g, &["completion", "bash", "-v"], "-v");
    refused(&g, &["--sysroot", "/", "completion", "zsh"], "--sysroot");
    // the subcommands' own flags: clap relates them (each names the flag it needs)
    for (args, needs) in [
        (&["verify", "--timeout", "1s"][..], "--npd"),
        (&["verify", "--dry-run"], "--repair"),
        (&["verify", "--force"], "--repair"),
    ] {
        let out = g.run(&[&["--config", &cfg][..], args].concat());
        assert_eq!(out.code, 2, "{}", out.dump());
        assert!(out.stderr.contains(needs), "{}", out.dump());
    }
    let out = g.run(&["--config", &cfg, "verify", "--npd", "--deep"]);
    assert_eq!(out.code, 2, "{}", out.dump());
}

/// Whitespace folded, so that text wrapped by `--help` compares with its source.
fn folded(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn help_of(args: &[&str]) -> String {
    let out = Guard::bare().run(&[args, &["--help"]].concat());
    assert_eq!(out.code, 0, "{}", out.dump());
    folded(&out.stdout)
}

#[track_caller]
fn lists(help: &str, meanings: &[Meaning], what: &str) {
    for m in meanings {
        let line = folded(&format!("{}  {}", m.code, m.text));
        assert!(
            help.contains(&line),
            "{what}'s --help lacks {line:?}:\n{help}"
        );
    }
}

#[test]
fn each_commands_help_lists_its_exit_codes_and_says_what_it_writes() {
    for command in Command::ALL {
        let help = help_of(&[command.as_str()]);
        lists(&help, exit_codes(command), command.as_str());
        assert!(
            help.contains("Writes"),
            "guard {} --help does not say what it writes:\n{help}",
            command.as_str()
        );
    }
    lists(&help_of(&["verify"]), NPD_EXIT_CODES, "verify --npd");
    let top = help_of(&[]);
    for exit in Exit::ALL {
        let line = folded(&format!("{}  {}", exit.code(), exit.meaning()));
        assert!(top.contains(&line), "guard --help lacks {line:?}:\n{top}");
    }
}

/// `[section] key (default)` as the help names a bound, from the key's declaration.
fn bound(dotted: &str) -> String {
    let key = containerd_guard::config::KEYS
        .iter()
        .find(|k| k.dotted == dotted)
        .unwrap_or_else(|| panic!("no key {dotted}"));
    let (section, name) = dotted.split_once('.').unwrap();
    format!(
        "[{section}] {name} ({})",
        key.default_text().trim_matches('"')
    )
}

#[test]
fn runtime_and_hygiene_help_name_their_actions_and_bounds() {
    let runtime = help_of(&["runtime"]);
    for said in [
        "restart containerd",
        "delete leaked containerd tasks and kill orphaned container cgroups",
        "create and remove a canary pod sandbox",
        "exits 4 at once",
    ] {
        assert!(
            runtime.contains(said),
            "runtime's help lacks {said:?}:\n{runtime}"
        );
    }
    for key in [
        "hold.timeout",
        "remediation.restart_budget",
        "remediation.backoff",
        "remediation.backoff_max",
        "containerd.restart_timeout",
        "sandbox.pull_timeout",
        "canary.timeout",
    ] {
        let bound = bound(key);
        assert!(
            runtime.contains(&bound),
            "runtime's help lacks {bound:?}:\n{runtime}"
        );
    }
    let hygiene = help_of(&["hygiene"]);
    for said in [
        "Deletes leaked containerd tasks, kills orphaned container cgroups",
        "never restarts containerd",
        "SIGKILL",
        &bound("orphans.reap"),
        &bound("sandbox.pull_timeout"),
    ] {
        assert!(
            hygiene.contains(said),
            "hygiene's help lacks {said:?}:\n{hygiene}"
        );
    }
}

/// Every `--flag` a completion script offers (`--flag` in bash, `-l flag` in fish,
/// `'--flag[...]` in zsh).
fn offered(script: &str) -> Vec<String> {
    let mut flags: Vec<String> = script
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect();
    for line in script.lines().filter(|l| l.starts_with("complete ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2).filter(|pair| pair[0] == "-l") {
            flags.push(format!("--{}", pair[1]));
        }
    }
    flags.sort();
    flags.dedup();
    flags
}

/// `flag` as a whole word of `help` (`--verbose` in `-v, --verbose...`, not `--dry`).
fn shows(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let next = help[at + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

#[test]
fn completions_offer_every_command_and_only_the_flags_help_shows() {
    let mut shown = help_of(&[]);
    for command in Command::ALL {
        shown.push_str(&help_of(&[command.as_str()]));
    }
    for shell in ["bash", "zsh", "fish"] {
        let out = Guard::bare().run(&["completion", shell]);
        assert_eq!(out.code, 0, "{}", out.dump());
        for command in Command::ALL {
            assert!(
                out.stdout.contains(command.as_str()),
                "{shell}: no {command:?}"
            );
        }
        let offered = offered(&out.stdout);
        assert!(
            offered.contains(&"--repair".to_string()),
            "{shell}: {offered:?}"
        );
        for flag in offered {
            assert!(
                shows(&shown, &flag),
                "the {shell} completion offers {flag}, which no --help shows"
            );
        }
    }
}

/// Text as roff writes it: a minus sign `\-`, an apostrophe `\*(Aq`, no code spans.
fn roff(text: &str) -> String {
    text.replace('`', "")
        .replace('-', "\\-")
        .replace('\'', "\\*(Aq")
}

#[test]
fn guard_man_has_every_exit_code_of_every_command_and_the_examples() {
    let out = Guard::bare().run(&["man"]);
    assert_eq!(out.code, 0, "{}", out.dump());
    let page = out.stdout;
    let (_, status) = page
        .split_once(".SH \"EXIT STATUS\"")
        .expect("an EXIT STATUS section");
    let (status, _) = status.split_once("\n.SH ").expect("a section after it");
    for exit in Exit::ALL {
        for text in [exit.meaning(), exit.under_systemd()] {
            assert!(
                status.contains(&roff(text)),
                "EXIT STATUS lacks {text:?}:\n{status}"
            );
        }
    }
    let mut sections = vec![("verify --npd".to_string(), NPD_EXIT_CODES)];
    for command in Command::ALL {
        sections.push((command.as_str().to_string(), exit_codes(command)));
    }
    for (name, meanings) in sections {
        let heading = format!(".SS \"guard {name}\"\n");
        let (_, own) = status
            .split_once(&heading)
            .unwrap_or_else(|| panic!("EXIT STATUS has no {heading:?}:\n{status}"));
        let own = own.split(".SS ").next().unwrap();
        for m in meanings {
            let entry = format!(".TP\n\\fB{}\\fR\n{}\n", m.code, roff(m.text));
            assert!(
                own.contains(&entry),
                "guard {name}: no {entry:?} in:\n{own}"
            );
        }
    }
    let (_, examples) = page
        .split_once(".SH EXAMPLES")
        .expect("an EXAMPLES section");
    for (example, command) in [
        ("After an HA failover", "sudo guard verify"),
        ("An image build's lint step", "guard lint \\-\\-root"),
        ("Reading guard status", "sudo guard status"),
    ] {
        assert!(examples.contains(example), "no example {example:?}");
        assert!(examples.contains(command), "no {command:?} in the examples");
    }
}

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
const IMAGE_BUILDER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/image-builder.md");
const TABLE_START: &str = "<!-- exit codes: generated from src/exit.rs and src/cli/exits.rs by \
                           tests/command_line.rs; do not edit -->\n";
const TABLE_END: &str = "<!-- end of the generated exit codes -->\n";

/// The README's exit tables as the code makes them: every code with what systemd does,
/// then what each command means by each of its codes.
fn exit_tables() -> String {
    let cell = |text: &str| text.replace('|', "\\|");
    let mut out = String::from("| exit | meaning | what systemd does with it |\n|---|---|---|\n");
    for exit in Exit::ALL {
        let (meaning, systemd) = (cell(exit.meaning()), cell(exit.under_systemd()));
        out.push_str(&format!("| {} | {meaning} | {systemd} |\n", exit.code()));
    }
    out.push_str(
        "\nWhat each command means by each of its codes (its `--help` and guard(8) say \
                  the same):\n\n| command | exit codes |\n|---|---|\n",
    );
    let mut row = |name: &str, meanings: &[Meaning]| {
        let codes: Vec<String> = meanings
            .iter()
            .map(|m| format!("**{}** {}", m.code, cell(m.text)))
            .collect();
        out.push_str(&format!("| `guard {name}` | {} |\n", codes.join("<br>")));
    };
    for command in Command::ALL {
        row(command.as_str(), exit_codes(command));
        if command == Command::Verify {
            row("verify --npd", NPD_EXIT_CODES);
        }
    }
    out
}

/// `lint`'s table in docs/image-builder.md, for those who build images.
fn lint_table() -> String {
    let mut out = String::from("| exit | meaning |\n|---|---|\n");
    for m in exit_codes(Command::Lint) {
        out.push_str(&format!(
            "| {} | {} |\n",
            m.code,
            m.text.replace('|', "\\|")
        ));
    }
    out
}

/// The text between the markers of `path` is `wanted` (or is made so, with
/// GUARD_REGENERATE_DOCS set).
fn generated_block_is(path: &str, wanted: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let (before, rest) = text
        .split_once(TABLE_START)
        .unwrap_or_else(|| panic!("{path}: no line {TABLE_START:?}"));
    let (table, after) = rest
        .split_once(TABLE_END)
        .unwrap_or_else(|| panic!("{path}: no line {TABLE_END:?}"));
    if table == wanted {
        return;
    }
    if std::env::var_os("GUARD_REGENERATE_DOCS").is_some() {
        let text = format!("{before}{TABLE_START}{wanted}{TABLE_END}{after}");
        std::fs::write(path, text).unwrap();
        return;
    }
    panic!(
        "{path}'s exit table differs from src/exit.rs and src/cli/exits.rs; rewrite it \
         with `GUARD_REGENERATE_DOCS=1 cargo test --test command_line`. Wanted:\n{wanted}"
    );
}

#[test]
fn the_docs_exit_tables_are_the_ones_the_code_makes() {
    generated_block_is(README, &exit_tables());
    generated_block_is(IMAGE_BUILDER, &lint_table());
}

/// What a command could have written: every file under state_dir, and the textfile.
fn written(t: &TempRoot) -> Vec<String> {
    let mut files = vec![];
    if let Ok(dir) = std::fs::read_dir(t.guard_state_dir()) {
        files.extend(dir.flatten().map(|e| e.path().display().to_string()));
    }
    if t.metrics_textfile().exists() {
        files.push(t.metrics_textfile().display().to_string());
    }
    files.sort();
    files
}

/// `--npd` and every `--dry-run` write nothing (their `--help` says so); plain `verify`
/// publishes its verdict and writes no state, which shows the look would see a write.
#[test]
fn npd_and_dry_runs_write_nothing_and_plain_verify_only_its_metrics() {
    let Some(_root) = root_or_skip(&[]) else {
        return;
    };
    let t = TempRoot::new();
    t.write_containerd_config("");
    let cfg = t.write_guard_config_with(|c| c.containerd_wait("100ms"));
    let g = Guard::with_config(&cfg);
    for args in [
        &["verify", "--npd", "--timeout", "2s"][..],
        &["verify", "--repair", "--dry-run"],
        &["verify", "--repair", "--dry-run", "--deep"],
        &["hygiene", "--dry-run"],
    ] {
        let out = g.run(args);
        assert!(!out.stderr.contains("panicked"), "{}", out.dump());
        assert_eq!(written(&t), Vec::<String>::new(), "{}", out.dump());
    }
    let out = g.run(&["verify"]);
    assert_eq!(out.code, 1, "no containerd answers:\n{}", out.dump());
    let state = t.guard_state_dir().display().to_string();
    let files = written(&t);
    assert!(
        files.contains(&t.metrics_textfile().display().to_string()),
        "{files:?}"
    );
    assert!(
        files
            .iter()
            .all(|f| !f.starts_with(&state) || f.ends_with("metrics.json")),
        "plain verify wrote state: {files:?}"
    );
}
