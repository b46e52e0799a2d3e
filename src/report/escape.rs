//! Text a workload controls (an orphan's command line, fd paths, task ids, image names)
//! reaches the table, the JSON, the journal and NPD's line. A newline in it would start a
//! forged line (`verdict: node is usable`), an ESC sequence would rewrite the terminal, a
//! bidi control would reorder what the operator reads. Every renderer passes its text
//! through [`escape`], so each finding line stays one line that says what it holds.

use std::borrow::Cow;

/// `text` with C0 and C1 control characters, DEL and the Unicode bidi controls shown
/// escaped: `\n`, `\r`, `\t`, `\x1b` (C0, DEL), `\u{9b}` (C1), `\u{202e}` (bidi).
/// Everything else, a backslash included, is kept, so escaping twice changes nothing.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// The bidi embedding, override and isolate controls, the LTR/RTL marks and the Arabic
/// letter mark.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn control_and_bidi_characters_are_shown_escaped_and_nothing_else_changes() {
        let cases = [
            ("plain /locker /data/lock", "plain /locker /data/lock"),
            ("a\nverdict: node is usable", "a\\nverdict: node is usable"),
            ("\x1b[2J\x1b]0;x\x07", "\\x1b[2J\\x1b]0;x\\x07"),
            ("tab\there\r", "tab\\there\\r"),
            ("nul\0del\x7f", "nul\\x00del\\x7f"),
            ("c1 \u{9b}31m", "c1 \\u{9b}31m"),
            ("abc\u{202e}fed", "abc\\u{202e}fed"),
            (
                "\u{2066}\u{2069}\u{200e}\u{200f}\u{61c}",
                "\\u{2066}\\u{2069}\\u{200e}\\u{200f}\\u{61c}",
            ),
            ("é ü 漢字 \\n", "é ü 漢字 \\n"),
        ];
        for (input, want) in cases {
            let got = escape(input);
            assert_eq!(got, want, "{input:?}");
            assert_eq!(
                escape(&got),
                got,
                "escaping twice changes nothing: {input:?}"
            );
            assert!(!got.chars().any(|c| c.is_control()), "{got:?}");
        }
    }
}
