//! The checks several scenarios share: the boot order of a healthy node, a held
//! containerd, the guard's findings kept as JSON.

use super::text::{cut, first, grep, has, head, lines, lt, oneline, only, secs, stamp, tail};
use super::Judge;
use crate::facts::Report;

const C: &str = "containerd.service";
const K: &str = "kubelet.service";
const M: &str = "var-lib-containerd.mount";

/// The first journal line matching PAT: its monotonic stamp, "" when none.
pub fn jt(r: &Report, pat: &str) -> String {
    stamp(&first(&r.block("journal"), pat))
}

/// The guard's own lines of a unit's pre-start ("-- No entries --" is no line).
pub fn prestart(r: &Report, unit: &str) -> String {
    grep(&r.block(&format!("prestart.{unit}")), r"^\[").join("\n")
}

/// A pre-start's last line for the evidence: its verdict (guard runtime logs when
/// containerd's CRI first answered after it).
pub fn last_line(text: &str) -> String {
    let kept: Vec<&str> = lines(text)
        .filter(|l| !l.contains("CRI first answered"))
        .collect();
    kept.last().copied().unwrap_or("").to_string()
}

/// `[ X -gt 0 ] && echo WORD`
pub fn if_pos(n: u64, word: &str) -> &str {
    if n > 0 {
        word
    } else {
        ""
    }
}

pub fn if_set<'a>(s: &str, word: &'a str) -> &'a str {
    if s.is_empty() {
        ""
    } else {
        word
    }
}

