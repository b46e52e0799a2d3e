//! guard(8) and the bash, zsh and fish completions, made from the command line's own
//! definition ([`super::command`]) so they never drift from `--help`. One generator for
//! both readers: `guard man` and `guard completion SHELL` print them, and scripts/deb
//! packs exactly what those subcommands print (scripts/check-deb compares).

use super::exits;
use crate::command::Command;
use crate::exit::Exit;
use clap_complete::Shell;
use roff::{bold, italic, roman, Roff};
use std::io::Write;

/// The shells the package ships a completion for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// The completion script for `shell`, as the package installs it.
pub fn completion(shell: CompletionShell, w: &mut dyn Write) {
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    clap_complete::generate(shell, &mut super::command(), "guard", w);
}

/// `guard completion SHELL`.
pub(super) fn print_completion(shell: CompletionShell) -> Exit {
    let mut script = Vec::new();
    completion(shell, &mut script);
    print!("{}", String::from_utf8_lossy(&script));
    Exit::Usable
}

/// `guard man`.
pub(super) fn print_man_page() -> Exit {
    let mut page = Vec::new();
    match man_page(&mut page) {
        Ok(()) => {
            print!("{}", String::from_utf8_lossy(&page));
            Exit::Usable
        }
        Err(e) => super::internal_error(&e),
    }
}

/// guard(8): one page. clap_mangen renders the title, synopsis, global options and the
/// version; each subcommand gets a subsection here with its own options (clap_mangen would
/// point at guard-volume(8) and so on, which do not exist).
pub fn man_page(w: &mut dyn Write) -> std::io::Result<()> {
    let cmd = super::command();
    let man = clap_mangen::Man::new(cmd.clone())
        .section("8")
        .manual("System Administration")
        .source(format!("containerd-guard {}", env!("CARGO_PKG_VERSION")));
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    description().to_writer(w)?;
    man.render_options_section(w)?;
    commands(&cmd).to_writer(w)?;
    exit_status().to_writer(w)?;
    super::manual_examples::examples().to_writer(w)?;
    configuration().to_writer(w)?;
    files().to_writer(w)?;
    man.render_version_section(w)
}

fn description() -> Roff {
    let mut roff = Roff::new();
    roff.control("PP", []);
    roff.text([roman(
        "systemd runs it before every start of containerd and kubelet, as their own ExecStartPre= (drop-ins): ",
    )])
    .text([bold("guard volume --pre-start"), roman(" before containerd (the first start of a boot in full, later ones the quick check) and ")])
    .text([bold("guard runtime"), roman(" before kubelet; ")])
    .text([bold("guard hygiene"), roman(" every 2 minutes (containerd-guard-hygiene.timer). After an HA failover an operator runs ")])
    .text([bold("guard verify"), roman(".")]);
    roff
}

fn commands(cmd: &clap::Command) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["COMMANDS"]);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let opts: Vec<&clap::Arg> = sub
            .get_arguments()
            .filter(|a| !a.is_global_set() && !a.is_hide_set())
            .collect();
        let mut heading = format!("guard {}", sub.get_name());
        for a in &opts {
            heading.push_str(&format!(" [{}]", arg_name(a)));
        }
        roff.control("SS", [heading.as_str()]);
        if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
            roff.text([roman(about.to_string())]);
        }
        for a in opts {
            roff.control("TP", []);
            roff.text([bold(arg_name(a))]);
            if let Some(help) = a.get_long_help().or_else(|| a.get_help()) {
                roff.text([roman(help.to_string())]);
            }
        }
    }
    roff
}

/// `--flag`, or a positional's `SHELL`.
fn arg_name(a: &clap::Arg) -> String {
    match a.get_long() {
        Some(long) => format!("--{long}"),
        None => a.get_id().as_str().to_uppercase(),
    }
}

/// Every code with what it means and what systemd does with it, then each command's own.
fn exit_status() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for exit in Exit::ALL {
        roff.control("TP", []);
        roff.text([bold(exit.code().to_string())]);
        roff.text([roman(plain(exit.meaning()))]);
        roff.control("br", []);
        roff.text([
            italic("Under systemd: "),
            roman(plain(exit.under_systemd())),
        ]);
    }
    let mut each = |title: String, meanings: &[exits::Meaning]| {
        roff.control("SS", [title.as_str()]);
        for m in meanings {
            roff.control("TP", []);
            roff.text([bold(m.code.to_string())]);
            roff.text([roman(plain(m.text))]);
        }
    };
    for command in Command::ALL {
        each(format!("guard {}", command.as_str()), exits::of(command));
        if command == Command::Verify {
            each("guard verify --npd".into(), exits::NPD);
        }
    }
    roff
}

/// The docs are Markdown; a man page has no code spans.
pub(super) fn plain(text: &str) -> String {
    text.replace('`', "")
}

/// Every config key, its default, what it accepts and what it is for: from the keys'
/// declaration (`crate::config::KEYS`), as docs/configuration.md's table is.
fn configuration() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["CONFIGURATION"]);
    roff.text([roman(
        "Keys of the configuration fragments (see FILES); section.key is key in the \
         [section] table of a fragment. guard config prints the effective value of each.",
    )]);
    for key in crate::config::KEYS {
        roff.control("TP", []);
        roff.text([
            bold(key.dotted),
            roman(format!(" (default: {})", key.default_text())),
        ]);
        roff.text([roman(format!(
            "{} Accepts {}.",
            plain(&key.doc()),
            key.accepts
        ))]);
    }
    roff
}

fn files() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["FILES"]);
    for (path, what) in [
        (
            "/usr/lib/containerd-guard/config.d/*.toml, /run/containerd-guard/config.d/*.toml, /etc/containerd-guard/config.d/*.toml",
            "Configuration fragments (vendor, runtime, admin), read like systemd drop-ins; guard config shows the result and where each value came from.",
        ),
        (
            "/run/containerd-guard/",
            "This boot's state: volume.ok (phase 1 passed), runtime.json and runtime.status (phase 2, the restart budget), repair.lock.",
        ),
        (
            "/usr/lib/systemd/system/containerd.service.d/10-containerd-guard.conf, kubelet.service.d/10-containerd-guard.conf",
            "The drop-ins that make the guard containerd's and kubelet's pre-start; mask them (a /dev/null link of the same name under /etc/systemd/system/) to opt out. containerd-guard-hygiene.service and .timer run guard hygiene.",
        ),
        (
            "/usr/share/doc/containerd-guard/",
            "README.md (what to do after a failover, every finding id), docs/operator-actions.md (every operator action), docs/configuration.md, examples/ (the dracut config).",
        ),
    ] {
        roff.control("TP", []);
        roff.text([italic(path)]);
        roff.text([roman(what)]);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("systemctl"),
        roman("(1), "),
        bold("systemd.unit"),
        roman("(5), "),
        bold("containerd"),
        roman("(8), "),
        bold("dracut"),
        roman("(8)"),
    ]);
    roff
}
