//! ops: the operator actions on a healthy node (guest/scenario.sh ops). A snapshot is
//! "c=PID/NRESTARTS/STATE k=PID/NRESTARTS/STATE shim=PID shim_alive=yes|no".

use super::common::last_line;
use super::node::standin_ran;
use super::scenarios::Ctx;
use super::text::{awk_num, count, count_i, cut, first_i, grep, has, oneline, only};
use super::Judge;
use crate::facts::Report;

const ACTIVE: &str = "^[1-9][0-9]*/[0-9]+/active$";

/// A snapshot's FIELD.
pub(super) fn sel(field: &str, snap: &str) -> String {
    let p = format!("{field}=");
    snap.split(' ')
        .find_map(|w| w.strip_prefix(&p))
        .unwrap_or("")
        .to_string()
}

/// `cut -d/ -fN` (1-based; a value without a slash is printed whole).
pub(super) fn slash(s: &str, n: usize) -> String {
    if !s.contains('/') {
        return s.to_string();
    }
    s.split('/').nth(n - 1).unwrap_or("").to_string()
}

struct Ops<'a> {
    r: &'a Report,
}

impl Ops<'_> {
    fn get(&self, k: &str) -> String {
        self.r.get(&format!("sc.ops.{k}"))
    }
    fn snap(&self, step: &str, when: &str, who: &str) -> String {
        sel(who, &self.get(&format!("{step}.{when}")))
    }
    fn who(c: &str) -> &'static str {
        if c == "c" {
            "containerd"
        } else {
            "kubelet"
        }
    }

    /// MainPID and NRestarts unchanged and active, for containerd (c) or kubelet (k).
    fn same(&self, j: &mut Judge, step: &str, c: &str) {
        let (b, a) = (self.snap(step, "before", c), self.snap(step, "after", c));
        j.check(
            format!("  {step}: {} untouched ({b} -> {a})", Self::who(c)),
            format!("{b}/{}", count(&b, ACTIVE)) == format!("{a}/1"),
        );
    }

    fn shim_same(&self, j: &mut Judge, step: &str) {
        let (b, a) = (
            self.snap(step, "before", "shim"),
            self.snap(step, "after", "shim"),
        );
        let alive = self.snap(step, "after", "shim_alive");
        let digits = !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit());
        j.check(
            format!("  {step}: the pod's shim still runs (pid {b} -> {a}, alive: {alive})"),
            digits && a == b && alive.eq_ignore_ascii_case("yes"),
        );
    }

    /// A new main process, active.
    fn renewed(&self, j: &mut Judge, step: &str, c: &str) {
        let (b, a) = (self.snap(step, "before", c), self.snap(step, "after", c));
        let new = if slash(&a, 1) != slash(&b, 1) {
            "new"
        } else {
            ""
        };
        j.check(
            format!(
                "  {step}: {} has a new main process and is active ({b} -> {a})",
                Self::who(c)
            ),
            format!("{}/{new}", count(&a, ACTIVE)) == "1/new",
        );
    }

    /// The command succeeded, and nothing reached containerd, kubelet or the pod.
    fn untouched(&self, j: &mut Judge, step: &str) {
        let (rc, settled) = (
            self.get(&format!("{step}.rc")),
            self.get(&format!("{step}.settled")),
        );
        let yes = if settled == "0" { "yes" } else { "no" };
        j.check(
            format!(
                "{step}: rc={rc}, jobs settled: {yes} ({}s)",
                self.get(&format!("{step}.secs"))
            ),
            format!("{rc}/{settled}") == "0/0",
        );
        self.same(j, step, "c");
        self.same(j, step, "k");
        self.shim_same(j, step);
    }

    /// containerd's pre-start ran the quick check since the step began.
    fn quick_ran(&self, j: &mut Judge, step: &str) {
        let b = self.r.block(&format!("sc.ops.{step}.cprestart"));
        j.check(
            format!(
                "  {step}: containerd's pre-start ran the quick check: {}",
                cut(&first_i(&b, "quick check"), 170)
            ),
            count_i(&b, "quick check") > 0,
        );
    }

    fn rc(&self, step: &str) -> String {
        self.get(&format!("{step}.rc"))
    }
}

