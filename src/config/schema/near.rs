//! "Did you mean": for a key the guard does not know, the declared key ([`KEYS`]) it most
//! likely meant, so that a typo is answered with one name and not the whole list.

use super::{Key, KEYS};

/// The key `dotted` most likely meant: in the same section, the one whose name is within a
/// typo's reach ([`reach`]); else the key of the same name in another section (a key
/// written in the wrong table).
pub(super) fn key(dotted: &str) -> Option<&'static Key> {
    let (section, name) = match dotted.split_once('.') {
        Some((section, name)) => (Some(section), name),
        None => (None, dotted),
    };
    KEYS.iter()
        .filter(|k| k.section == section)
        .map(|k| (distance(name, k.name), k))
        .filter(|(d, _)| *d <= reach(name))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
        .or_else(|| KEYS.iter().find(|k| k.name == name && k.section != section))
}

/// The section `name` most likely meant, within a typo's reach.
pub(super) fn section(name: &str) -> Option<&'static str> {
    sections()
        .map(|s| (distance(name, s), s))
        .filter(|(d, _)| *d <= reach(name))
        .min_by_key(|(d, _)| *d)
        .map(|(_, s)| s)
}

/// Every section, in declaration order.
pub(super) fn sections() -> impl Iterator<Item = &'static str> {
    let mut seen: Vec<&'static str> = Vec::new();
    KEYS.iter().filter_map(move |k| {
        let s = k.section?;
        (!seen.contains(&s)).then(|| {
            seen.push(s);
            s
        })
    })
}

/// How many edits still read as a typo of `word`: one per four characters, at least one.
fn reach(word: &str) -> usize {
    (word.chars().count() / 4).max(1)
}

/// The optimal string alignment distance: insertions, deletions, substitutions, and swaps
/// of two neighbouring characters (`devcie` is one edit from `device`).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![(0..=b.len()).collect::<Vec<usize>>()];
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (rows[i - 1][j] + 1)
                .min(row[j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(rows[i - 2][j - 2] + 1);
            }
        }
        rows.push(row);
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_and_swaps_count_once() {
        for (a, b, want) in [
            ("devcie", "device", 1),
            ("wiat", "wait", 1),
            ("require_netwrok", "require_network", 1),
            ("min_fre", "min_free", 1),
            ("device", "device", 0),
            ("", "wait", 4),
            ("fstype", "allow", 6),
        ] {
            assert_eq!(distance(a, b), want, "{a} -> {b}");
        }
    }

    #[test]
    fn a_typo_finds_its_key_a_stranger_finds_none() {
        let dotted = |d: &str| key(d).map(|k| k.dotted);
        assert_eq!(dotted("volume.devcie"), Some("volume.device"));
        assert_eq!(dotted("volume.wiat"), Some("volume.wait"));
        assert_eq!(dotted("state_dri"), Some("state_dir"));
        // right name, wrong table
        assert_eq!(dotted("volume.socket"), Some("containerd.socket"));
        assert_eq!(dotted("device"), Some("volume.device"));
        assert_eq!(dotted("volume.colour"), None);
        assert_eq!(section("volum"), Some("volume"));
        assert_eq!(section("sandbx"), Some("sandbox"));
        assert_eq!(section("network"), None);
        assert_eq!(sections().next(), Some("containerd"));
    }
}
