//! Every key a containerd config sets, as plain data: what the deprecation table is
//! judged against (`runtime.deprecations`, `lint.containerd-deprecations`). A key is its
//! path of table names (`plugins`, `io.containerd.grpc.v1.cri`, `registry`, `mirrors`)
//! and, for a string, its value (`runtime_type = "io.containerd.runc.v1"`): some settings
//! are deprecated by value, not by name.

use toml::{Table, Value};

/// At most this many keys are listed, and tables this deep walked: a config file is at
/// most 1 MiB, and no setting containerd documents is nested deeper.
const MAX_KEYS: usize = 10_000;
const MAX_DEPTH: usize = 12;

/// One key a config sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetKey {
    pub path: Vec<String>,
    /// The value, when it is a string or a boolean (`true`, `false`).
    pub value: Option<String>,
    /// It holds nothing: an empty string or list, `false`, zero, or a table of such
    /// values. `containerd config default` writes every key so: one that holds nothing
    /// is the same as one not written.
    pub empty: bool,
}

impl SetKey {
    /// The key as containerd's docs spell it: parts with a dot quoted
    /// (`plugins."io.containerd.grpc.v1.cri".registry.mirrors`).
    pub fn dotted(&self) -> String {
        dotted(&self.path)
    }
}

/// A key's path as containerd's docs spell it, parts with a dot quoted.
pub fn dotted(path: &[String]) -> String {
    let quoted = path.iter().map(|p| match p.contains('.') {
        true => format!("\"{p}\""),
        false => p.clone(),
    });
    quoted.collect::<Vec<_>>().join(".")
}

/// Every key of `table` (tables included, arrays not walked into), in file order.
pub fn set_keys(table: &Table) -> Vec<SetKey> {
    let mut keys = Vec::new();
    walk(table, &mut Vec::new(), &mut keys);
    keys
}

fn walk(table: &Table, path: &mut Vec<String>, keys: &mut Vec<SetKey>) {
    for (name, value) in table {
        if keys.len() >= MAX_KEYS {
            return;
        }
        path.push(name.clone());
        let text = match value {
            Value::String(s) => Some(s.clone()),
            Value::Boolean(b) => Some(b.to_string()),
            _ => None,
        };
        keys.push(SetKey {
            path: path.clone(),
            value: text,
            empty: holds_nothing(value),
        });
        if let (Value::Table(inner), true) = (value, path.len() < MAX_DEPTH) {
            walk(inner, path, keys);
        }
        path.pop();
    }
}

/// An empty string or list, `false`, zero, or a table of only such values.
fn holds_nothing(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Boolean(b) => !b,
        Value::Integer(i) => *i == 0,
        Value::Float(f) => *f == 0.0,
        Value::Table(t) => t.values().all(holds_nothing),
        Value::Datetime(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_listed_with_its_string_value_and_quoted_where_it_has_a_dot() {
        let table: Table = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\nendpoint = [\"https://m\"]\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v1\"\n"
            .parse()
            .unwrap();
        let keys = set_keys(&table);
        let dotted: Vec<String> = keys.iter().map(SetKey::dotted).collect();
        assert!(dotted.contains(&"plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors".into()));
        let runtime = keys
            .iter()
            .find(|k| k.path.last().unwrap() == "runtime_type");
        assert_eq!(
            runtime.and_then(|k| k.value.as_deref()),
            Some("io.containerd.runc.v1")
        );
    }

    #[test]
    fn a_deep_or_wide_table_is_walked_within_bounds() {
        let deep = format!("{}b = 1", "a.".repeat(40));
        let keys = set_keys(&deep.parse().unwrap());
        assert!(keys.iter().all(|k| k.path.len() <= MAX_DEPTH), "{keys:?}");
        let wide: String = (0..MAX_KEYS + 5).map(|i| format!("k{i} = 1\n")).collect();
        assert_eq!(set_keys(&wide.parse().unwrap()).len(), MAX_KEYS);
    }
}