pub fn ops(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let o = Ops { r };
    standin_ran(j, r);
    let k = "kubelet.service";
    let (act, sub) = (r.unit(k, "ActiveState"), r.unit(k, "SubState"));
    j.check(
        format!("the stand-in is a daemon: kubelet active with Restart=always ({act}/{sub})"),
        format!("{act}/{sub}") == "active/running",
    );
    j.check(
        format!("the pod's shim found (pid {})", r.get("sc.shim")),
        has(&r.get("sc.shim"), "^[0-9]+$"),
    );
    let steps: Vec<String> = ["timer", "service"]
        .iter()
        .flat_map(|u| {
            [
                "restart", "stop", "start", "mask", "unmask", "disable", "enable",
            ]
            .iter()
            .map(move |a| format!("{u}-{a}"))
        })
        .collect();
    for s in &steps {
        o.untouched(j, s);
    }
    let states: String = steps
        .iter()
        .map(|s| format!("{s}={} ", o.snap(s, "after", "timer")))
        .collect();
    j.note(format!(
        "       the timer's state after each step: {states}"
    ));
    for l in grep(&r.block("sc.ops.timer.journal"), "(?i)fail|mask")
        .iter()
        .take(4)
    {
        j.note(format!("       {}", cut(l, 200)));
    }
    // masking the running timer fails it, whatever the guard does (systemd 252: "Unit to
    // trigger vanished"); unmask and enable leave it failed until it is started again
    j.check(
        format!(
            "the hygiene timer was enabled and active before the steps ({}); after them: {}",
            r.get("sc.timer.before"),
            r.get("sc.timer.after")
        ),
        r.get("sc.timer.before") == "enabled/active",
    );
    timer_back(j, &o, r);
    restarts(j, &o);
    isolate(j, &o);
    super::failover_live::failover_live(j, r);
    failover(j, &o);
    optout(j, &o);
    super::terminal::terminal(j, r);
}

fn restarts(j: &mut Judge, o: &Ops) {
    let st = "restart-containerd";
    j.check(
        format!(
            "systemctl restart containerd (rc={}, {}s)",
            o.rc(st),
            o.get(&format!("{st}.secs"))
        ),
        o.rc(st) == "0",
    );
    o.renewed(j, st, "c");
    o.quick_ran(j, st);
    o.same(j, st, "k");
    o.shim_same(j, st);
    let st = "kill-containerd";
    let (b, a) = (o.snap(st, "before", "c"), o.snap(st, "after", "c"));
    let nb = slash(&b, 2);
    let next = if !nb.is_empty() && nb.bytes().all(|c| c.is_ascii_digit()) {
        nb.parse::<u64>().unwrap_or(98) + 1
    } else {
        100
    };
    let back = o.get(&format!("{st}.back"));
    j.check(
        format!("kill -9 of containerd's main pid {} (rc={}): back by its Restart= (back={back}, NRestarts {nb} -> {}, {}s)", slash(&b, 1), o.rc(st), slash(&a, 2), o.get(&format!("{st}.secs"))),
        format!("{}/{back}/{next}", o.rc(st)) == format!("0/0/{}", slash(&a, 2)),
    );
    o.renewed(j, st, "c");
    o.quick_ran(j, st);
    o.same(j, st, "k");
    o.shim_same(j, st);
    upgrade_and_kubelet(j, o);
}

fn isolate(j: &mut Judge, o: &Ops) {
    let st = "isolate";
    let rescue = o.get("isolate.rescue");
    let up = only(&rescue, "/(active|activating|deactivating|reloading)( |$)").len();
    j.check(
        format!(
            "systemctl isolate rescue.target (rc={}) stopped both: {rescue}",
            o.get("isolate.rescue.rc")
        ),
        format!("{}/{up}", o.get("isolate.rescue.rc")) == "0/0",
    );
    let kp = o.r.block("sc.ops.isolate.kprestart");
    let (rc, active, runtime) = (o.rc(st), o.get("isolate.active"), o.get("isolate.runtime"));
    j.check(
        format!("then isolate multi-user.target (rc={rc}): both active again (active={active}, {}s), kubelet's pre-start passed: {}", o.get("isolate.secs"), cut(&last_line(&kp), 150)),
        format!("{rc}/{active}/{runtime}") == "0/0/0",
    );
    o.renewed(j, st, "c");
    o.renewed(j, st, "k");
    o.quick_ran(j, st);
    j.note(format!(
        "       the pod's shim across rescue: {} -> alive: {}",
        o.snap(st, "before", "shim"),
        o.snap(st, "after", "shim_alive")
    ));
}

fn failover(j: &mut Judge, o: &Ops) {
    let st = "failover";
    let g = |k: &str| o.get(&format!("failover.{k}"));
    j.check(
        format!("failover: systemctl stop containerd (rc={}); the volume unmounted ({}), nothing at /var/lib/containerd: '{}'", g("stop.rc"), g("umount"), g("mounted")),
        format!("{}/{}", g("stop.rc"), g("mounted")) == "0/",
    );
    let s = g("refused.secs");
    let timely = if !s.is_empty() && awk_num(&s) <= 25.0 {
        "in time"
    } else {
        "late"
    };
    j.check(
        format!("  systemctl start containerd refused: its pre-start failed {s}s after the start (within 10 s + margin: 25 s); now {}", g("held")),
        format!("{}/{}/{timely}", g("start.rc"), g("refused.rc")) == "0/0/in time",
    );
    let refusal = o.r.block("sc.ops.failover.refusal");
    let all = format!(
        "{} {refusal} {}",
        g("status"),
        o.r.block("sc.ops.failover.guard.status")
    );
    j.check(
        format!(
            "  the refusal names the volume: StatusText '{}'; {}",
            g("status"),
            cut(&first_i(&refusal, "mount|volume"), 150)
        ),
        has(&all, r"volume\.mounted|not a mount point"),
    );
    let pid = slash(&g("held"), 1);
    j.check(
        format!("  containerd's main never ran on the root filesystem: no main pid ({pid}), no containerd process ('{}'), no main process since the start (ExecMainStart {} before it, {} while held)", g("procs"), g("mainstart.before"), g("mainstart.held")),
        format!("{pid}/{}/{}", g("procs"), g("mainstart.held")) == "0//0",
    );
    j.check(
        format!(
            "  nothing new under the root filesystem's /var/lib/containerd ('{}' -> '{}')",
            g("rootfs.before"),
            g("rootfs.after")
        ),
        g("rootfs.after") == g("rootfs.before"),
    );
    j.check(
        format!("  the volume mounted again (rc={}, {}): containerd back by its own Restart= (back={}: {})", g("mount.rc"), g("mounted.after"), g("back"), g("back.how")),
        format!("{}/{}/{}", g("mount.rc"), g("back"), count(&g("mounted.after"), "ctrd-eph")) == "0/0/1",
    );
    o.renewed(j, st, "c");
    o.same(j, st, "k");
    j.note(format!(
        "       the pod's shim across the failover: {} -> alive: {}",
        sel("shim", &g("before")),
        o.snap(st, "after", "shim_alive")
    ));
}

