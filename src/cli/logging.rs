//! The guard's own log lines (tracing) on stderr.

/// Logs go to stderr without timestamps or colour: journald adds its own. `level` 0 is
/// errors only (NPD mode), 1 the default, 2 `-v` (the reasons: each look and what it
/// decided, each wait's retries), 3 `-vv` (also every span's time as it closes), 4 and
/// more `-vvv` (trace).
pub(super) fn init_logging(level: u8) {
    use tracing_subscriber::fmt::format::FmtSpan;
    let max = match level {
        0 => tracing::Level::ERROR,
        1 => tracing::Level::INFO,
        2 | 3 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    let log = tracing_subscriber::fmt()
        .with_max_level(max)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        // A closed stderr (`2>&1 | head -c1`): tracing would say so on stderr with std's
        // eprintln!, which panics on the closed pipe (an abort in the release build).
        .log_internal_errors(false);
    let _ = match level {
        // -vv: every span's time as it closes (crate::timing), lines stamped with the time
        // since the guard started (span timings need a timer)
        3.. => log
            .with_span_events(FmtSpan::CLOSE)
            .with_timer(tracing_subscriber::fmt::time::Uptime::default())
            .try_init(),
        _ => log.without_time().try_init(),
    };
}
