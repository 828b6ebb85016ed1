//! Webhook body templates (`domain::template`): mustache source, flat token soup and
//! structure-aware trees (nested and inverted sections, deep nesting, delimiter changes,
//! partials, unclosed and mismatched sections), rendered against an event.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::config;
use crate::domain::template::{check, render, DEPTH_MAX, OUTPUT_MAX};

fn event() -> Value {
    json!({"event": {"id": 7, "type": "feature-created", "createdBy": "alice",
        "createdAt": "2026-11-22T10:00:00Z",
        "data": {"name": "demo", "enabled": true, "strategies": [{"name": "default"}, {"name": "userWithId"}]},
        "tags": [{"type": "simple", "value": "team-a"}]}})
}

/// A node of a template.
#[derive(Debug, Clone)]
enum Node {
    Text(String),
    /// Text with braces: next to a tag it changes the tag (`{` + `{{a}}`).
    Stray(String),
    /// `{{name}}`, `{{{name}}}` or `{{& name}}`.
    Var(String, u8),
    Comment(String),
    /// A section (`{{#name}}`) or an inverted one (`{{^name}}`); `close` is the name its
    /// closing tag gives (`None`: no closing tag).
    Section {
        name: String,
        inverted: bool,
        children: Vec<Node>,
        close: Option<String>,
    },
    /// `{{=<% %>=}}` and the like: refused.
    Delimiters(String),
    /// `{{> name}}`: refused.
    Partial(String),
}

impl Node {
    fn write(&self, out: &mut String) {
        match self {
            Node::Text(t) | Node::Stray(t) => out.push_str(t),
            Node::Var(name, 0) => out.push_str(&format!("{{{{{name}}}}}")),
            Node::Var(name, 1) => out.push_str(&format!("{{{{{{{name}}}}}}}")),
            Node::Var(name, _) => out.push_str(&format!("{{{{& {name}}}}}")),
            Node::Comment(t) => out.push_str(&format!("{{{{!{t}}}}}")),
            Node::Section {
                name,
                inverted,
                children,
                close,
            } => {
                out.push_str(&format!(
                    "{{{{{}{name}}}}}",
                    if *inverted { '^' } else { '#' }
                ));
                for child in children {
                    child.write(out);
                }
                if let Some(close) = close {
                    out.push_str(&format!("{{{{/{close}}}}}"));
                }
            }
            Node::Delimiters(d) => out.push_str(&format!("{{{{={d}=}}}}")),
            Node::Partial(name) => out.push_str(&format!("{{{{> {name}}}}}")),
        }
    }

    /// The deepest section nesting under and including this node.
    fn depth(&self) -> usize {
        match self {
            Node::Section { children, .. } => {
                1 + children.iter().map(Node::depth).max().unwrap_or(0)
            }
            _ => 0,
        }
    }

    /// Whether the template is one the wrapper must accept: sections closed by their own
    /// name, no delimiter changes, no partials.
    fn well_formed(&self) -> bool {
        match self {
            Node::Section {
                name,
                children,
                close,
                ..
            } => close.as_ref() == Some(name) && children.iter().all(Node::well_formed),
            Node::Delimiters(_) | Node::Partial(_) | Node::Stray(_) => false,
            _ => true,
        }
    }

    /// Whether the template holds what the wrapper refuses: a partial or a delimiter change.
    fn refused(&self) -> bool {
        match self {
            Node::Section { children, .. } => children.iter().any(Node::refused),
            Node::Delimiters(_) | Node::Partial(_) => true,
            _ => false,
        }
    }
}

/// Names the event has, and some it has not.
fn tag_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "event.type",
        "event.data.strategies",
        "event.tags",
        "event.data",
        "name",
        "type",
        "value",
        ".",
        "event.missing",
        "event",
        "event.data.enabled",
        "event.id",
    ])
    .prop_map(str::to_string)
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = prop_oneof![
        4 => "[a-z <>&\"'\n\t]{0,8}".prop_map(Node::Text),
        1 => "[a-z{} ]{0,4}".prop_map(Node::Stray),
        4 => (tag_name(), 0u8..3).prop_map(|(n, style)| Node::Var(n, style)),
        1 => "[a-z }{]{0,6}".prop_map(Node::Comment),
        1 => prop::sample::select(vec!["<% %>", "| |", "", "{{ }}", "[ ]", "<%", " "])
            .prop_map(|d| Node::Delimiters(d.to_string())),
        1 => tag_name().prop_map(Node::Partial),
    ];
    // Deeper than `DEPTH_MAX`, so that refusals by depth are exercised too.
    leaf.prop_recursive(8, 64, 4, |inner| {
        (
            tag_name(),
            any::<bool>(),
            prop::collection::vec(inner, 0..4),
            prop_oneof![
                8 => Just(0u8),
                1 => Just(1u8),
                1 => Just(2u8),
            ],
            tag_name(),
        )
            .prop_map(|(name, inverted, children, close, other)| Node::Section {
                close: match close {
                    0 => Some(name.clone()),
                    1 => None,
                    _ => Some(other),
                },
                name,
                inverted,
                children,
            })
    })
}

/// A refusal says why in plain text (no terminal colour codes).
fn assert_clean(
    result: &Result<String, crate::domain::template::TemplateError>,
) -> Result<(), TestCaseError> {
    match result {
        Ok(out) => prop_assert!(out.len() <= OUTPUT_MAX),
        Err(e) => prop_assert!(!e.0.is_empty() && !e.0.contains('\u{1b}'), "{:?}", e),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(3000))]

    /// No template, however odd, panics or runs away (token soup: this found mustache2's
    /// lexer panicking on `{{=}}`).
    #[test]
    fn any_template_renders_or_fails_cleanly(template in "(\\{\\{[#^/&>!={}]?[ a-z.]{0,8}\\}\\}\\}?|[a-z {}<>%=]{0,4}){0,12}") {
        assert_clean(&render(&template, &event()))?;
    }
}

proptest! {
    #![proptest_config(config(1536))]

    /// Templates built as trees: well-formed ones within the nesting limit render; deeper
    /// ones, partials and delimiter changes are refused; nothing panics.
    #[test]
    fn structured_templates_render_or_are_refused(nodes in prop::collection::vec(node(), 0..6)) {
        let mut template = String::new();
        for n in &nodes {
            n.write(&mut template);
        }
        let result = render(&template, &event());
        assert_clean(&result)?;
        let depth = nodes.iter().map(Node::depth).max().unwrap_or(0);
        if depth > DEPTH_MAX {
            prop_assert!(result.is_err(), "nested {} deep: {:?}", depth, template);
        } else if nodes.iter().all(Node::well_formed) {
            prop_assert!(result.is_ok(), "{:?}: {:?}", template, result);
            prop_assert!(check(&template).is_ok());
        }
        if nodes.iter().any(Node::refused) {
            prop_assert!(result.is_err(), "{:?}", template);
        }
    }
}
