//! The constraint editor shared by the strategy and segment forms (a row per constraint: a
//! context field, an operator of every one the API accepts, values, negation and case), and
//! submitted forms as their fields in order (rows of repeated fields are numbered).

use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::domain::config_state::ConfigState;
use crate::domain::constraint::{Constraint, Operator};
use crate::ui::form::Errors;

/// Constraint rows in a form at least (blank rows are ignored).
pub const CONSTRAINT_ROWS: usize = 3;

/// Rows of one kind a form may have: far more than a person edits (the domain keeps at most
/// a hundred strategies or variants), and few enough that a post naming row `c4000000000`
/// cannot make the server loop over, or render, billions of rows.
pub const MAX_ROWS: usize = 300;

/// A submitted form as its fields in order (rows of repeated fields are numbered).
#[derive(Deserialize, Default)]
#[serde(transparent)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    /// The value of `name` (trimmed; empty when not sent).
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.trim())
    }

    /// The value of `name` as sent (not trimmed; empty when not sent).
    pub fn raw(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// The lines of the multi-line field `name`, one value each, kept as typed (a value may
    /// hold commas and spaces); blank lines are left out.
    pub fn lines(&self, name: &str) -> Vec<&str> {
        self.raw(name)
            .split('\n')
            .map(|line| line.strip_suffix('\r').unwrap_or(line))
            .filter(|line| !line.trim().is_empty())
            .collect()
    }

    /// Every value of `name`, in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The highest row number of `prefix` sent (`c4.values` is row 4 of `c`).
    fn highest_row(&self, prefix: &str) -> Option<usize> {
        self.0
            .iter()
            .filter_map(|(k, _)| {
                let (row, _) = k.strip_prefix(prefix)?.split_once('.')?;
                // Row numbers are digits only ("c+1.x" is not row 1).
                if row.is_empty() || !row.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some(row.parse::<usize>().unwrap_or(usize::MAX))
            })
            .max()
    }

    /// How many rows of `prefix` (`c` for constraints, `v` for variants) the form has: at
    /// least `minimum`, and one past the highest numbered row sent, but never more than
    /// [`MAX_ROWS`] (a form with more is refused by [`Fields::check_rows`]).
    pub fn rows(&self, prefix: &str, minimum: usize) -> usize {
        let rows = self
            .highest_row(prefix)
            .map_or(minimum, |h| minimum.max(h.saturating_add(1)));
        rows.min(MAX_ROWS)
    }

    /// How many rows of `prefix` a form shows: [`Fields::rows`], and one blank row past
    /// those whose `key` field is filled from row 0 on (at most [`MAX_ROWS`]).
    pub fn shown_rows(&self, prefix: &str, key: &str, minimum: usize) -> usize {
        let filled = (0..MAX_ROWS)
            .take_while(|i| !self.get(&format!("{prefix}{i}.{key}")).is_empty())
            .count();
        self.rows(prefix, minimum).max(filled + 1).min(MAX_ROWS)
    }

    /// Refuses a form with a row of any of `prefixes` numbered [`MAX_ROWS`] or more (those
    /// rows would otherwise be dropped without a word).
    pub fn check_rows(&self, prefixes: &[(&str, &str)]) -> Result<(), Errors> {
        for (prefix, what) in prefixes {
            if self.highest_row(prefix).is_some_and(|h| h >= MAX_ROWS) {
                return Err(Errors::general(format!(
                    "A form has at most {MAX_ROWS} {what}; this one sent more."
                )));
            }
        }
        Ok(())
    }

    /// Adds a field.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.push((name.into(), value.into()));
    }

    /// Adds the rows (`c0.…`, `c1.…`) describing `constraints`.
    pub fn push_constraints(&mut self, constraints: &[Constraint]) {
        for (i, c) in constraints.iter().enumerate() {
            let p = format!("c{i}");
            self.push(format!("{p}.contextName"), c.context_name.as_str());
            self.push(format!("{p}.operator"), c.operator.as_str());
            let values = match (&c.values, &c.value) {
                (Some(values), _) => values
                    .iter()
                    .map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                (None, Some(value)) => value.to_string(),
                _ => String::new(),
            };
            self.push(format!("{p}.values"), values);
            if c.inverted == Some(true) {
                self.push(format!("{p}.inverted"), "true");
            }
            if c.case_insensitive == Some(true) {
                self.push(format!("{p}.caseInsensitive"), "true");
            }
        }
    }
}

