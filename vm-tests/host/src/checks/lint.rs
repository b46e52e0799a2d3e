//! `guard lint` on copies of the guest's image (lib/lint-image.sh writes lint.json,
//! lint.rc, lint.ms, or error, into a directory), and the lint stage's checks; the
//! dracut module's build-time checks (no boot either).

use super::common::finding_line;
use super::text::{cut, has, nonempty};
use super::Judge;
use crate::facts::small_file;
use std::path::Path;

/// The rules, one finding each, in this order (the spec of guard lint).
pub const LINT_IDS: &str = "lint.guard-dropin lint.containerd-order lint.volume-mount lint.volume-nofail lint.cloud-init lint.kubelet-gate lint.kubelet-order lint.kubelet-endpoint lint.kubelet-pod-infra-image lint.kubelet-cgroup-v1 lint.kubelet-cgroup-driver lint.kill-mode lint.sandbox-archive lint.containerd-deprecations lint.config lint.budget";

/// One hazard of guard lint's table, planted in a copy of its own (lib/lint-image.sh
/// plant_NAME) over the healthy scenario's generator output.
pub struct Plant {
    pub name: &'static str,
    pub id: &'static str,
    pub want: &'static str,
    /// the exit code; a warning alone exits 0, and 1 with --warn-is-error
    pub rc: &'static str,
    /// vmtest.* words, where the hazard is a mount missing
    pub words: &'static [&'static str],
}

const NO_MOUNT: &[&str] = &["vmtest.mount=no"];

const fn p(name: &'static str, id: &'static str, want: &'static str, rc: &'static str) -> Plant {
    Plant {
        name,
        id,
        want,
        rc,
        words: &[],
    }
}
const fn pm(name: &'static str, id: &'static str, want: &'static str, rc: &'static str) -> Plant {
    Plant {
        name,
        id,
        want,
        rc,
        words: NO_MOUNT,
    }
}

pub const PLANTS: &[Plant] = &[
    p("guard-masked", "lint.guard-dropin", "fail", "1"),
    p("prestart-reset", "lint.guard-dropin", "fail", "1"),
    p("after-reset", "lint.containerd-order", "fail", "1"),
    pm("fstab-after", "lint.volume-mount", "fail", "1"),
    pm("no-mount", "lint.volume-mount", "warn", "0"),
    pm("userdata-nomounts", "lint.volume-mount", "fail", "1"),
    pm("nofail-masked", "lint.volume-nofail", "fail", "1"),
    p("cloud-cfg", "lint.cloud-init", "fail", "1"),
    pm("cloud-userdata", "lint.cloud-init", "fail", "1"),
    p("cloud-installed", "lint.cloud-init", "warn", "0"),
    p("kubelet-masked", "lint.kubelet-gate", "fail", "1"),
    p("kubeadm-join", "lint.kubelet-order", "fail", "1"),
    p("kill-mode", "lint.kill-mode", "fail", "1"),
    p("pkill-shim", "lint.kill-mode", "fail", "1"),
    p("archive-removed", "lint.sandbox-archive", "fail", "1"),
    p("sandbox-other", "lint.sandbox-archive", "fail", "1"),
    p("archive-truncated", "lint.sandbox-archive", "fail", "1"),
    p("fragment-not-toml", "lint.config", "fail", "1"),
    p("device-nosuch", "lint.config", "warn", "0"),
    p("fragment-foreign", "lint.config", "fail", "1"),
    p("fragment-group-writable", "lint.config", "fail", "1"),
];

/// What one lint run left in its directory.
pub struct Lint {
    json: Option<serde_json::Value>,
    json_present: bool,
    pub rc: String,
    pub ms: String,
    pub error: String,
}

