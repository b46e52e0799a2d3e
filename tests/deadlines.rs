//! Every read and connect that can block has a deadline inside the command's own bound,
//! proven on real components as root: a unix socket at containerd's address whose listen
//! backlog is full (a hung containerd that no longer accepts), and an orphan candidate
//! holding a file open on a FUSE filesystem whose server stopped answering (what a dead
//! hard-mounted NFS server does to `stat`).

use testkit as support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{
    flock_is_free, random_uuid, root_or_skip, unique, FsKind, Guard, LoopVolume, Mount, TempRoot,
};

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
    t.write_guard_config_with(|c| {
        c.containerd_wait("2s")
            .volume_device(&format!("LABEL={label}"))
            .volume_wait("300ms")
    })
}

/// The bound each command must end within here: its own waits (300 ms for the volume, 2 s
/// for containerd) and a margin, far below "forever".
const BOUND: Duration = Duration::from_secs(15);

#[test]
fn a_containerd_socket_with_a_full_backlog_ends_volume_and_verify_within_their_bound() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
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

/// Runs `f` on a thread and waits at most `bound` for it: a call that blocks for good
/// fails the test instead of hanging it (the thread is left behind).
fn within<T: Send + 'static>(bound: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(bound)
        .unwrap_or_else(|_| panic!("did not return within {bound:?}"))
}

#[test]
fn peer_pid_of_a_socket_with_a_full_backlog_fails_within_its_bound_naming_it() {
    use containerd_guard::containerd::client::{peer_pid, ConnectError, PeerError};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("containerd.sock");
    let hung = FullBacklog::at(&socket);
    let s = socket.clone();
    let started = std::time::Instant::now();
    let answer = within(Duration::from_secs(10), move || peer_pid(&s));
    eprintln!(
        "peer_pid on a full backlog: {answer:?} after {:?}",
        started.elapsed()
    );
    let error = answer.expect_err("no peer can be read through a full backlog");
    assert!(
        matches!(error, PeerError::Connect(ConnectError::Busy { .. })),
        "{error:?}"
    );
    let error = error.to_string();
    assert!(error.contains(&socket.display().to_string()), "{error}");
    assert!(error.contains("does not accept"), "{error}");
    drop(hung);
    // An accepting listener: the peer is this process (SO_PEERCRED of the listener).
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("ok.sock")).unwrap();
    let ok = dir.path().join("ok.sock");
    let pid = within(Duration::from_secs(10), move || peer_pid(&ok));
    assert_eq!(pid.ok(), Some(std::process::id() as i32));
}

// ---- an orphan candidate holding a file on a hung FUSE filesystem -----------------------

/// `<linux/fuse.h>` opcodes this server answers (or must not answer).
const FUSE_LOOKUP: u32 = 1;
const FUSE_FORGET: u32 = 2;
const FUSE_GETATTR: u32 = 3;
const FUSE_OPEN: u32 = 14;
const FUSE_INIT: u32 = 26;
const FUSE_OPENDIR: u32 = 27;
const FUSE_INTERRUPT: u32 = 36;
const FUSE_BATCH_FORGET: u32 = 42;
/// `struct fuse_in_header`: len, opcode, unique, nodeid, uid, gid, pid, extlen, padding.
const IN_HEADER: usize = 40;
const ROOT_NODE: u64 = 1;
const FILE_NODE: u64 = 2;
const FILE_NAME: &str = "file";

/// A FUSE filesystem mounted straight on `/dev/fuse` (no fusermount3), served by a tiny
/// thread that answers INIT, LOOKUP, GETATTR and OPEN with nothing cached (entry_valid and
/// attr_valid 0, so every `stat` asks the server) until [`HungFuse::stop_answering`]: then
/// the next request is read and never answered, as a dead hard-mounted NFS server leaves
/// its callers. The device fd stays open (closing it would abort the connection).
struct HungFuse {
    dir: PathBuf,
    /// Kept open for the test's length: closing it would abort the connection.
    _device: std::sync::Arc<std::fs::File>,
    /// The connection number: the mount's anonymous device minor.
    connection: u32,
    /// Written to stop the server; it then reads nothing more.
    stop: std::os::unix::net::UnixStream,
    server: Option<std::thread::JoinHandle<()>>,
}

