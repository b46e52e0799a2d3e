//! SIGTERM and SIGINT (the hygiene unit stopped at package removal, a start timeout,
//! Ctrl-C) end a command at once, as their default action would, except inside a
//! **critical section**: a change the guard must finish or undo before it may die (a
//! frozen cgroup is thawed, a canary sandbox is removed, a file is renamed into place or
//! its temporary copy removed). A signal that arrives inside one is deferred to the end of
//! the outermost section; every section is bounded, so the exit is too.
//!
//! Either way the guard then dies by that same signal with its default action (no core
//! dump), so a shell sees 143 (SIGTERM) or 130 (SIGINT) and systemd sees the clean
//! `signal=TERM` it saw before there were handlers. Nothing else runs on the way out: no
//! report, no metrics; the kernel drops the repair lock with the process.
//!
//! [`hook`] is for tests only (compiled out of release builds): it stops the guard at a
//! named point so that a test can send a signal at exactly that point.

use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

/// The open sections, the deferred signal and whether the guard is dying, in one word so
/// that the handler and the sections agree without a lock (a handler may take none).
/// Bits 0-15: sections open; 16-23: the deferred signal (0: none); 31: dying.
static STATE: AtomicU32 = AtomicU32::new(0);
const DEPTH: u32 = 0xffff;
const DEFERRED_SHIFT: u32 = 16;
const DEFERRED: u32 = 0xff << DEFERRED_SHIFT;
const DYING: u32 = 1 << 31;

/// Installs the handlers of SIGTERM and SIGINT; called once, first thing, by the CLI.
/// `SA_RESTART`: a system call the signal interrupts is resumed, not failed with EINTR.
pub fn install() -> nix::Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: `on_signal` only touches an atomic and calls async-signal-safe functions
        // (sigaction, pthread_sigmask, raise, _exit).
        unsafe { signal::sigaction(sig, &action) }?;
    }
    Ok(())
}

/// Outside any section: die now. Inside: remember the signal for the end of the outermost
/// section.
extern "C" fn on_signal(signo: nix::libc::c_int) {
    let mut now = STATE.load(SeqCst);
    while let Some(next) = signalled(now, signo as u32) {
        match STATE.compare_exchange(now, next, SeqCst, SeqCst) {
            Ok(_) if next & DYING != 0 => die(signo),
            Ok(_) => return,
            Err(changed) => now = changed,
        }
    }
}

/// The state word after `signo` arrived in state `now`; `None`: nothing changes (already
/// dying, or a signal is already deferred: the first one wins).
fn signalled(now: u32, signo: u32) -> Option<u32> {
    match (now & DYING != 0, now & DEPTH, now & DEFERRED != 0) {
        (true, _, _) => None,
        (false, 0, _) => Some(now | DYING),
        (false, _, true) => None,
        (false, _, false) => Some(now | ((signo & 0xff) << DEFERRED_SHIFT)),
    }
}

/// The state word once a section in state `now` closed: dying when it was the last open
/// one and a signal was deferred.
fn closed(now: u32) -> u32 {
    let last = now & DEPTH == 1;
    match last && now & DEFERRED != 0 {
        true => (now - 1) | DYING,
        false => now - 1,
    }
}

/// The signal deferred in state `now` (0: none).
fn deferred(now: u32) -> u32 {
    (now & DEFERRED) >> DEFERRED_SHIFT
}

/// Ends the process by `signo` with its default action. Async-signal-safe.
fn die(signo: nix::libc::c_int) -> ! {
    if let Ok(sig) = Signal::try_from(signo) {
        // SAFETY: restoring the default action has no handler to race with.
        let _ = unsafe { signal::signal(sig, SigHandler::SigDfl) };
        // (inside the handler the signal is blocked for this thread until it returns)
        let _ = SigSet::from(sig).thread_unblock();
        let _ = signal::raise(sig);
    }
    // Not reached: the default action of SIGTERM and SIGINT ends the process.
    // SAFETY: _exit(2) ends the process without running anything of it.
    unsafe { nix::libc::_exit(128 + signo) }
}

/// An open critical section: a SIGTERM or SIGINT that arrives while it lives ends the
/// guard when the last open section is dropped, not before. Keep each one bounded.
#[must_use = "the section ends when this is dropped"]
pub struct Critical(());

/// Opens a critical section (they nest). While the guard is already dying by a signal,
/// this never returns: the process ends in a moment, before the section would begin.
pub fn critical() -> Critical {
    let mut now = STATE.load(SeqCst);
    loop {
        if now & DYING != 0 {
            loop {
                std::thread::park();
            }
        }
        match STATE.compare_exchange(now, now + 1, SeqCst, SeqCst) {
            Ok(_) => return Critical(()),
            Err(changed) => now = changed,
        }
    }
}

impl Drop for Critical {
    fn drop(&mut self) {
        let mut now = STATE.load(SeqCst);
        loop {
            let next = closed(now);
            match STATE.compare_exchange(now, next, SeqCst, SeqCst) {
                Ok(_) if next & DYING != 0 => die(deferred(next) as nix::libc::c_int),
                Ok(_) => return,
                Err(changed) => now = changed,
            }
        }
    }
}

/// The variable naming the hook point where a debug build stops itself.
pub const HOOK_VAR: &str = "GUARD_TEST_HOOK";

/// Test-only: when `GUARD_TEST_HOOK` names `point`, the guard stops itself here
/// (`SIGSTOP`), so that a test can wait for the stop, send a signal, then `SIGCONT`: the
/// signal arrives at exactly this point. Compiled out of release builds.
#[inline]
pub fn hook(point: &str) {
    #[cfg(debug_assertions)]
    if std::env::var_os(HOOK_VAR).is_some_and(|v| v == point) {
        let _ = signal::raise(Signal::SIGSTOP);
    }
    #[cfg(not(debug_assertions))]
    let _ = point;
}

#[cfg(test)]
mod tests {
    use super::*;

    const TERM: u32 = Signal::SIGTERM as u32;
    const INT: u32 = Signal::SIGINT as u32;

    #[test]
    fn outside_a_section_a_signal_ends_the_guard_at_once() {
        assert_eq!(signalled(0, TERM), Some(DYING));
        assert_eq!(signalled(DYING, INT), None, "dying already");
    }

    #[test]
    fn inside_a_section_the_first_signal_waits_for_the_last_section_to_close() {
        let two_open = 2;
        let deferred_term = signalled(two_open, TERM).unwrap();
        assert_eq!(deferred(deferred_term), TERM);
        assert_eq!(deferred_term & DYING, 0, "not dying inside a section");
        assert_eq!(signalled(deferred_term, INT), None, "the first signal wins");
        let one_open = closed(deferred_term);
        assert_eq!(
            one_open & (DYING | DEPTH),
            1,
            "an inner section closing ends nothing"
        );
        let ending = closed(one_open);
        assert_eq!(ending & (DYING | DEPTH), DYING);
        assert_eq!(deferred(ending), TERM, "dies by the deferred signal");
    }

    #[test]
    fn a_section_closed_without_a_signal_ends_nothing() {
        assert_eq!(closed(1), 0);
        assert_eq!(closed(3), 2);
    }
}
