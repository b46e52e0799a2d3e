//! The one backoff every bounded retry loop uses: waiting for the volume, for containerd to
//! answer, for the repair lock, between pulls and while holding kubelet. It only computes
//! pauses; the caller sleeps (and, in phase 2, releases the repair lock first) and bounds
//! the whole loop by its own deadline.

use std::time::Duration;

/// Pauses that start at `first` and double up to `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            next: first.min(max),
            max,
        }
    }

    /// The pause to take now; the one after it is twice as long, up to `max`.
    #[allow(clippy::should_implement_trait)] // an endless sequence, not an iterator a caller drains
    pub fn next(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.max);
        now
    }

    /// The pause after the `n`-th event (1-based) of a sequence starting at `first`:
    /// `first`, `2 * first`, `4 * first`... capped at `max`. Used where the count, not the
    /// loop, is kept (the restart budget counts restarts in the state file).
    pub fn nth(first: Duration, max: Duration, n: u32) -> Duration {
        let shift = n.saturating_sub(1).min(20);
        first.checked_mul(1u32 << shift).unwrap_or(max).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_stays_there() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(500));
        let seen: Vec<_> = (0..5).map(|_| b.next()).collect();
        assert_eq!(seen, vec![ms(100), ms(200), ms(400), ms(500), ms(500)]);
        assert_eq!(Backoff::new(ms(900), ms(500)).next(), ms(500));
    }

    #[test]
    fn nth_matches_the_sequence_and_never_overflows() {
        let s = Duration::from_secs;
        let mut b = Backoff::new(s(10), s(60));
        for n in 1..=6 {
            assert_eq!(Backoff::nth(s(10), s(60), n), b.next(), "n = {n}");
        }
        assert_eq!(Backoff::nth(s(10), s(60), 0), s(10));
        assert_eq!(Backoff::nth(s(10), s(60), u32::MAX), s(60));
    }
}
