//! Every config key, declared once in `src/config/schema.rs`, reaches every place a user
//! meets it: `guard config` (text and JSON, compared with golden files captured before the
//! keys were declared in one table), docs/configuration.md's key table and guard(8).

use containerd_guard::config::{apply_fragment, Settings, KEYS};
use std::path::Path;
use support::{Guard, TempRoot};
use testkit as support;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/config");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIXTURES).join(name))
        .unwrap_or_else(|e| panic!("{FIXTURES}/{name}: {e}"))
}

/// `guard config`'s output with the test's own paths replaced by placeholders.
fn config_output(guard: Guard, json: bool, paths: &[(&Path, &str)]) -> String {
    let args: &[&str] = if json {
        &["--json", "config"]
    } else {
        &["config"]
    };
    let out = guard.run(args);
    assert_eq!(out.code, 0, "{}", out.dump());
    paths.iter().fold(out.stdout, |text, (path, placeholder)| {
        text.replace(&*path.to_string_lossy(), placeholder)
    })
}

#[test]
fn guard_config_prints_the_defaults_as_before() {
    let t = TempRoot::new();
    let sysroot = t.path().join("sysroot");
    std::fs::create_dir_all(&sysroot).unwrap();
    let guard = Guard::bare()
        .arg("--sysroot")
        .arg(sysroot.display().to_string());
    let text = config_output(guard, false, &[]);
    assert_eq!(text, fixture("defaults.out"));
}

#[test]
fn guard_config_prints_every_key_set_as_before() {
    let t = TempRoot::new();
    let cfg = t.write_guard_config_raw(&fixture("every-key.toml"));
    let paths = [(cfg.as_path(), "CONFIG")];
    let text = config_output(Guard::with_config(&cfg), false, &paths);
    assert_eq!(text, fixture("every-key.out"));
    let json = config_output(Guard::with_config(&cfg), true, &paths);
    assert_eq!(json, fixture("every-key.json"));
}

const DOCS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
const TABLE_START: &str = "<!-- key table: generated from src/config/schema.rs by \
                           tests/config_keys.rs; do not edit -->\n";
const TABLE_END: &str = "<!-- end of the generated key table -->\n";

/// docs/configuration.md's key table as the keys' declaration makes it.
fn key_table() -> String {
    let mut table = String::from(
        "In a fragment, `containerd.wait` is `wait` in the `[containerd]` table.\n\n\
         | Key | Default | Accepts | What it is for |\n|---|---|---|---|\n",
    );
    for key in KEYS {
        let cell = |text: &str| text.replace('|', "\\|");
        table.push_str(&format!(
            "| `{}` | `{}` | {} | {} |\n",
            key.dotted,
            cell(&key.default_text()),
            cell(key.accepts),
            cell(&key.doc())
        ));
    }
    table
}

#[test]
fn the_docs_key_table_is_the_one_the_declaration_makes() {
    let docs = std::fs::read_to_string(DOCS).unwrap();
    let (before, rest) = docs
        .split_once(TABLE_START)
        .unwrap_or_else(|| panic!("{DOCS}: no line {TABLE_START:?}"));
    let (table, after) = rest
        .split_once(TABLE_END)
        .unwrap_or_else(|| panic!("{DOCS}: no line {TABLE_END:?}"));
    let wanted = key_table();
    if table == wanted {
        return;
    }
    if std::env::var_os("GUARD_REGENERATE_DOCS").is_some() {
        let text = format!("{before}{TABLE_START}{wanted}{TABLE_END}{after}");
        std::fs::write(DOCS, text).unwrap();
        return;
    }
    panic!(
        "{DOCS}'s key table differs from src/config/schema.rs's keys; rewrite it with \
         `GUARD_REGENERATE_DOCS=1 cargo test --test config_keys`. Wanted:\n{wanted}"
    );
}

#[test]
fn the_man_page_lists_every_key_with_its_default() {
    let mut page = Vec::new();
    containerd_guard::cli::man_page(&mut page).unwrap();
    let page = String::from_utf8(page).unwrap();
    let (_, section) = page
        .split_once(".SH CONFIGURATION")
        .unwrap_or_else(|| panic!("no CONFIGURATION section in:\n{page}"));
    // roff writes a minus sign as `\-` and an apostrophe as `\*(Aq`.
    let roff = |text: &str| text.replace('-', "\\-").replace('\'', "\\*(Aq");
    for key in KEYS {
        let entry = format!(
            "\\fB{}\\fR (default: {})",
            roff(key.dotted),
            roff(&key.default_text())
        );
        assert!(section.contains(&entry), "no {entry:?} in:\n{section}");
    }
}

