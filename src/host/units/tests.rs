use super::*;
use std::os::unix::fs::symlink;

/// A tree standing for a node's `/`, files by OS path.
struct Fixture(tempfile::TempDir);

impl Fixture {
    fn new() -> Fixture {
        Fixture(tempfile::tempdir().unwrap())
    }
    fn at(&self, os: &str) -> PathBuf {
        let at = self.0.path().join(os.trim_start_matches('/'));
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        at
    }
    fn put(&self, os: &str, text: &str) -> &Fixture {
        std::fs::write(self.at(os), text).unwrap();
        self
    }
    fn link(&self, os: &str, target: &str) -> &Fixture {
        symlink(target, self.at(os)).unwrap();
        self
    }
    fn host(&self) -> Tree {
        Tree::open(self.0.path()).unwrap()
    }
    fn load(&self, name: &str) -> Unit {
        load(&self.host(), name).unwrap().expect("the unit exists")
    }
}

fn values(list: Vec<&Assignment>) -> Vec<&str> {
    list.into_iter().map(|a| a.value.as_str()).collect()
}

#[test]
fn parse_keeps_sections_lines_and_continuations() {
    let text = "# c\n[Unit]\nDescription = x\n\n[Service]\n; c\nExecStart=/bin/a \\\n  --b \\\n# skipped\n  --c\nKillMode=process\n";
    let a = parse(text, Path::new("/u"));
    let got: Vec<(&str, &str, &str, usize)> = a
        .iter()
        .map(|a| (a.section.as_str(), a.key.as_str(), a.value.as_str(), a.line))
        .collect();
    assert_eq!(
        got,
        [
            ("Unit", "Description", "x", 3),
            ("Service", "ExecStart", "/bin/a  --b  --c", 7),
            ("Service", "KillMode", "process", 11),
        ]
    );
}

#[test]
fn etc_overrides_lib_and_dev_null_masks() {
    let t = Fixture::new();
    t.put(
        "/lib/systemd/system/c.service",
        "[Service]\nKillMode=process\n",
    );
    assert_eq!(
        t.load("c.service").fragment.as_deref(),
        Some(Path::new("/lib/systemd/system/c.service"))
    );
    t.put(
        "/etc/systemd/system/c.service",
        "[Service]\nKillMode=mixed\n",
    );
    let u = t.load("c.service");
    assert_eq!(u.setting("Service", "KillMode").unwrap().value, "mixed");
    t.link("/run/systemd/transient/c.service", "/dev/null");
    let u = t.load("c.service");
    assert!(u.masked && u.assignments.is_empty(), "{u:?}");
    assert!(load(&t.host(), "absent.service").unwrap().is_none());
}

#[test]
fn an_alias_is_followed_inside_the_root_and_a_loop_is_refused() {
    let t = Fixture::new();
    t.put(
        "/usr/lib/systemd/system/real.service",
        "[Service]\nKillMode=none\n",
    );
    // absolute: the image's /usr, never the host's
    t.link(
        "/etc/systemd/system/alias.service",
        "/usr/lib/systemd/system/real.service",
    );
    let u = t.load("alias.service");
    assert_eq!(
        u.fragment.as_deref(),
        Some(Path::new("/usr/lib/systemd/system/real.service"))
    );
    assert_eq!(u.setting("Service", "KillMode").unwrap().value, "none");
    t.link(
        "/etc/systemd/system/loop.service",
        "/etc/systemd/system/loop.service",
    );
    let e = load(&t.host(), "loop.service").unwrap_err();
    assert!(e.contains("symlinks; not followed"), "{e}");
}

#[test]
fn dropins_apply_by_file_name_and_the_first_on_the_path_wins() {
    let t = Fixture::new();
    t.put(
        "/lib/systemd/system/k3s-agent.service",
        "[Service]\nExecStartPre=/a\nKillMode=process\n",
    )
    .put(
        "/lib/systemd/system/k3s-agent.service.d/10-x.conf",
        "[Service]\nExecStartPre=/from-lib\n",
    )
    .put(
        "/etc/systemd/system/k3s-agent.service.d/10-x.conf",
        "[Service]\nExecStartPre=/from-etc\n",
    )
    .put(
        "/etc/systemd/system/k3s-.service.d/05-prefix.conf",
        "[Service]\nExecStartPre=/prefix\n",
    )
    .put(
        "/run/systemd/system/service.d/99-all.conf",
        "[Service]\nKillMode=\n",
    )
    .put(
        "/etc/systemd/system/k3s-agent.service.d/README",
        "not a drop-in\n",
    );
    let u = t.load("k3s-agent.service");
    assert_eq!(
        values(u.list("Service", "ExecStartPre")),
        ["/a", "/prefix", "/from-etc"]
    );
    // the empty KillMode= of the last drop-in resets it to the default
    assert_eq!(u.setting("Service", "KillMode"), None);
    // a /dev/null drop-in of the same name removes the packaged one
    t.link("/run/systemd/transient/service.d/99-all.conf", "/dev/null");
    let u = t.load("k3s-agent.service");
    assert_eq!(u.setting("Service", "KillMode").unwrap().value, "process");
    assert_eq!(u.dropins.len(), 2, "{:?}", u.dropins);
}

