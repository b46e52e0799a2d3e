//! containerd in the image: its config (imports merged), read through [`Tree`] (its
//! package's version: [`super::dpkg`]).

use super::Source;
use crate::containerd::config::{self as cd_config, ContainerdConfig};
use crate::host::tree::Tree;
use std::path::Path;

pub fn config(tree: &Tree, path: &Path) -> Source<ContainerdConfig> {
    Source {
        file: path.display().to_string(),
        read: cd_config::load_image(tree, path).map_err(|e| e.text().to_string()),
    }
}
