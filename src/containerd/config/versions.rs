//! containerd's config versions as containerd reads them: which version a file is, and
//! the one migration of containerd 2.3 the guard must make per file to find the socket.
//!
//! - `version` absent or 0 is version 1; 1 (containerd 1.0), 2 (1.3), 3 (2.0) and 4 (2.3,
//!   whose `containerd config default` writes it) are known. A version newer than the
//!   guard knows is read as the newest it knows, with a note naming it: containerd accepts
//!   it or refuses it itself, and a guard that refused it would keep containerd down.
//! - containerd 2.3 migrates each file older than version 4 on its own before merging it
//!   (`serviceMigrate`): a `[grpc] address` becomes `plugins."io.containerd.server.v1.grpc"
//!   address`, unless that file has the plugin's table, which then wins. In a version 4
//!   file the top-level `[grpc]` is read by nothing (containerd says nothing either): the
//!   socket is the plugin's, or containerd's default.

use super::{absolute, get_str, ContainerdConfig, DEFAULT_ADDRESS};
use toml::{Table, Value};

/// The newest config version the guard knows (containerd 2.3's `ConfigVersion`).
pub const NEWEST: i64 = 4;
/// containerd 2.3's gRPC server plugin, where a version 4 config sets the socket.
pub const GRPC_SERVER: &str = "io.containerd.server.v1.grpc";
const PLUGIN_KEY: &str = "plugins.\"io.containerd.server.v1.grpc\".address";

/// The version `table` says, as the guard reads it, and a note when that is not the
/// version the file names.
pub fn of(table: &Table) -> Result<(i64, Option<String>), String> {
    match table.get("version") {
        None | Some(Value::Integer(0)) => Ok((1, None)),
        Some(Value::Integer(v @ 1..=NEWEST)) => Ok((*v, None)),
        Some(Value::Integer(v)) if *v > NEWEST => Ok((NEWEST, Some(newer(*v)))),
        Some(other) => Err(format!(
            "key `version`: {other} is not a config version (containerd reads 1 to {NEWEST}; \
             fix the file's `version`)"
        )),
    }
}

fn newer(v: i64) -> String {
    format!(
        "`version = {v}` is newer than this guard knows: read as version {NEWEST} (containerd \
         2.3's), the newest it knows; containerd itself accepts or refuses it (upgrade the \
         guard to read it as containerd does)"
    )
}

/// The socket: the gRPC server plugin's address (containerd 2.3, where every file older
/// than version 4 has had its `[grpc] address` moved there, [`versions::migrate_socket`]),
/// else an older file's `[grpc] address`. A version 4 file's `[grpc]` is read by nothing.
pub(super) fn read_socket(table: &toml::Table, c: &mut ContainerdConfig) -> Result<(), String> {
    let plugin = get_str(table, &["plugins", GRPC_SERVER, "address"])?;
    let top = get_str(table, &["grpc", "address"])?.filter(|a| !a.is_empty());
    let (address, key) = match (plugin.filter(|a| !a.is_empty()), top) {
        // (a `[grpc] address` moved there reads as the key the file wrote)
        (Some(p), Some(t)) if p == t && c.version < NEWEST => (p, "grpc.address"),
        (Some(p), _) => (p, PLUGIN_KEY),
        (None, Some(t)) if c.version < NEWEST => (t, "grpc.address"),
        (None, Some(_)) => {
            c.notes.push(format!(
                "`grpc.address` is read by nothing in a version 4 config (containerd 2.3 \
                 takes its socket from `{PLUGIN_KEY}`): containerd listens on its default \
                 {DEFAULT_ADDRESS}; move the address there"
            ));
            return Ok(());
        }
        (None, None) => return Ok(()),
    };
    c.address = absolute(key, address)?;
    c.address_key = Some(key.to_string());
    Ok(())
}

/// Whether a (migrated) file's table sets the socket.
pub fn sets_socket(table: &Table) -> bool {
    let address = table
        .get("plugins")
        .and_then(|p| p.get(GRPC_SERVER))
        .and_then(|g| g.get("address"));
    address
        .and_then(Value::as_str)
        .is_some_and(|a| !a.is_empty())
}

/// The key a file wrote its socket under: `grpc.address` when [`migrate_socket`] moved it.
pub fn key_written(moved: bool) -> &'static str {
    match moved {
        true => "grpc.address",
        false => PLUGIN_KEY,
    }
}

/// containerd 2.3's `serviceMigrate` of one file's table, for the socket: a file older
/// than version 4 with a `[grpc] address` and no gRPC server plugin table gets that table
/// with the address. True when it moved one.
pub fn migrate_socket(table: &mut Table) -> bool {
    let old = matches!(of(table), Ok((v, _)) if v < NEWEST);
    let address = table
        .get("grpc")
        .and_then(Value::as_table)
        .and_then(|g| g.get("address"))
        .filter(|a| a.as_str().is_some_and(|a| !a.is_empty()))
        .cloned();
    let (true, Some(address)) = (old, address) else {
        return false;
    };
    let plugins = table
        .entry("plugins")
        .or_insert_with(|| Value::Table(Table::new()));
    let Some(plugins) = plugins.as_table_mut() else {
        return false; // (not a table: the reading names the key)
    };
    if plugins.contains_key(GRPC_SERVER) {
        return false;
    }
    let server = Table::from_iter([("address".to_string(), address)]);
    plugins.insert(GRPC_SERVER.to_string(), Value::Table(server));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        text.parse().unwrap()
    }

    #[test]
    fn every_version_containerd_reads_is_read_and_a_newer_one_as_the_newest() {
        for (text, want) in [
            ("", 1),
            ("version = 0", 1),
            ("version = 2", 2),
            ("version = 4", 4),
        ] {
            assert_eq!(of(&table(text)), Ok((want, None)), "{text}");
        }
        let (v, note) = of(&table("version = 5")).unwrap();
        assert_eq!(v, NEWEST);
        assert!(note
            .unwrap()
            .starts_with("`version = 5` is newer than this guard knows"));
        for bad in ["version = -1", "version = \"4\""] {
            let e = of(&table(bad)).unwrap_err();
            assert!(e.starts_with("key `version`: "), "{e}");
        }
    }

    /// containerd's `TestLoadConfigWithV3GRPCImportsMergeSparseKeys` and
    /// `serviceMigrate`: `[grpc] address` of a version 2 or 3 file becomes the plugin's.
    #[test]
    fn an_older_files_grpc_address_moves_to_the_server_plugin_unless_it_has_one() {
        let mut t = table("version = 3\n[grpc]\naddress = \"/run/a.sock\"\n");
        assert!(migrate_socket(&mut t));
        let plugin = &t["plugins"][GRPC_SERVER]["address"];
        assert_eq!(plugin.as_str(), Some("/run/a.sock"));
        let both = "version = 2\n[grpc]\naddress = \"/run/a.sock\"\n\
                    [plugins.\"io.containerd.server.v1.grpc\"]\naddress = \"/run/b.sock\"\n";
        let mut t = table(both);
        assert!(!migrate_socket(&mut t), "the file's own plugin table wins");
        assert_eq!(
            t["plugins"][GRPC_SERVER]["address"].as_str(),
            Some("/run/b.sock")
        );
        let mut v4 = table("version = 4\n[grpc]\naddress = \"/run/a.sock\"\n");
        assert!(!migrate_socket(&mut v4), "a version 4 file is not migrated");
        let mut empty = table("version = 3\n[grpc]\naddress = \"\"\n");
        assert!(
            !migrate_socket(&mut empty),
            "an empty address moves nothing"
        );
    }
}
