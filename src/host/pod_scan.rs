//! The processes in kubelet container cgroups, shared by every family that asks.
//!
//! Where kubelet's tree sits at the top of a cgroup hierarchy (`kubepods` or
//! `kubepods.slice`, the cgroupfs and systemd drivers' names), the look lists that tree's
//! directories (a few per pod) and reads a container's `cgroup.procs` only when asked
//! about it: the hygiene families ask only about containers without a live task, so a
//! healthy node reads no process at all. Elsewhere (a tree below a prefix, no tree) it
//! falls back to one pass over `/proc`: one read of `/proc/PID/cgroup` per process
//! ([`ProcFiles`]), which costs about 40 µs a process on a cgroup v1 host
//! (docs/performance.md).

use super::cgroup::{container_cgroup_of, parse_container_cgroup, parse_procs, ContainerCgroup};
use super::proc::{pids, CGROUP_CAP};
use super::proc_files::ProcFiles;
use super::Host;
use rustix::fs::{openat, FileType, Mode, OFlags, RawDir, CWD};
use std::collections::BTreeSet;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A process in a container cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InPod {
    pub pid: i32,
    pub cgroup: ContainerCgroup,
}

/// The container cgroups on this host, as one look found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodCgroups {
    /// kubelet's tree in `hierarchy` (a cgroup mount): every container cgroup in it.
    Tree {
        hierarchy: PathBuf,
        cgroups: Vec<ContainerCgroup>,
    },
    /// No tree at a hierarchy's top: every process in a container cgroup, from `/proc`.
    Scanned(Vec<InPod>),
}

/// The names kubelet gives its tree at the top of a hierarchy.
const KUBEPODS: [&str; 2] = ["kubepods", "kubepods.slice"];
/// Container cgroups sit at most this deep below the tree's top (QoS class, pod, container).
const DEPTH: usize = 3;
/// At most this many directories are listed; more (no node has them) and `/proc` is read.
const TREE_CAP: usize = 1 << 16;
/// At most this much of one `cgroup.procs` is read (about 100,000 pids).
const PROCS_CAP: u64 = 1 << 20;

/// One look at the container cgroups: kubelet's tree when it is found, else `/proc`.
pub fn look(host: &Host) -> PodCgroups {
    match hierarchy(host).and_then(|h| Some((tree(&h)?, h))) {
        Some((cgroups, hierarchy)) => PodCgroups::Tree { hierarchy, cgroups },
        None => PodCgroups::Scanned(scan(host)),
    }
}

impl PodCgroups {
    /// How many container cgroups the look saw (with `/proc`: those holding a process).
    pub fn count(&self) -> usize {
        match self {
            PodCgroups::Tree { cgroups, .. } => cgroups.len(),
            PodCgroups::Scanned(procs) => {
                let paths: BTreeSet<&str> = procs.iter().map(|p| p.cgroup.path.as_str()).collect();
                paths.len()
            }
        }
    }

    /// The processes in every container cgroup but those of `skip` (container ids): from
    /// the tree, only the other containers' `cgroup.procs` are read.
    pub fn processes(&self, skip: &BTreeSet<&str>) -> Vec<InPod> {
        let wanted = |c: &ContainerCgroup| !skip.contains(c.container_id.as_str());
        match self {
            PodCgroups::Scanned(procs) => procs
                .iter()
                .filter(|p| wanted(&p.cgroup))
                .cloned()
                .collect(),
            PodCgroups::Tree { hierarchy, cgroups } => cgroups
                .iter()
                .filter(|c| wanted(c))
                .flat_map(|c| {
                    let dir = hierarchy.join(c.path.trim_start_matches('/'));
                    let pids = procs_in(&dir);
                    pids.into_iter().map(|pid| InPod {
                        pid,
                        cgroup: c.clone(),
                    })
                })
                .collect(),
        }
    }
}

