//! The page shell every page shares: landmarks (banner, navigation, main, contentinfo), a
//! skip link, the navigation with the current page marked, and the page's own policy
//! (scripts and styles from this origin only: no inline ones anywhere).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use super::assets::ASSETS;
use super::session::{Viewer, CSRF_FIELD};

/// The policy of every UI page: its own scripts and styles only (no inline ones, no eval),
/// images from itself or `data:` (Pico's icons), forms posting only to itself.
pub const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";

/// htmx's settings: no inline indicator styles (the policy forbids them), no eval, and
/// 422 answers (a form with its errors) swapped in like successes.
const HTMX_CONFIG: &str = r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"historyCacheSize":0,"scrollIntoViewOnBoost":false,"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},{"code":"422","swap":true},{"code":"409","swap":true},{"code":"50[034]","swap":true},{"code":"[45]..","swap":false,"error":true}]}"#;

/// The sections of the navigation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Toggles,
    NewToggle,
    Archive,
    Events,
    Playground,
    Tokens,
    State,
    Addons,
    Applications,
    Settings,
    None,
}

const NAV: [(Section, &str, &str); 10] = [
    (Section::Toggles, "/ui/toggles", "Toggles"),
    (Section::NewToggle, "/ui/new-toggle", "New toggle"),
    (Section::Archive, "/ui/archive", "Archive"),
    (Section::Events, "/ui/events", "Events"),
    (Section::Playground, "/ui/playground", "Playground"),
    (Section::Tokens, "/ui/tokens", "API tokens"),
    (Section::State, "/ui/state", "Import/export"),
    (Section::Addons, "/ui/addons", "Addons"),
    (Section::Applications, "/ui/applications", "Applications"),
    (Section::Settings, "/ui/settings", "Settings"),
];

/// The hidden CSRF field of a form.
pub fn csrf(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf); }
}

/// A whole page: `title` is its one h1 and (with the product name) its title.
pub fn page(
    status: StatusCode,
    title: &str,
    viewer: Option<&Viewer>,
    section: Section,
    body: Markup,
) -> Response {
    let assets = &*ASSETS;
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                // No favicon request (a 404 in every page's console).
                link rel="icon" href="data:,";
                meta name="htmx-config" content=(HTMX_CONFIG);
                title { (title) " · Flagpole" }
                link rel="stylesheet" href={ "/ui/assets/" (assets.pico.name) };
                link rel="stylesheet" href={ "/ui/assets/" (assets.css.name) };
                script src={ "/ui/assets/" (assets.htmx.name) } defer {}
                script src={ "/ui/assets/" (assets.js.name) } defer {}
            }
            body hx-boost="true" {
                a.skip href="#main" { "Skip to content" }
                header.container {
                    nav aria-label="Main" {
                        ul { li { a.brand href="/ui/toggles" { strong { "Flagpole" } } } }
                        @if let Some(viewer) = viewer {
                            ul.sections {
                                @for (s, href, label) in NAV {
                                    li {
                                        @if s == section {
                                            a href=(href) aria-current="page" { (label) }
                                        } @else {
                                            a href=(href) { (label) }
                                        }
                                    }
                                }
                                li {
                                    form.inline method="post" action="/ui/sign-out" {
                                        (csrf(viewer))
                                        button.secondary.outline type="submit" {
                                            "Sign out " span.who { (viewer.actor.0) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                main.container #main tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
                footer.container {
                    small { "Flagpole " (env!("CARGO_PKG_VERSION")) " · " a href="/api/docs" hx-boost="false" { "API documentation" } }
                }
            }
        }
    };
    let mut response = (status, markup).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(PAGE_POLICY),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::VARY, HeaderValue::from_static("HX-Request, Cookie"));
    response
}

/// A time, shown in UTC without JavaScript and in the browser's zone with it (`app.js`).
pub fn time(at: &chrono::DateTime<chrono::Utc>) -> Markup {
    html! {
        time datetime=(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)) {
            (at.format("%Y-%m-%d %H:%M UTC"))
        }
    }
}
