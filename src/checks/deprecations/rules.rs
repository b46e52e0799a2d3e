//! containerd's deprecated settings: the keys of its config against the table of what
//! upstream deprecated (`table`), and what containerd itself reports, judged against the
//! running version. Pure: facts from [`super::facts`]; `guard lint` judges an image's
//! config with [`hits`] and [`lines`] too.

mod table;

use super::facts::{DeprecationFacts, Reported};
use crate::containerd::config::keys::SetKey;
use crate::host::kubelet::version::Version;
use crate::report::{Finding, Id};
pub use table::{Deprecated, TABLE};

/// The first containerd whose introspection `Server` answer carries its deprecation
/// warnings (`ctr deprecations list`).
pub const REPORTS_FROM: Version = Version(1, 7, 0);

/// A key of a config that a row of the table deprecates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub key: String,
    pub row: &'static Deprecated,
}

/// Every key of `keys` the table deprecates, in the config's order: by value where the
/// row names one, else where the key holds something (a key written empty, as
/// `containerd config default` writes them all, is no setting to replace).
pub fn hits(keys: &[SetKey]) -> Vec<Hit> {
    let matches = |row: &Deprecated, key: &SetKey| {
        row.key.len() == key.path.len()
            && row.key.iter().zip(&key.path).all(|(r, k)| *r == "*" || r == k)
            && match row.value {
                Some(v) => key.value.as_deref() == Some(v),
                None => !key.empty,
            }
    };
    let hit = |key: &SetKey| {
        let row = TABLE.iter().find(|row| matches(row, key))?;
        let key = match row.value {
            Some(v @ ("true" | "false")) => format!("{} = {v}", key.dotted()),
            Some(v) => format!("{} = \"{v}\"", key.dotted()),
            None => key.dotted(),
        };
        Some(Hit { key, row })
    };
    keys.iter().filter_map(hit).collect()
}

/// `2.4`
fn release((major, minor): (u32, u32)) -> String {
    format!("{major}.{minor}")
}

/// The hits that can be acted on now (the running containerd reads their replacement, or
/// its version is not known), and those that wait for the upgrade.
pub fn by_now(hits: Vec<Hit>, running: Option<Version>) -> (Vec<Hit>, Vec<Hit>) {
    hits.into_iter()
        .partition(|h| running.is_none_or(|v| (v.0, v.1) >= h.row.replaceable_from))
}

/// One evidence line a hit that waits for the upgrade: no warning, since this containerd
/// (`running`) does not read its replacement yet.
pub fn later_line(hit: &Hit, running: Option<Version>) -> String {
    let running = running.map(|v| format!(" ({v})")).unwrap_or_default();
    format!(
        "`{}` is removed in containerd {}; its replacement, {}, is read from containerd {} \
         on, not by this one{running}: change it with the upgrade ({})",
        hit.key,
        release(hit.row.removed_in),
        hit.row.instead,
        release(hit.row.replaceable_from),
        hit.row.reference
    )
}

/// One evidence line a hit: the key, the release that removes it, what the running
/// containerd (`running`, where known) makes of it, the fix and the reference.
pub fn line(hit: &Hit, running: Option<Version>) -> String {
    let removed = hit.row.removed_in;
    let past = match running {
        Some(v) if (v.0, v.1) >= removed => {
            format!(", which this containerd ({v}) is past: the setting is gone")
        }
        Some(v) => format!("; this containerd ({v}) still reads it"),
        None => String::new(),
    };
    format!(
        "`{}` is removed in containerd {}{past}; use {} instead ({})",
        hit.key,
        release(removed),
        hit.row.instead,
        hit.row.reference
    )
}

/// Each hit's line, then each deprecation containerd reports that no hit names.
pub fn lines(hits: &[Hit], reported: &[Reported], running: Option<Version>) -> Vec<String> {
    let told = |hit: &Hit| reported.iter().any(|r| r.id == hit.row.reference);
    let mut out: Vec<String> = hits
        .iter()
        .map(|h| match told(h) {
            true => format!("{}; containerd reports it too", line(h, running)),
            false => line(h, running),
        })
        .collect();
    let known = |r: &Reported| hits.iter().any(|h| h.row.reference == r.id);
    out.extend(
        reported
            .iter()
            .filter(|r| !known(r))
            .map(|r| format!("containerd reports {}: {}", r.id, r.message)),
    );
    out
}

/// `runtime.deprecations`: a warning at most (an upgrade hazard, never a broken node).
pub fn evaluate(facts: Option<&DeprecationFacts>) -> Finding {
    let id = Id::RuntimeDeprecations;
    let Some(f) = facts else {
        return Finding::skip(id, "containerd did not answer: its deprecations were not asked");
    };
    let hits = hits(&f.keys);
    let (reported, unread) = match &f.reported {
        Ok(list) => (list.as_slice(), None),
        Err(e) => (&[][..], Some(format!("containerd's deprecations could not be read: {e}"))),
    };
    let silent = match f.version {
        Some(v) if v < REPORTS_FROM => Some(format!(
            "containerd {v} keeps no deprecation warnings (its introspection `Server` reports them from {})",
            release((REPORTS_FROM.0, REPORTS_FROM.1))
        )),
        _ => unread,
    };
    let (hits, later) = by_now(hits, f.version);
    let later: Vec<String> = later.iter().map(|h| later_line(h, f.version)).collect();
    let lines = lines(&hits, reported, f.version);
    if lines.is_empty() {
        return later
            .into_iter()
            .fold(clean(id, f, silent), Finding::evidence);
    }
    let named: Vec<String> = hits
        .iter()
        .map(|h| format!("{} (removed in {})", h.key, release(h.row.removed_in)))
        .chain(reported.iter().filter(|r| !hits.iter().any(|h| h.row.reference == r.id)).map(|r| r.id.clone()))
        .collect();
    let mut finding = Finding::warn(
        id,
        format!("containerd's config uses deprecated settings: {}", named.join(", ")),
    )
    .remedy(format!(
        "replace each setting in {} as its line says, before upgrading containerd \
         (`ctr deprecations list` shows what containerd itself reports)",
        f.config_file
    ));
    for line in lines.into_iter().chain(later).chain(silent) {
        finding = finding.evidence(line);
    }
    finding
}

/// No deprecated setting: a pass, or a skip where containerd cannot say.
fn clean(id: Id, f: &DeprecationFacts, silent: Option<String>) -> Finding {
    let table = format!(
        "none of the {} key(s) of {} is deprecated upstream",
        f.keys.len(),
        f.config_file
    );
    match silent {
        Some(why) => Finding::skip(id, why).evidence(table),
        None => Finding::pass(id, "containerd reports no deprecated setting").evidence(table),
    }
}

#[cfg(test)]
mod tests;
