//! The fields of the Redis usage counter hashes: `<toggle>|<app>|<kind>` in a minute's hash,
//! `<app>|<kind>` in a toggle's hour hash, kind `y`, `n` or `v|<variant>`, each part escaped so
//! `|` separates parts unambiguously.

use super::{CountKey, Counts};

/// Escapes one part of a counter field, so `|` separates parts unambiguously.
pub(super) fn escape(part: &str) -> std::borrow::Cow<'_, str> {
    if part.contains(['%', '|']) {
        part.replace('%', "%25").replace('|', "%7C").into()
    } else {
        part.into()
    }
}

fn unescape(part: &str) -> String {
    part.replace("%7C", "|").replace("%25", "%")
}

/// The counter field of a toggle's yes (`y`), no (`n`) or variant (`v|<name>`) count in one
/// application.
pub(super) fn field(toggle: &str, app: &str, kind: &str) -> String {
    format!("{}|{}|{kind}", escape(toggle), escape(app))
}

/// The hourly counter field of a toggle's yes (`y`), no (`n`) or variant (`v|<name>`) count in
/// one application (the toggle is in the key).
pub(super) fn hour_field(app: &str, kind: &str) -> String {
    format!("{}|{kind}", escape(app))
}

/// Reads an hourly counter field back: the application, the kind and the variant name.
pub(super) fn parse_hour_field(field: &str) -> Option<(String, &str, Option<String>)> {
    let mut parts = field.splitn(3, '|');
    let app = unescape(parts.next()?);
    let kind = parts.next()?;
    let variant = parts.next().map(unescape);
    Some((app, kind, variant))
}

/// Adds a counter field's value to `counts` (unknown kinds are skipped).
pub(super) fn add_field(counts: &mut Counts, kind: &str, variant: Option<String>, n: u64) {
    let total = match (kind, variant) {
        ("y", None) => &mut counts.yes,
        ("n", None) => &mut counts.no,
        ("v", Some(variant)) => counts.variants.entry(variant).or_default(),
        _ => return,
    };
    *total = total.saturating_add(n);
}

/// Reads a counter field back: the key and `None` for yes/no, or the variant name.
pub(super) fn parse_field(field: &str) -> Option<(CountKey, &str, Option<String>)> {
    let mut parts = field.splitn(4, '|');
    let toggle = unescape(parts.next()?);
    let app = unescape(parts.next()?);
    let kind = parts.next()?;
    let variant = parts.next().map(unescape);
    Some((CountKey { toggle, app }, kind, variant))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_with_separators_in_names() {
        let key = CountKey {
            toggle: "a|b%7C".into(),
            app: "my|app".into(),
        };
        let kind = format!("v|{}", escape("x|y"));
        let encoded = field(&key.toggle, &key.app, &kind);
        let (parsed, k, variant) = parse_field(&encoded).expect("parses");
        assert_eq!(parsed, key);
        assert_eq!(k, "v");
        assert_eq!(variant.as_deref(), Some("x|y"));
        let encoded = field(&key.toggle, &key.app, "y");
        let (parsed, k, variant) = parse_field(&encoded).expect("parses");
        assert_eq!((parsed, k, variant), (key, "y", None));
        let encoded = hour_field("my|app%", &kind);
        let (app, k, variant) = parse_hour_field(&encoded).expect("parses");
        assert_eq!((app.as_str(), k), ("my|app%", "v"));
        assert_eq!(variant.as_deref(), Some("x|y"));
    }
}
