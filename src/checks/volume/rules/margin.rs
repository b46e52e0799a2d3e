//! `guard verify`'s early warning: the volume's free space or inodes within `[volume]
//! warn_margin` percentage points of kubelet's image-filesystem eviction threshold, so a
//! fleet sees it before kubelet starts evicting pods. Pure.

use crate::checks::volume::facts::FsStats;
use crate::config::units::human_size;
use crate::host::kubelet::Eviction;
use crate::report::Id;

/// The findings to turn into warnings, each with its evidence line.
pub fn near_eviction(stats: &FsStats, e: &Eviction, margin: u8) -> Vec<(Id, String)> {
    let checks = [
        (
            Id::VolumeFreeSpace,
            "imagefs.available",
            stats.free_bytes,
            stats.total_bytes,
        ),
        (
            Id::VolumeFreeInodes,
            "imagefs.inodesFree",
            stats.free_inodes,
            stats.total_inodes,
        ),
    ];
    checks
        .into_iter()
        .filter_map(|(id, signal, free, total)| {
            let (threshold, from) = e.threshold(signal)?;
            let at = limit(&threshold, total)?;
            let warn_at = at.saturating_add(total / 100 * u64::from(margin));
            let shown = |n: u64| match id {
                Id::VolumeFreeSpace => human_size(n),
                _ => format!("{n} inodes"),
            };
            (total > 0 && free < warn_at).then(|| {
                let pct = free as f64 * 100.0 / total as f64;
                let line = format!(
                    "{} free ({pct:.1}%); kubelet evicts pods at {signal}<{threshold} ({from}, \
                     {}); warned within {margin} points ([volume] warn_margin)",
                    shown(free),
                    shown(at)
                );
                (id, line)
            })
        })
        .collect()
}

/// A threshold as an amount of `total`: `15%`, or a quantity (`10Gi`, `500000`).
fn limit(threshold: &str, total: u64) -> Option<u64> {
    match threshold.strip_suffix('%') {
        Some(pct) => {
            let pct: f64 = pct
                .trim()
                .parse()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))?;
            Some((total as f64 * pct / 100.0) as u64)
        }
        None => quantity(threshold.trim()),
    }
}

/// A Kubernetes quantity (`10Gi`, `500M`, `100000`) as a number.
fn quantity(text: &str) -> Option<u64> {
    const UNITS: [(&str, u64); 10] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
    ];
    let (number, scale) = UNITS
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))
        .unwrap_or((text, 1));
    number.trim().parse::<u64>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::kubelet::parse;

    fn stats(free_pct: u64) -> FsStats {
        FsStats {
            free_bytes: free_pct << 30,
            total_bytes: 100 << 30,
            free_inodes: 90_000,
            total_inodes: 100_000,
        }
    }

    #[test]
    fn within_the_margin_of_the_threshold_kubelet_applies() {
        let defaults = parse("kind: KubeletConfiguration\n").unwrap();
        assert_eq!(near_eviction(&stats(21), &defaults, 5), vec![]);
        let near = near_eviction(&stats(19), &defaults, 5);
        assert_eq!(near.len(), 1, "{near:?}");
        assert_eq!(near[0].0, Id::VolumeFreeSpace);
        assert!(
            near[0].1.contains("19.0%")
                && near[0]
                    .1
                    .contains("imagefs.available<15% (kubelet's default"),
            "{near:?}"
        );
        // already past it: still the warning (evictions under way)
        assert_eq!(near_eviction(&stats(10), &defaults, 5).len(), 1);
        assert_eq!(near_eviction(&stats(19), &defaults, 0), vec![]);
        // a quantity threshold, and inodes
        let e = parse("evictionHard:\n  imagefs.available: 20Gi\n  imagefs.inodesFree: \"95%\"\n")
            .unwrap();
        let ids: Vec<Id> = near_eviction(&stats(22), &e, 5)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids, [Id::VolumeFreeSpace, Id::VolumeFreeInodes]);
        assert_eq!(quantity("500M"), Some(500_000_000));
        assert_eq!(quantity("x"), None);
        assert_eq!(quantity("99999999999Pi"), None);
        // no threshold, nothing to be near
        let none = parse("evictionHard:\n  memory.available: 1Gi\n").unwrap();
        assert_eq!(near_eviction(&stats(1), &none, 5), vec![]);
    }
}
