//! The "URL friendly" name rule shared by toggles, strategies, tag types and more.

use super::error::ValidationErrors;

/// Maximum length of toggle, strategy, variant and context names.
pub const NAME_MAX: usize = 100;
/// Maximum length of tag types and tag values.
pub const TAG_MAX: usize = 50;

/// True for the characters `encodeURIComponent` leaves alone: `A-Z a-z 0-9 - _ . ! ~ * ' ( )`.
fn is_url_safe(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '!' | '~' | '*' | '\'' | '(' | ')')
}

/// Checks a name against the URL-friendly rule with the given length bounds; the error is the
/// message to show (the caller adds the field path).
pub fn check_name(label: &str, value: &str, min: usize, max: usize) -> Result<(), String> {
    let len = value.chars().count();
    if value.is_empty() {
        return Err(format!("\"{label}\" is not allowed to be empty"));
    }
    if !value.chars().all(is_url_safe) {
        return Err(format!(
            "\"{label}\" must be URL friendly: letters, digits and - _ . ! ~ * ' ( ) only"
        ));
    }
    // `.` and `..` are path segments that clients and proxies collapse.
    if value.chars().all(|c| c == '.') {
        return Err(format!("\"{label}\" must not consist of dots only"));
    }
    if len < min {
        return Err(format!(
            "\"{label}\" length must be at least {min} characters long"
        ));
    }
    if len > max {
        return Err(format!(
            "\"{label}\" length must be less than or equal to {max} characters long"
        ));
    }
    Ok(())
}

/// The name a create or update addresses: the body's field `label` (`name`, `id`), which on
/// update (`path` given) must match the path. A new name is checked against the URL-friendly
/// rule with `max` characters; an update's is not (it names an existing record, possibly one
/// an earlier version allowed). Problems are recorded in `errors`.
pub fn resolve_name(
    label: &str,
    body: Option<String>,
    path: Option<&str>,
    max: usize,
    errors: &mut ValidationErrors,
) -> String {
    let creating = path.is_none();
    let name = match (body, path) {
        (Some(body), Some(path)) if body != path => {
            errors.push(
                label,
                format!("\"{label}\" in the body must match the {label} in the path"),
            );
            body
        }
        (Some(name), _) => name,
        (None, Some(path)) => path.to_string(),
        (None, None) => {
            errors.push(label, format!("\"{label}\" is required"));
            return String::new();
        }
    };
    if creating {
        if let Err(m) = check_name(label, &name, 2, max) {
            errors.push(label, m);
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_url_friendly_names() {
        for ok in [
            "com.example",
            "com.example-company.someFeature.123",
            "123",
            "a_b~c*d'(e)!",
        ] {
            assert_eq!(check_name("name", ok, 2, NAME_MAX), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_other_names() {
        for bad in [
            "some example",
            "some$example",
            "me&me",
            "   ",
            "o2%ae",
            "ØÆ`",
            "a",
            "",
        ] {
            assert!(check_name("name", bad, 2, NAME_MAX).is_err(), "{bad}");
        }
        assert!(check_name("name", &"x".repeat(101), 2, NAME_MAX).is_err());
    }
}
