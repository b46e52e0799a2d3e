//! The sandbox image: imported from `[sandbox] archives` first, then pulled through CRI
//! where the config allows, each attempt bounded and recorded; and a present image that
//! is not pinned, labelled pinned.

use super::{FamilyId, Machine, Step, World};
use crate::remedies::restore::Import;
use crate::report::{Finding, Id};
use crate::state::ledger::{Action, Outcome};
use std::time::Duration;

/// How often a run goes through `[sandbox] archives`: once, and once more only when every
/// import of that round failed (none refused, none done), as when containerd is killed or
/// restarted under the import (`ctr` cannot dial it). The second round comes after a
/// later look, which found containerd answering again; a broken archive costs one more
/// bounded import, never more.
#[derive(Debug, Default)]
pub(super) struct ArchiveRounds {
    taken: u8,
    all_failed: bool,
}

impl ArchiveRounds {
    const MAX: u8 = 2;

    fn another(&self) -> bool {
        self.taken == 0 || (self.all_failed && self.taken < Self::MAX)
    }
}

impl<W: World> Machine<'_, W> {
    pub(super) async fn restore(&mut self) -> Step {
        if self.archives.another() {
            self.archives.taken += 1;
            if self.import_archives().await {
                return Step::Observe;
            }
        }
        match self.s.sandbox.pull && self.pulls < self.pull_attempts() {
            true => Step::Pull,
            false => Step::Hold,
        }
    }

    /// `[sandbox] pull_attempts`, but one for a run that only keeps the node as it is
    /// (`guard hygiene`: the next timer period tries again), so that it stays within its
    /// unit's timeout.
    fn pull_attempts(&self) -> u32 {
        match self.mode.scope.covers(FamilyId::Answers) {
            true => self.s.sandbox.pull_attempts,
            false => 1,
        }
    }

    /// Tries each `[sandbox] archives` entry in order until one imports. True if one did.
    async fn import_archives(&mut self) -> bool {
        let wanted = self.w.image_name();
        let mut tried = Vec::new();
        let (mut restored, mut failed, mut refused) = (false, false, false);
        for a in self.s.sandbox.archives.clone() {
            let item = a.display().to_string();
            if !self.w.archive_present(&a) {
                tried.push(format!("{item}: not there"));
                continue;
            }
            let importing = format!("importing {wanted} from {item}");
            self.progress
                .waiting(&importing, self.s.sandbox.pull_timeout);
            match self.progress.during(self.w.import(&a)).await {
                Import::Imported(text) => {
                    self.record(&item, Action::Import, Outcome::Ok, &text);
                    tried.push(text);
                    restored = true;
                    break;
                }
                Import::Refused(why) => {
                    refused = true;
                    self.record(&item, Action::Import, Outcome::Refused, &why);
                    tried.push(format!("REFUSED: {why}"));
                }
                Import::Failed(why) => {
                    failed = true;
                    let line = format!("failed: {why}");
                    self.record(&item, Action::Import, Outcome::Failed, &line);
                    tried.push(format!("import failed: {why}"));
                }
            }
        }
        self.archives.all_failed = failed && !refused && !restored;
        let f = self.restore_finding(restored, &wanted);
        self.set(tried.into_iter().fold(f, Finding::evidence));
        let _ = self.save();
        restored
    }

    fn restore_finding(&self, restored: bool, wanted: &str) -> Finding {
        const ID: Id = Id::RemedyRestoreImage;
        if restored {
            Finding::pass(ID, format!("restored {wanted} from an archive"))
        } else if self.s.sandbox.archives.is_empty() {
            Finding::skip(ID, "no [sandbox] archives configured")
        } else {
            Finding::warn(ID, format!("no archive restored {wanted}"))
                .remedy("replace the archive with a good copy of the sandbox image")
        }
    }

    /// One bounded CRI pull; between attempts the lock is released and the node looked at
    /// again (another guard may have restored the image).
    pub(super) async fn pull(&mut self) -> Step {
        self.pulls += 1;
        let (attempt, attempts) = (self.pulls, self.pull_attempts());
        let reference = self.w.image_reference();
        let pulling = format!("pulling {reference} through CRI, attempt {attempt} of {attempts}");
        self.extend(self.s.sandbox.pull_timeout + super::EXTEND_SLACK);
        self.progress.waiting(&pulling, self.s.sandbox.pull_timeout);
        match self.progress.during(self.w.pull()).await {
            Ok(text) => {
                self.record(&reference, Action::Pull, Outcome::Ok, &text);
                self.set(Finding::pass(Id::RemedyPull, text));
                let _ = self.save();
                return Step::Observe;
            }
            Err(e) => {
                let line = format!("attempt {attempt}: {e}");
                self.record(&reference, Action::Pull, Outcome::Failed, &line);
                self.pull_errors.push(line);
            }
        }
        let f = Finding::warn(
            Id::RemedyPull,
            format!("could not pull {reference} through CRI"),
        )
        .remedy(
            "check the registry and containerd's registry configuration, or ship the image \
                 as an archive",
        );
        self.set(self.pull_errors.iter().cloned().fold(f, Finding::evidence));
        let _ = self.save();
        if attempt >= attempts || (self.mode.hold && self.left().is_zero()) {
            return Step::Hold;
        }
        self.unlock();
        let pause = self
            .pull_pause
            .next()
            .min(self.left().max(Duration::from_millis(100)));
        self.w.sleep(pause).await;
        Step::Observe
    }

    /// Labels the present sandbox image pinned, once per run, then looks again: CRI's
    /// answer on the labelled image says whether this containerd pins at all.
    pub(super) async fn pin(&mut self) -> Step {
        self.pin_tried = true;
        let name = self.w.image_name();
        let (outcome, finding) = match self.w.pin().await {
            Ok(()) => (
                Outcome::Ok,
                Finding::pass(
                    Id::RemedyPinImage,
                    format!(
                        "labelled {name} {}=pinned",
                        crate::containerd::image::PINNED_LABEL
                    ),
                ),
            ),
            Err(e) => (
                Outcome::Failed,
                Finding::warn(Id::RemedyPinImage, format!("could not label {name} pinned"))
                    .evidence(e.to_string()),
            ),
        };
        self.record(&name, Action::Pin, outcome, &finding.summary.clone());
        self.set(finding);
        let _ = self.save();
        Step::Observe
    }
}
