//! Webhook body templates: mustache (`mustache2`, which returns errors instead of panicking on
//! values), rendered with the context `{event: <event record>}` as the reference does, behind
//! a wrapper that keeps every template cheap and safe: at most `TEMPLATE_MAX` bytes, sections
//! nested at most `DEPTH_MAX` deep (deeper ones overflow the parser's stack), no partials, no
//! delimiter changes (mustache2's lexer panics on some), a bound on the iterations sections
//! over lists can multiply to, and a capped output.

use std::borrow::Cow;
use std::fmt::{self, Write};

use mustache2::render::provider::SourceProvider;
use mustache2::render::{RenderManager, SourceCache};
use serde_json::Value;

/// Largest body a template may render to (sections over lists can multiply a template).
pub const OUTPUT_MAX: usize = 1 << 20;
/// Longest template.
pub const TEMPLATE_MAX: usize = 64 << 10;
/// Deepest nesting of sections.
pub const DEPTH_MAX: usize = 4;
/// Most iterations nested sections may multiply to: the longest list in the context raised to
/// the template's nesting depth.
const ITERATIONS_MAX: u64 = 1_000_000;

/// Why a template cannot be used or rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

/// The one template of a render; partials (`{{> name}}`) resolve to nothing, so a template
/// can neither read files nor include itself.
struct OneTemplate(String);

impl SourceProvider for OneTemplate {
    /// `true`: the template; `false`: any partial.
    type Key = bool;

    fn get_src(&mut self, key: &bool) -> Result<String, Cow<'static, str>> {
        if *key {
            Ok(self.0.clone())
        } else {
            Err("partials are not supported".into())
        }
    }

    fn resolve_partial(&self, _: &bool, _: &str) -> bool {
        false
    }

    fn display_key(_: &bool) -> Cow<'_, str> {
        Cow::Borrowed("bodyTemplate")
    }
}

/// A `fmt::Write` that refuses to grow past `OUTPUT_MAX` (and remembers that it did).
#[derive(Default)]
struct Capped {
    out: String,
    overflowed: bool,
}

impl Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.out.len() + s.len() > OUTPUT_MAX {
            self.overflowed = true;
            return Err(fmt::Error);
        }
        self.out.push_str(s);
        Ok(())
    }
}

/// The deepest section nesting of `template`, after checking what the wrapper refuses.
fn shape(template: &str) -> Result<usize, TemplateError> {
    let refuse = |m: &str| Err(TemplateError(m.to_string()));
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let tag = &rest[start + 2..];
        match tag.trim_start().chars().next() {
            Some('#' | '^') => {
                depth += 1;
                deepest = deepest.max(depth);
                if depth > DEPTH_MAX {
                    return Err(TemplateError(format!(
                        "sections are nested deeper than {DEPTH_MAX}"
                    )));
                }
            }
            Some('/') => depth = depth.saturating_sub(1),
            Some('>') => return refuse("partials ({{> name}}) are not supported"),
            Some('=') => return refuse("delimiter changes ({{=<% %>=}}) are not supported"),
            _ => {}
        }
        rest = &rest[start + 2..];
    }
    Ok(deepest)
}

/// `template` with every comment emptied (`{{! a {{ b }}` becomes `{{!}}`): a comment runs
/// to the first `}}` whatever it holds, but mustache2 reads a `{{` inside one as a tag and
/// refuses the template. Emptying keeps the tag, so standalone comment lines still vanish.
fn without_comment_bodies(template: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0;
    let mut from = 0;
    while let Some(start) = template[from..].find("{{").map(|i| from + i) {
        let tag = &template[start + 2..];
        let body = tag.trim_start();
        if !body.starts_with('!') {
            from = start + 2;
            continue;
        }
        let Some(end) = body.find("}}") else { break };
        let after = template.len() - body.len() + end + 2;
        out.push_str(&template[copied..start]);
        out.push_str("{{!}}");
        copied = after;
        from = after;
    }
    if copied == 0 {
        return Cow::Borrowed(template);
    }
    out.push_str(&template[copied..]);
    Cow::Owned(out)
}

/// The length of the longest list anywhere in `value`.
fn longest_list(value: &Value) -> u64 {
    match value {
        Value::Array(items) => items
            .iter()
            .map(longest_list)
            .max()
            .unwrap_or(0)
            .max(items.len() as u64),
        Value::Object(map) => map.values().map(longest_list).max().unwrap_or(0),
        _ => 0,
    }
}

