//! kubelet's command line as systemd builds it from its unit: `Environment=` and
//! `EnvironmentFile=` (the files override `Environment=`, a later file an earlier one),
//! then `ExecStart=` with `$VAR` (a word of its own: the value split at whitespace) and
//! `${VAR}` (inside a word: the exact value) replaced. Only what `ExecStart=` references
//! reaches kubelet, so a variable it does not name sets nothing.
//!
//! An environment file is read as systemd's `load_env_file()` reads it: `KEY=VALUE`
//! lines; `#` and `;` at a line's start begin a comment (a trailing `\` continues it);
//! an unquoted value ends at the line's end, a trailing `\` joins the next line, `\x` is
//! `x`, trailing blanks are dropped; `'...'` is literal; in `"..."`, `\` escapes only
//! `"`, `\`, `` ` ``, `$` and a newline (a continuation), and is kept before anything
//! else. Pure: the files are outside input (kubeadm writes one, an operator the other).

use std::collections::BTreeMap;

/// An environment file's assignments, in file order.
pub fn parse_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        // before a key: blank lines and leading blanks, comments
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None => return out,
            Some('#' | ';') => {
                skip_comment(&mut chars);
                continue;
            }
            Some(_) => {}
        }
        let mut key = String::new();
        let mut assigned = false;
        for c in chars.by_ref() {
            match c {
                '=' => {
                    assigned = true;
                    break;
                }
                '\n' => break,
                c => key.push(c),
            }
        }
        if !assigned {
            continue;
        }
        let value = value(&mut chars);
        let key = key.trim();
        if is_name(key) {
            out.push((key.to_string(), value));
        }
    }
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

fn skip_comment(chars: &mut Chars) {
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\n' => return,
            _ => {}
        }
    }
}

/// One value after `=`, up to the end of its (possibly continued) line.
fn value(chars: &mut Chars) -> String {
    let mut out = String::new();
    // blanks after `=` are not part of the value
    while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
    // where the unquoted text's trailing blanks start, to drop them at the end
    let mut kept = 0;
    while let Some(c) = chars.next() {
        match c {
            '\n' => break,
            '\'' => {
                out.extend(chars.by_ref().take_while(|c| *c != '\''));
                kept = out.len();
            }
            '"' => {
                double_quoted(chars, &mut out);
                kept = out.len();
            }
            '\\' => {
                match chars.next() {
                    Some('\n') | None => {}
                    Some(c) => out.push(c),
                }
                kept = out.len();
            }
            c => {
                out.push(c);
                if !c.is_whitespace() {
                    kept = out.len();
                }
            }
        }
    }
    out.truncate(kept);
    out
}

fn double_quoted(chars: &mut Chars, out: &mut String) {
    while let Some(c) = chars.next() {
        match c {
            '"' => return,
            '\\' => match chars.next() {
                Some(c @ ('"' | '\\' | '`' | '$')) => out.push(c),
                Some('\n') | None => {}
                Some(c) => {
                    out.push('\\');
                    out.push(c);
                }
            },
            c => out.push(c),
        }
    }
}

fn is_name(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The words of a unit's command line or `Environment=` value, unquoted as systemd
/// splits them (`"..."` and `'...'` group, `\` escapes the next character).
pub fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return out;
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '\'' => word.extend(chars.by_ref().take_while(|c| *c != '\'')),
                '"' => {
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => break,
                            '\\' => word.extend(chars.next()),
                            c => word.push(c),
                        }
                    }
                }
                '\\' => word.extend(chars.next()),
                c => word.push(c),
            }
        }
        out.push(word);
    }
}

/// `Environment=` assignments: each word `KEY=VALUE`.
pub fn assignments(line: &str) -> Vec<(String, String)> {
    words(line)
        .into_iter()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            is_name(k).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// The argv an `ExecStart=` line gives its program (the prefixes `-@:+!` dropped; with
/// `:` nothing is expanded), with `env`'s variables replaced.
pub fn command_line(line: &str, env: &BTreeMap<String, String>) -> Vec<String> {
    let (prefix, rest) = crate::host::units::exec_prefix(line);
    let expand = !prefix.contains(':');
    let mut argv = Vec::new();
    for word in words(rest) {
        if !expand {
            argv.push(word);
            continue;
        }
        match word.strip_prefix('$').filter(|name| is_name(name)) {
            Some(name) => argv.extend(env.get(name).map(|v| words(v)).unwrap_or_default()),
            None => argv.push(braced(&word, env)),
        }
    }
    argv
}

/// `${NAME}` inside a word: the exact value (nothing when unset); `$$` is a `$`.
fn braced(word: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after.strip_prefix('{').and_then(|a| a.split_once('}')) {
            out.push_str(env.get(name).map_or("", String::as_str));
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
