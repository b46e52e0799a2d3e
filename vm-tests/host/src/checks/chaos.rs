//! chaos boots: a fault schedule drawn from a seed, and the invariant asserted on every
//! boot (docs/testing.md): the stand-in never ran a pod on a broken runtime; the boot
//! ends usable or held with the reason; in bounded time; within the restart budget.

use super::common::{json_docs, volume_first};
use super::text::{awk_num, first, has, lacks, lines};
use super::Judge;
use crate::facts::Report;

/// [remediation] restart_budget of the guest (guest/guard-vm-tests.toml).
pub const CHAOS_BUDGET: u64 = 2;

pub use crate::schedule::Schedule;

/// `sed -n "s/.* NAME=\([^ ]*\).*/\1/p"`: the last ` NAME=` value of a line.
pub fn field(name: &str, line: &str) -> String {
    let pat = format!(" {name}=");
    match line.rfind(&pat) {
        Some(i) if i > 0 || line.starts_with(' ') => line[i + pat.len()..]
            .split(' ')
            .next()
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    }
}

/// A view "pid=P,db=D,vol=V,label=L,img=I" (guest/chaos.sh): 0 sound, 1 broken, 2
/// unknown (no containerd, or it did not answer).
pub fn view_state(v: &str) -> u8 {
    let re =
        regex::Regex::new(r"^pid=([0-9]+),db=([0-9:]*),vol=([0-9:]*),label=([^,]*),img=([a-z?]+)$")
            .expect("pattern");
    let Some(c) = re.captures(v) else { return 1 };
    if &c[1] == "0" || &c[5] == "?" {
        return 2;
    }
    let sound = !c[2].is_empty() && c[2] == c[3] && &c[4] == "ctrd-eph" && &c[5] == "yes";
    if sound {
        0
    } else {
        1
    }
}

/// A successful attempt is sound when one of its views is sound and neither is broken.
pub fn attempt_sound(line: &str) -> bool {
    let (b, a) = (
        view_state(&field("before", line)),
        view_state(&field("after", line)),
    );
    b != 1 && a != 1 && (b == 0 || a == 0)
}

/// How the boot ended, by `guard --json status`: usable, "held: REASON" or "none: WHY".
pub fn outcome(r: &Report) -> String {
    let docs = json_docs(&r.block("guard.json"));
    let Some(s) = docs.first() else {
        return "none: guard --json status said nothing readable".into();
    };
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        o => o.to_string(),
    };
    let interp = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        o => o.to_string(),
    };
    let vol = &s["volume"];
    let fails: Vec<String> = vol["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["status"] == "fail")
        .map(|f| format!("{}: {}", interp(&f["id"]), interp(&f["summary"])))
        .collect();
    let last = &s["state"]["last"];
    if vol.is_null() {
        "none: no phase-1 record this boot".into()
    } else if vol["verdict"] != "usable" {
        match fails.first() {
            Some(f) => format!("held: phase 1: {f}"),
            None => "none: phase 1 unusable, no failed check named".into(),
        }
    } else if !s["state"]["terminal"].is_null() {
        format!(
            "held: terminal: {}",
            text(&s["state"]["terminal"]["reason"])
        )
    } else if last.is_null() {
        "none: no phase-2 outcome this boot".into()
    } else if last["exit"] == 0 {
        "usable".into()
    } else if !text(&last["summary"]).is_empty() {
        format!(
            "held: phase 2 exit {}: {}",
            interp(&last["exit"]),
            text(&last["summary"])
        )
    } else {
        format!(
            "none: phase 2 exit {} with no reason",
            interp(&last["exit"])
        )
    }
}

/// Invariant 1, over every attempt of the stand-in (the report's own probe aside).
fn pods(j: &mut Judge, r: &Report) {
    let attempts = r.block("attempts");
    let tries: Vec<&str> = lines(&attempts)
        .filter(|l| l.starts_with("attempt ") && !l.contains(" who=report "))
        .collect();
    let ran: Vec<&&str> = tries
        .iter()
        .filter(|l| field("result", l) == "ok")
        .collect();
    let broken: Vec<&&&str> = ran.iter().filter(|l| !attempt_sound(l)).collect();
    j.check(
        format!("the stand-in never ran a pod on a broken runtime: {} attempt(s), {} ran a pod, {} of them on a broken runtime", tries.len(), ran.len(), broken.len()),
        broken.is_empty(),
    );
    for l in broken {
        j.note(format!("       {l}"));
    }
}