impl Lint {
    pub fn load(dir: &Path) -> Lint {
        let text = small_file(&dir.join("lint.json"));
        let trimmed = |s: String| s.trim_end_matches('\n').to_string();
        let or = |s: String, d: &str| {
            if dir.join(d).exists() {
                trimmed(s)
            } else {
                String::new()
            }
        };
        let rc = small_file(&dir.join("lint.rc"));
        let ms = small_file(&dir.join("lint.ms"));
        Lint {
            json_present: !text.is_empty(),
            json: serde_json::from_str(&text).ok(),
            rc: if dir.join("lint.rc").exists() {
                trimmed(rc)
            } else {
                "none".into()
            },
            ms: if dir.join("lint.ms").exists() {
                trimmed(ms)
            } else {
                "?".into()
            },
            error: or(small_file(&dir.join("error")), "error"),
        }
    }

    fn findings(&self) -> Vec<serde_json::Value> {
        let f = self
            .json
            .as_ref()
            .and_then(|j| j["findings"].as_array().cloned());
        f.unwrap_or_default()
    }

    /// A rule's status ("" when not run or not there; joined by commas if repeated).
    pub fn status(&self, id: &str) -> String {
        let s: Vec<String> = self
            .findings()
            .iter()
            .filter(|f| f["id"].as_str() == Some(id))
            .map(|f| f["status"].as_str().unwrap_or("").to_string())
            .collect();
        s.join(",")
    }

    /// The finding's "status | summary | evidence ;; ...", for the evidence.
    pub fn line(&self, id: &str) -> String {
        if !self.json_present {
            return format!("no lint record: {}", self.error);
        }
        let f = self.findings();
        let l = f
            .iter()
            .find(|f| f["id"].as_str() == Some(id))
            .map(finding_line);
        cut(&l.unwrap_or_default(), 260)
    }

    /// The findings that are fail or warn, "status id, ...".
    pub fn above_ok(&self) -> String {
        let s: Vec<String> = self
            .findings()
            .iter()
            .filter(|f| matches!(f["status"].as_str(), Some("fail" | "warn")))
            .map(|f| {
                format!(
                    "{} {}",
                    f["status"].as_str().unwrap_or(""),
                    f["id"].as_str().unwrap_or("")
                )
            })
            .collect();
        s.join(", ")
    }

    pub fn ids(&self) -> String {
        let f = self.findings();
        let ids: Vec<&str> = f
            .iter()
            .map(|f| f["id"].as_str().unwrap_or("null"))
            .collect();
        ids.join(" ")
    }

    pub fn verdict(&self) -> String {
        let v = self.json.as_ref().map(|j| j["verdict"].clone());
        match v {
            Some(serde_json::Value::String(s)) => s,
            Some(serde_json::Value::Null) => "null".into(),
            _ => String::new(),
        }
    }

    /// Each finding as "status id: summary", cut to 200 bytes.
    pub fn table(&self) -> Vec<String> {
        let f = self.findings();
        f.iter()
            .map(|f| {
                let s = |k: &str| f[k].as_str().unwrap_or("null").to_string();
                cut(
                    &format!("{} {}: {}", s("status"), s("id"), s("summary")),
                    200,
                )
            })
            .collect()
    }
}

/// The lint stage's checks on the runs kept under `d` (runs/lint). `plant_ms` reports
/// the slowest plant in the closing line.
pub fn stage(j: &mut Judge, d: &Path) -> String {
    let clean = Lint::load(&d.join("clean"));
    j.check(
        format!("the clean image (healthy's generator output): guard lint exits 0 (rc={}), no finding above ok ('{}'); lint took {} ms {}", clean.rc, clean.above_ok(), clean.ms, clean.error),
        format!("{}/{}/{}", clean.rc, clean.above_ok(), clean.verdict()) == "0//usable",
    );
    for l in clean.table() {
        j.note(format!("       {l}"));
    }
    j.check(
        format!(
            "  one finding per rule, in the spec's order: {}",
            clean.ids()
        ),
        clean.ids() == LINT_IDS,
    );
    j.check(
        format!(
            "  no cloud-init in the image and no user data: lint.cloud-init ok ({})",
            clean.line("lint.cloud-init")
        ),
        clean.status("lint.cloud-init") == "pass",
    );
    for p in ["missing", "empty"] {
        let rc = small_file(&d.join(format!("{p}.rc")))
            .trim_end_matches('\n')
            .to_string();
        let out = cut_bytes(&small_file(&d.join(format!("{p}.out"))), 160).replace('\n', " ");
        let what = if p == "missing" {
            "a missing DIR"
        } else {
            "an empty directory"
        };
        j.check(format!("{what}: exit 3 (rc={rc}: {out})"), rc == "3");
    }
    let (slow, slowest) = plants(j, d);
    format!(
        "  lint took {} ms on the clean image (target: well under a second); the slowest plant {slow} ms ({slowest})",
        clean.ms
    )
}

