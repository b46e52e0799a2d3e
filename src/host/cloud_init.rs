//! What a cloud-init config (the image's `/etc/cloud/cloud.cfg`, `cloud.cfg.d/*.cfg`, or a
//! node's `#cloud-config` user data) does to disks: `disk_setup`, `fs_setup`, `mounts`,
//! and whether its `runcmd`/`bootcmd` runs kubeadm. Read as yaml-rust2 parser events into
//! a small tree of the top-level keys wanted, bounded in nodes; an alias is never
//! expanded (it reads as an empty value).

use yaml_rust2::parser::{Event, Parser};

/// Nodes kept from one document at most: a cloud config is a few hundred.
const MAX_NODES: usize = 20_000;
const WANTED: &[&str] = &["disk_setup", "fs_setup", "mounts", "runcmd", "bootcmd"];

/// One cloud config, as far as the lint needs it. Lines are 1-based.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cloud {
    /// `mounts` entries: `[device, mount point, fstype, options, ...]`, with their line.
    pub mounts: Vec<(Vec<String>, usize)>,
    /// `fs_setup` entries' `label` and `device`, with their line.
    pub fs_setup: Vec<(Option<String>, Option<String>, usize)>,
    /// The line of `disk_setup`, when set.
    pub disk_setup: Option<usize>,
    /// The line of a `runcmd`/`bootcmd` entry that runs kubeadm.
    pub kubeadm: Option<usize>,
}

#[derive(Debug, Clone)]
enum Node {
    Scalar(String, usize),
    Seq(Vec<Node>, usize),
    Map(Vec<(String, Node)>, usize),
    /// An alias, or a key that is not a plain scalar.
    Other,
}

impl Node {
    fn line(&self) -> usize {
        match self {
            Node::Scalar(_, l) | Node::Seq(_, l) | Node::Map(_, l) => *l,
            Node::Other => 0,
        }
    }
    fn text(&self) -> Option<&str> {
        match self {
            Node::Scalar(s, _) => Some(s),
            _ => None,
        }
    }
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m, _) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Parses a cloud config. Text that is not `#cloud-config` user data is the caller's to
/// reject; here any YAML mapping is read.
pub fn parse(text: &str) -> Result<Cloud, String> {
    let mut parser = Parser::new_from_str(text);
    let mut budget = MAX_NODES;
    let mut next = move || -> Result<(Event, usize), String> {
        budget = budget
            .checked_sub(1)
            .ok_or_else(|| format!("more than {MAX_NODES} YAML nodes; not read"))?;
        parser
            .next_token()
            .map(|(e, m)| (e, m.line()))
            .map_err(|e| format!("not YAML: {e}"))
    };
    let mut out = Cloud::default();
    loop {
        match next()?.0 {
            Event::MappingStart(..) => break,
            Event::StreamEnd => return Ok(out),
            Event::StreamStart | Event::DocumentStart => {}
            Event::Scalar(s, ..) if s.is_empty() => return Ok(out),
            _ => return Err("not a mapping of settings at the top".into()),
        }
    }
    loop {
        let (key, line) = match next()? {
            (Event::MappingEnd, _) => return Ok(out),
            (Event::Scalar(key, ..), line) => (key, line),
            _ => return Err("a top-level key that is not a plain name".into()),
        };
        let value = node(&mut next)?;
        if WANTED.contains(&key.as_str()) {
            take(&mut out, &key, line, &value);
        }
    }
}

fn take(out: &mut Cloud, key: &str, line: usize, value: &Node) {
    let items: &[Node] = match value {
        Node::Seq(items, _) => items,
        _ => &[],
    };
    match key {
        "disk_setup" => out.disk_setup = Some(line),
        "mounts" => out.mounts.extend(items.iter().filter_map(|m| {
            match m {
                Node::Seq(fields, l) => Some((
                    fields
                        .iter()
                        .map(|f| f.text().unwrap_or_default().to_string())
                        .collect(),
                    *l,
                )),
                _ => None,
            }
        })),
        "fs_setup" => out.fs_setup.extend(items.iter().map(|fs| {
            let field = |k| fs.get(k).and_then(Node::text).map(str::to_string);
            (field("label"), field("device"), fs.line())
        })),
        _ => {
            // runcmd/bootcmd: a string, or a list of words, per entry
            let runs_kubeadm = |n: &Node| match n {
                Node::Scalar(s, _) => s.contains("kubeadm"),
                Node::Seq(words, _) => words
                    .iter()
                    .any(|w| w.text().is_some_and(|t| t.contains("kubeadm"))),
                _ => false,
            };
            if let Some(hit) = items.iter().find(|n| runs_kubeadm(n)) {
                out.kubeadm.get_or_insert(hit.line());
            }
        }
    }
}