impl HungFuse {
    fn mount(dir: &Path) -> HungFuse {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(dir).unwrap();
        let device = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_CLOEXEC)
            .open("/dev/fuse")
            .expect("open /dev/fuse");
        let device = std::sync::Arc::new(device);
        let fd = device.as_raw_fd();
        let options = format!("fd={fd},rootmode=40000,user_id=0,group_id=0");
        nix::mount::mount(
            Some("guard-test"),
            dir,
            Some("fuse"),
            nix::mount::MsFlags::empty(),
            Some(options.as_str()),
        )
        .expect("mount fuse");
        let table =
            containerd_guard::host::mountinfo::MountTable::read(Path::new("/proc/self/mountinfo"))
                .unwrap();
        let connection = table.at(dir).expect("the fuse mount").dev.minor;
        let (stop, stopped) = std::os::unix::net::UnixStream::pair().unwrap();
        let serving = device.clone();
        let server = std::thread::spawn(move || serve(&serving, &stopped));
        HungFuse {
            dir: dir.to_path_buf(),
            _device: device,
            connection,
            stop,
            server: Some(server),
        }
    }

    fn file(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// From now on requests stay queued, unread: their callers wait as on a dead NFS
    /// server (killably: a request the server has read but not answered would make its
    /// caller unkillable, which no network filesystem does).
    fn stop_answering(&mut self) {
        use std::io::Write;
        (&self.stop).write_all(b"x").unwrap();
        self.server.take().unwrap().join().unwrap();
    }

    /// Aborts the connection (every waiting request fails with ENOTCONN): through fusectl,
    /// mounted privately when the host has not mounted it.
    fn abort(&self) {
        let n = self.connection;
        let host = PathBuf::from(format!("/sys/fs/fuse/connections/{n}/abort"));
        if host.exists() {
            let _ = std::fs::write(&host, "1");
            return;
        }
        let ctl = self.dir.with_extension("fusectl");
        std::fs::create_dir_all(&ctl).unwrap();
        let m = Mount::fs("fusectl", "none", &ctl, "");
        let _ = std::fs::write(ctl.join(format!("{n}/abort")), "1");
        drop(m);
        let _ = std::fs::remove_dir(&ctl);
    }
}