/// `head -c N`: the first N bytes (never inside a character).
fn cut_bytes(s: &str, n: usize) -> String {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The dracut module's build-time checks, as exercised by assemble.sh (suite files).
pub fn dracut_build(j: &mut Judge, suite: &Path) {
    let log = small_file(&suite.join("dracut.log"));
    let neg = small_file(&suite.join("dracut-negative.txt"));
    let line = |i: usize| neg.split('\n').nth(i).unwrap_or("").to_string();
    let incl = super::text::first(&log, "Including module: containerd-guard");
    j.check(
        format!("initrd built with the module: {incl}"),
        log.contains("Including module: containerd-guard"),
    );
    j.check(
        format!(
            "no guard binary: dracut fails naming /usr/bin/guard: {}",
            line(0)
        ),
        has(
            &line(0),
            "^no-guard-binary: dracut failed rc=[1-9].*installing '/usr/bin/guard'",
        ),
    );
    j.check(
        format!("no initrd-switch-root.target: dracut fails naming it: {}", line(1)),
        has(&line(1), "^no-initrd-switch-root.target: dracut failed rc=[1-9].*containerd-guard: initrd-switch-root.target is missing"),
    );
    // grep -c of a missing file prints nothing
    let n = if suite.join("dracut-negative.txt").exists() {
        nonempty(neg.trim_end_matches('\n')).to_string()
    } else {
        String::new()
    };
    j.check(
        format!("two negative builds, no more, no less ({n})"),
        n == "2",
    );
}

/// Each hazard planted once: its finding and exit code; the slowest plant.
fn plants(j: &mut Judge, d: &Path) -> (u64, String) {
    let (mut slow, mut slowest) = (0u64, String::new());
    for p in PLANTS {
        let f = d.join(p.name);
        let l = Lint::load(&f);
        let st = l.status(p.id);
        let words = if p.words.is_empty() {
            String::new()
        } else {
            format!(" ({})", p.words.join(" "))
        };
        let ev = l.line(p.id);
        let ev3 = cut(
            &ev.splitn(3, '|')
                .nth(2)
                .map(|s| s.to_string())
                .unwrap_or_default(),
            200,
        );
        j.check(
            format!(
                "{}{words}: {} {st} (want {}), exit {} (want {}), {} ms: {ev3}",
                p.name, p.id, p.want, l.rc, p.rc, l.ms
            ),
            format!("{st}/{}", l.rc) == format!("{}/{}", p.want, p.rc),
        );
        if p.want == "warn" {
            let w = Lint::load(&d.join(format!("{}.warn-is-error", p.name)));
            j.check(
                format!(
                    "  with --warn-is-error: exit {} (want 1), {} {}",
                    w.rc,
                    p.id,
                    w.status(p.id)
                ),
                format!("{}/{}", w.rc, w.status(p.id)) == "1/warn",
            );
        }
        if let Ok(ms) = l.ms.parse::<u64>() {
            if ms > slow {
                (slow, slowest) = (ms, p.name.to_string());
            }
        }
    }
    (slow, slowest)
}
