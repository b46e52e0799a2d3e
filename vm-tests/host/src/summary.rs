//! What a run prints: each scenario's verdict with its evidence, healthy's cost figures,
//! and the closing lines (`N passed, N failed` last, which CI's tail shows).

use crate::checks::text::{awk_num, secs};
use crate::checks::Judge;
use crate::facts::Report;
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// A log line on stderr, stamped with the UTC time of day as the shell's `date -u +%T`.
pub fn log(msg: &str) {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        % 86_400;
    eprintln!(
        "{:02}:{:02}:{:02} vm-tests: {msg}",
        t / 3600,
        t / 60 % 60,
        t % 60
    );
}

/// Lines on stdout, flushed: the log lines on stderr interleave with them in CI's output.
pub fn say(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    let _ = out.flush();
}

/// The verdicts so far.
#[derive(Default)]
pub struct Summary {
    pub passes: u32,
    pub fails: u32,
    /// each failure's name and its first FAIL lines, for the closing lines (CI shows the
    /// tail of the output)
    failed: Vec<String>,
}

impl Summary {
    /// Counts one verdict; PASS or FAIL.
    pub fn tally(&mut self, name: &str, j: &Judge) -> &'static str {
        if j.ok {
            self.passes += 1;
            return "PASS";
        }
        self.fails += 1;
        self.failed.push(format!("FAIL {name}"));
        self.failed.push(j.fail_lines().join("\n"));
        "FAIL"
    }

    /// The closing lines.
    pub fn closing(&self, took_s: u64) -> Vec<String> {
        let mut out = vec![format!("vm-tests: suite took {took_s}s")];
        if self.fails > 0 {
            out.push("vm-tests: the failures again:".into());
            out.extend(self.failed.iter().cloned());
        }
        out.push(format!(
            "vm-tests: {} passed, {} failed",
            self.passes, self.fails
        ));
        out.push(format!("{} passed, {} failed", self.passes, self.fails));
        out
    }
}

/// healthy's boot-time cost of the guard's pre-starts (from a unit leaving inactive to
/// its main process starting), and the chain the units' ordering makes, drawn as
/// systemd-analyze critical-chain draws it from the same timestamps (the tool itself
/// cost 6-12 s of the report under TCG).
pub fn cost_lines(r: &Report) -> Vec<String> {
    let (c, k, m) = (
        "containerd.service",
        "kubelet.service",
        "var-lib-containerd.mount",
    );
    let d = r"dev-disk-by\x2dlabel-ctrd\x2deph.device";
    let z = awk_num(&r.get("userspace_mono"));
    let at = |u: &str| {
        format!(
            "@{:.3}s",
            (r.us(u, "ActiveEnterTimestampMonotonic") as f64 - z) / 1e6
        )
    };
    let took = |u: &str| {
        let t = (r.us(u, "ActiveEnterTimestampMonotonic") as f64
            - r.us(u, "InactiveExitTimestampMonotonic") as f64)
            / 1e3;
        if t < 1000.0 {
            format!("+{}ms", t.trunc() as i64)
        } else {
            format!("+{:.3}s", t / 1e3)
        }
    };
    let span = |u: &str| {
        secs(
            r.us(u, "InactiveExitTimestampMonotonic"),
            r.us(u, "ExecMainStartTimestampMonotonic"),
        )
    };
    let mut out = vec![
        format!(
            "  cost: guard volume --pre-start {}s, guard runtime {}s (systemd timestamps)",
            span(c),
            span(k)
        ),
        "  critical chain of kubelet.service (systemd's timestamps):".into(),
        format!("    kubelet.service {}", took(k)),
        format!("    └─containerd.service {} {}", at(c), took(c)),
        format!("      └─var-lib-containerd.mount {} {}", at(m), took(m)),
        format!("        └─{d} {}", at(d)),
    ];
    out.extend(
        r.block_lines("analyze")
            .into_iter()
            .take(2)
            .map(|l| format!("    {l}")),
    );
    out
}

/// The last 15 lines of a console log, without CR (the log may be megabytes: its last
/// 256 KiB are enough).
pub fn console_tail(path: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(256 << 10)));
    let mut bytes = Vec::new();
    let _ = f.take(256 << 10).read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).replace('\r', "");
    crate::checks::text::tail(text.trim_end_matches('\n'), 15)
}

pub fn journal_tail(journal: &[String], n: usize) -> Vec<String> {
    let mut out = vec!["  journal (guard, containerd, stand-in):".to_string()];
    out.extend(
        journal[journal.len().saturating_sub(n)..]
            .iter()
            .map(|l| format!("    {l}")),
    );
    out
}
