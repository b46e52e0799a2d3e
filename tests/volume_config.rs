//! The guard's config as `guard volume` and `guard config` read it: errors name the file
//! and key (exit 3), usage errors exit 2, and values are shown with their sources.
//!
//! `guard volume` (phase 1) against real components, as root. Each test checks the exit
//! code, the finding's id and status in `--json`, and that the table a person reads names
//! the thing at fault. Every test builds its own tree ([`TempRoot`]): its own containerd
//! config whose `root` is the volume path, and its own guard config naming that file via
//! `[containerd] config`.

use testkit as support;

use support::suite::volume::SHORT_WAIT;
use support::{Guard, TempRoot};

// ---- configuration -----------------------------------------------------------------------

#[track_caller]
fn config_error(t: &TempRoot, text: &str, needles: &[&str]) {
    let cfg = t.write_guard_config_raw(text);
    for sub in ["volume", "verify"] {
        let o = Guard::with_config(&cfg).run(&["--json", sub]);
        assert_eq!(o.code, 3, "config error must exit 3:\n{}", o.dump());
        assert!(
            o.stdout.is_empty(),
            "nothing is checked on a config error:\n{}",
            o.dump()
        );
        for n in needles {
            assert!(
                o.stderr.contains(n),
                "error does not name {n:?}:\n{}",
                o.dump()
            );
        }
    }
}

#[test]
fn config_errors_exit_3_and_name_file_and_key() {
    let t = TempRoot::new();
    let file = t.guard_config_path().display().to_string();
    let head = format!(
        "[containerd]\nconfig = \"{}\"\n",
        t.containerd_config().display()
    );
    config_error(
        &t,
        &format!("{head}[volume]\nwiat = \"1s\"\n"),
        &[&file, "volume.wiat"],
    );
    config_error(
        &t,
        &format!("{head}[volume]\nwait = \"5 minutes\"\n"),
        &[&file, "volume.wait", "90s"],
    );
    config_error(
        &t,
        &format!("{head}[volume]\nmin_free = \"2 gigs\"\n"),
        &[&file, "volume.min_free", "GiB"],
    );
    config_error(
        &t,
        &format!("{head}[volume]\ndevice = \"FOO=bar\"\n"),
        &[&file, "volume.device", "LABEL="],
    );
    config_error(
        &t,
        &format!("{head}[volume]\nfstypes = \"ext4\"\n"),
        &[&file, "volume.fstypes"],
    );
    config_error(&t, "[volume\n", &[&file, "TOML"]);
    // containerd's own config is read too: its errors name that file and key.
    std::fs::write(t.containerd_config(), "version = 2\nroot = 5\n").unwrap();
    let ccfg = t.containerd_config().display().to_string();
    config_error(
        &t,
        &format!("{head}[volume]\nwait = \"{SHORT_WAIT}\"\n"),
        &[&ccfg, "root"],
    );
    // --config naming a missing file.
    let missing = t.path().join("nope.toml");
    let o = Guard::with_config(&missing).run(&["volume"]);
    assert_eq!(o.code, 3, "{}", o.dump());
    assert!(
        o.stderr.contains(&*missing.to_string_lossy()),
        "{}",
        o.dump()
    );
}

#[test]
fn usage_errors_exit_2() {
    let o = Guard::bare().run(&["no-such-subcommand"]);
    assert_eq!(o.code, 2, "{}", o.dump());
    let o = Guard::bare().run(&["volume", "--no-such-flag"]);
    assert_eq!(o.code, 2, "{}", o.dump());
}

