//! ops' last step: the terminal state under real systemd (guest/scenario.sh terminal_step).
//! containerd stops answering after every start (a runtime drop-in stops it once it is
//! ready) and the restart budget is one; `systemctl restart kubelet` then makes kubelet's
//! pre-start restart containerd once, which does not help, and go terminal. kubelet's own
//! Restart= runs the pre-start again and again: each ends at once (exit 4) touching
//! nothing. `guard verify` exits 4 naming the spent budget; the cause fixed, `guard reset`
//! and `systemctl restart kubelet` bring kubelet back without touching containerd.

use super::common::last_line;
use super::ops::{sel, slash};
use super::text::{awk_num, count, cut, first, grep, has, lines, oneline, stamp};
use super::Judge;
use crate::facts::Report;

/// How long a terminal pre-start may take from systemd's "Starting" to its exit: the
/// guard reads the state file and looks for at most a second (TERMINAL_WAIT in the
/// guard); one that acted would wait for the hung containerd ([containerd] wait, 2 s in
/// the step's fragment), then restart it, which takes longer under TCG.
pub const AT_ONCE_SECS: f64 = 4.5;

fn get(r: &Report, k: &str) -> String {
    r.get(&format!("sc.ops.terminal.{k}"))
}

pub fn terminal(j: &mut Judge, r: &Report) {
    spent(j, r);
    retries(j, r);
    let (rc, v) = (get(r, "verify.rc"), r.block("sc.ops.terminal.verify"));
    let row = first(&v, r"remedy\.budget");
    j.check(
        format!(
            "in the terminal state, guard verify exits 4 (rc={rc}) and says why: {}",
            cut(&row, 160)
        ),
        rc == "4" && has(&v, r"remedy\.budget +TERMINAL") && has(&v, "restart budget spent"),
    );
    recovered(j, r);
}

/// The first pre-start: one restart of containerd (its budget), then terminal.
fn spent(j: &mut Judge, r: &Report) {
    let (b, s) = (get(r, "before"), get(r, "spent"));
    let first_run = r.block("sc.ops.terminal.first");
    let restarted = first(&first_run, "restarted containerd");
    j.check(
        format!(
            "terminal: containerd hung, restart_budget 1, systemctl restart kubelet: its pre-start restarted containerd once: {}",
            cut(&restarted, 160)
        ),
        has(&restarted, "restart 1 of 1 this boot"),
    );
    let (cb, cs) = (sel("c", &b), sel("c", &s));
    j.check(
        format!("  that restart gave containerd a new main process ({cb} -> {cs})"),
        slash(&cb, 1) != slash(&cs, 1) && has(&cs, "^[1-9][0-9]*/[0-9]+/active$"),
    );
    let sys = r.block("sc.ops.terminal.ksys");
    let exit4 = first(&sys, "Control process exited");
    j.check(
        format!(
            "  then it went terminal and exited 4: {} / {}",
            cut(&first(&first_run, "TERMINAL"), 140),
            cut(&exit4, 120)
        ),
        has(&first_run, "TERMINAL: restart budget spent") && has(&exit4, "status=4/"),
    );
}

