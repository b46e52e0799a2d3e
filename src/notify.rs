//! Status for people watching `systemctl status`: sd_notify `STATUS=` lines when the guard
//! runs under systemd, nothing otherwise. Failures to notify never fail the guard.

use libsystemd::daemon::{self, NotifyState};
use std::time::Duration;

fn under_systemd() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

pub fn status(text: &str) {
    if under_systemd() {
        let _ = daemon::notify(false, &[NotifyState::Status(text.to_string())]);
    }
}

/// Asks systemd for more start time while the guard legitimately waits.
pub fn extend_timeout(by: Duration) {
    if under_systemd() {
        let _ = daemon::notify(
            false,
            &[NotifyState::Other(format!(
                "EXTEND_TIMEOUT_USEC={}",
                by.as_micros()
            ))],
        );
    }
}

pub fn ready(text: &str) {
    if under_systemd() {
        let _ = daemon::notify(
            false,
            &[NotifyState::Ready, NotifyState::Status(text.to_string())],
        );
    }
}