/// Invariant 2, the reason: what the drawn schedule allows.
fn reason(j: &mut Judge, s: &Schedule, out: &str) {
    let p1 = r"^held: phase 1: volume\.(device|mounted)";
    let img = "sandbox-image|restore-image";
    match (s.disk, s.archive) {
        ("never", _) => j.check("  no disk: phase 1 holds, naming the device or the mount", has(out, p1)),
        ("boot", "present") => j.check(
            "  disk at boot and the archive: usable, or held by neither phase 1 nor the image",
            lacks(out, &format!("^held: phase 1|{img}")),
        ),
        ("hotplug", "present") => j.check("  hot-plugged disk and the archive: usable, or held by something but the image", lacks(out, img)),
        ("boot", a) => j.check(
            format!("  disk at boot, no usable archive ({a}): held naming the sandbox image"),
            has(out, &format!("^held: .*({img})")),
        ),
        (_, a) => j.check(
            format!("  hot-plugged disk, no usable archive ({a}): held naming the image (or phase 1, a late disk)"),
            has(out, &format!(r"^held: (.*({img})|phase 1: volume\.(device|mounted))")),
        ),
    }
}

/// The invariant on one chaos boot's report; `bound`: VM_CHAOS_BOUND's seconds.
pub fn assert(j: &mut Judge, r: &Report, s: &Schedule, bound: &str) {
    pods(j, r);
    volume_first(j, r);
    let out = outcome(r);
    let probe = first(&r.block("attempts"), " who=report ");
    j.check(
        format!("the boot ended usable or held with the reason in guard status: {out}"),
        has(&out, "^(usable|held: .+)$"),
    );
    reason(j, s, &out);
    if out == "usable" {
        let err = probe
            .rfind(" error=")
            .map(|i| probe[i + 7..].to_string())
            .unwrap_or_default();
        j.check(
            format!("  usable indeed: the report's own RunPodSandbox ran a pod on a sound runtime ({} before={} {err})", field("result", &probe), field("before", &probe)),
            attempt_sound(&probe),
        );
        j.check("  ... and it succeeded", field("result", &probe) == "ok");
    }
    let up = r.get("uptime");
    let shown = if up.is_empty() {
        "?".to_string()
    } else {
        up.clone()
    };
    let u = if up.is_empty() { 9999.0 } else { awk_num(&up) };
    j.check(
        format!("the boot settled in bounded time (at {shown}s uptime; bound {bound}s)"),
        u <= awk_num(bound),
    );
    budget(j, r);
}

/// Invariant 4: the guard's restarts within its budget, containerd's starts within 1 +
/// kills + budget (systemd's journal, outside the guard).
fn budget(j: &mut Judge, r: &Report) {
    let counts: Vec<String> = json_docs(&r.block("guard.json"))
        .iter()
        .map(|d| match &d["state"]["restarts"] {
            serde_json::Value::Array(a) => a.len().to_string(),
            serde_json::Value::Object(o) => o.len().to_string(),
            serde_json::Value::String(s) => s.chars().count().to_string(),
            _ => "0".into(),
        })
        .collect();
    let restarts = counts.join("\n");
    let shown = if restarts.is_empty() {
        "?".to_string()
    } else {
        restarts.clone()
    };
    let within = if restarts.is_empty() {
        false
    } else {
        restarts.parse::<u64>().is_ok_and(|n| n <= CHAOS_BUDGET)
    };
    j.check(
        format!("guard restarts within the budget: {shown} of {CHAOS_BUDGET} (guard status)"),
        within,
    );
    let starts = r.get("containerd.starts");
    let (kills, killed) = match r.get("kill.sent").as_str() {
        "yes" => (
            1,
            format!(
                "SIGKILLed at {}s (back at {}s)",
                r.get("kill.at"),
                r.get("kill.back")
            ),
        ),
        "no" => (
            0,
            format!("not running at the kill (at {}s)", r.get("kill.at")),
        ),
        _ => (0, "not SIGKILLed".to_string()),
    };
    let n = if starts.is_empty() {
        Some(99)
    } else {
        starts.parse::<u64>().ok()
    };
    j.check(
        format!(
            "containerd started {} time(s), stopped {}, {killed}: at most 1 + kills + budget",
            if starts.is_empty() { "?" } else { &starts },
            r.get("containerd.stops")
        ),
        n.is_some_and(|n| n <= 1 + kills + CHAOS_BUDGET),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views() {
        assert_eq!(view_state("pid=5,db=8:1,vol=8:1,label=ctrd-eph,img=yes"), 0);
        assert_eq!(view_state("pid=5,db=8:1,vol=8:2,label=ctrd-eph,img=yes"), 1);
        assert_eq!(view_state("pid=0,db=,vol=,label=,img=?"), 2);
        assert_eq!(view_state("garbage"), 1);
        assert_eq!(field("before", "attempt 1 result=ok before=a after=b"), "a");
    }
}
