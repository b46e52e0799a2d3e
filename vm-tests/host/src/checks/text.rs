//! The text tools the checks were written with in shell (grep -iE, cut -c, awk's numbers,
//! printf), with the same meaning, so that a ported check judges a report as it did.

use regex::{Regex, RegexBuilder};
use std::sync::{Mutex, OnceLock};

/// A pattern compiled once per process (the checks use a few dozen), case-insensitive as
/// `grep -i`. An invalid pattern is a bug in a check: it panics naming the pattern.
fn re(pat: &str, icase: bool) -> Regex {
    type Cache = Mutex<Vec<((String, bool), Regex)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = c.iter().find(|(k, _)| k.0 == pat && k.1 == icase) {
        return r.clone();
    }
    let r = RegexBuilder::new(pat)
        .case_insensitive(icase)
        .build()
        .unwrap_or_else(|e| panic!("check pattern {pat:?}: {e}"));
    c.push(((pat.to_string(), icase), r.clone()));
    r
}

/// `grep -qiE PAT <<<TEXT`: some line of TEXT matches (an empty TEXT is one empty line).
pub fn has(text: &str, pat: &str) -> bool {
    let r = re(pat, true);
    text.split('\n').any(|l| r.is_match(l))
}

pub fn lacks(text: &str, pat: &str) -> bool {
    !has(text, pat)
}

/// `grep -cE PAT` (case-sensitive) over TEXT's lines; an empty TEXT counts no line.
pub fn count(text: &str, pat: &str) -> usize {
    let r = re(pat, false);
    lines(text).filter(|l| r.is_match(l)).count()
}

/// `grep -ciE PAT`.
pub fn count_i(text: &str, pat: &str) -> usize {
    let r = re(pat, true);
    lines(text).filter(|l| r.is_match(l)).count()
}

/// `grep -m1 -E PAT` (case-sensitive): the first matching line, "" when none.
pub fn first(text: &str, pat: &str) -> String {
    let r = re(pat, false);
    lines(text)
        .find(|l| r.is_match(l))
        .unwrap_or("")
        .to_string()
}

/// `grep -m1 -iE PAT`.
pub fn first_i(text: &str, pat: &str) -> String {
    let r = re(pat, true);
    lines(text)
        .find(|l| r.is_match(l))
        .unwrap_or("")
        .to_string()
}

/// `grep -E PAT` (case-sensitive): the matching lines.
pub fn grep(text: &str, pat: &str) -> Vec<String> {
    let r = re(pat, false);
    lines(text)
        .filter(|l| r.is_match(l))
        .map(str::to_string)
        .collect()
}

/// `grep -oE PAT` (case-sensitive): every match, in order.
pub fn only(text: &str, pat: &str) -> Vec<String> {
    let r = re(pat, false);
    lines(text)
        .flat_map(|l| {
            r.find_iter(l)
                .map(|m| m.as_str().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The lines of a `$(...)` value: none for "".
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let t = if text.is_empty() { None } else { Some(text) };
    t.into_iter().flat_map(|t| t.split('\n'))
}

/// `grep -c .`: the non-empty lines.
pub fn nonempty(text: &str) -> usize {
    lines(text).filter(|l| !l.is_empty()).count()
}

/// `cut -c1-N`, line by line (bytes, as GNU cut; never inside a character).
pub fn cut(text: &str, n: usize) -> String {
    let cut_line = |l: &str| -> String {
        let mut end = n.min(l.len());
        while !l.is_char_boundary(end) {
            end -= 1;
        }
        l[..end].to_string()
    };
    text.split('\n')
        .map(cut_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `head -n N` of a `$(...)` value.
pub fn head(text: &str, n: usize) -> String {
    lines(text).take(n).collect::<Vec<_>>().join("\n")
}

/// `tail -n N`.
pub fn tail(text: &str, n: usize) -> String {
    let all: Vec<&str> = lines(text).collect();
    all[all.len().saturating_sub(n)..].join("\n")
}

/// `tr '\n' ' '` of a `$(...)` value, as printed: lines joined by blanks, a trailing one.
pub fn oneline(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    format!("{} ", text.replace('\n', " "))
}

/// awk's number of a string: its longest numeric prefix, 0 when none.
pub fn awk_num(s: &str) -> f64 {
    let s = s.trim_start();
    let r = re(r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", false);
    r.find(s)
        .and_then(|m| m.as_str().parse().ok())
        .unwrap_or(0.0)
}

/// `[ "$a" -gt 0 ] && [ "$b" -gt 0 ] && [ "$a" -le "$b" ]`: both happened, in this order.
pub fn lt(a: u64, b: u64) -> bool {
    a > 0 && b > 0 && a <= b
}

/// Seconds between two monotonic microsecond stamps, "%.2f".
pub fn secs(a: impl AsF64, b: impl AsF64) -> String {
    format!("{:.2}", (b.as_f64() - a.as_f64()) / 1e6)
}

/// A stamp as the shell passed it to awk: a number, or a string awk reads as one.
pub trait AsF64 {
    fn as_f64(&self) -> f64;
}
impl AsF64 for u64 {
    fn as_f64(&self) -> f64 {
        *self as f64
    }
}
impl AsF64 for &str {
    fn as_f64(&self) -> f64 {
        awk_num(self)
    }
}
impl AsF64 for String {
    fn as_f64(&self) -> f64 {
        awk_num(self)
    }
}

/// The monotonic stamp of a `[   12.345678] ...` journal line, "" when it has none.
pub fn stamp(line: &str) -> String {
    let r = re(r"^\[ *([0-9.]*)\]", false);
    r.captures(line)
        .map(|c| c[1].to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grep_like() {
        assert!(has("x\nFoo bar", "^foo"));
        assert!(has("", "^$"));
        assert!(lacks("abc", "d"));
        assert_eq!(count("", "."), 0);
        assert_eq!(count("a\nb\na", "a"), 2);
        assert_eq!(first("a1\nb2\nb3", "^b"), "b2");
        assert_eq!(nonempty("a\n\nb"), 2);
    }

    #[test]
    fn numbers_and_text() {
        assert_eq!(awk_num("12.5s"), 12.5);
        assert_eq!(awk_num("x"), 0.0);
        assert_eq!(secs(1_000_000u64, 3_500_000u64), "2.50");
        assert!(lt(1, 2) && !lt(0, 2) && !lt(3, 2));
        assert_eq!(cut("héllo\nabc", 2), "h\nab");
        assert_eq!(stamp("[   12.5] Started x"), "12.5");
        assert_eq!(oneline("a\nb"), "a b ");
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
    }
}
