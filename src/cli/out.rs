//! Standard output that a closed pipe cannot crash. `guard verify --json | head -c1`
//! closes the reader early; Rust ignores SIGPIPE, so the next write fails with EPIPE and
//! std's `println!` panics on it (with `panic = "abort"`: a core dump where
//! systemd-coredump runs). The work is done and its state written before anything is
//! printed, so a closed pipe only drops output: the rest is skipped and the guard exits
//! [`Exit::PipeClosed`].
//!
//! The same holds for stderr (`guard verify 2>&1 | head -c1` closes both): a line that
//! cannot be written there is dropped, since nowhere is left to say it.
//!
//! `println!`, `print!`, `eprintln!` and `eprint!` are shadowed for every module of `cli`
//! (declared before them), so no print there, now or later, can take the std path.

use crate::exit::Exit;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// The reader of stdout went away.
static CLOSED: AtomicBool = AtomicBool::new(false);
/// stdout failed otherwise (a full disk behind a redirect); said once on stderr.
static FAILED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout; after a failed write, writes nothing more. Never panics.
pub fn write(args: std::fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) || FAILED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_fmt(args).and_then(|()| stdout.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
        }
        Err(e) => {
            FAILED.store(true, Ordering::Relaxed);
            let _ = writeln!(std::io::stderr(), "guard: cannot write the output: {e}");
        }
    }
}

/// Writes to stderr; a closed or failing stderr drops the line. Never panics.
pub fn write_err(args: std::fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_fmt(args).and_then(|()| stderr.flush());
}

/// The command's exit code, or [`Exit::PipeClosed`] when the reader of stdout went away
/// and some output was lost.
pub fn unless_closed(exit: i32) -> i32 {
    match CLOSED.load(Ordering::Relaxed) {
        true => Exit::PipeClosed.code(),
        false => exit,
    }
}

macro_rules! print {
    ($($arg:tt)*) => {
        $crate::cli::out::write(format_args!($($arg)*))
    };
}

macro_rules! println {
    () => {
        $crate::cli::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

// (unused today: here so that a later `eprint!` in cli cannot take the std path)
#[allow(unused_macros)]
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::cli::out::write_err(format_args!($($arg)*))
    };
}

macro_rules! eprintln {
    () => {
        $crate::cli::out::write_err(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::out::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}
