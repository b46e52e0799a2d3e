//! `state_dir`: the ledger (`runtime.json`), phase 1's volume record and the kept metrics, as
//! read back on a later run (a crash, a full disk or a person may have left anything).
#![no_main]
use containerd_guard::metrics::{render, Kept};
use containerd_guard::state::{parse_ledger, parse_volume, LedgerFile};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("/var/lib/containerd-guard/runtime.json");
    let state = match parse_ledger(data, path, "boot-1") {
        LedgerFile::Current(s) => {
            // What is read back must write and read back the same.
            let again = serde_json::to_vec(&s).unwrap();
            match parse_ledger(&again, path, "boot-1") {
                LedgerFile::Current(t) => assert_eq!(s, t),
                other => panic!("a state that parsed does not round-trip: {other:?}"),
            }
            Some(s)
        }
        _ => None,
    };
    if let Some(record) = parse_volume(data, "boot-1") {
        let _ = record.held_by();
    }
    let kept: Kept = serde_json::from_slice(data).unwrap_or_default();
    // (the time a status still counts is judged against: any moment, from the input)
    let now = data
        .iter()
        .take(8)
        .fold(0u64, |t, b| t << 8 | u64::from(*b));
    let _ = render(&kept, state.as_ref(), "fuzz", now);
});
