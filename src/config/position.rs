//! Where in a fragment's text a key, its value or a TOML syntax error is, as `LINE:COLUMN`
//! (both counted from 1, the column in characters), so that an error points at the
//! mistake as a compiler's does.

use std::fmt;
use toml::de::{DeTable, DeValue};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// What of a key an error points at: its name (a key the guard does not know) or its value
/// (one the key does not accept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Name,
    Value,
}

impl Position {
    /// The position of byte `offset` of `text`; `None` past its end or inside a character.
    pub fn of_offset(text: &str, offset: usize) -> Option<Position> {
        let before = text.get(..offset)?;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        Some(Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        })
    }
}

/// Where the first syntax error of `text` is, as the TOML parser found it.
pub fn of_syntax_error(text: &str, error: &toml::de::Error) -> Option<Position> {
    Position::of_offset(text, error.span()?.start)
}

/// Where the dotted key (`volume.wait`, `state_dir`) or its value is written in `text`;
/// `None` for a text that does not parse or a key whose name holds a dot.
pub fn of_key(text: &str, dotted: &str, part: Part) -> Option<Position> {
    let document = DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    let mut names = dotted.split('.').peekable();
    while let Some(name) = names.next() {
        let (key, value) = table.get_key_value(name)?;
        if names.peek().is_none() {
            let span = match part {
                Part::Name => key.span(),
                Part::Value => value.span(),
            };
            return Position::of_offset(text, span.start);
        }
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize, column: usize) -> Option<Position> {
        Some(Position { line, column })
    }

    #[test]
    fn keys_and_values_are_found_in_sections_dotted_keys_and_at_the_top() {
        let text = "state_dir = \"/run/x\"\n[volume]\n  wait = \"5s\"\n[hold]\ntimeout = 5\n";
        assert_eq!(of_key(text, "state_dir", Part::Name), at(1, 1));
        assert_eq!(of_key(text, "volume.wait", Part::Name), at(3, 3));
        assert_eq!(of_key(text, "volume.wait", Part::Value), at(3, 10));
        assert_eq!(of_key(text, "hold.timeout", Part::Value), at(5, 11));
        assert_eq!(of_key(text, "volume", Part::Name), at(2, 2));
        assert_eq!(
            of_key("volume.wait = 1\n", "volume.wait", Part::Name),
            at(1, 8)
        );
        assert_eq!(of_key(text, "volume.nope", Part::Name), None);
        assert_eq!(of_key("[volume\n", "volume", Part::Name), None);
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let text = "# é\n[volume]\n\"ünïcode\" = 1\n";
        assert_eq!(of_key(text, "volume.ünïcode", Part::Value), at(3, 13));
        assert_eq!(Position::of_offset("é", 1), None);
        assert_eq!(Position::of_offset("ab", 3), None);
    }

    #[test]
    fn a_syntax_error_is_where_the_parser_stopped() {
        let text = "[volume]\nwait = \"5s\"\nmin_free = \"10 GB\n";
        let error = text.parse::<toml::Table>().unwrap_err();
        let found = of_syntax_error(text, &error).unwrap();
        assert_eq!(found.line, 3, "{error}");
    }
}