/// mustache2's messages carry terminal colour codes; ours do not.
fn plain(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip an escape sequence up to its final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Renders `template` with `context`.
pub fn render(template: &str, context: &Value) -> Result<String, TemplateError> {
    if template.len() > TEMPLATE_MAX {
        return Err(TemplateError(format!(
            "the template is longer than {TEMPLATE_MAX} bytes"
        )));
    }
    let template = &*without_comment_bodies(template);
    let depth = shape(template)?;
    let iterations = longest_list(context).max(1).saturating_pow(depth as u32);
    if iterations > ITERATIONS_MAX {
        return Err(TemplateError(format!(
            "the template's nested sections would repeat {iterations} times over this event \
             (at most {ITERATIONS_MAX})"
        )));
    }
    // mustache2 1.0.7 panics on some malformed delimiter tags (a slice out of bounds in its
    // lexer, found by the proptest in `src/fuzz/template.rs`; delimiter changes are refused
    // above, this stays as a backstop): a panic is a refusal, never a crashed worker. The
    // render touches nothing shared, so unwinding out of it leaves nothing half-changed.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        render_unguarded(template, context)
    }))
    .unwrap_or_else(|_| Err(TemplateError("the template cannot be parsed".into())))
}

fn render_unguarded(template: &str, context: &Value) -> Result<String, TemplateError> {
    let cache = SourceCache::default();
    let mut manager = RenderManager::new(OneTemplate(template.to_string()), &cache);
    let mut out = Capped::default();
    match manager.render_serde_to(&mut out, true, context) {
        Ok(()) => Ok(out.out),
        Err(_) if out.overflowed => Err(TemplateError(format!(
            "the template renders to more than {OUTPUT_MAX} bytes"
        ))),
        Err(e) => Err(TemplateError(plain(&e.to_string()))),
    }
}

/// Checks that `template` parses (rendering it with an empty context).
pub fn check(template: &str) -> Result<(), TemplateError> {
    render(template, &serde_json::json!({})).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event() -> Value {
        json!({"event": {"id": 7, "type": "feature-created", "createdBy": "alice",
            "createdAt": "2026-11-22T10:00:00Z",
            "data": {"name": "demo", "enabled": true, "strategies": [{"name": "default"}, {"name": "userWithId"}]},
            "tags": [{"type": "simple", "value": "team-a"}]}})
    }

    #[test]
    fn the_reference_examples_render() {
        let cases = [
            (
                "{{event.type}} {{event.data.name}} by {{event.createdBy}}",
                "feature-created demo by alice",
            ),
            ("{{event.data.enabled}}", "true"),
            (
                "{{#event.data.strategies}}[{{name}}]{{/event.data.strategies}}",
                "[default][userWithId]",
            ),
            ("{{^event.data.stale}}fresh{{/event.data.stale}}", "fresh"),
            ("{{event.missing.key}}!", "!"),
            ("{{{event.createdAt}}}", "2026-11-22T10:00:00Z"),
        ];
        for (template, expected) in cases {
            assert_eq!(
                render(template, &event()).as_deref(),
                Ok(expected),
                "{template}"
            );
        }
    }

    #[test]
    fn malformed_templates_and_partials_are_errors_not_panics() {
        for bad in [
            "{{#a}}",
            "{{/a}}",
            "{{",
            "{{#a}}{{/b}}",
            "{{=}}",
            "{{=<% %>=}}",
            "a{{> other}}b",
        ] {
            let err = check(bad).expect_err(bad);
            assert!(!err.0.contains('\u{1b}'), "{err}");
        }
        // Deep nesting would overflow the parser's stack: refused before parsing.
        let deep = format!("{}x{}", "{{#a}}".repeat(10_000), "{{/a}}".repeat(10_000));
        assert!(check(&deep).is_err());
        assert!(check(&"x".repeat(TEMPLATE_MAX + 1)).is_err());
    }

    #[test]
    fn nested_sections_over_long_lists_are_refused_before_they_run() {
        let strategies: Vec<Value> = (0..40).map(|i| json!({"name": format!("s{i}")})).collect();
        let context = json!({"event": {"data": {"strategies": strategies}}});
        let nested =
            "{{#event.data.strategies}}".repeat(4) + &"{{/event.data.strategies}}".repeat(4);
        let started = std::time::Instant::now();
        assert!(render(&nested, &context).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let two = "{{#event.data.strategies}}".repeat(2) + &"{{/event.data.strategies}}".repeat(2);
        assert!(render(&two, &context).is_ok());
    }

    #[test]
    fn comments_hold_anything_but_their_end() {
        let cases = [
            ("a{{!{{}}b", "ab"),
            ("{{! {{#event }}x", "x"),
            ("{{! {{#event}} }}x", " }}x"),
            ("{{!{{#a}}}}", "}}"),
            ("a\n  {{! {{c }}\nb", "a\nb"),
            ("{{ ! x }}{{event.type}}{{!y}}", "feature-created"),
        ];
        for (template, expected) in cases {
            assert_eq!(
                render(template, &event()).as_deref(),
                Ok(expected),
                "{template}"
            );
        }
        assert!(check("{{! never closed").is_err());
    }

    #[test]
    fn output_is_capped() {
        let context = json!({"xs": vec![json!({"ys": vec![1; 300]}); 300], "big": "x".repeat(100)});
        let template = "{{#xs}}{{#ys}}{{big}}{{/ys}}{{/xs}}";
        assert!(render(template, &context).is_err());
    }
}
