//! Checked against the kernel's own mount table on this machine: every mount the healthy
//! path may take from `statmount` must be the entry the table holds, field by field.

use super::*;
use crate::host::mountinfo::MountTable;

fn table() -> MountTable {
    MountTable::read(Path::new("/proc/self/mountinfo")).unwrap()
}

/// The kernel this runs on answers `statmount` with a mount's source (Linux 6.15 and
/// later); the comparisons below prove nothing on an older one.
fn kernel_answers() -> bool {
    mount_holding(Path::new("/"), false).is_some()
}

#[test]
fn each_mount_statmount_describes_is_the_tables_entry_field_by_field() {
    if !kernel_answers() {
        eprintln!("this kernel's statmount does not give a mount's source: nothing to compare");
        return;
    }
    let table = table();
    let mut compared = Vec::new();
    for expected in &table.entries {
        // the topmost mount at a point is the one a path reaches
        if table.at(&expected.mount_point) != Some(expected) {
            continue;
        }
        let Some(got) = mount_at(&expected.mount_point, false) else {
            continue; // escaped, a subtype: the table's to say
        };
        let judged = mount_at(&expected.mount_point, true);
        assert_eq!(
            judged.is_none(),
            expected.is_read_only(),
            "a read-only mount is left to the table: {expected:?}"
        );
        assert_eq!(
            &got,
            expected,
            "statmount of {}",
            expected.mount_point.display()
        );
        compared.push(expected.mount_point.clone());
    }
    eprintln!(
        "compared {} of {} mounts",
        compared.len(),
        table.entries.len()
    );
    assert!(
        compared.iter().any(|p| p == Path::new("/")),
        "the root mount was not described: {table:?}"
    );
}

#[test]
fn a_directory_below_a_mount_point_is_not_a_mount_of_its_own() {
    if !kernel_answers() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let holder = mount_holding(dir.path(), false).expect("the temporary directory's mount");
    assert!(
        mount_at(dir.path(), false).is_none(),
        "{} is no mount point",
        dir.path().display()
    );
    let table = table();
    let expected = table.containing(dir.path()).unwrap();
    assert_eq!(holder.mount_id, expected.mount_id);
    assert_eq!(mount_id(dir.path()), Some(expected.mount_id));
}

#[test]
fn paths_on_one_mount_give_it_once_and_a_missing_path_gives_no_table() {
    if !kernel_answers() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::write(&a, "").unwrap();
    std::fs::write(&b, "").unwrap();
    let got = mounts_holding([a.as_path(), b.as_path(), Path::new("/")]).unwrap();
    assert!(
        got.partial,
        "a few mounts asked one by one are no whole table"
    );
    let table = table();
    let mut expected = vec![table.containing(&a).unwrap().mount_id];
    let root = table.containing(Path::new("/")).unwrap().mount_id;
    if !expected.contains(&root) {
        expected.push(root);
    }
    let ids: Vec<u64> = got.entries.iter().map(|m| m.mount_id).collect();
    assert_eq!(ids, expected);
    // a database that is gone: the caller reads the whole table
    let gone = dir.path().join("gone");
    assert_eq!(mounts_holding([a.as_path(), gone.as_path()]), None);
}

#[test]
fn options_are_spelled_as_the_table_spells_them() {
    let attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    assert_eq!(
        mount_options(attr),
        ["rw", "nosuid", "nodev", "noexec", "relatime"]
    );
    assert_eq!(
        mount_options(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOATIME),
        ["ro", "noatime"]
    );
    assert_eq!(mount_options(0x20), ["rw"], "strictatime is not shown");
    assert_eq!(super_options(0, ""), ["rw"]);
    assert_eq!(
        super_options(SB_RDONLY | SB_LAZYTIME, "errors=remount-ro"),
        ["ro", "lazytime", "errors=remount-ro"]
    );
}

#[test]
fn a_partial_table_answers_only_for_a_file_on_one_of_its_mounts() {
    if !kernel_answers() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("meta.db");
    std::fs::write(&file, "").unwrap();
    let holder = mount_holding(dir.path(), false).unwrap();
    let id = holder.mount_id;
    let few = MountTable::of_mounts(vec![holder]);
    assert!(answers_for(&few, &file, Some(id)));
    assert!(
        !answers_for(&few, &file, Some(id + 1_000_000)),
        "a mount not in it"
    );
    assert!(!answers_for(&few, &file, None), "no mount id to compare");
    assert!(!answers_for(
        &MountTable::of_mounts(vec![]),
        &file,
        Some(id)
    ));
}
