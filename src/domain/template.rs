//! Webhook body templates: mustache (`mustache2`, which returns errors instead of panicking on
//! any template or value), rendered with the context `{event: <event record>}` as the
//! reference does, behind a wrapper that allows no partials and caps the output.

use std::borrow::Cow;
use std::fmt::{self, Write};

use mustache2::render::provider::SourceProvider;
use mustache2::render::{RenderManager, SourceCache};
use serde_json::Value;

/// Largest body a template may render to (sections over lists can multiply a template).
pub const OUTPUT_MAX: usize = 1 << 20;

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

/// A `fmt::Write` that refuses to grow past `OUTPUT_MAX`.
struct Capped(String);

impl Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.0.len() + s.len() > OUTPUT_MAX {
            return Err(fmt::Error);
        }
        self.0.push_str(s);
        Ok(())
    }
}

/// Renders `template` with `context`.
pub fn render(template: &str, context: &Value) -> Result<String, TemplateError> {
    // mustache2 1.0.7 panics on some malformed delimiter tags (a slice out of bounds in its
    // lexer, found by the proptest below): a panic is a refusal, never a crashed worker. The
    // render touches nothing shared, so unwinding out of it leaves nothing half-changed.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        render_unguarded(template, context)
    }))
    .unwrap_or_else(|_| Err(TemplateError("the template cannot be parsed".into())))
}

fn render_unguarded(template: &str, context: &Value) -> Result<String, TemplateError> {
    let cache = SourceCache::default();
    let mut manager = RenderManager::new(OneTemplate(template.to_string()), &cache);
    let mut out = Capped(String::new());
    match manager.render_serde_to(&mut out, true, context) {
        Ok(()) => Ok(out.0),
        Err(_) if out.0.len() + 1 > OUTPUT_MAX / 2 => Err(TemplateError(format!(
            "the template renders to more than {OUTPUT_MAX} bytes"
        ))),
        Err(e) => Err(TemplateError(e.to_string())),
    }
}

/// Checks that `template` parses (rendering it with an empty context).
pub fn check(template: &str) -> Result<(), TemplateError> {
    render(template, &serde_json::json!({})).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
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
            ("{{=<% %>=}}<% event.id %>", "7"),
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
        for bad in ["{{#a}}", "{{/a}}", "{{", "{{#a}}{{/b}}", "{{=}}"] {
            assert!(check(bad).is_err(), "{bad}");
        }
        assert!(render("a{{> other}}b", &event()).is_ok_and(|s| !s.contains("other")));
    }

    #[test]
    fn output_is_capped() {
        let context = json!({"xs": vec![json!({"ys": vec![1; 300]}); 300], "big": "x".repeat(100)});
        let template = "{{#xs}}{{#ys}}{{big}}{{/ys}}{{/xs}}";
        assert!(render(template, &context).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// No template, however odd, panics or runs away.
        #[test]
        fn any_template_renders_or_fails_cleanly(template in "(\\{\\{[#^/&>!={}]?[ a-z.]{0,8}\\}\\}\\}?|[a-z {}<>%=]{0,4}){0,12}") {
            let _ = render(&template, &event());
        }
    }
}
