//! `lint.budget`: the lint reads an image it does not trust, so its work on unit files is
//! bounded ([`super::facts::UNIT_BYTES`], [`super::facts::UNIT_ASSIGNMENTS`],
//! [`super::facts::SERVICES`]). Past the budget it stops reading units and fails here,
//! naming the limit and the file: a rule may then lack a unit it would have judged.

use super::facts::Image;
use crate::report::{Finding, Id};

pub fn budget(image: &Image) -> Finding {
    let id = Id::LintBudget;
    let b = &image.budget;
    let read = format!(
        "read {} unit files, {} bytes, {} assignments",
        b.files, b.bytes, b.assignments
    );
    match &b.exceeded {
        None => Finding::pass(
            id,
            format!(
                "the units fit the lint's budget ({} bytes, {} assignments, {} services)",
                b.max_bytes,
                b.max_assignments,
                super::facts::SERVICES
            ),
        )
        .evidence(read),
        Some(why) => Finding::fail(
            id,
            "the image's units exceed the lint's budget: the rest were not read, and no \
             rule judged them",
        )
        .evidence(why.clone())
        .evidence(read)
        .remedy(
            "a node image has a few hundred small units: remove the file named above (a \
             unit of megabytes, or many unit names linked to one file)",
        ),
    }
}