/// One value: a scalar, an alias, or a whole sequence or mapping, nested at most
/// [`MAX_DEPTH`] deep (the parser itself keeps no stack; this walk would).
fn node(next: &mut impl FnMut() -> Result<(Event, usize), String>) -> Result<Node, String> {
    let first = next()?;
    value(first, next, 0)
}

const MAX_DEPTH: usize = 64;

fn value(
    (event, line): (Event, usize),
    next: &mut impl FnMut() -> Result<(Event, usize), String>,
    depth: usize,
) -> Result<Node, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested more than {MAX_DEPTH} deep; not read"));
    }
    Ok(match event {
        Event::Scalar(s, ..) => Node::Scalar(s, line),
        Event::SequenceStart(..) => {
            let mut items = Vec::new();
            loop {
                match next()? {
                    (Event::SequenceEnd, _) => break Node::Seq(items, line),
                    e => items.push(value(e, next, depth + 1)?),
                }
            }
        }
        Event::MappingStart(..) => {
            let mut entries = Vec::new();
            loop {
                let key = match next()? {
                    (Event::MappingEnd, _) => break Node::Map(entries, line),
                    e => value(e, next, depth + 1)?,
                };
                let val = {
                    let e = next()?;
                    value(e, next, depth + 1)?
                };
                if let Node::Scalar(k, _) = key {
                    entries.push((k, val));
                }
            }
        }
        Event::StreamEnd | Event::DocumentEnd | Event::SequenceEnd | Event::MappingEnd => {
            return Err("the document ends inside a value".into())
        }
        _ => Node::Other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mounts_fs_setup_disk_setup_and_kubeadm() {
        let text = "#cloud-config\n\
            disk_setup:\n  /dev/sdb: {table_type: gpt, layout: true}\n\
            fs_setup:\n  - label: containerd\n    filesystem: ext4\n    device: /dev/sdb1\n\
            mounts:\n  - [LABEL=containerd, /var/lib/containerd, ext4, \"defaults,nofail\"]\n  - [swap, none]\n\
            runcmd:\n  - echo hi\n  - [kubeadm, join, --config, /run/kubeadm.yaml]\n\
            users: &u [a, b]\nother: *u\n";
        let c = parse(text).unwrap();
        assert_eq!(c.disk_setup, Some(2));
        assert_eq!(
            c.fs_setup,
            vec![(Some("containerd".into()), Some("/dev/sdb1".into()), 5)]
        );
        assert_eq!(c.mounts.len(), 2);
        assert_eq!(
            c.mounts[0].0,
            [
                "LABEL=containerd",
                "/var/lib/containerd",
                "ext4",
                "defaults,nofail"
            ]
        );
        assert_eq!(c.mounts[0].1, 9);
        assert_eq!(c.kubeadm, Some(13));
    }

    #[test]
    fn hostile_documents_are_refused_or_bounded() {
        assert!(parse("- a\n- b\n").is_err(), "a list at the top");
        assert_eq!(parse("").unwrap(), Cloud::default());
        let deep = format!("mounts: {}{}\n", "[".repeat(30_000), "]".repeat(30_000));
        let e = parse(&deep).unwrap_err();
        assert!(e.contains("YAML nodes") || e.contains("not YAML"), "{e}");
        // nested aliases are never expanded
        let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for i in 0..20 {
            laughs.push_str(&format!(
                "b{i}: &b{i} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
                p = if i == 0 {
                    "a".to_string()
                } else {
                    format!("b{}", i - 1)
                }
            ));
        }
        laughs.push_str("mounts: *b19\n");
        assert_eq!(parse(&laughs).unwrap().mounts, vec![]);
    }
}