/// The cgroup mount whose top holds kubelet's tree: the unified one on a cgroup v2 host,
/// else the first v1 hierarchy that has it (runc puts a container in every one).
fn hierarchy(host: &Host) -> Option<PathBuf> {
    let base = host.sys("fs/cgroup");
    let candidates = match base.join("cgroup.controllers").exists() {
        true => vec![base],
        false => ["pids", "memory", "cpu,cpuacct", "cpu", "systemd", "unified"]
            .map(|h| base.join(h))
            .into(),
    };
    candidates
        .into_iter()
        .find(|h| KUBEPODS.iter().any(|k| h.join(k).is_dir()))
}

/// Every container cgroup of kubelet's tree in `hierarchy`; `None` when there is none or
/// it is over [`TREE_CAP`] directories.
fn tree(hierarchy: &Path) -> Option<Vec<ContainerCgroup>> {
    let (mut out, mut budget) = (Vec::new(), TREE_CAP);
    let mut found = false;
    for top in KUBEPODS {
        if let Some(dir) = open_dir(CWD, hierarchy.join(top)) {
            found = true;
            walk(&dir, &format!("/{top}"), DEPTH, &mut out, &mut budget)?;
        }
    }
    found.then_some(out)
}

/// Lists the open directory `dir` (the cgroup `rel`) and what is below it, `depth` levels
/// down, into `out`. A directory that cannot be opened (a pod removed meanwhile) is
/// skipped; `None` when the budget is spent. Each directory below is opened relative to
/// its parent: one lookup, not the whole path's.
fn walk(
    dir: &OwnedFd,
    rel: &str,
    depth: usize,
    out: &mut Vec<ContainerCgroup>,
    budget: &mut usize,
) -> Option<()> {
    for name in subdirectories(dir, budget)? {
        let Ok(name) = name.into_string() else {
            continue;
        };
        let path = format!("{rel}/{name}");
        match parse_container_cgroup(&path) {
            Some(cgroup) => out.push(cgroup),
            None if depth > 1 => {
                if let Some(below) = open_dir(dir, name.as_str()) {
                    walk(&below, &path, depth - 1, out, budget)?;
                }
            }
            None => {}
        }
    }
    Some(())
}

/// Opens a directory at `path` (relative to `at`) for listing: never through a symlink,
/// never blocking.
fn open_dir<P: rustix::path::Arg>(at: impl AsFd, path: P) -> Option<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    openat(at, path, flags | OFlags::NONBLOCK, Mode::empty()).ok()
}

/// The names of the directories in `dir`, from `getdents64` alone: a cgroup filesystem
/// has no symlinks and gives each entry's type, so nothing is stat'ed (`opendir` would
/// add an `fstat` a directory). A listing that fails midway gives what it read; `None`
/// when the budget is spent.
fn subdirectories(dir: &OwnedFd, budget: &mut usize) -> Option<Vec<std::ffi::CString>> {
    // (a cgroup's name is at most 255 bytes: any entry fits)
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
    let mut entries = RawDir::new(dir, &mut buf);
    let mut names = Vec::new();
    while let Some(Ok(entry)) = entries.next() {
        let name = entry.file_name();
        if entry.file_type() != FileType::Directory || name == c"." || name == c".." {
            continue;
        }
        *budget = budget.checked_sub(1)?;
        names.push(name.to_owned());
    }
    Some(names)
}

/// The pids in a cgroup directory's `cgroup.procs` (read bounded: whole lines of the
/// first [`PROCS_CAP`] bytes); none when it is gone. Pids outside this PID namespace are
/// not shown (v1) or shown as 0 (v2), and left out.
fn procs_in(dir: &Path) -> Vec<i32> {
    let mut text = Vec::new();
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(dir.join("cgroup.procs"))
        .and_then(|f| f.take(PROCS_CAP).read_to_end(&mut text));
    if read.is_err() {
        return Vec::new();
    }
    let whole = &text[..text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)];
    let mut pids = parse_procs(&String::from_utf8_lossy(whole));
    pids.retain(|pid| *pid > 0);
    pids
}

