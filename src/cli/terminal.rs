//! Whether the table goes to a person: on a terminal it fits the terminal's width
//! (`COLUMNS`, else the terminal's own size) and is coloured by status (unless
//! `NO_COLOR`); into a pipe or a file it is whole and plain, for scripts and the journal.
//! `--full` and `--color` decide over both.

use super::args::Color;
use crate::report::Style;
use std::io::IsTerminal;
use std::sync::OnceLock;

static STYLE: OnceLock<Style> = OnceLock::new();

/// Decides the table's style once, from the flags and what stdout is.
pub(super) fn decide(full: bool, color: Color) {
    let tty = std::io::stdout().is_terminal();
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let style = Style {
        width: (tty && !full).then(width),
        color: match color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => tty && !no_color,
        },
        full,
    };
    let _ = STYLE.set(style);
}

/// The style decided for this run (a pipe's before [`decide`]).
pub(super) fn style() -> Style {
    STYLE.get().copied().unwrap_or_default()
}

/// `COLUMNS` when it is a width, else the terminal's (TIOCGWINSZ on stdout), else 80.
fn width() -> usize {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
    columns
        .filter(|&c: &usize| c > 0)
        .or_else(terminal_columns)
        .unwrap_or(80)
}

fn terminal_columns() -> Option<usize> {
    let mut size = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct it is given; stdout is an
    // open descriptor (a terminal: checked by the caller's is_terminal).
    let done = unsafe { nix::libc::ioctl(1, nix::libc::TIOCGWINSZ, &mut size) };
    (done == 0 && size.ws_col > 0).then_some(size.ws_col.into())
}