/// containerd's main process never ran before the volume was mounted in this boot: its
/// own first log line (written by containerd's main, not its pre-start) comes after the
/// mount unit went active.
pub fn volume_first(j: &mut Judge, r: &Report) {
    let m = r.us(M, "ActiveEnterTimestampMonotonic");
    let c = jt(r, r#"msg="starting containerd""#);
    let mounted = if m != 0 {
        format!("at {}s", secs(0, m))
    } else {
        "never".into()
    };
    let started = if c.is_empty() {
        "never".into()
    } else {
        format!("at {c}s")
    };
    let cf = super::text::awk_num(&c);
    let pass = c.is_empty() || (m != 0 && cf * 1e6 >= m as f64);
    j.check(
        format!("containerd's main never ran before the volume was mounted (mounted: {mounted}, containerd's main first started: {started})"),
        pass,
    );
}

/// ... and when containerd did start, the node recovered.
pub fn guarded_starts(j: &mut Judge, r: &Report) {
    volume_first(j, r);
    if !jt(r, r#"msg="starting containerd""#).is_empty() {
        let what = format!(
            "the node recovered: pod sandbox runs (stand-in: {} {})",
            r.get("standin.result"),
            r.get("standin.error")
        );
        j.check(what, r.get("standin.result") == "ok");
    }
}

/// A healthy boot: containerd's pre-start (phase 1) passed after the mount, then
/// containerd's main; then kubelet's pre-start (guard runtime) once containerd was
/// ready, then kubelet's main.
pub fn order_healthy(j: &mut Judge, r: &Report) {
    let pre = r.get("containerd.execstartpre");
    let shown = only(&pre, r"argv\[\]=[^;]*guard[^;]*")
        .into_iter()
        .next()
        .unwrap_or_default();
    j.check(
        format!("containerd carries the guard's pre-start: {shown}"),
        has(&pre, r"argv\[\]=/usr/bin/guard volume --pre-start"),
    );
    let pc = prestart(r, C);
    let state = format!(
        "{}/{}/{}",
        r.unit(C, "Result"),
        r.unit(C, "ActiveState"),
        if_set(&pc, "logged")
    );
    j.check(
        format!(
            "containerd's pre-start ran phase 1 and passed: {}",
            cut(&tail(&pc, 1), 160)
        ),
        state == "success/active/logged",
    );
    j.check(
        "the volume was mounted before containerd's pre-start ended and its main started",
        lt(
            r.us(M, "ActiveEnterTimestampMonotonic"),
            r.us(C, "ExecMainStartTimestampMonotonic"),
        ),
    );
    j.check(
        "containerd ready before kubelet's pre-start started",
        lt(
            r.us(C, "ActiveEnterTimestampMonotonic"),
            r.us(K, "InactiveExitTimestampMonotonic"),
        ),
    );
    kubelet_prestart(
        j,
        r,
        "kubelet's pre-start (guard runtime) ran and passed before kubelet's main",
    );
    j.check(
        format!(
            "pod sandbox runs (stand-in: {} {} {})",
            r.get("standin.result"),
            r.get("standin.state"),
            r.get("standin.error")
        ),
        r.get("standin.result") == "ok",
    );
}

/// kubelet's pre-start logged and its main started.
pub fn kubelet_prestart(j: &mut Judge, r: &Report, what: &str) {
    let pk = prestart(r, K);
    let state = format!(
        "{}/{}",
        if_pos(r.us(K, "ExecMainStartTimestampMonotonic"), "started"),
        if_set(&pk, "logged")
    );
    j.check(
        format!("{what}: {}", cut(&last_line(&pk), 160)),
        state == "started/logged",
    );
}

pub fn mounted_eph(j: &mut Judge, r: &Report) {
    let m = r.get("mount");
    j.check(
        format!("ephemeral volume mounted at /var/lib/containerd ({m})"),
        has(&m, "ext4 ctrd-eph"),
    );
}

pub fn started_once(j: &mut Judge, r: &Report) {
    let n = r.get("containerd.starts");
    j.check(format!("containerd started once ({n})"), n == "1");
}

/// held: containerd's pre-start refuses and kubelet waits. `u` is the key prefix of the
/// unit properties: the report's ("unit") or readme-recovery's record taken while held
/// ("sc.held.unit").
pub fn held(j: &mut Judge, r: &Report, u: &str) {
    let p = u.strip_suffix("unit").unwrap_or(u);
    let g = |k: &str| r.get(&format!("{u}.{C}.{k}"));
    let failures = r.get(&format!("{p}containerd.prestart_failures"));
    let st = g("StatusText");
    let n: u64 = failures.parse().unwrap_or(0);
    let (act, sub, res) = (g("ActiveState"), g("SubState"), g("Result"));
    j.check(
        format!("containerd's pre-start failed: {failures} failure(s) of it in systemd's journal (Control process exited); now {act}/{sub}, Result={res}"),
        n >= 1,
    );
    j.check(
        "  ... and containerd is held, not active (retried by its own Restart=)",
        has(
            &format!("{act}/{sub}/{res}"),
            r"^(activating/(auto-restart|start-pre)|failed/failed)/|/exit-code$",
        ),
    );
    let main = g("ExecMainStartTimestampMonotonic");
    j.check(
        format!("containerd's main never ran (ExecMainStart={main})"),
        main == "0",
    );
    let kmain = r.get(&format!("{u}.{K}.ExecMainStartTimestampMonotonic"));
    let kact = r.get(&format!("{u}.{K}.ActiveState"));
    j.check(
        format!("kubelet never ran (ExecMainStart={kmain}, {kact})"),
        kmain == "0",
    );
    let status = r.block(&format!("{p}guard.status"));
    let named = format!(
        "{}\n{status}",
        grep(&st, r"^FAILED volume\.[a-z-]+: .").join("\n")
    );
    j.check(
        format!(
            "StatusText or guard status names the finding: StatusText '{st}'; guard status '{}'",
            cut(&oneline(&head(&status, 4)), 200)
        ),
        has(
            &named,
            r"volume\.(mounted|device)|not a mount point|was not found",
        ),
    );
    let ok = r.get(&format!("{p}volume.ok"));
    j.check(
        format!("no marker for containerd (volume.ok='{ok}')"),
        ok.is_empty(),
    );
}

/// The JSON documents of a block: each from a line starting `{` to the next starting `}`
/// (the shell's `sed -n '/^{/,/^}/p'`).
pub fn json_docs(text: &str) -> Vec<serde_json::Value> {
    let mut docs = Vec::new();
    let mut cur: Option<Vec<&str>> = None;
    for l in lines(text) {
        match cur.as_mut() {
            None if l.starts_with('{') => cur = Some(vec![l]),
            None => {}
            Some(v) => {
                v.push(l);
                if l.starts_with('}') {
                    docs.push(v.join("\n"));
                    cur = None;
                }
            }
        }
    }
    if let Some(v) = cur {
        docs.push(v.join("\n"));
    }
    // as jq: the documents up to the first that does not parse
    docs.iter()
        .map_while(|d| serde_json::from_str(d).ok())
        .collect()
}

/// One finding of a guard --json run kept as a block: "status | summary | evidence ;; ...".
pub fn finding(r: &Report, block: &str, id: &str) -> String {
    let mut out = Vec::new();
    for doc in json_docs(&r.block(block)) {
        for f in doc["findings"].as_array().into_iter().flatten() {
            if f["id"].as_str() == Some(id) {
                out.push(finding_line(f));
            }
        }
    }
    out.join("\n")
}

pub fn finding_line(f: &serde_json::Value) -> String {
    let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    let ev: Vec<String> = f["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .map(s)
        .collect();
    format!(
        "{} | {} | {}",
        s(&f["status"]),
        s(&f["summary"]),
        ev.join(" ;; ")
    )
}

/// A finding's line checked against a pattern; `show`: the evidence item to print.
pub fn finding_is(
    j: &mut Judge,
    r: &Report,
    what: &str,
    block: &str,
    id: &str,
    pat: &str,
    show: Option<&str>,
) {
    let f = finding(r, block, id);
    let shown = match show {
        None => cut(&f, 300),
        Some(s) => {
            let item = first(&f.replace(" ;; ", "\n"), s);
            let item =
                regex::Regex::new(r", cgroup [^;]*").map(|re| re.replace(&item, "").into_owned());
            cut(&item.unwrap_or_default(), 300)
        }
    };
    j.check(format!("{what}: {id} = '{shown}'"), has(&f, pat));
}
