//! The deprecations family: settings of containerd's config that a later containerd
//! removes, from containerd's own warnings and the table of upstream's deprecations,
//! judged against the running version. A warning at most: an upgrade hazard, never a
//! reason to hold kubelet.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Verdict};
use super::look::{Look, Stage};
use crate::host::kubelet::version::Version;
use crate::report::Id;

pub struct Deprecations;

impl Family for Deprecations {
    const IDS: &'static [Id] = &[Id::RuntimeDeprecations];
    const STAGE: Stage = Stage::Containerd;
    type Facts = facts::DeprecationFacts;

    /// containerd's warnings (one call), its version from the look's answer, and the keys
    /// of the config the guard already read. Not asked of a containerd the stale facts
    /// prove stale: it answers by writing under its root (`answers::facts::NOT_ASKED`).
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        let conn = look.conn()?;
        let version = look.containerd_version().and_then(Version::parse);
        let stale = look.writes_under_root().await;
        Some(facts::DeprecationFacts {
            version,
            reported: match stale {
                false => facts::reported(conn).await,
                true => Err(crate::checks::answers::facts::NOT_ASKED.to_string()),
            },
            keys: look.target.containerd_keys.clone(),
            config_file: look.target.containerd_file.clone(),
        })
    }

    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        Verdict::of([rules::evaluate(facts)])
    }
}
