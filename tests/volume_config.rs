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