impl Drop for HungFuse {
    fn drop(&mut self) {
        self.abort();
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// The server loop: one request per read, one reply per request (none for FORGET and
/// INTERRUPT). Ends when the connection goes away or when `stop` becomes readable.
fn serve(mut device: &std::fs::File, stop: &std::os::unix::net::UnixStream) {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; 1 << 17];
    loop {
        let pollfd = |fd: i32| nix::libc::pollfd {
            fd,
            events: nix::libc::POLLIN,
            revents: 0,
        };
        let mut fds = [pollfd(device.as_raw_fd()), pollfd(stop.as_raw_fd())];
        // SAFETY: two valid pollfd structs, owned here for the call's length.
        if unsafe { nix::libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            continue; // EINTR
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents == 0 {
            continue;
        }
        let n = match device.read(&mut buf) {
            Ok(n) if n >= IN_HEADER => n,
            Ok(_) => return,
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => continue, // interrupted
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return, // ENODEV: aborted or unmounted
        };
        if let Some(out) = reply(&buf[..n]) {
            let _ = device.write_all(&out);
        }
    }
}

/// The reply to one request, `None` for those that get none.
fn reply(req: &[u8]) -> Option<Vec<u8>> {
    let opcode = u32::from_le_bytes(req[4..8].try_into().unwrap());
    let unique = u64::from_le_bytes(req[8..16].try_into().unwrap());
    let node = u64::from_le_bytes(req[16..24].try_into().unwrap());
    let body = &req[IN_HEADER..];
    let answer = match opcode {
        FUSE_FORGET | FUSE_BATCH_FORGET | FUSE_INTERRUPT => return None,
        FUSE_INIT => Ok(init_out(body)),
        FUSE_LOOKUP if node == ROOT_NODE && body.starts_with(b"file\0") => Ok(entry_out(FILE_NODE)),
        FUSE_LOOKUP => Err(nix::libc::ENOENT),
        FUSE_GETATTR => Ok(attr_out(node)),
        FUSE_OPEN | FUSE_OPENDIR => Ok(vec![0u8; 16]), // fuse_open_out: fh 0, no flags
        _ => Err(nix::libc::ENOSYS), // FLUSH, RELEASE...: "not implemented" is an answer
    };
    let (error, body) = match answer {
        Ok(b) => (0i32, b),
        Err(e) => (-e, Vec::new()),
    };
    let mut out = Vec::with_capacity(16 + body.len());
    out.extend(((16 + body.len()) as u32).to_le_bytes());
    out.extend(error.to_le_bytes());
    out.extend(unique.to_le_bytes());
    out.extend(body);
    Some(out)
}

/// `struct fuse_init_out` (64 bytes): protocol 7.31, max_readahead as asked, no flags.
fn init_out(init_in: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    b.extend(7u32.to_le_bytes());
    b.extend(31u32.to_le_bytes());
    b.extend(&init_in[8..12]); // max_readahead
    b.extend(0u32.to_le_bytes()); // flags
    b.extend(16u16.to_le_bytes()); // max_background
    b.extend(12u16.to_le_bytes()); // congestion_threshold
    b.extend(4096u32.to_le_bytes()); // max_write
    b.extend(1u32.to_le_bytes()); // time_gran
    b.resize(64, 0); // max_pages, map_alignment, flags2, unused
    b
}

/// `struct fuse_attr` (88 bytes) of the root directory or the file.
fn attr(node: u64) -> Vec<u8> {
    let mode: u32 = if node == ROOT_NODE {
        0o040755
    } else {
        0o100644
    };
    let mut b = Vec::with_capacity(88);
    b.extend(node.to_le_bytes()); // ino
    b.extend([0u8; 40]); // size, blocks, atime, mtime, ctime
    b.extend([0u8; 12]); // atimensec, mtimensec, ctimensec
    b.extend(mode.to_le_bytes());
    b.extend(1u32.to_le_bytes()); // nlink
    b.extend([0u8; 12]); // uid, gid, rdev
    b.extend(4096u32.to_le_bytes()); // blksize
    b.extend(0u32.to_le_bytes()); // flags
    b
}

/// `struct fuse_entry_out`: nodeid, generation, entry_valid 0, attr_valid 0, the attr.
fn entry_out(node: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(128);
    b.extend(node.to_le_bytes());
    b.extend([0u8; 32]); // generation, entry_valid, attr_valid, both nsec
    b.extend(attr(node));
    b
}

/// `struct fuse_attr_out`: attr_valid 0 (never cached), the attr.
fn attr_out(node: u64) -> Vec<u8> {
    let mut b = vec![0u8; 16];
    b.extend(attr(node));
    b
}

/// A process holding the FUSE file open (as its stdin) inside a kubelet container cgroup
/// whose container no containerd knows: an orphan candidate, as `tests/hygiene_orphans.rs` h02
/// makes one, without a pod. Killed and its cgroup removed on drop.
struct Holder {
    child: std::process::Child,
    pod_cgroup: String,
}

impl Holder {
    fn start(file: &Path) -> Holder {
        let opened = std::fs::File::open(file).expect("open the FUSE file");
        let child = std::process::Command::new("sleep")
            .arg("600")
            .stdin(opened)
            .spawn()
            .expect("spawn sleep");
        let pod_cgroup = format!("/kubepods/besteffort/pod{}", random_uuid());
        let cid = format!("{}{}", unique("", 32), unique("", 32));
        let hierarchy = support::hygiene::v1_hierarchy("pids")
            .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"));
        let dir = hierarchy.join(format!("{}/{cid}", &pod_cgroup[1..]));
        std::fs::create_dir_all(&dir).expect("container cgroup");
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).expect("join");
        Holder { child, pod_cgroup }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        support::hygiene::remove_cgroup_tree(&self.pod_cgroup);
    }
}

const HYGIENE_TOOLS: &[&str] = &["containerd", "ctr", "runc", "gcc", "sleep"];

/// Two tests here must not overlap: the proxy runs in this process, so the guard behind it
/// finds this process as the socket's peer and reads its descriptors (the stale check),
/// and the FUSE test holds a mount whose server stops answering.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn an_orphan_holding_a_file_on_a_hung_fuse_mount_is_not_killed_and_hygiene_ends_in_bound() {
    let Some(_root) = root_or_skip(HYGIENE_TOOLS) else {
        return;
    };
    let _alone = alone();
    let n = support::workload::HygieneNode::start();
    let cfg = n.t.write_guard_config();
    let mut fuse = HungFuse::mount(&n.t.path().join("fuse"));
    let holder = Holder::start(&fuse.file());
    fuse.stop_answering();
    let lock = n.t.guard_state_dir().join("repair.lock");