#[test]
fn an_empty_assignment_resets_a_list() {
    let t = Fixture::new();
    t.put(
        "/lib/systemd/system/c.service",
        "[Service]\nExecStartPre=/a\nExecStartPre=/b\n",
    )
    .put(
        "/etc/systemd/system/c.service.d/1.conf",
        "[Service]\nExecStartPre=\nExecStartPre=/c\n",
    );
    assert_eq!(
        values(t.load("c.service").list("Service", "ExecStartPre")),
        ["/c"]
    );
}

#[test]
fn a_fifo_drop_in_is_refused_without_blocking() {
    let t = Fixture::new();
    t.put("/lib/systemd/system/c.service", "[Service]\n");
    let fifo = t.at("/etc/systemd/system/c.service.d/1.conf");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let e = load(&t.host(), "c.service").unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn services_are_listed_by_prefix_once() {
    let t = Fixture::new();
    t.put("/lib/systemd/system/k3s.service", "")
        .put("/etc/systemd/system/k3s.service", "")
        .put("/etc/systemd/system/rke2-agent.service", "")
        .put("/etc/systemd/system/k3s.timer", "")
        .put("/etc/systemd/system/kubelet.service", "");
    assert_eq!(
        services_named(&t.host(), &["k3s", "rke2"]),
        ["k3s.service", "rke2-agent.service"]
    );
}

#[test]
fn a_linked_directory_on_the_way_is_resolved_inside_the_root() {
    let t = Fixture::new();
    // an image whose /etc/systemd/system is a link to an absolute path: the image's own
    // /srv/units, never the host's directory of that name
    t.put("/srv/units/c.service", "[Service]\nKillMode=process\n");
    t.put(
        "/srv/units/c.service.d/1.conf",
        "[Service]\nKillMode=mixed\n",
    );
    std::fs::create_dir_all(t.at("/etc/systemd")).unwrap();
    t.link("/etc/systemd/system", "/srv/units");
    let u = t.load("c.service");
    assert_eq!(
        u.fragment.as_deref(),
        Some(Path::new("/etc/systemd/system/c.service"))
    );
    assert_eq!(u.setting("Service", "KillMode").unwrap().value, "mixed");
    // a link that climbs out with `..` stops at the root
    t.put(
        "/lib/systemd/system/d.service",
        "[Service]\nKillMode=none\n",
    );
    t.link(
        "/etc/systemd/system.control",
        "../../../../../../../../lib/systemd/system",
    );
    let d = t.load("d.service");
    assert_eq!(d.setting("Service", "KillMode").unwrap().value, "none");
}

/// A budget charges each file and assignment; past it the parse stops (no more is
/// allocated), the load fails naming the limit and the unit, and so does every later one.
#[test]
fn a_budget_bounds_what_loading_reads_and_keeps() {
    let f = Fixture::new();
    f.put("/etc/systemd/system/a.service", "[Service]\nA=1\nB=2\n")
        .put("/etc/systemd/system/a.service.d/x.conf", "[Service]\nC=3\n")
        .put("/etc/systemd/system/many.service", &"X=y\n".repeat(100));
    let tree = f.host();
    let mut budget = Budget::new(1 << 20, 10);
    let a = load_within(&tree, "a.service", &mut budget)
        .unwrap()
        .unwrap();
    assert_eq!(a.assignments.len(), 3);
    assert_eq!((budget.files, budget.assignments), (2, 3));
    let e = load_within(&tree, "many.service", &mut budget).unwrap_err();
    assert!(
        e.contains("many.service") && e.contains("10 assignments"),
        "{e}"
    );
    assert_eq!(budget.assignments, 10, "the parse stopped at the limit");
    assert_eq!(load_within(&tree, "a.service", &mut budget).unwrap_err(), e);
    let mut bytes = Budget::new(20, 1000);
    let e = load_within(&tree, "many.service", &mut bytes).unwrap_err();
    assert!(e.contains("20 bytes"), "{e}");
}

/// systemd's `service_verify()`: each unit checked here against what
/// `systemd-analyze verify` (systemd 252) says of the same file.
#[test]
fn a_service_systemd_refuses_to_load_is_named_with_its_reason() {
    let refusal = |text: &str| {
        let f = Fixture::new();
        f.put("/usr/lib/systemd/system/k.service", text);
        f.load("k.service").refusal()
    };
    let two = "[Service]\nExecStart=/bin/true\nExecStart=/bin/false\n";
    assert!(refusal(two)
        .unwrap()
        .contains("more than one ExecStart= setting"));
    let reset = "[Service]\nExecStart=/bin/true\nExecStart=\nExecStart=/bin/false\n";
    assert_eq!(refusal(reset), None, "an empty ExecStart= resets the list");
    assert_eq!(
        refusal(&format!("[Service]\nType=oneshot\n{}", &two[10..])),
        None
    );
    let none = refusal("[Service]\nExecStartPre=/bin/true\n").unwrap();
    assert!(
        none.contains("Service has no ExecStart=, ExecStop=, or SuccessAction=."),
        "{none}"
    );
    let stop_only = refusal("[Service]\nExecStop=/bin/true\n").unwrap();
    assert!(
        stop_only.contains("does not have RemainAfterExit=yes set"),
        "{stop_only}"
    );
    assert_eq!(
        refusal("[Service]\nExecStop=/bin/true\nRemainAfterExit=yes\n"),
        None
    );
}
