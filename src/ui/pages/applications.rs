//! Applications and their instances, with the configuration each instance holds (whether it
//! is what it would be sent now).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use maud::html;

use crate::error::ApiError;
use crate::state::AppState;
use crate::ui::layout::{page, time, Section};
use crate::ui::problem::{PageResult, Problem};
use crate::ui::session::Viewer;
use crate::usage::views;

use super::segment;

/// `GET /ui/applications`.
pub async fn list(viewer: Viewer, State(state): State<AppState>) -> PageResult {
    let apps = views::applications(state.usage.store(), None)
        .await
        .map_err(|e| Problem(ApiError::from(e)))?;
    let body = html! {
        @if apps.is_empty() { p { "No SDK has registered in the last two days." } }
        ul { @for a in &apps {
            li { a href={ "/ui/applications/" (segment(&a.app_name)) } { (a.app_name) }
                 " — last seen " (time(&a.updated_at)) }
        } }
    };
    Ok(page(
        StatusCode::OK,
        "Applications",
        Some(&viewer),
        Section::Applications,
        body,
    ))
}

/// `GET /ui/applications/{app}`.
pub async fn detail(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(app): Path<String>,
) -> PageResult {
    let found = views::application(state.usage.store(), &app)
        .await
        .map_err(|e| Problem(ApiError::from(e)))?;
    let Some((record, instances, toggles)) = found else {
        return Err(Problem(ApiError::NotFound(format!(
            "No application “{app}” has been seen in the last two days."
        ))));
    };
    let etags = views::current_etags(&state.snapshot, views::poll_queries(&instances)).await;
    let details = views::application_details(record, instances, toggles, &etags);
    let body = html! {
        section aria-labelledby="h-instances" {
            h2 #h-instances { "Instances" }
            div.table-scroll tabindex="0" role="region" aria-labelledby="h-instances" {
                table {
                    thead { tr { th scope="col" { "Instance" } th scope="col" { "SDK" } th scope="col" { "Last seen" } th scope="col" { "Configuration" } } }
                    tbody { @for i in &details.instances {
                        tr {
                            th scope="row" { (i.instance_id) }
                            td { (i.sdk_version.as_deref().unwrap_or("")) }
                            td { (time(&i.last_seen)) }
                            td { @match &i.configuration {
                                Some(c) => {
                                    "version " (c.version) ", polled " (time(&c.last_polled)) " — "
                                    @if c.current { strong { "newest" } } @else { mark { "behind" } }
                                }
                                None => { "has not polled" }
                            } }
                        }
                    } }
                }
            }
        }
        section aria-labelledby="h-seen" {
            h2 #h-seen { "Toggles it reported" }
            p { (details.seen_toggles.join(", ")) }
        }
    };
    Ok(page(
        StatusCode::OK,
        &format!("Application {app}"),
        Some(&viewer),
        Section::Applications,
        body,
    ))
}