#[test]
fn config_shows_values_and_their_sources() {
    let t = TempRoot::new();
    let cfg = t.write_guard_config_with(|c| c.volume_wait("7s").volume_min_free("1GiB"));
    let file = cfg.display().to_string();
    let o = Guard::with_config(&cfg).run(&["config"]);
    assert_eq!(o.code, 0, "{}", o.dump());
    let line = |key: &str| {
        o.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} in:\n{}", o.stdout))
            .to_string()
    };
    assert!(line("volume.wait").contains("\"7s\"") && line("volume.wait").ends_with(&file));
    assert!(line("volume.min_free").ends_with(&file), "{}", o.stdout);
    assert!(
        line("volume.fstypes").ends_with("(default)"),
        "{}",
        o.stdout
    );
    assert!(line("containerd.config").ends_with(&file), "{}", o.stdout);
    let j = Guard::with_config(&cfg).run(&["--json", "config"]);
    let v = j.json.as_ref().unwrap_or_else(|| panic!("{}", j.dump()));
    assert_eq!(v["settings"]["volume.wait"]["source"], file.as_str());
    assert_eq!(v["settings"]["volume.fstypes"]["source"], "(default)");
    assert_eq!(v["files"][0], file.as_str());
}

/// `guard volume`'s configuration error for `text` in `t`'s guard config: exit 3 and stderr.
fn config_error_text(t: &TempRoot, text: &str) -> String {
    let cfg = t.write_guard_config_raw(text);
    let o = Guard::with_config(&cfg).run(&["volume"]);
    assert_eq!(o.code, 3, "config error must exit 3:\n{}", o.dump());
    o.stderr
}

#[test]
fn config_errors_point_at_the_line_and_column_like_a_compiler() {
    let t = TempRoot::new();
    let file = t.guard_config_path().display().to_string();
    // A typo: the place, the near key and what it accepts; not every key the guard has.
    let err = config_error_text(&t, "[volume]\nwait = \"5s\"\ndevcie = \"LABEL=x\"\n");
    for needle in [
        &format!("{file}:3:1: key `volume.devcie`: unknown key"),
        "did you mean `volume.device`",
        "LABEL=, UUID=",
    ] {
        assert!(err.contains(needle), "no {needle:?} in:\n{err}");
    }
    assert!(!err.contains("metrics.textfile"), "lists every key:\n{err}");
    // A misspelt section is a section's typo.
    let err = config_error_text(&t, "[volum]\nwait = \"5s\"\n");
    assert!(err.contains(&format!("{file}:1:2: key `volum`")), "{err}");
    assert!(err.contains("did you mean `[volume]`"), "{err}");
    // A TOML syntax error: where the closing quote of the string is missing.
    let err = config_error_text(&t, "[volume]\nwait = \"5s\"\nmin_free = \"10 GB\n");
    assert!(
        err.contains(&format!("{file}:3:18: not valid TOML")),
        "{err}"
    );
    // A value of the wrong form: at the value, with the form accepted.
    let err = config_error_text(&t, "[volume]\nmin_free = \"10 GiBs\"\n");
    assert!(
        err.contains(&format!("{file}:2:12: key `volume.min_free`")),
        "{err}"
    );
    assert!(err.contains("\"2GB\" (1000-based)"), "{err}");
}

#[test]
fn a_fragments_error_names_the_fragment_in_the_layered_search() {
    let t = TempRoot::new();
    let sysroot = t.path().join("sysroot");
    let dir = sysroot.join("etc/containerd-guard/config.d");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        file
    };
    write("10-image.toml", "[volume]\ndevice = \"LABEL=containerd\"\n");
    let bad = write(
        "50-site.toml",
        "[hold]\ntimeout = \"2m\"\nrequire_netwrok = true\n",
    );
    let o = Guard::bare()
        .arg("--sysroot")
        .arg(sysroot.display().to_string())
        .run(&["volume"]);
    assert_eq!(o.code, 3, "{}", o.dump());
    let place = format!("{}:3:1: key `hold.require_netwrok`", bad.display());
    assert!(o.stderr.contains(&place), "{}", o.dump());
    assert!(
        o.stderr.contains("did you mean `hold.require_network`"),
        "{}",
        o.dump()
    );
}
