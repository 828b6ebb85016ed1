//! What survives unleash-yggdrasil's rule text unchanged: the strings it quotes into its rules
//! and the values whose shape its grammar reads (`strategy_grammar.pest`). A value that would
//! not survive is not compiled here; its toggle is left to yggdrasil, which answers for it.

/// Whether `name` is read back as written inside `context["…"]`, where yggdrasil strips the
/// quotes without unescaping: no quote and no backslash.
pub fn plain_name(name: &str) -> bool {
    !name.contains(['"', '\\'])
}

/// Whether `value`, quoted as yggdrasil quotes list values (`"` escaped as `\"`), is read back
/// as `value`.
pub fn quoted_round_trips(value: &str) -> bool {
    read_back(&value.replace('"', "\\\"")).is_some_and(|read| read == value)
}

/// Whether `value`, put between quotes as it is (a group id, an address, a host name), is read
/// back as `value`.
pub fn raw_round_trips(value: &str) -> bool {
    read_back(value).is_some_and(|read| read == value)
}

/// What yggdrasil's `string` rule reads from `"{inner}"`: it ends at the first quote not
/// preceded by a backslash, and `\"` reads as `"`; `None` when it ends before the closing quote.
fn read_back(inner: &str) -> Option<String> {
    let bytes = inner.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'"') {
            i += 2;
        } else if bytes[i] == b'"' {
            return None;
        } else {
            i += 1;
        }
    }
    // `\"` at the very end would have swallowed the closing quote: `i` ran past it above only
    // if the text ends in a backslash.
    if inner.ends_with('\\') {
        return None;
    }
    Some(inner.replace("\\\"", "\""))
}

/// ASCII digits, at least `min` and (with `exact`) exactly that many, from `at`; returns the end.
fn digits(bytes: &[u8], at: usize, min: usize, exact: bool) -> Option<usize> {
    let count = bytes[at.min(bytes.len())..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if count < min || (exact && count != min) {
        return None;
    }
    Some(at + if exact { min } else { count })
}

fn byte(bytes: &[u8], at: usize, wanted: u8) -> Option<usize> {
    (bytes.get(at) == Some(&wanted)).then_some(at + 1)
}

/// The grammar's `date`, whole: `YYYY-MM-DDTHH:MM:SS(.mmm)?(Z|±HH:MM)`.
pub fn is_grammar_date(value: &str) -> bool {
    let b = value.as_bytes();
    let parsed = (|| {
        let mut at = digits(b, 0, 4, true)?;
        at = byte(b, at, b'-')?;
        at = digits(b, at, 2, true)?;
        at = byte(b, at, b'-')?;
        at = digits(b, at, 2, true)?;
        at = byte(b, at, b'T')?;
        at = digits(b, at, 2, true)?;
        at = byte(b, at, b':')?;
        at = digits(b, at, 2, true)?;
        at = byte(b, at, b':')?;
        at = digits(b, at, 2, true)?;
        if b.get(at) == Some(&b'.') {
            at = digits(b, at + 1, 3, true)?;
        }
        match b.get(at) {
            Some(b'Z') => at += 1,
            Some(b'+' | b'-') => {
                at = digits(b, at + 1, 2, true)?;
                at = byte(b, at, b':')?;
                at = digits(b, at, 2, true)?;
            }
            _ => return None,
        }
        Some(at)
    })();
    parsed == Some(b.len())
}

/// A semver fragment (`[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*`) from `at`; returns the end.
fn semver_fragment(b: &[u8], mut at: usize) -> Option<usize> {
    let part = |at: usize| {
        let n = b[at.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'-')
            .count();
        (n > 0).then_some(at + n)
    };
    at = part(at)?;
    while b.get(at) == Some(&b'.') {
        match part(at + 1) {
            Some(end) => at = end,
            None => break,
        }
    }
    Some(at)
}

/// The grammar's `semver`, whole: `N.N.N(-fragment)?(+fragment)?`.
pub fn is_grammar_semver(value: &str) -> bool {
    let b = value.as_bytes();
    let parsed = (|| {
        let mut at = digits(b, 0, 1, false)?;
        at = byte(b, at, b'.')?;
        at = digits(b, at, 1, false)?;
        at = byte(b, at, b'.')?;
        at = digits(b, at, 1, false)?;
        if b.get(at) == Some(&b'-') {
            if let Some(end) = semver_fragment(b, at + 1) {
                at = end;
            }
        }
        if b.get(at) == Some(&b'+') {
            if let Some(end) = semver_fragment(b, at + 1) {
                at = end;
            }
        }
        Some(at)
    })();
    parsed == Some(b.len())
}

/// The grammar's `num`, whole: `[+-]?D+(\.D*)?([eE][+-]?D+)?`.
pub fn is_grammar_number(value: &str) -> bool {
    let b = value.as_bytes();
    let int = |at: usize| {
        let at = match b.get(at) {
            Some(b'+' | b'-') => at + 1,
            _ => at,
        };
        digits(b, at, 1, false)
    };
    let parsed = (|| {
        let mut at = int(0)?;
        if b.get(at) == Some(&b'.') {
            at = digits(b, at + 1, 0, false)?;
        }
        if matches!(b.get(at), Some(b'e' | b'E')) {
            if let Some(end) = int(at + 1) {
                at = end;
            }
        }
        Some(at)
    })();
    parsed == Some(b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_round_trips_unless_a_backslash_meets_a_quote_or_the_end() {
        for value in ["", "plain", "a\"b", "\"", "reg\\d+", "x\\y\"z"] {
            assert!(quoted_round_trips(value), "{value:?}");
        }
        for value in ["ends\\", "\\"] {
            assert!(!quoted_round_trips(value), "{value:?}");
        }
        assert!(raw_round_trips("group-1") && !raw_round_trips("a\"b"));
        assert!(!raw_round_trips("a\\\"b"));
    }

    #[test]
    fn shapes_are_the_grammar_s() {
        assert!(is_grammar_date("2024-01-31T10:00:00Z"));
        assert!(is_grammar_date("2024-01-31T10:00:00.123+02:00"));
        assert!(!is_grammar_date("2024-01-31T10:00:00.123456Z"));
        assert!(!is_grammar_date("2024-01-31"));
        assert!(is_grammar_semver("1.2.3") && is_grammar_semver("10.0.1-beta.1+build-7"));
        assert!(
            !is_grammar_semver("1.2")
                && !is_grammar_semver("1.2.3-")
                && !is_grammar_semver("1.2.3.4")
        );
        for n in ["5", "-5", "+5.", "1.25", "1e5", "2E-3"] {
            assert!(is_grammar_number(n), "{n}");
        }
        for n in ["", "1e", ".5", "1.2.3", " 5", "5 ", "0x1"] {
            assert!(!is_grammar_number(n), "{n}");
        }
    }
}
