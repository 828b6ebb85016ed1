//! What a toggle's page shows about its use: evaluations per application in the last hour
//! (inline SVG bars, with the same numbers in a table), whether the SDKs hold the newest
//! configuration, and the toggle's history with what each event changed.

use maud::{html, Markup};
use serde_json::Value;

use crate::ui::layout::time;
use crate::usage::views::{ConfigVersions, ToggleDetail};

/// Yes and no per application over the last hour as bars (inline SVG, drawn in the text
/// colour of either theme), with the same numbers in a table.
pub fn usage_chart(detail: &ToggleDetail) -> Markup {
    let max = detail
        .applications
        .iter()
        .map(|a| a.last_hour.yes + a.last_hour.no)
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
