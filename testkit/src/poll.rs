//! Bounded waiting: poll a condition until it holds or a deadline passes. The short pause
//! between polls only paces the loop; the condition is what synchronises.

use std::time::{Duration, Instant};

/// Polls `cond` every few milliseconds until it returns `Some`, or panics after `timeout`
/// with `what` in the message.
pub fn poll_until<T>(what: &str, timeout: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(v) = cond() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}
