//! Phase 1's record (`state_dir/volume.json`): the last `guard volume` verdict of this boot,
//! for `guard status` and for phase 2 (which never restarts a containerd that phase 1 held
//! back on purpose).

use crate::report::{Finding, Report, Verdict};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeRecord {
    pub boot_id: String,
    pub unix_time: u64,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
}

impl VolumeRecord {
    pub fn new(boot_id: &str, report: &Report) -> VolumeRecord {
        VolumeRecord {
            boot_id: boot_id.to_string(),
            unix_time: super::unix_now(),
            verdict: report.verdict(),
            findings: report.findings.clone(),
        }
    }

    /// The first failed check, as `id: summary`, when phase 1 held containerd back.
    pub fn held_by(&self) -> Option<String> {
        (self.verdict == Verdict::Unusable).then(|| {
            Report::new(self.findings.clone())
                .failures()
                .next()
                .map(|f| format!("{}: {}", f.id, f.summary))
                .unwrap_or_else(|| "phase 1 failed".into())
        })
    }
}
