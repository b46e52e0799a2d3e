//! Does containerd hold its metadata on the filesystem now mounted at its root?

pub mod facts;
mod mounts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct Stale;

impl Family for Stale {
    const IDS: &'static [Id] = &[Id::RuntimeStale];
    type Facts = facts::StaleFacts;
    const STAGE: Stage = Stage::Containerd;

    /// containerd's mounts beside the filesystem at its root, read on the thread for
    /// host reads; the guard's own mount table (when its caller reads one) stands in for
    /// containerd's in the same mount namespace.
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        // The one thread for host reads goes to the hygiene looks' pass over the cgroups
        // first (queued on their first poll, after this family's in registry order): this
        // read may wait there for `guard verify`'s mount table.
        tokio::task::yield_now().await;
        let socket = look.host.path(&look.target.socket);
        let (root, own_mounts) = (look.target.root.clone(), look.own_mounts.clone());
        let read = super::off_the_loop("stale facts", look.host, move |host| {
            let own = || own_mounts.as_ref().and_then(|read| read());
            facts::gather(host, &socket, &root, own)
        });
        Some(read.await)
    }

    /// A stale containerd asks for a restart.
    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        let (finding, stale) = rules::evaluate(facts);
        Verdict::of([finding]).asking(stale, Remedy::Restart)
    }
}
