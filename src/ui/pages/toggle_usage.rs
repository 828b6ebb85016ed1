//! What a toggle's page shows about its use: evaluations per hour over the last 24 or 48
//! hours and per application in the last hour (inline SVG bars, with the same numbers in
//! tables), whether the SDKs hold the newest configuration, and the toggle's history with
//! what each event changed.

use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;

use crate::ui::layout::time;
use crate::usage::hourly::{hour_time, HourCounts, HourlyUsage, DEFAULT_HOURS, MAX_HOURS};
use crate::usage::views::{ConfigVersions, ToggleDetail};

/// `?usage=48h&app=…`: which hours the toggle page charts, and for which application (all of
/// them summed when absent or empty).
#[derive(Debug, Default, Deserialize)]
pub struct UsageChoice {
    #[serde(default)]
    pub usage: Option<String>,
    #[serde(default)]
    pub app: Option<String>,
}

impl UsageChoice {
    /// The hours charted: 48 for `usage=48h`, else 24.
    pub fn hours(&self) -> u64 {
        match self.usage.as_deref() {
            Some("48h") => MAX_HOURS,
            _ => DEFAULT_HOURS,
        }
    }

    /// The application chosen, if one is.
    fn app(&self) -> Option<&str> {
        self.app.as_deref().filter(|a| !a.is_empty())
    }
}

/// How long ago an hour was, in words free of any time zone (for the bars' titles).
fn hours_ago(age: usize) -> String {
    match age {
        0 => "This hour".to_string(),
        1 => "1 hour ago".to_string(),
        n => format!("{n} hours ago"),
    }
}

/// The form choosing the period and the application of the hourly chart (a GET form: the
/// choice is in the URL, and works without JavaScript).
fn usage_choice_form(usage: &HourlyUsage, choice: &UsageChoice) -> Markup {
    let chosen = choice.app().unwrap_or("");
    let period = if choice.hours() == MAX_HOURS {
        "48h"
    } else {
        "24h"
    };
    html! {
        form.usage-choice method="get" action="#h-usage" {
            div.grid {
                label for="f-usage-app" { "Usage of application"
                    select id="f-usage-app" name="app" {
                        option value="" selected[chosen.is_empty()] { "All applications" }
                        @for app in usage.applications.keys() {
                            option value=(app) selected[app == chosen] { (app) }
                        }
                        @if !chosen.is_empty() && !usage.applications.contains_key(chosen) {
                            option value=(chosen) selected { (chosen) }
                        }
                    }
                }
                label for="f-usage-period" { "Usage period"
                    select id="f-usage-period" name="usage" {
                        option value="24h" selected[period == "24h"] { "Last 24 hours" }
                        option value="48h" selected[period == "48h"] { "Last 48 hours" }
                    }
                }
            }
            button.secondary type="submit" { "Show usage" }
        }
    }
}

/// Evaluations per hour (yes and no stacked, oldest hour first) as bars in the text colour,
/// with the same numbers in a table; for one application or all of them summed.
pub fn hourly_chart(usage: &HourlyUsage, choice: &UsageChoice) -> Markup {
    let (who, counts): (String, Vec<HourCounts>) = match choice.app() {
        Some(app) => (
            app.to_string(),
            usage
                .applications
                .get(app)
                .cloned()
                .unwrap_or_else(|| vec![HourCounts::default(); usage.hours.len()]),
        ),
        None => ("all applications".to_string(), usage.total()),
    };
    let n = usage.hours.len().max(1);
    // Saturating: counts come from clients, and the stores saturate rather than wrap.
    let yes = counts.iter().fold(0u64, |sum, c| sum.saturating_add(c.yes));
    let no = counts.iter().fold(0u64, |sum, c| sum.saturating_add(c.no));
    let max = counts
        .iter()
        .map(|c| c.yes.saturating_add(c.no))
        .max()
        .unwrap_or(0)
        .max(1);
    let (width, height) = (480.0, 120.0);
    let step = width / n as f64;
    let label =
        format!("Evaluations per hour in the last {n} hours, {who}: {yes} yes and {no} no in all");
    html! {
        (usage_choice_form(usage, choice))
        svg.usage viewBox={ "0 0 " (width) " " (height) } width=(width) height=(height) role="img" aria-label=(label) {
            line x1="0" y1=(height - 0.5) x2=(width) y2=(height - 0.5) stroke="currentColor" stroke-opacity="0.35" {}
            @for (i, c) in counts.iter().enumerate() {
                @let x = i as f64 * step + 1.0;
                @let w = (step - 2.0).max(1.0);
                @let yes_h = c.yes as f64 / max as f64 * (height - 4.0);
                @let no_h = c.no as f64 / max as f64 * (height - 4.0);
                @let ago = hours_ago(n - 1 - i);
                rect x=(format!("{x:.1}")) y=(format!("{:.1}", height - yes_h)) width=(format!("{w:.1}"))
                    height=(format!("{yes_h:.1}")) fill="currentColor" {
                    title { (ago) ": " (c.yes) " yes" }
                }
                rect x=(format!("{x:.1}")) y=(format!("{:.1}", height - yes_h - no_h)) width=(format!("{w:.1}"))
                    height=(format!("{no_h:.1}")) fill="currentColor" fill-opacity="0.35" {
                    title { (ago) ": " (c.no) " no" }
                }
            }
        }
        p { small { "Oldest hour on the left, this hour on the right; yes solid, no lighter." } }
        details {
            summary { "Evaluations per hour as a table" }
            div.table-scroll tabindex="0" role="region" aria-label="Evaluations per hour" {
                table {
                    caption { (label) }
                    thead { tr { th scope="col" { "Hour starting" } th scope="col" { "Yes" } th scope="col" { "No" } } }
                    tbody {
                        @for (hour, c) in usage.hours.iter().zip(&counts).rev() {
                            tr { th scope="row" { (time(&hour_time(*hour))) } td { (c.yes) } td { (c.no) } }
                        }
                    }
                }
            }
        }
    }
}

