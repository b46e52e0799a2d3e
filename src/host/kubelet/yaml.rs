//! kubelet's configuration file, walked as parser events (yaml-rust2): only the top-level
//! keys the guard needs are read, each with its line for evidence, and an alias is never
//! expanded (a document of nested aliases cannot make it allocate).

use super::Eviction;
use std::collections::BTreeMap;
use yaml_rust2::parser::{Event, Parser};

/// A plain setting of kubelet's configuration file, and its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub value: String,
    pub line: usize,
}

/// What the guard reads of a kubelet configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSettings {
    pub eviction: Eviction,
    /// The settings of [`PLAIN_KEYS`] the file sets, each with its line.
    pub plain: BTreeMap<&'static str, Located>,
    /// `featureGates`, each gate with its line.
    pub feature_gates: BTreeMap<String, Located>,
}

/// The plain top-level settings kept (the rest is skipped unread).
pub const PLAIN_KEYS: [&str; 4] = [
    "containerRuntimeEndpoint",
    "imageServiceEndpoint",
    "cgroupDriver",
    "failCgroupV1",
];

/// The next event and its 1-based line.
type Next<'a> = dyn FnMut() -> Result<(Event, usize), String> + 'a;

/// A kubelet configuration file's settings the guard judges.
pub fn parse_file(text: &str) -> Result<FileSettings, String> {
    let mut events = Parser::new_from_str(text);
    let mut next = move || -> Result<(Event, usize), String> {
        let (event, mark) = events.next_token().map_err(|e| format!("not YAML: {e}"))?;
        Ok((event, mark.line()))
    };
    let mut out = FileSettings::default();
    // the first document's top-level mapping
    loop {
        match next()?.0 {
            Event::MappingStart(..) => break,
            Event::StreamEnd => return Ok(out),
            Event::StreamStart | Event::DocumentStart => {}
            _ => return Err("not a mapping of settings at the top".into()),
        }
    }
    loop {
        let key = match next()?.0 {
            Event::MappingEnd => return Ok(out),
            Event::Scalar(key, ..) => key,
            _ => return Err("a top-level key that is not a plain name".into()),
        };
        setting(&mut next, &key, &mut out)?;
    }
}

/// Reads the value of the top-level `key` into `out`, or skips it.
fn setting(next: &mut Next, key: &str, out: &mut FileSettings) -> Result<(), String> {
    match key {
        "evictionHard" => out.eviction.hard = Some(plain(string_map(next, key)?)),
        "evictionSoft" => out.eviction.soft = Some(plain(string_map(next, key)?)),
        "featureGates" => out.feature_gates = string_map(next, key)?,
        "mergeDefaultEvictionSettings" => match next()?.0 {
            Event::Scalar(v, ..) => out.eviction.merge_defaults = v == "true",
            _ => return Err(format!("{key}: not true or false")),
        },
        _ => match PLAIN_KEYS.iter().find(|k| **k == key) {
            Some(kept) => match next()? {
                (Event::Scalar(value, ..), line) => {
                    out.plain.insert(kept, Located { value, line });
                }
                _ => {
                    return Err(format!(
                        "{key}: not a plain value (an alias, a list or a map)"
                    ))
                }
            },
            None => skip_value(next)?,
        },
    }
    Ok(())
}

fn plain(map: BTreeMap<String, Located>) -> BTreeMap<String, String> {
    map.into_iter().map(|(k, v)| (k, v.value)).collect()
}

/// A mapping of plain scalars (`imagefs.available: "15%"`); an empty value (`evictionHard:`)
/// is an empty map, as kubelet reads it.
fn string_map(next: &mut Next, key: &str) -> Result<BTreeMap<String, Located>, String> {
    let mut map = BTreeMap::new();
    match next()?.0 {
        Event::MappingStart(..) => {}
        Event::Scalar(v, ..) if v.is_empty() || v == "null" || v == "~" => return Ok(map),
        _ => return Err(format!("{key}: not a mapping of names to values")),
    }
    loop {
        let name = match next()?.0 {
            Event::MappingEnd => return Ok(map),
            Event::Scalar(s, ..) => s,
            _ => return Err(format!("{key}: a name that is not plain")),
        };
        match next()? {
            (Event::Scalar(value, ..), line) => map.insert(name, Located { value, line }),
            _ => {
                return Err(format!(
                    "{key}.{name}: not a plain value (an alias or a list)"
                ))
            }
        };
    }
}

/// Skips one value (a scalar, an alias, or a whole sequence or mapping).
fn skip_value(next: &mut Next) -> Result<(), String> {
    let mut depth = 0usize;
    loop {
        match next()?.0 {
            Event::MappingStart(..) | Event::SequenceStart(..) => depth += 1,
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            Event::StreamEnd | Event::DocumentEnd => {
                return Err("the document ends inside a value".into())
            }
            _ => {}
        }
        if depth == 0 {
            return Ok(());
        }
    }
}