/// The constraint rows of a form: those filled, and at least one blank row for another; ids
/// start with `id_prefix`, the API's problems (`constraints[i]`) show under their row.
pub fn constraint_fieldset(
    state: &ConfigState,
    fields: &Fields,
    errors: &Errors,
    id_prefix: &str,
    legend: &str,
) -> Markup {
    let mut contexts: Vec<String> = [
        "userId",
        "sessionId",
        "remoteAddress",
        "environment",
        "appName",
        "currentTime",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for name in state.context_fields.keys() {
        if !contexts.contains(name) {
            contexts.push(name.clone());
        }
    }
    // A constraint on a context name that is not (or no longer) defined keeps it: it is
    // offered, chosen, in its row instead of the first option being sent on save.
    let mut extra = Vec::new();
    for i in 0..fields.rows("c", CONSTRAINT_ROWS) {
        let name = fields.get(&format!("c{i}.contextName"));
        if !name.is_empty() && !contexts.iter().any(|c| c == name) && !extra.contains(&name) {
            extra.push(name);
        }
    }
    let constraint_rows = fields.shown_rows("c", "contextName", CONSTRAINT_ROWS);
    html! {
    fieldset {
        legend { (legend) }
        @for i in 0..constraint_rows {
            @let p = format!("c{i}");
            div.grid.constraint {
                label for=(format!("{id_prefix}{i}-ctx")) { "Context field " (i + 1)
                    select id=(format!("{id_prefix}{i}-ctx") ) name={ (p) ".contextName" } {
                        option value="" { "—" }
                        @for c in &contexts {
                            option value=(c) selected[fields.get(&format!("{p}.contextName")) == c] { (c) }
                        }
                        @for c in &extra {
                            option value=(c) selected[fields.get(&format!("{p}.contextName")) == *c] { (c) }
                        }
                    }
                }
                label for=(format!("{id_prefix}{i}-op")) { "Operator " (i + 1)
                    select id=(format!("{id_prefix}{i}-op")) name={ (p) ".operator" } {
                        @for op in Operator::ALL {
                            option value=(op.as_str()) selected[fields.get(&format!("{p}.operator")) == op.as_str()] { (op.as_str()) }
                        }
                    }
                }
                label for=(format!("{id_prefix}{i}-val")) { "Values " (i + 1) " (one a line)"
                    textarea id=(format!("{id_prefix}{i}-val")) name={ (p) ".values" } rows="2"
                        aria-invalid=[errors.has(&format!("constraints[{i}]")).then_some("true")] {
                        (fields.raw(&format!("{p}.values")))
                    }
                }
                label { input type="checkbox" name={ (p) ".inverted" } value="true" checked[fields.get(&format!("{p}.inverted")) == "true"]; "Negate " (i + 1) }
                label { input type="checkbox" name={ (p) ".caseInsensitive" } value="true" checked[fields.get(&format!("{p}.caseInsensitive")) == "true"]; "Ignore case " (i + 1) }
            }
            (errors.under(&format!("{id_prefix}{i}-val"), &format!("constraints[{i}]")))
        }
    }
    }
}

/// The constraints of a submitted form as the API's request body (blank rows left out;
/// values one a line, kept as typed; one value for the operators that take one).
pub fn constraints_body(fields: &Fields) -> Vec<Value> {
    let mut constraints = Vec::new();
    for i in 0..fields.rows("c", CONSTRAINT_ROWS) {
        let p = format!("c{i}");
        let context = fields.get(&format!("{p}.contextName"));
        if context.is_empty() {
            continue;
        }
        let operator = fields.get(&format!("{p}.operator"));
        let name = format!("{p}.values");
        let mut c = json!({
            "contextName": context,
            "operator": operator,
            "inverted": fields.get(&format!("{p}.inverted")) == "true",
            "caseInsensitive": fields.get(&format!("{p}.caseInsensitive")) == "true",
        });
        let list = Operator::named(operator)
            .operand()
            .is_none_or(|o| o.is_list());
        if list {
            c["values"] = json!(fields.lines(&name));
        } else {
            // One value: the line breaks a textarea may add around it are not part of it.
            c["value"] = json!(fields.raw(&name).trim_matches(['\r', '\n']));
        }
        constraints.push(c);
    }
    constraints
}
