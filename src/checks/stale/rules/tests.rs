use super::*;
use crate::checks::stale::facts::{is_metadata_db, FileId};
use crate::report::Status;
use std::path::PathBuf;

const ROOT: &str = "/var/lib/containerd";

fn mounts() -> MountTable {
    MountTable::parse(
        "21 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw\n\
         30 21 7:3 / /var/lib/containerd rw,relatime - ext4 /dev/loop3 rw\n",
    )
    .unwrap()
}

fn db(link: &str, open: (u64, u64), now: Result<(u64, u64), &str>, mnt: u64) -> OpenDb {
    OpenDb {
        fd: 7,
        link: link.into(),
        open: Ok(FileId {
            dev: open.0,
            ino: open.1,
        }),
        expected: PathBuf::from(ROOT).join("io.containerd.metadata.v1.bolt/meta.db"),
        now: now
            .map(|(dev, ino)| FileId { dev, ino })
            .map_err(str::to_string),
        mnt_id: Some(mnt),
        resolved: None,
    }
}

fn facts(dbs: Vec<OpenDb>) -> StaleFacts {
    StaleFacts {
        pid: Ok(42),
        comm: "containerd".into(),
        root: ROOT.into(),
        other_root: None,
        dbs: Ok(dbs),
        mounts: Ok(mounts().into()),
    }
}

const META: &str = "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db";

#[test]
fn table() {
    let loop3 = 7 << 8 | 3;
    let vda1 = 254 << 8 | 1;
    let cases: Vec<(&str, OpenDb, Status, &str)> = vec![
        (
            "healthy",
            db(META, (loop3, 12), Ok((loop3, 12)), 30),
            Status::Pass,
            "holds 1",
        ),
        (
            "tkgs: volume mounted over a running containerd",
            db(META, (vda1, 99), Ok((loop3, 12)), 21),
            Status::Fail,
            "mounted over",
        ),
        (
            "empty volume mounted over",
            db(
                META,
                (vda1, 99),
                Err("missing (No such file or directory)"),
                21,
            ),
            Status::Fail,
            "is now missing",
        ),
        (
            "lazily unmounted: link text relative to the detached fs",
            db(
                "/io.containerd.metadata.v1.bolt/meta.db",
                (loop3, 12),
                Ok((vda1, 5)),
                30,
            ),
            Status::Fail,
            "detached",
        ),
        (
            "lazily unmounted: mnt_id gone",
            db(META, (loop3, 12), Ok((loop3, 12)), 77),
            Status::Fail,
            "lazily unmounted",
        ),
        (
            "deleted file",
            db(
                &format!("{META} (deleted)"),
                (loop3, 12),
                Ok((loop3, 13)),
                30,
            ),
            Status::Fail,
            "deleted",
        ),
        (
            "bind mount of the directory onto itself",
            db(META, (loop3, 12), Ok((loop3, 12)), 21),
            Status::Warn,
            "another mount",
        ),
    ];
    for (name, d, want, text) in cases {
        let (f, restart) = evaluate(Some(&facts(vec![d])));
        assert_eq!(f.status, want, "{name}: {f:?}");
        assert_eq!(restart, want == Status::Fail, "{name}");
        let all = format!("{} {}", f.summary, f.evidence.join(" "));
        assert!(all.contains(text), "{name}: {all:?} lacks {text:?}");
    }
}

#[test]
fn one_stale_database_among_current_ones_is_stale() {
    let loop3 = 7 << 8 | 3;
    let mut snap = db(META, (1, 1), Ok((loop3, 40)), 21);
    snap.link = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/metadata.db".into();
    let (f, restart) = evaluate(Some(&facts(vec![
        db(META, (loop3, 12), Ok((loop3, 12)), 30),
        snap,
    ])));
    assert_eq!(f.status, Status::Fail);
    assert!(restart);
    assert_eq!(f.evidence.len(), 1, "{f:?}");
}