fn optout(j: &mut Judge, o: &Ops) {
    o.untouched(j, "optout-mask");
    let pre = o.get("optout.execstartpre");
    j.check(
        format!(
            "  the opt-out took: containerd's ExecStartPre has no guard ('{}')",
            oneline(&only(&pre, r"argv\[\]=[^;]*").join("\n"))
        ),
        count(&pre, "guard") == 0,
    );
    let st = "optout-restart";
    let lines = count(&o.r.block(&format!("sc.ops.{st}.cprestart")), r"^\[");
    let back = o.get(&format!("{st}.back"));
    j.check(
        format!("opt-out, systemctl restart containerd (rc={}, back={back}): no guard ran ({lines} guard line(s) in its start)", o.rc(st)),
        format!("{}/{back}/{lines}", o.rc(st)) == "0/0/0",
    );
    o.renewed(j, st, "c");
    o.same(j, st, "k");
    o.shim_same(j, st);
    o.untouched(j, "optout-unmask");
    let un = o.get("unmasked.execstartpre");
    j.check(
        format!(
            "  unmasked: containerd's ExecStartPre runs the guard again ({})",
            only(&un, r"argv\[\]=[^;]*guard[^;]*").join("\n")
        ),
        has(&un, r"argv\[\]=/usr/bin/guard volume --pre-start"),
    );
    let r = o.r;
    let end = o.get("end");
    let res = r.unit("vm-tests-scenario.service", "Result");
    j.check(
        format!(
            "the scenario unit ran to its end ({res}, done at {}s; end: {end})",
            r.get("sc.scenario.done")
        ),
        format!(
            "{res}/{}",
            count(
                &end,
                "^[1-9][0-9]*/[0-9]+/active [1-9][0-9]*/[0-9]+/active$"
            )
        ) == "success/1",
    );
}

/// containerd's own package upgraded (its postinst restarts it), then kubelet restarted.
fn upgrade_and_kubelet(j: &mut Judge, o: &Ops) {
    let st = "dpkg";
    let (inst, deb, rc) = (
        o.get("dpkg.installed"),
        o.get("dpkg.deb"),
        o.r.get("sc.ops.dpkg.out.rc"),
    );
    j.check(
        format!("dpkg -i of containerd's own package, the version installed ({inst} = {deb}; rc={rc}, {}s)", o.get("dpkg.secs")),
        format!("{rc}/{inst}") == format!("0/{deb}"),
    );
    let jl = o.r.block("sc.ops.dpkg.journal");
    j.check(
        format!(
            "  its postinst restarted containerd: {}",
            cut(&oneline(&grep(&jl, "Stopp|Start").join("\n")), 200)
        ),
        jl.contains("Started"),
    );
    o.renewed(j, st, "c");
    o.quick_ran(j, st);
    o.same(j, st, "k");
    o.shim_same(j, st);
    let st = "restart-kubelet";
    let kp = o.r.block(&format!("sc.ops.{st}.kprestart"));
    j.check(
        format!(
            "systemctl restart kubelet (rc={}): guard runtime ran in its pre-start: {}",
            o.rc(st),
            cut(&last_line(&kp), 170)
        ),
        format!("{}/{}", o.rc(st), o.get(&format!("{st}.runtime"))) == "0/0",
    );
    o.renewed(j, st, "k");
    o.same(j, st, "c");
    o.shim_same(j, st);
}

/// The timer brought back by a restart; daemon-reload touches nothing.
fn timer_back(j: &mut Judge, o: &Ops, r: &Report) {
    o.untouched(j, "timer-restart-again");
    j.check(
        format!(
            "  systemctl restart of the timer brings the cleanup back: enabled/active ({})",
            r.get("sc.timer.final")
        ),
        r.get("sc.timer.final") == "enabled/active",
    );
    o.untouched(j, "daemon-reload");
}