    for run in ["first", "second"] {
        let out = Guard::with_config(&cfg)
            .spawn(&["--json", "hygiene"])
            .finish(BOUND);
        eprintln!(
            "{run} guard hygiene ended in {:?}: {}",
            out.elapsed,
            out.finding_text("runtime.orphans")
        );
        out.expect(1, "runtime.orphans", "fail").mentions(
            "runtime.orphans",
            &[
                &format!("pid {}", holder.pid()),
                "not killed",
                &format!("fd 0 -> {}", fuse.file().display()),
            ],
        );
        assert!(
            support::locks::pid_alive(holder.pid()),
            "{run}: the candidate whose files could not be read was killed\n{}",
            out.dump()
        );
        assert!(flock_is_free(&lock), "{run}: the repair lock is still held");
    }
    // Phase 2 looks at orphans too (a warning there): it is usable within its bound.
    let cfg = n.t.write_guard_config_with(|c| c.hold_timeout("30s"));
    let out = Guard::with_config(&cfg)
        .spawn(&["--json", "runtime"])
        .finish(BOUND);
    eprintln!("guard runtime ended in {:?}", out.elapsed);
    out.expect(0, "runtime.orphans", "warn")
        .mentions("runtime.orphans", &["not killed"]);
    assert!(support::locks::pid_alive(holder.pid()), "{}", out.dump());
    assert!(
        flock_is_free(&lock),
        "runtime: the repair lock is still held"
    );
    // NPD's deadline fires while the pass waits: the runtime's thread is never blocked.
    let npd = Guard::with_config(&cfg)
        .spawn(&["verify", "--npd", "--timeout", "3s"])
        .finish(BOUND);
    eprintln!(
        "guard verify --npd --timeout 3s ended in {:?}: {}",
        npd.elapsed,
        npd.stdout.trim()
    );
    // --timeout 3s plus a margin for a loaded machine: the point is that it answers at all.
    assert!(npd.elapsed < Duration::from_secs(3 + 5), "{}", npd.dump());
    fuse.abort();
    drop(holder);
}

/// kubelet's start calls, each held in turn by a proxy in front of a real containerd that
/// delays exactly that one method (`support::grpc_proxy`, a test tool): `runtime.cri`
/// fails naming the call, within the call's own bound, while every other call answers.
/// Through the proxy with nothing held, the same calls pass (the control).
#[test]
fn a_cri_call_that_hangs_while_the_others_answer_is_named_within_its_own_bound() {
    use support::grpc_proxy::DelayProxy;
    use support::node::{Node, TOOLS};
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _alone = alone();
    let n = Node::healthy(&format!(
        "127.0.0.1:{}/guard/pause:dl",
        support::runtime::dead_port()
    ));
    n.import_image();
    let upstream = n.t.socket();
    let through = |proxy: &DelayProxy| {
        let text = n
            .guard_config(&n.ctrd.restart_program())
            .sandbox_pull(false)
            .containerd_socket(&proxy.socket)
            .render();
        let cfg = n.t.path().join(format!(
            "guard-{}.toml",
            proxy.socket.file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(&cfg, text).unwrap();
        cfg
    };
    let hold = Duration::from_secs(60);
    let control = DelayProxy::start(&upstream, &n.t.path().join("control.sock"), "/none", hold);
    Guard::with_config(&through(&control))
        .run(&["--json", "verify"])
        .expect(0, "runtime.cri", "pass");
    let held = [
        ("/runtime.v1.RuntimeService/Version", "CRI Version"),
        ("/runtime.v1.RuntimeService/Status", "CRI Status"),
        ("/runtime.v1.ImageService/ImageFsInfo", "CRI ImageFsInfo"),
        (
            "/runtime.v1.RuntimeService/ListPodSandbox",
            "CRI ListPodSandbox",
        ),
        ("/runtime.v1.ImageService/ImageStatus", "CRI ImageStatus"),
    ];
    // one proxy per held method, the five verifies at once
    let proxies: Vec<DelayProxy> = held
        .iter()
        .enumerate()
        .map(|(i, (method, _))| {
            DelayProxy::start(
                &upstream,
                &n.t.path().join(format!("held-{i}.sock")),
                method,
                hold,
            )
        })
        .collect();
    let runs: Vec<_> = proxies
        .iter()
        .map(|p| {
            let cfg = through(p);
            std::thread::spawn(move || Guard::with_config(&cfg).run(&["--json", "verify"]))
        })
        .collect();
    for ((_, call), run) in held.iter().zip(runs) {
        let out = run.join().unwrap();
        // each call's own bound is 5 s; the run is not held for the proxy's 60 s
        assert!(
            out.elapsed < Duration::from_secs(20),
            "{call}: {:?}",
            out.elapsed
        );
        out.expect(1, "runtime.cri", "fail")
            .mentions("runtime.cri", &[&format!("{call}: no answer within 5s")]);
    }
    // Node Problem Detector's run (`--timeout 6s`): each call gets half, 3 s, so the one
    // line names the call before the run's deadline
    let status = &proxies[1];
    let npd = Guard::with_config(&through(status)).run(&["verify", "--npd", "--timeout", "6s"]);
    assert_eq!(npd.code, 1, "{}", npd.dump());
    assert!(
        npd.stdout.starts_with(
            "runtime.cri: the CRI plugin does not serve: CRI Status: no answer within 3s"
        ),
        "{}",
        npd.dump()
    );
}