/// kubelet's own Restart= runs the pre-start again: each ends at once, exit 4, and
/// containerd is not touched.
fn retries(j: &mut Judge, r: &Report) {
    let sys = r.block("sc.ops.terminal.ksys");
    let secs = prestart_secs(&sys);
    let shown: Vec<String> = secs.iter().map(|s| format!("{s:.2}s")).collect();
    let exits = count(&sys, "Control process exited, code=exited, status=4/");
    let fast = secs.iter().skip(1).all(|s| *s <= AT_ONCE_SECS);
    j.check(
        format!(
            "  kubelet's Restart= ran its pre-start {} more time(s), each exit 4 ({exits} exits) and at once (<= {AT_ONCE_SECS} s after the first: {})",
            secs.len().saturating_sub(1),
            shown.join(" ")
        ),
        get(r, "retried") == "0" && secs.len() >= 3 && exits >= secs.len() && fast,
    );
    let again = r.block("sc.ops.terminal.again");
    let acted = grep(
        &again,
        r"(?i)restarting containerd|restarted containerd|remedy\.(restart|restore-image|pull)|imported|pulled",
    );
    j.check(
        format!(
            "  those pre-starts attempted nothing ({} line(s) of a remedy; {} TERMINAL line(s))",
            acted.len(),
            count(&again, "TERMINAL")
        ),
        acted.is_empty() && count(&again, "TERMINAL") > 0,
    );
    let (s, t) = (get(r, "spent"), get(r, "retries"));
    let csys = grep(
        &r.block("sc.ops.terminal.csys"),
        "Starting|Stopping|Scheduled restart",
    );
    j.check(
        format!(
            "  containerd untouched through them: MainPID/NRestarts {} -> {}, no start or stop of it ('{}')",
            sel("c", &s),
            sel("c", &t),
            oneline(&csys.join("\n"))
        ),
        has(&sel("c", &s), "^[1-9][0-9]*/[0-9]+/active$")
            && sel("c", &s) == sel("c", &t)
            && csys.is_empty(),
    );
    let (ks, kt) = (sel("k", &s), sel("k", &t));
    j.check(
        format!("  kubelet stayed stopped: no main process ({ks}, {kt})"),
        slash(&ks, 1) == "0"
            && slash(&kt, 1) == "0"
            && !ks.ends_with("/active")
            && !kt.ends_with("/active"),
    );
}

/// The seconds from each "Starting" of kubelet to its pre-start's exit, in order.
pub fn prestart_secs(sys: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut started: Option<f64> = None;
    for l in lines(sys) {
        if l.contains("Starting kubelet") {
            started = Some(awk_num(&stamp(l)));
        } else if l.contains("Control process exited") {
            if let Some(t) = started.take() {
                out.push(awk_num(&stamp(l)) - t);
            }
        }
    }
    out
}

/// The cause fixed, `guard reset` and a kubelet restart: kubelet back through a passing
/// pre-start (its canary made a pod), containerd and the pod's shim untouched.
fn recovered(j: &mut Judge, r: &Report) {
    let reset = r.block("sc.ops.terminal.reset");
    j.check(
        format!(
            "the cause fixed (containerd answers: {}), guard reset (rc={}): {}",
            get(r, "answers"),
            get(r, "reset.rc"),
            cut(&oneline(&reset), 120)
        ),
        format!("{}/{}", get(r, "answers"), get(r, "reset.rc")) == "0/0",
    );
    let rec = r.block("sc.ops.terminal.recover");
    let (t, a) = (get(r, "retries"), get(r, "after"));
    let ka = sel("k", &a);
    j.check(
        format!(
            "  then systemctl restart kubelet (rc={}): kubelet active ({ka}), its pre-start passed with a canary pod: {}",
            get(r, "recover.rc"),
            cut(&last_line(&rec), 140)
        ),
        get(r, "recover.rc") == "0"
            && has(&ka, "^[1-9][0-9]*/[0-9]+/active$")
            && has(&rec, "verdict: node is usable")
            && has(&rec, r"guard\[[0-9]+\]: ok +runtime\.can-create"),
    );
    j.check(
        format!(
            "  containerd untouched by the way back ({} -> {}), the pod's shim still runs (alive: {})",
            sel("c", &t),
            sel("c", &a),
            sel("shim_alive", &a)
        ),
        slash(&sel("c", &t), 1) == slash(&sel("c", &a), 1)
            && has(&sel("c", &a), "/active$")
            && sel("shim_alive", &a) == "yes",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_start_is_paired_with_its_exit() {
        let sys = "[ 10.0] systemd[1]: Starting kubelet.service - x...\n\
                   [ 22.5] systemd[1]: kubelet.service: Control process exited, code=exited, status=4/NOPERMISSION\n\
                   [ 24.6] systemd[1]: kubelet.service: Scheduled restart job, restart counter is at 1.\n\
                   [ 24.7] systemd[1]: Starting kubelet.service - x...\n\
                   [ 25.5] systemd[1]: kubelet.service: Control process exited, code=exited, status=4/NOPERMISSION";
        let s = prestart_secs(sys);
        assert_eq!(s.len(), 2);
        assert!((s[0] - 12.5).abs() < 1e-9 && (s[1] - 0.8).abs() < 1e-9);
        assert!(prestart_secs("").is_empty());
    }
}
