//! The restart budget, the pure half: given what the state file says about this boot,
//! may the guard restart containerd now, must it wait, or is it terminal?
//!
//! The lesson of the Claudie incident: a remedy that repeats forever at full blast radius
//! is worse than the fault. So restarts are counted per boot, spaced by exponential backoff
//! (the state file outlives each invocation, so kubelet's `Restart=` re-running the gate
//! cannot shorten the backoff) and, once spent, the guard stops acting until the boot
//! changes or an operator runs `guard reset`.

use crate::backoff::Backoff;
use crate::config::RemediationSettings;
use crate::state::ledger::State;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Restart number `attempt` (1-based) may run now.
    Allowed { attempt: u32 },
    /// Backoff: the next restart may run after `left`.
    Wait { left: Duration, attempt: u32 },
    /// No restart this boot; the reason says why.
    Terminal { reason: String },
}

/// The backoff that must pass after restart number `done` (1-based) before the next one.
pub fn backoff_after(settings: &RemediationSettings, done: u32) -> Duration {
    Backoff::nth(settings.backoff, settings.backoff_max, done)
}

/// `now` is time since boot (CLOCK_BOOTTIME-like), the same clock the state file records.
pub fn decide(settings: &RemediationSettings, state: &State, now: Duration) -> Decision {
    if let Some(t) = &state.terminal {
        return Decision::Terminal {
            reason: t.reason.clone(),
        };
    }
    if let Some(why) = &state.void {
        return Decision::Terminal {
            reason: format!("no restart budget this boot: {why}"),
        };
    }
    let done = state.restarts.len() as u32;
    if done >= settings.restart_budget {
        return Decision::Terminal {
            reason: format!(
                "restart budget spent: {done} of {} restart(s) this boot did not make the node \
                 usable",
                settings.restart_budget
            ),
        };
    }
    if let Some(last) = state.restarts.last() {
        let ready_at = Duration::from_millis(last.uptime_ms) + backoff_after(settings, done);
        if now < ready_at {
            return Decision::Wait {
                left: ready_at - now,
                attempt: done + 1,
            };
        }
    }
    Decision::Allowed { attempt: done + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ledger::{Action, Outcome, Record, Terminal};

    fn settings(budget: u32) -> RemediationSettings {
        RemediationSettings {
            restart_budget: budget,
            backoff: Duration::from_secs(10),
            backoff_max: Duration::from_secs(60),
        }
    }

    fn restarted_at(secs: &[u64]) -> State {
        let mut s = State::fresh("boot");
        for t in secs {
            s.restarts.push(Record {
                uptime_ms: t * 1000,
                unix: 0,
                item: "containerd".into(),
                action: Action::Restart,
                outcome: Outcome::Ok,
                message: "ran".into(),
            });
        }
        s
    }

    #[test]
    fn table() {
        let s = Duration::from_secs;
        let cases: Vec<(&str, u32, State, u64, Decision)> = vec![
            (
                "fresh boot",
                3,
                restarted_at(&[]),
                5,
                Decision::Allowed { attempt: 1 },
            ),
            (
                "inside first backoff",
                3,
                restarted_at(&[100]),
                105,
                Decision::Wait {
                    left: s(5),
                    attempt: 2,
                },
            ),
            (
                "first backoff over",
                3,
                restarted_at(&[100]),
                110,
                Decision::Allowed { attempt: 2 },
            ),
            (
                "backoff doubles",
                3,
                restarted_at(&[100, 110]),
                125,
                Decision::Wait {
                    left: s(5),
                    attempt: 3,
                },
            ),
            (
                "budget spent",
                2,
                restarted_at(&[100, 110]),
                10_000,
                Decision::Terminal {
                    reason: "restart budget spent: 2 of 2 restart(s) this boot did not make the \
                             node usable"
                        .into(),
                },
            ),
            (
                "budget zero never restarts",
                0,
                restarted_at(&[]),
                5,
                Decision::Terminal {
                    reason: "restart budget spent: 0 of 0 restart(s) this boot did not make the \
                             node usable"
                        .into(),
                },
            ),
        ];
        for (name, budget, state, now, want) in cases {
            assert_eq!(decide(&settings(budget), &state, s(now)), want, "{name}");
        }
    }

    #[test]
    fn terminal_and_void_states_stay_terminal() {
        let mut st = restarted_at(&[]);
        st.terminal = Some(Terminal {
            unix: 0,
            reason: "spent".into(),
        });
        assert!(matches!(
            decide(&settings(3), &st, Duration::ZERO),
            Decision::Terminal { .. }
        ));
        let mut st = restarted_at(&[]);
        st.void = Some("state file was corrupt".into());
        match decide(&settings(3), &st, Duration::ZERO) {
            Decision::Terminal { reason } => assert!(reason.contains("corrupt"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    /// The records carry wall-clock time (`unix`) for people; the decision reads only the
    /// boot clock, so the wall clock jumping (NTP at boot, an operator's `date -s`) between
    /// two guards neither shortens nor stretches the backoff. That the caller passes
    /// CLOCK_BOOTTIME is `tests/gate_budget.rs::s08b_backoff_holds_across_invocations`.
    #[test]
    fn a_wall_clock_jump_does_not_change_the_backoff() {
        let s = Duration::from_secs;
        for unix in [0, 1_700_000_000, 4_000_000_000, u64::MAX] {
            let mut st = restarted_at(&[100]);
            st.restarts[0].unix = unix;
            let wait = Decision::Wait {
                left: s(5),
                attempt: 2,
            };
            assert_eq!(decide(&settings(3), &st, s(105)), wait, "unix {unix}");
            let go = Decision::Allowed { attempt: 2 };
            assert_eq!(decide(&settings(3), &st, s(110)), go, "unix {unix}");
        }
    }

    #[test]
    fn backoff_is_capped() {
        let st = settings(100);
        assert_eq!(backoff_after(&st, 1), Duration::from_secs(10));
        assert_eq!(backoff_after(&st, 2), Duration::from_secs(20));
        assert_eq!(backoff_after(&st, 3), Duration::from_secs(40));
        assert_eq!(backoff_after(&st, 4), Duration::from_secs(60));
        assert_eq!(backoff_after(&st, 60), Duration::from_secs(60));
    }
}