#[test]
fn a_database_reached_through_a_symlink_is_judged_by_where_it_resolves_now() {
    let loop3 = 7 << 8 | 3;
    // The snapshotter directory is a symlink: the kernel shows the real path.
    let real = "/srv/fast/overlayfs/metadata.db";
    let mut snap = db(real, (loop3, 40), Ok((loop3, 40)), 30);
    snap.resolved = Some(real.into());
    let (f, restart) = evaluate(Some(&facts(vec![snap.clone()])));
    assert_eq!((f.status, restart), (Status::Pass, false), "{f:?}");
    // Where the path resolves now is not the open file's path: detached, stale.
    snap.resolved = Some("/srv/other/metadata.db".into());
    let (f, restart) = evaluate(Some(&facts(vec![snap])));
    assert_eq!((f.status, restart), (Status::Fail, true), "{f:?}");
}

#[test]
fn a_containerd_on_another_root_than_the_guards_is_said_never_restarted() {
    let mut f = facts(vec![db(
        "/elsewhere/io.containerd.metadata.v1.bolt/meta.db",
        (1, 2),
        Ok((1, 2)),
        30,
    )]);
    f.other_root = Some(
        "pid 42 uses /elsewhere as its root (its command line and config), not /var/lib/containerd"
            .into(),
    );
    let (finding, restart) = evaluate(Some(&f));
    assert_eq!(
        (finding.status, restart),
        (Status::Warn, false),
        "{finding:?}"
    );
    assert!(
        finding.evidence[0].contains("uses /elsewhere"),
        "{finding:?}"
    );
}

#[test]
fn unknown_is_a_warning_never_a_restart() {
    let mut f = facts(vec![]);
    let (finding, restart) = evaluate(Some(&f));
    assert_eq!(finding.status, Status::Warn);
    assert!(!restart);
    f.pid = Err("no peer credentials".into());
    let (finding, restart) = evaluate(Some(&f));
    assert_eq!(finding.status, Status::Warn);
    assert!(!restart);
}

#[test]
fn metadata_db_names() {
    for (p, want) in [
        ("io.containerd.metadata.v1.bolt/meta.db", true),
        ("io.containerd.snapshotter.v1.overlayfs/metadata.db", true),
        ("io.containerd.snapshotter.v1.native/metadata.db", true),
        ("io.containerd.content.v1.content/ingest/x", false),
        ("meta.db", false),
    ] {
        assert_eq!(is_metadata_db(Path::new(p)), want, "{p}");
    }
}

/// Facts captured from a real containerd 1.6.20 on this kind of machine (a loop-mounted
/// ext4 volume; see tests/fixtures/stale/README): `fds` has one line per open database,
/// `fd<TAB>link<TAB>open dev ino<TAB>now dev ino|missing<TAB>mnt_id`.
fn captured(name: &str) -> StaleFacts {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stale")
        .join(name);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let id = |t: &str| -> Result<FileId, String> {
        let mut it = t.split_whitespace();
        match (it.next(), it.next()) {
            (Some(d), Some(i)) => Ok(FileId {
                dev: d.parse().unwrap(),
                ino: i.parse().unwrap(),
            }),
            _ => Err(format!("{t} (No such file or directory)")),
        }
    };
    let dbs = read("fds")
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let link = f[1].to_string();
            let rel: PathBuf = link
                .trim_end_matches(" (deleted)")
                .rsplitn(3, '/')
                .take(2)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            OpenDb {
                fd: f[0].parse().unwrap(),
                expected: PathBuf::from(ROOT).join(rel),
                link,
                open: id(f[2]),
                now: id(f[3]),
                mnt_id: f[4].parse().ok(),
                resolved: None,
            }
        })
        .collect();
    StaleFacts {
        pid: Ok(4242),
        comm: "containerd".into(),
        root: ROOT.into(),
        other_root: None,
        dbs: Ok(dbs),
        mounts: MountTable::parse(&read("mountinfo")).map(Into::into),
    }
}

#[test]
fn captured_from_a_real_containerd() {
    for (name, want, text) in [
        ("healthy", Status::Pass, "holds 1"),
        ("tkgs-mounted-over", Status::Fail, "mounted over"),
        ("lazily-unmounted", Status::Fail, "detached"),
    ] {
        let (f, restart) = evaluate(Some(&captured(name)));
        assert_eq!(f.status, want, "{name}: {f:?}");
        assert_eq!(restart, want == Status::Fail, "{name}");
        let all = format!("{} {}", f.summary, f.evidence.join(" "));
        assert!(all.contains(text), "{name}: {all}");
    }
}
