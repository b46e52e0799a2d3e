//! The remedies the volume forbids ([`Withheld`]): a restart that would start containerd
//! on the root filesystem's directory, a restore, a pull or a pin that would write into
//! a containerd whose root is not the verified volume. Each is refused and named, the
//! restart budget untouched; the look after the volume is mended carries them out.

use super::{Machine, World};
use crate::checks::volume::rules::Unverified;
use crate::phases::gate::decide::Withheld;
use crate::report::{Finding, Id};
use crate::state::ledger::{Action, Outcome};

impl<W: World> Machine<'_, W> {
    /// The volume as a remedy must see it. Not asked when phase 1 held containerd back
    /// this boot: that refusal (`restart.rs`) already names the volume and its fix.
    pub(super) fn volume_now(&self) -> Option<Unverified> {
        match self.w.phase1_held() {
            Some(_) => None,
            None => self.w.volume_unverified(),
        }
    }

    /// Reports each withheld remedy; the first refusal of a run is recorded in the state
    /// file (a refusal, never counted as a restart).
    pub(super) fn refuse(&mut self, withheld: &Withheld) {
        let reported = |m: &Self, id| m.remedies.iter().any(|f: &Finding| f.id == id);
        for f in self.refusals(withheld, false) {
            if f.id == Id::RemedyRestart && !reported(self, f.id) {
                let why = withheld.volume.restart_refusal();
                self.record("containerd", Action::Restart, Outcome::Refused, &why);
                // (saved now: a hold lets go of the lock, and the next look loads the file)
                let _ = self.save();
            }
            self.set(f);
        }
    }

    /// One finding per withheld remedy; for the dry run's account, a SKIP of what it would
    /// refuse.
    pub(super) fn refusals(&self, withheld: &Withheld, dry_run: bool) -> Vec<Finding> {
        let v = &withheld.volume;
        let refused = |id, status_fail: bool, summary: String| {
            let f = match (dry_run, status_fail) {
                (true, _) => Finding::skip(id, format!("dry run: {summary}")),
                (false, true) => Finding::fail(id, summary),
                (false, false) => Finding::warn(id, summary),
            };
            v.failed
                .iter()
                .cloned()
                .fold(f, Finding::evidence)
                .remedy(v.fix.clone())
        };
        let image = self.w.image_reference();
        let mut out = Vec::new();
        if let Some(reason) = withheld.restart {
            let why = v.restart_refusal();
            let summary = format!("not restarting containerd ({}): {why}", reason.text());
            out.push(refused(Id::RemedyRestart, true, summary));
        }
        if withheld.restore_image {
            let why = v.write_refusal("an import or a pull");
            out.push(refused(
                Id::RemedyRestoreImage,
                true,
                format!("not restoring {image}: {why}"),
            ));
        }
        if withheld.pin_image {
            // (a warning, as the unpinned image itself is: the node may still be usable)
            let why = v.write_refusal("the label");
            out.push(refused(
                Id::RemedyPinImage,
                false,
                format!("not labelling {image} pinned: {why}"),
            ));
        }
        out
    }
}