/// Every process in a kubelet container cgroup, by pid: one pass over `/proc`.
pub fn scan(host: &Host) -> Vec<InPod> {
    let mut files = ProcFiles::new(host, "cgroup", CGROUP_CAP);
    pids(host)
        .into_iter()
        .filter_map(|pid| {
            let cgroup = container_cgroup_of(&files.read(host, pid)?)?;
            Some(InPod { pid, cgroup })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    /// A fixture host with cgroup directories `dirs` (below `sys/fs/cgroup`), each with the
    /// `cgroup.procs` given.
    fn host_with(dirs: &[(&str, &str)]) -> (tempfile::TempDir, Host) {
        let t = tempfile::tempdir().unwrap();
        for (dir, procs) in dirs {
            let d = t.path().join("sys/fs/cgroup").join(dir);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup.procs"), procs).unwrap();
        }
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        let host = Host::at(t.path());
        (t, host)
    }

    #[test]
    fn kubelets_tree_is_listed_and_only_the_asked_containers_are_read() {
        let (_t, host) = host_with(&[
            (
                &format!("pids/kubepods/besteffort/poduid-1/{A}"),
                "10\n11\n",
            ),
            (&format!("pids/kubepods/poduid-2/{B}"), "20\n"),
            ("pids/kubepods/besteffort/poduid-1", ""),
            ("pids/system.slice/x", "30\n"),
        ]);
        let look = look(&host);
        let PodCgroups::Tree { cgroups, .. } = &look else {
            panic!("no tree found: {look:?}")
        };
        let mut ids: Vec<&str> = cgroups.iter().map(|c| c.container_id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, [A, B]);
        assert_eq!(look.count(), 2);
        let skip: BTreeSet<&str> = [A].into();
        let procs = look.processes(&skip);
        assert_eq!(procs.len(), 1, "{procs:?}");
        assert_eq!(
            (procs[0].pid, procs[0].cgroup.pod_uid.as_str()),
            (20, "uid-2")
        );
        assert_eq!(look.processes(&BTreeSet::new()).len(), 3);
    }

    #[test]
    fn the_systemd_drivers_tree_is_found_too() {
        let scope = format!(
            "systemd/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poduid_3.slice/cri-containerd-{A}.scope"
        );
        let (_t, host) = host_with(&[(&scope, "40\n0\n")]);
        let procs = look(&host).processes(&BTreeSet::new());
        assert_eq!(
            procs.len(),
            1,
            "the 0 (a pid of another namespace) is left out: {procs:?}"
        );
        assert_eq!(procs[0].cgroup.pod_uid, "uid-3");
        assert!(procs[0].cgroup.path.starts_with("/kubepods.slice/"));
    }

    #[test]
    fn without_a_tree_at_a_hierarchys_top_every_processs_cgroup_is_read() {
        let (t, host) = host_with(&[(&format!("pids/k3s/kubepods/poduid-1/{A}"), "10\n")]);
        let pid = t.path().join("proc/10");
        std::fs::create_dir_all(&pid).unwrap();
        std::fs::write(
            pid.join("cgroup"),
            format!("3:pids:/k3s/kubepods/poduid-1/{A}\n"),
        )
        .unwrap();
        let look = look(&host);
        assert!(matches!(look, PodCgroups::Scanned(_)), "{look:?}");
        let procs = look.processes(&BTreeSet::new());
        assert_eq!(procs.len(), 1, "{procs:?}");
        assert_eq!(procs[0].cgroup.path, format!("/k3s/kubepods/poduid-1/{A}"));
    }

    #[test]
    fn a_truncated_cgroup_procs_gives_its_whole_lines_only() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("cgroup.procs"), "5\n6\n7").unwrap();
        assert_eq!(procs_in(t.path()), [5, 6]);
        assert!(procs_in(&t.path().join("gone")).is_empty());
    }
}
