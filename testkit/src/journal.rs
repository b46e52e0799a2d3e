//! A journal of the test's own: a datagram socket the guard finds at journald's path
//! (`/run/systemd/journal/socket`) inside a private mount namespace, so a test can see
//! what the guard sends to the journal on a host without journald, and no real journal
//! gets the test's messages.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct JournalTrap {
    wrapper: String,
    done: Arc<AtomicBool>,
    reader: Option<JoinHandle<Vec<String>>>,
}

impl JournalTrap {
    /// Binds `<dir>/socket` and reads it while the test runs (as journald would: a full
    /// datagram queue would block the sender).
    pub fn new(dir: &Path) -> JournalTrap {
        std::fs::create_dir_all(dir).unwrap();
        let socket = UnixDatagram::bind(dir.join("socket")).expect("bind the journal socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let reader = std::thread::spawn(move || {
            let mut messages = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match socket.recv(&mut buf) {
                    Ok(len) => messages.push(String::from_utf8_lossy(&buf[..len]).into_owned()),
                    Err(_) if stop.load(Ordering::SeqCst) => return messages,
                    Err(_) => {}
                }
            }
        });
        // tmpfs over /run/systemd (this host may have no journal directory to bind over),
        // then the test's directory as /run/systemd/journal; private to the guard.
        let wrapper = format!(
            "mount -t tmpfs guard-test /run/systemd && mkdir /run/systemd/journal && \
             mount --bind '{}' /run/systemd/journal && exec \"$0\" \"$@\"",
            dir.display()
        );
        JournalTrap {
            wrapper,
            done,
            reader: Some(reader),
        }
    }

    /// The wrapper for [`super::Guard::wrapped_in`]: the guard runs in a mount namespace of
    /// its own where the trap is journald's socket.
    pub fn wrapper(&self) -> [&str; 5] {
        ["unshare", "-m", "sh", "-c", &self.wrapper]
    }

    /// Every datagram received, once the guards that could send have exited.
    pub fn received(mut self) -> Vec<String> {
        self.done.store(true, Ordering::SeqCst);
        self.reader
            .take()
            .expect("read once")
            .join()
            .expect("journal reader")
    }
}

impl Drop for JournalTrap {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}
