//! Generates the man page guard(8) and the bash, zsh and fish completions from the clap
//! definition of the command line (`containerd_guard::cli::command()`), so they never
//! drift from `guard --help`. Run by scripts/deb before `cargo deb`; never installed.
//!
//!   cargo run --example gen-docs -- OUT_DIR      (scripts/deb: OUT_DIR = target/assets)
//!
//! Writes OUT_DIR/guard.8 (scripts/deb gzips it) and
//! OUT_DIR/completions/{guard.bash,_guard,guard.fish}.

use clap_complete::{generate, Shell};
use roff::{bold, italic, roman, Roff};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

fn main() {
    let Some(out) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gen-docs OUT_DIR");
        std::process::exit(2);
    };
    if let Err(e) = run(&out) {
        eprintln!("gen-docs: {e}");
        std::process::exit(1);
    }
}

fn run(out: &Path) -> std::io::Result<()> {
    let completions = out.join("completions");
    fs::create_dir_all(&completions)?;

    let cmd = containerd_guard::cli::command();
    write(&out.join("guard.8"), |w| man_page(&cmd, w))?;

    for (shell, file) in [
        (Shell::Bash, "guard.bash"),
        (Shell::Zsh, "_guard"),
        (Shell::Fish, "guard.fish"),
    ] {
        let mut cmd = cmd.clone();
        write(&completions.join(file), |w| {
            generate(shell, &mut cmd, "guard", w);
            Ok(())
        })?;
    }
    Ok(())
}

/// guard(8): one page.
/// (`pub` so that tests/config_keys.rs can check that it lists every config key.) clap_mangen renders the title, synopsis, global options, the exit
/// codes (the CLI's after_help) and the version; each subcommand gets a subsection here with
/// its own options (clap_mangen would point at guard-volume(8) and so on, which do not exist).
pub fn man_page(cmd: &clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone())
        .section("8")
        .manual("System Administration")
        .source(format!("containerd-guard {}", env!("CARGO_PKG_VERSION")));
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    let mut roff = Roff::new();
    roff.control("PP", []);
    roff.text([roman(
        "systemd runs it before every start of containerd and kubelet, as their own ExecStartPre= (drop-ins): ",
    )])
    .text([bold("guard volume --pre-start"), roman(" before containerd (the first start of a boot in full, later ones the quick check) and ")])
    .text([bold("guard runtime"), roman(" before kubelet; ")])
    .text([bold("guard hygiene"), roman(" every 2 minutes (containerd-guard-hygiene.timer). After an HA failover an operator runs ")])
    .text([bold("guard verify"), roman(".")]);
    roff.to_writer(w)?;
    man.render_options_section(w)?;
    commands(cmd).to_writer(w)?;
    let mut extra = Vec::new();
    man.render_extra_section(&mut extra)?;
    let extra = String::from_utf8_lossy(&extra).replacen(".SH EXTRA", ".SH \"EXIT STATUS\"", 1);
    w.write_all(extra.as_bytes())?;
    configuration().to_writer(w)?;
    files().to_writer(w)?;
    man.render_version_section(w)
}

fn commands(cmd: &clap::Command) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["COMMANDS"]);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let opts: Vec<&clap::Arg> = sub
            .get_arguments()
            .filter(|a| !a.is_global_set() && !a.is_hide_set() && a.get_long().is_some())
            .collect();
        let mut heading = format!("guard {}", sub.get_name());
        for a in &opts {
            heading.push_str(&format!(" [--{}]", a.get_long().unwrap_or_default()));
        }
        roff.control("SS", [heading.as_str()]);
        if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
            roff.text([roman(about.to_string())]);
        }
        for a in opts {
            roff.control("TP", []);
            roff.text([bold(format!("--{}", a.get_long().unwrap_or_default()))]);
            if let Some(help) = a.get_long_help().or_else(|| a.get_help()) {
                roff.text([roman(help.to_string())]);
            }
        }
    }
    roff
}

/// Every config key, its default, what it accepts and what it is for: from the keys'
/// declaration (`containerd_guard::config::KEYS`), as docs/configuration.md's table is.
fn configuration() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["CONFIGURATION"]);
    roff.text([roman(
        "Keys of the configuration fragments (see FILES); section.key is key in the \
         [section] table of a fragment. guard config prints the effective value of each.",
    )]);
    for key in containerd_guard::config::KEYS {
        roff.control("TP", []);
        roff.text([
            bold(key.dotted),
            roman(format!(" (default: {})", key.default_text())),
        ]);
        // The docs are Markdown; a man page has no code spans.
        let doc = key.doc().replace('`', "");
        roff.text([roman(format!("{doc} Accepts {}.", key.accepts))]);
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

fn write(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    body(&mut w)?;
    w.flush()?;
    println!("{}", path.display());
    Ok(())
}
