//! `uuid` values: 128 bits, kept as their canonical text (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`
//! in lower-case hexadecimal). Lower-case hexadecimal digits sort in the order of their values,
//! so the text's byte order (indexes, ORDER BY, both paths) is the order of the 128-bit values,
//! which is PostgreSQL's uuid order.

use crate::error::{Error, Result, SqlState};

/// The canonical text of the uuid `text` spells, in any form PostgreSQL's input accepts:
/// upper or lower case, optionally within braces, with or without a hyphen after any group of
/// four digits (22P02 otherwise).
pub fn parse(text: &str) -> Result<String> {
    bytes_of(text).map(|b| format(&b)).ok_or_else(|| {
        Error::new(SqlState::InvalidTextRepresentation, format!("invalid input syntax for type uuid: \"{text}\""))
    })
}

fn bytes_of(text: &str) -> Option<[u8; 16]> {
    let inner = match text.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}')?,
        None => text,
    };
    let mut out = [0u8; 16];
    let mut digits = 0usize;
    let mut chars = inner.bytes().peekable();
    while let Some(c) = chars.next() {
        if c == b'-' {
            // A hyphen only after a group of four digits, never first, last or doubled.
            if digits == 0 || !digits.is_multiple_of(4) || digits == 32 || chars.peek() == Some(&b'-') {
                return None;
            }
            continue;
        }
        let v = (c as char).to_digit(16)? as u8;
        if digits == 32 {
            return None;
        }
        out[digits / 2] |= if digits.is_multiple_of(2) { v << 4 } else { v };
        digits += 1;
    }
    (digits == 32 && !inner.ends_with('-')).then_some(out)
}

/// The canonical text of 16 bytes.
pub fn format(b: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(HEX[(byte >> 4) as usize] as char);
        s.push(HEX[(byte & 15) as usize] as char);
    }
    s
}

/// The 16 bytes of a canonical (or any accepted) uuid text.
pub fn to_bytes(text: &str) -> Result<[u8; 16]> {
    bytes_of(text).ok_or_else(|| Error::new(SqlState::InvalidTextRepresentation, format!("invalid input syntax for type uuid: \"{text}\"")))
}

/// A random (version 4) uuid, as `gen_random_uuid()` makes.
pub fn random() -> String {
    format(::uuid::Uuid::new_v4().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_postgresql_input_forms_and_gives_the_canonical_text() {
        let canonical = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        for input in [
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
        ] {
            assert_eq!(parse(input).unwrap(), canonical, "{input}");
        }
        for bad in ["", "a0eebc99", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111", "-a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11-", "a0eebc99--9c0b4ef8bb6d6bb9bd380a11", "a0eeb-c999c0b4ef8bb6d6bb9bd380a11", "g0eebc999c0b4ef8bb6d6bb9bd380a11",
            "{a0eebc999c0b4ef8bb6d6bb9bd380a11", " a0eebc999c0b4ef8bb6d6bb9bd380a11"] {
            assert_eq!(parse(bad).unwrap_err().state, SqlState::InvalidTextRepresentation, "{bad:?}");
        }
        assert_eq!(format(&to_bytes(canonical).unwrap()), canonical);
    }

    #[test]
    fn random_uuids_are_version_4_and_distinct() {
        let (a, b) = (random(), random());
        assert_ne!(a, b);
        assert_eq!(parse(&a).unwrap(), a);
        assert_eq!(&a[14..15], "4");
    }
}
