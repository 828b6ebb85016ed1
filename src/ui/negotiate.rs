//! `/`: a browser (asking for HTML) is sent to the UI; every other client gets the API's
//! answer as before (404 in JSON), so scripts and SDKs see no change.

use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Redirect, Response};

use crate::error::ApiError;

/// Whether the `Accept` header ranks `text/html` above JSON (browsers send
/// `text/html,…,*/*;q=0.8`; API clients send JSON, `*/*` or nothing).
pub fn wants_html(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let quality = |wanted: &str| {
        accept
            .split(',')
            .filter_map(|part| {
                let mut pieces = part.split(';');
                let media = pieces.next()?.trim();
                if !media.eq_ignore_ascii_case(wanted) {
                    return None;
                }
                let q = pieces
                    .filter_map(|p| p.trim().strip_prefix("q="))
                    .find_map(|q| q.parse::<f32>().ok())
                    .unwrap_or(1.0);
                Some(q)
            })
            .fold(0.0_f32, f32::max)
    };
    let html = quality("text/html");
    html > 0.0 && html >= quality("application/json")
}

/// `GET /`.
pub async fn index(headers: HeaderMap) -> Response {
    if wants_html(&headers) {
        Redirect::to("/ui/toggles").into_response()
    } else {
        ApiError::NotFound("No route for GET /".into()).into_response()
    }
}

/// `GET /ui`.
pub async fn home() -> Redirect {
    Redirect::to("/ui/toggles")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn browsers_get_the_ui_and_api_clients_do_not() {
        assert!(wants_html(&accept(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        )));
        assert!(!wants_html(&accept("application/json")));
        assert!(!wants_html(&accept("*/*")));
        assert!(!wants_html(&accept("application/json, text/html;q=0.5")));
        assert!(!wants_html(&HeaderMap::new()));
    }
}