/// Yes and no per application over the last hour as bars (inline SVG, drawn in the text
/// colour of either theme), with the same numbers in a table.
pub fn usage_chart(detail: &ToggleDetail) -> Markup {
    let max = detail
        .applications
        .iter()
        .map(|a| a.last_hour.yes.saturating_add(a.last_hour.no))
        .max()
        .unwrap_or(0)
        .max(1);
    let rows = detail.applications.len().max(1);
    let height = rows * 22;
    let label = format!(
        "Evaluations in the last hour: {} yes and {} no, across {} applications",
        detail.last_hour.yes,
        detail.last_hour.no,
        detail.applications.len()
    );
    html! {
        svg.usage viewBox={ "0 0 300 " (height) } width="300" height=(height) role="img" aria-label=(label) {
            @for (i, app) in detail.applications.iter().enumerate() {
                @let y = i * 22;
                @let yes = app.last_hour.yes as f64 / max as f64 * 200.0;
                @let no = app.last_hour.no as f64 / max as f64 * 200.0;
                text x="0" y=(y + 15) font-size="12" fill="currentColor" { (app.app_name) }
                rect x="100" y=(y + 3) width=(format!("{yes:.1}")) height="16" fill="currentColor" {
                    title { (app.app_name) ": " (app.last_hour.yes) " yes" }
                }
                rect x=(format!("{:.1}", 100.0 + yes)) y=(y + 3) width=(format!("{no:.1}")) height="16"
                    fill="currentColor" fill-opacity="0.35" {
                    title { (app.app_name) ": " (app.last_hour.no) " no" }
                }
            }
        }
        table {
            caption { (label) }
            thead { tr { th scope="col" { "Application" } th scope="col" { "Yes" } th scope="col" { "No" } th scope="col" { "Last minute (yes/no)" } } }
            tbody {
                @for app in &detail.applications {
                    tr { th scope="row" { (app.app_name) } td { (app.last_hour.yes) } td { (app.last_hour.no) }
                         td { (app.last_minute.yes) " / " (app.last_minute.no) } }
                }
            }
        }
    }
}

/// Per application: how many instances hold the configuration they would be sent now.
pub fn reach_table(reach: &ConfigVersions) -> Markup {
    html! {
        @if reach.applications.is_empty() {
            p { "No SDK instance has registered or polled yet." }
        } @else {
            p { "Configuration version served now: " (reach.version) ". Instances not seen for "
                (reach.stale_after_seconds) " s are counted apart." }
            div.table-scroll tabindex="0" role="region" aria-labelledby="h-reach" {
                table {
                    thead { tr {
                        th scope="col" { "Application" } th scope="col" { "On the newest configuration" }
                        th scope="col" { "Behind" } th scope="col" { "Not seen recently" }
                    } }
                    tbody {
                        @for app in &reach.applications {
                            tr {
                                th scope="row" { (app.app_name) }
                                td { (app.current) " of " (app.instances) }
                                td { (app.behind) }
                                td { (app.not_seen_recently) }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub fn history(events: &[Value]) -> Markup {
    html! {
        @if events.is_empty() { p { "No events yet." } }
        ol.history {
            @for e in events {
                li {
                    strong { (e["type"].as_str().unwrap_or("")) }
                    " by " (e["createdBy"].as_str().unwrap_or("")) " at "
                    @if let Some(at) = e["createdAt"].as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok()) {
                        (time(&at.with_timezone(&chrono::Utc)))
                    }
                    @match e["diffs"].as_array() {
                        Some(diffs) if !diffs.is_empty() => {
                            ul.diff {
                                @for d in diffs {
                                    @let path = d["path"].as_array().map(|p| p.iter().map(|s| match s { Value::String(s) => s.clone(), other => other.to_string() }).collect::<Vec<_>>()).unwrap_or_default();
                                    li {
                                        // A line may break after each dot: long paths fit a 390 px screen.
                                        code { @for (i, part) in path.iter().enumerate() { @if i > 0 { "." wbr; } (part) } } ": "
                                        @if !d["lhs"].is_null() { del { (d["lhs"].to_string()) } " " }
                                        @if !d["rhs"].is_null() { ins { (d["rhs"].to_string()) } }
                                        @if d["kind"] == "A" { " (list changed)" }
                                    }
                                }
                            }
                        }
                        _ => { details { summary { "Data" } pre { (serde_json::to_string_pretty(&e["data"]).unwrap_or_default()) } } }
                    }
                }
            }
        }
    }
}