/// Each default, written back as its key's value, is accepted and read as that default:
/// the default the docs show is one a fragment may state.
#[test]
fn every_default_as_shown_reads_back_as_the_default() {
    let every_key = fixture("every-key.toml");
    for key in KEYS
        .iter()
        .filter(|k| !k.default_text().starts_with("(unset"))
    {
        let mut settings = Settings::default();
        apply_fragment(&mut settings, &every_key).unwrap();
        let line = format!("{} = {}", key.name, key.default_text());
        let fragment = match key.section {
            Some(section) => format!("[{section}]\n{line}\n"),
            None => format!("{line}\n"),
        };
        let set = apply_fragment(&mut settings, &fragment)
            .unwrap_or_else(|e| panic!("{}'s default {fragment:?}: {e:?}", key.dotted));
        assert_eq!(set, [key.dotted]);
        assert_eq!(key.show(&settings), key.default_text(), "{}", key.dotted);
    }
}

/// The line `guard config` prints for `key`.
fn line_of<'a>(text: &'a str, key: &str) -> &'a str {
    let start = format!("{key} = ");
    text.lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no {key} in:\n{text}"))
}

/// Keys the guard takes from containerd's config when unset show the value in use and
/// say so; a size shows as it was written.
#[test]
fn guard_config_shows_the_values_in_use_and_where_each_came_from() {
    let t = TempRoot::new();
    let image = "registry.example/pause:provenance";
    let containerd = t.write_containerd_config_with(Some(image));
    let cfg = t.write_guard_config_with(|c| c.volume_min_free("10 GB"));
    let out = Guard::with_config(&cfg).run(&["config"]);
    assert_eq!(out.code, 0, "{}", out.dump());
    let from_containerd = format!("# containerd's config {}: ", containerd.display());
    let socket = line_of(&out.stdout, "containerd.socket");
    assert!(socket.contains(&format!("{:?}", t.socket())), "{socket}");
    assert!(
        socket.contains(&format!("{from_containerd}grpc.address")),
        "{socket}"
    );
    let sandbox = line_of(&out.stdout, "sandbox.image");
    assert!(sandbox.contains(&format!("\"{image}\"")), "{sandbox}");
    assert!(sandbox.contains(&from_containerd), "{sandbox}");
    let min_free = line_of(&out.stdout, "volume.min_free");
    assert_eq!(
        min_free,
        format!("volume.min_free = \"10 GB\"    # {}", cfg.display())
    );
    let json = Guard::with_config(&cfg).run(&["--json", "config"]);
    let v = json
        .json
        .as_ref()
        .unwrap_or_else(|| panic!("{}", json.dump()));
    assert_eq!(
        v["settings"]["sandbox.image"]["value"],
        format!("\"{image}\"")
    );
    let source = v["settings"]["containerd.socket"]["source"]
        .as_str()
        .unwrap();
    assert_eq!(
        format!("# {source}"),
        format!("{from_containerd}grpc.address")
    );
}

/// A duration, like a size, is echoed as the operator wrote it: `guard config` shows each
/// key's own text (`"1m30s"`, not the `"90s"` it makes), in its table and its JSON, and an
/// error quotes the value the file holds, also one out of range.
#[test]
fn durations_and_sizes_are_echoed_as_written() {
    let t = TempRoot::new();
    t.write_containerd_config_with(None);
    let cfg = t.write_guard_config_with(|c| {
        c.containerd_wait("90s")
            .containerd_restart_timeout("1m30s")
            .volume_wait("1500ms")
            .sandbox_pull_timeout("2min")
            .volume_min_free("10 GB")
    });
    let out = Guard::with_config(&cfg).run(&["config"]);
    assert_eq!(out.code, 0, "{}", out.dump());
    let json = Guard::with_config(&cfg).run(&["--json", "config"]);
    let settings = &json.json.as_ref().expect("JSON")["settings"];
    for (key, written) in [
        ("containerd.wait", "\"90s\""),
        ("containerd.restart_timeout", "\"1m30s\""),
        ("volume.wait", "\"1500ms\""),
        ("sandbox.pull_timeout", "\"2min\""),
        ("volume.min_free", "\"10 GB\""),
    ] {
        let line = line_of(&out.stdout, key);
        assert_eq!(line, format!("{key} = {written}    # {}", cfg.display()));
        assert_eq!(settings[key]["value"], written, "{}", json.dump());
    }
    for (text, quoted) in [
        ("[hold]\ntimeout = \"2 min\"\n", "\"2 min\""),
        ("[canary]\ntimeout = \"2m1s\"\n", "\"2m1s\""),
        ("[containerd]\nrestart_timeout = \"0ms\"\n", "\"0ms\""),
        ("[volume]\nmin_free = \"2 PiB\"\n", "\"2 PiB\""),
    ] {
        let refused = Guard::with_config(&t.write_guard_config_raw(text)).run(&["config"]);
        assert_eq!(refused.code, 3, "{}", refused.dump());
        assert!(refused.stderr.contains(quoted), "{}", refused.dump());
    }
}
