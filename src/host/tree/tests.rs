use super::*;
use std::os::unix::fs::symlink;

fn fixture() -> (tempfile::TempDir, Tree) {
    let dir = tempfile::tempdir().unwrap();
    let tree = Tree::open(dir.path()).unwrap();
    (dir, tree)
}

fn text(tree: &Tree, path: &str) -> Option<String> {
    tree.read(Path::new(path), 1 << 10)
        .unwrap()
        .map(|(b, _)| String::from_utf8(b).unwrap())
}

#[test]
fn absolute_and_climbing_links_stay_inside_the_tree() {
    let (dir, tree) = fixture();
    let d = dir.path();
    std::fs::create_dir_all(d.join("etc/sub")).unwrap();
    std::fs::write(d.join("etc/hostname"), "image\n").unwrap();
    // an absolute link to a file every host has: the image's copy, or nothing
    symlink("/etc/hostname", d.join("etc/sub/abs")).unwrap();
    symlink("../../../../../etc/hostname", d.join("etc/sub/climb")).unwrap();
    symlink("/proc/self/root/etc/passwd", d.join("etc/sub/proc")).unwrap();
    assert_eq!(text(&tree, "/etc/sub/abs").as_deref(), Some("image\n"));
    assert_eq!(text(&tree, "/etc/sub/climb").as_deref(), Some("image\n"));
    assert_eq!(text(&tree, "/etc/sub/proc"), None);
    assert_eq!(
        text(&tree, "/../../etc/hostname").as_deref(),
        Some("image\n")
    );
}

#[test]
fn a_linked_directory_is_resolved_inside_the_tree() {
    let (dir, tree) = fixture();
    let d = dir.path();
    std::fs::create_dir_all(d.join("srv/etc")).unwrap();
    std::fs::write(d.join("srv/etc/passwd"), "image's\n").unwrap();
    // /etc is a link to /srv/etc: `/etc/passwd` is the image's, never the host's
    symlink("/srv/etc", d.join("etc")).unwrap();
    assert_eq!(text(&tree, "/etc/passwd").as_deref(), Some("image's\n"));
    assert_eq!(tree.list(Path::new("/etc")).unwrap(), ["passwd"]);
    let m = tree.lstat(Path::new("/etc")).unwrap().unwrap();
    assert_eq!(m.kind, Kind::Link);
    assert_eq!(
        tree.read_link(Path::new("/etc")).unwrap().as_deref(),
        Some(Path::new("/srv/etc"))
    );
}

#[test]
fn loops_fifos_and_big_files_are_refused_without_blocking() {
    let (dir, tree) = fixture();
    let d = dir.path();
    symlink("/a", d.join("b")).unwrap();
    symlink("/b", d.join("a")).unwrap();
    let e = tree.read(Path::new("/a"), 10).unwrap_err();
    assert!(e.contains("more than 40 symlinks"), "{e}");
    nix::unistd::mkfifo(&d.join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
    let e = tree.read(Path::new("/fifo"), 10).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
    std::fs::write(d.join("big"), vec![b'x'; 11]).unwrap();
    let e = tree.read(Path::new("/big"), 10).unwrap_err();
    assert!(e.contains("larger than 10 bytes"), "{e}");
    assert_eq!(text(&tree, "/missing/file"), None);
    std::fs::write(d.join("file"), "x").unwrap();
    assert_eq!(
        text(&tree, "/file/below"),
        None,
        "a file is not a directory"
    );
}

#[test]
fn the_tree_owner_and_file_owners_are_reported() {
    let (dir, tree) = fixture();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    let (_, m) = tree.open_file(Path::new("/f")).unwrap().unwrap();
    assert_eq!(m.uid, nix::unistd::geteuid().as_raw());
    assert_eq!(tree.owner(), nix::unistd::geteuid().as_raw());
    assert_eq!(m.kind, Kind::File);
    assert_eq!(m.len, 1);
}
