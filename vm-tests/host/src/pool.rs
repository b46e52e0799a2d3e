//! Boots side by side, verdicts in order. A boot under TCG keeps about 1.3 of the host's
//! cores busy on average (the guest waits on timers, on the device timeout, on its own
//! pre-starts), so two boots at a time on a 2-core host finish the suite sooner than one;
//! the verdicts are still printed in the listed order, each as soon as it and every
//! stage before it are done, so that the output reads as a sequential run's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Runs `produce` on every job, `workers` at a time, starting them in `start` order (the
/// longest first, so that no long boot is left alone at the end), and calls `show` on
/// each job in the listed order once it and all before it were produced. `start` is a
/// permutation of the jobs' indices; an index missing from it is never produced, but
/// still shown (the verdict of a boot that did not run is a failure of its own).
pub fn ordered<J: Sync>(
    jobs: &[J],
    start: &[usize],
    workers: usize,
    produce: impl Fn(&J) + Sync,
    mut show: impl FnMut(&J),
) {
    let next = AtomicUsize::new(0);
    let (done_tx, done_rx) = mpsc::channel::<usize>();
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, jobs.len().max(1)) {
            let (done_tx, next, produce) = (done_tx.clone(), &next, &produce);
            scope.spawn(move || {
                while let Some(&k) = start.get(next.fetch_add(1, Ordering::SeqCst)) {
                    if let Some(job) = jobs.get(k) {
                        produce(job);
                    }
                    let _ = done_tx.send(k);
                }
            });
        }
        // the workers hold the only senders: the loop ends when the last one ends
        drop(done_tx);
        let mut done = vec![false; jobs.len()];
        let mut shown = 0;
        let mut show_ready = |done: &[bool]| {
            while shown < jobs.len() && done[shown] {
                show(&jobs[shown]);
                shown += 1;
            }
        };
        for k in done_rx {
            if let Some(d) = done.get_mut(k) {
                *d = true;
            }
            show_ready(&done);
        }
        // what no worker produced (not in `start`) is shown last, in order
        done.iter_mut().for_each(|d| *d = true);
        show_ready(&done);
    });
}

/// The number of boots at a time: VM_JOBS when set to a positive number, else 2.
pub fn workers() -> usize {
    std::env::var("VM_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Each job is produced once, shown once and in the listed order, whatever order they
    /// finish in; with two workers, two run at once.
    #[test]
    fn every_job_is_produced_once_and_shown_in_the_listed_order() {
        let jobs: Vec<usize> = (0..7).collect();
        let start = [6, 3, 0, 1, 2, 4, 5];
        for workers in [1, 2, 3, 9] {
            let produced = Mutex::new(Vec::new());
            let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let mut shown = Vec::new();
            ordered(
                &jobs,
                &start,
                workers,
                |&j| {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // the first job waits until a second one started beside it (with
                    // more than one worker), so that the overlap is certain, not timed
                    if workers > 1 && j == 6 {
                        while produced.lock().unwrap().is_empty() {
                            std::thread::yield_now();
                        }
                    }
                    produced.lock().unwrap().push(j);
                    running.fetch_sub(1, Ordering::SeqCst);
                },
                |&j| {
                    assert!(
                        produced.lock().unwrap().contains(&j),
                        "{j} shown before done"
                    );
                    shown.push(j);
                },
            );
            let mut p = produced.into_inner().unwrap();
            p.sort();
            assert_eq!(p, jobs, "workers {workers}");
            assert_eq!(shown, jobs, "workers {workers}");
            let most = most.load(Ordering::SeqCst);
            assert_eq!(most > 1, workers > 1, "workers {workers}: {most} at once");
            assert!(most <= workers, "workers {workers}: {most} at once");
        }
    }

    #[test]
    fn a_job_left_out_of_the_start_order_is_shown_not_produced() {
        let jobs = [0, 1, 2];
        let produced = Mutex::new(Vec::new());
        let mut shown = Vec::new();
        ordered(
            &jobs,
            &[2, 0],
            2,
            |&j| produced.lock().unwrap().push(j),
            |&j| shown.push(j),
        );
        assert!(!produced.lock().unwrap().contains(&1));
        assert_eq!(shown, [0, 1, 2]);
    }
}
