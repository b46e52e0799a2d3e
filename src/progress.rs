//! Never silent: every wait the guard makes (containerd's socket, the volume's mount, the
//! hold, a pull, a restart, the canary, the repair lock) says what it waits for and how
//! long is left, on stderr (the journal under systemd) and in systemd's status line. One
//! reporter for every wait, so none can forget to speak.
//!
//! The first line comes once a wait has lasted [`FIRST`] (a look that answers at once
//! stays quiet on stderr; systemd's status line names every wait as it begins), then one
//! every [`EVERY`] until the wait ends. A wait given the same
//! words again continues (a hold's looks and pauses are one wait); new words are a new
//! wait, said anew.

use crate::human;
use std::time::{Duration, Instant};

/// How long a wait may stay silent: a person at a terminal wonders after about a second.
pub const FIRST: Duration = Duration::from_secs(1);
/// How often a wait says it still waits.
pub const EVERY: Duration = Duration::from_secs(5);

/// The reporter: the wait in progress, if any.
#[derive(Debug, Default)]
pub struct Progress {
    wait: Option<Wait>,
}

#[derive(Debug)]
struct Wait {
    what: String,
    deadline: Instant,
    started: Instant,
    said: Option<Instant>,
    /// When the work waited on last finished ([`Progress::during`]).
    ended: Option<Instant>,
}

impl Progress {
    /// From now on the guard waits for `what` (a phrase: "waiting for ...", "pulling ...")
    /// at most `left`. The same words as the wait just before continue it (a hold's
    /// pause, then its next look); the same words after a pause are a new wait. A new wait
    /// sets systemd's status line at once: `systemctl status` names what the guard does
    /// even when it takes less than [`FIRST`].
    pub fn waiting(&mut self, what: &str, left: Duration) {
        let now = Instant::now();
        let back_to_back = |w: &Wait| w.ended.is_none_or(|ended| now - ended < FIRST);
        match &mut self.wait {
            Some(w) if w.what == what && back_to_back(w) => {
                w.deadline = now + left;
                w.ended = None;
            }
            _ => {
                crate::notify::status(&format!("{what} ({} left)", human::duration(left)));
                self.wait = Some(Wait {
                    what: what.to_string(),
                    deadline: now + left,
                    started: now,
                    said: None,
                    ended: None,
                })
            }
        }
    }

    /// When the next line is due (none without a wait).
    fn due(&self) -> Option<Instant> {
        let w = self.wait.as_ref().filter(|w| w.ended.is_none())?;
        Some(match w.said {
            None => w.started + FIRST,
            Some(said) => said + EVERY,
        })
    }

    /// How long a polling loop may sleep without missing a line, at most `max`.
    pub fn quiet_for(&self, max: Duration) -> Duration {
        self.due()
            .map(|due| due.saturating_duration_since(Instant::now()))
            .map_or(max, |until| until.min(max))
    }

    /// Says the wait's line if it is due (polling loops call this between looks).
    pub fn tick(&mut self) {
        let now = Instant::now();
        if self.due().is_none_or(|due| due > now) {
            return;
        }
        let Some(w) = self.wait.as_mut() else {
            return;
        };
        let left = human::duration(w.deadline.saturating_duration_since(now));
        let line = format!("{} ({left} left)", w.what);
        tracing::info!("{line}");
        crate::notify::status(&line);
        w.said = Some(now);
    }

    /// Runs `work` (a future that waits), saying the wait's line whenever it is due.
    #[cfg(feature = "grpc")]
    pub async fn during<F: std::future::Future>(&mut self, work: F) -> F::Output {
        use std::future::Future as _;
        use std::task::Poll;
        let mut work = std::pin::pin!(work);
        let mut timer = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
        std::future::poll_fn(|cx| loop {
            if let Poll::Ready(out) = work.as_mut().poll(cx) {
                if let Some(w) = self.wait.as_mut() {
                    w.ended = Some(Instant::now());
                }
                return Poll::Ready(out);
            }
            let Some(due) = self.due() else {
                return Poll::Pending;
            };
            timer.as_mut().reset(due.into());
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.tick();
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_words_continue_a_wait_and_new_words_start_one() {
        let mut p = Progress::default();
        assert_eq!(p.quiet_for(EVERY), EVERY, "no wait, nothing due");
        p.waiting("holding kubelet: runtime.answers", Duration::from_secs(60));
        let first = p.due().unwrap();
        p.waiting("holding kubelet: runtime.answers", Duration::from_secs(59));
        assert_eq!(
            p.due(),
            Some(first),
            "the hold's next look continues the hold"
        );
        assert!(p.quiet_for(EVERY) <= FIRST);
        p.waiting("pulling pause:3.9", Duration::from_secs(30));
        assert!(p.due().unwrap() >= first, "a new wait waits its own FIRST");
    }

    #[cfg(feature = "grpc")]
    #[test]
    fn an_ended_wait_is_quiet_until_its_words_come_back() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build();
        let mut p = Progress::default();
        p.waiting("holding kubelet: runtime.answers", Duration::from_secs(60));
        let first = p.due();
        rt.unwrap().block_on(p.during(async {}));
        assert_eq!(p.due(), None, "nothing to say while nothing is awaited");
        p.waiting("holding kubelet: runtime.answers", Duration::from_secs(59));
        assert_eq!(
            p.due(),
            first,
            "the next look, back to back, continues the hold"
        );
    }
}
