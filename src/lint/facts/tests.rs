use super::*;

/// cloud-init's configs are charged to the units' budget: past it the rest of them
/// is not read, and the one past it says why.
#[test]
fn cloud_configs_share_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("etc/cloud/cloud.cfg.d");
    std::fs::create_dir_all(&d).unwrap();
    for name in ["a.cfg", "b.cfg", "c.cfg"] {
        std::fs::write(d.join(name), "# thirty bytes of a comment..\n").unwrap();
    }
    let tree = Tree::open(dir.path()).unwrap();
    let mut budget = units::Budget::new(70, 100);
    let read = clouds(&tree, &mut budget);
    assert_eq!(read.len(), 3, "a, b, then c past the budget: {read:?}");
    assert!(read[..2].iter().all(|s| s.read.is_ok()), "{read:?}");
    let e = read[2].read.as_ref().unwrap_err();
    assert!(e.contains("c.cfg") && e.contains("70 bytes"), "{e}");
    assert_eq!(budget.exceeded.as_ref(), Some(e));
}
