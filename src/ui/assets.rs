//! The UI's static files, compiled into the binary and served under names that change with
//! their content (vendored files carry their version, our own a digest of their bytes), so
//! browsers may keep them for a year. Versions and checksums: assets/vendor/VENDORED.md.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// One served file.
pub struct Asset {
    /// The name it is served under (in `/ui/assets/`).
    pub name: String,
    content_type: &'static str,
    bytes: &'static [u8],
}

/// A file with a digest of its bytes in its name: `app.css` → `app.1a2b3c4d5e6f.css`.
fn digested(
    stem: &str,
    extension: &str,
    content_type: &'static str,
    bytes: &'static [u8],
) -> Asset {
    let digest = Sha256::digest(bytes);
    let short: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    Asset {
        name: format!("{stem}.{short}.{extension}"),
        content_type,
        bytes,
    }
}

/// The UI's files: the vendored ones (htmx, Pico) and our own stylesheet and script.
pub struct Assets {
    pub htmx: Asset,
    pub pico: Asset,
    pub css: Asset,
    pub js: Asset,
}

/// Built once: the digests of our own files.
pub static ASSETS: LazyLock<Assets> = LazyLock::new(|| Assets {
    htmx: Asset {
        name: "htmx-2.0.11.min.js".into(),
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../assets/vendor/htmx-2.0.11.min.js"),
    },
    pico: Asset {
        name: "pico-2.1.1.min.css".into(),
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../assets/vendor/pico-2.1.1.min.css"),
    },
    css: digested(
        "app",
        "css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/app.css"),
    ),
    js: digested(
        "app",
        "js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/app.js"),
    ),
});

/// `/ui/assets/{file}`: a file, cached for a year (its name changes with it).
pub async fn serve(Path(file): Path<String>) -> Response {
    let assets = &*ASSETS;
    let Some(asset) = [&assets.htmx, &assets.pico, &assets.css, &assets.js]
        .into_iter()
        .find(|a| a.name == file)
    else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
        ],
        asset.bytes,
    )
        .into_response()
}
