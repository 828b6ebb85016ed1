//! The admin UI over real HTTP, without a browser (tests/ui drives Chromium): `/` for
//! browsers and for API clients, sign-in, every page rendering, the page policy, versioned
//! assets, and form posts refused without the session's CSRF token or from another origin.

use reqwest::header::{ACCEPT, CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;
use reqwest::StatusCode;

use crate::common::{Backend, TestApp};
use crate::conformance;

conformance!(ui_pages_sessions_and_form_guards);

/// A urlencoded form body.
fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// The value of `name="_csrf" value="…"` in a page.
fn csrf_of(page: &str) -> String {
    let marker = "name=\"_csrf\" value=\"";
    let start = page.find(marker).expect("a form with a CSRF token") + marker.len();
    page[start..]
        .split('"')
        .next()
        .expect("a value")
        .to_string()
}

async fn ui_pages_sessions_and_form_guards(backend: &Backend) {
    let app = TestApp::spawn(backend).await;
    app.create_toggle("ui-guarded").await;
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client");
    let url = |path: &str| format!("{}{path}", app.base);

    // `/`: browsers to the UI, API clients as before.
    let browser = http
        .get(url("/"))
        .header(ACCEPT, "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .expect("GET /");
    assert_eq!(browser.status(), StatusCode::SEE_OTHER);
    assert_eq!(browser.headers()[LOCATION], "/ui/toggles");
    let api = http
        .get(url("/"))
        .header(ACCEPT, "application/json")
        .send()
        .await
        .expect("GET /");
    assert_eq!(api.status(), StatusCode::NOT_FOUND);
    assert!(api.headers()[CONTENT_TYPE]
        .to_str()
        .unwrap_or_default()
        .starts_with("application/json"));

    // Not signed in: sent to the sign-in page, which comes back here.
    let away = http.get(url("/ui/toggles")).send().await.expect("GET");
    assert_eq!(away.status(), StatusCode::SEE_OTHER);
    assert_eq!(away.headers()[LOCATION], "/ui/sign-in?next=%2Fui%2Ftoggles");
    let signed = http
        .post(url("/ui/sign-in"))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form(&[("name", "Ann"), ("next", "/ui/archive")]))
        .send()
        .await
        .expect("sign in");
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed.headers()[LOCATION], "/ui/archive");
    let set_cookie = signed.headers()[SET_COOKIE]
        .to_str()
        .expect("cookie")
        .to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Lax"));
    let cookie = set_cookie.split(';').next().expect("pair").to_string();

    // Every page renders, under the page policy.
    let mut csrf = String::new();
    for path in [
        "/ui/toggles",
        "/ui/toggles?q=guarded&stale=no&sort=-created&size=10",
        "/ui/toggles/ui-guarded",
        "/ui/toggles/ui-guarded?usage=48h&app=shop",
        "/ui/toggles/ui-guarded/variants",
        "/ui/new-toggle",
        "/ui/archive",
        "/ui/events",
        "/ui/playground",
        "/ui/tokens",
        "/ui/state",
        "/ui/addons",
        "/ui/applications",
        "/ui/settings",
        "/ui/settings/tag-types/simple",
    ] {
        let page = http
            .get(url(path))
            .header(COOKIE, &cookie)
            .send()
            .await
            .expect("GET page");
        assert_eq!(page.status(), StatusCode::OK, "{path}");
        let policy = page.headers()["content-security-policy"]
            .to_str()
            .expect("policy")
            .to_string();
        assert!(
            policy.contains("script-src 'self'") && !policy.contains("unsafe"),
            "{path}"
        );
        let body = page.text().await.expect("body");
        assert_eq!(body.matches("<h1").count(), 1, "{path}: one h1");
        assert!(
            !body.contains("<script>") && !body.contains(" style="),
            "{path}: nothing inline"
        );
        csrf = csrf_of(&body);
    }
    let page = http
        .get(url("/ui/toggles"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("body");
    let htmx = page
        .split("src=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a script");
    let asset = http.get(url(htmx)).send().await.expect("asset");
    assert_eq!(asset.status(), StatusCode::OK);
    assert!(asset.headers()["cache-control"]
        .to_str()
        .unwrap_or_default()
        .contains("immutable"));

    // A form post: refused without the token, with another's, or from another origin.
    let stale = |token: String, origin: Option<&'static str>| {
        let mut request = http
            .post(url("/ui/toggles/bulk"))
            .header(COOKIE, &cookie)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form(&[
                ("names", "ui-guarded"),
                ("action", "stale"),
                ("_csrf", &token),
            ]));
        if let Some(origin) = origin {
            request = request.header(ORIGIN, origin);
        }
        request.send()
    };
    let is_stale = || async {
        app.get("/api/admin/features/ui-guarded")
            .await
            .expect(200)
            .json["stale"]
            .as_bool()
            .expect("stale")
    };
    for (token, origin) in [
        (String::new(), None),
        ("forged".to_string(), None),
        (csrf.clone(), Some("http://127.0.0.1:1")),
    ] {
        let refused = stale(token, origin).await.expect("post");
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert!(!is_stale().await, "a refused post changed nothing");
    }
    let accepted = stale(csrf.clone(), None).await.expect("post");
    assert_eq!(accepted.status(), StatusCode::SEE_OTHER);
    assert!(is_stale().await);

    // A row numbered in the billions is refused at once (not billions of loops or rows).
    let huge = http
        .post(url("/ui/settings/tag-types/simple"))
        .header(COOKIE, &cookie)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form(&[
            ("description", "d"),
            ("c4000000000.values", "x"),
            ("_csrf", &csrf),
        ]))
        .send();
    let huge = tokio::time::timeout(std::time::Duration::from_secs(10), huge)
        .await
        .expect("answered within 10 s")
        .expect("post");
    assert_eq!(huge.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = huge.text().await.expect("body");
    assert!(body.contains("at most 300 constraints"), "{body}");
    assert!(body.len() < 200_000, "not thousands of rows");
    app.stop().await;
}

/// A session opened by a name (insecure mode) opens nothing once the installation requires
/// tokens, even with the same session secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_session_opens_nothing_where_tokens_are_required() {
    use flagpole::config::{AuthMode, ClientAuth, SecretString};
    let backend = Backend::embedded();
    let secret = SecretString("a-session-secret-shared-by-both".into());
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client");
    let mut settings = backend.settings();
    settings.auth.mode = AuthMode::Insecure;
    settings.auth.session_secret = Some(secret.clone());
    let app = TestApp::spawn_with(settings.clone()).await;
    let signed = http
        .post(format!("{}/ui/sign-in", app.base))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form(&[("name", "Ann"), ("next", "/ui/toggles")]))
        .send()
        .await
        .expect("sign in");
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    let cookie = signed.headers()[SET_COOKIE]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_string();
    let open = |app: &TestApp| {
        http.get(format!("{}/ui/toggles", app.base))
            .header(COOKIE, cookie.clone())
            .send()
    };
    assert_eq!(open(&app).await.expect("GET").status(), StatusCode::OK);
    app.stop().await;

    settings.auth.mode = AuthMode::Token;
    settings.auth.client_auth = ClientAuth::Token;
    settings.auth.admin_token = Some(SecretString("test-admin-token-0001".into()));
    let app = TestApp::spawn_with(settings).await;
    let refused = open(&app).await.expect("GET");
    assert_eq!(refused.status(), StatusCode::SEE_OTHER);
    assert!(refused.headers()[LOCATION]
        .to_str()
        .unwrap_or_default()
        .starts_with("/ui/sign-in"));
    app.stop().await;
}

/// A save the store cannot take (it is down) shows the form again with what was typed and
/// the failure, instead of a problem page losing the edits: a strategy, a context field, a
/// dependency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_the_store_refuses_keeps_what_was_typed() {
    let backend = Backend::redis();
    let app = TestApp::spawn(&backend).await;
    app.create_toggle("kept-child").await;
    app.create_toggle("kept-parent").await;
    let strategy = app
        .post(
            "/api/admin/projects/default/features/kept-child/environments/development/strategies",
            serde_json::json!({"name": "flexibleRollout", "parameters": {"rollout": "10"}}),
        )
        .await
        .expect(200)
        .json;
    let id = strategy["id"].as_str().expect("an id").to_string();
    app.post(
        "/api/admin/context",
        serde_json::json!({"name": "kept-region", "legalValues": ["eu"]}),
    )
    .await
    .expect(201);
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client");
    let url = |path: &str| format!("{}{path}", app.base);
    let signed = http
        .post(url("/ui/sign-in"))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form(&[("name", "Ann"), ("next", "/ui/toggles")]))
        .send()
        .await
        .expect("sign in");
    let cookie = signed.headers()[SET_COOKIE]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_string();
    let page = http
        .get(url("/ui/settings/context-fields/kept-region"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("body");
    let csrf = csrf_of(&page);

    backend.redis_server().stop();

    let strategy_path = format!("/ui/toggles/kept-child/environments/development/strategies/{id}");
    let posts = [
        (
            strategy_path.as_str(),
            vec![
                ("name", "flexibleRollout"),
                ("title", "Typed title 7431"),
                ("rollout", "42"),
            ],
        ),
        (
            "/ui/settings/context-fields/kept-region",
            vec![
                ("description", "Typed description 7432"),
                ("legalValues", "eu"),
            ],
        ),
        (
            "/ui/toggles/kept-child/dependency",
            vec![
                ("feature", "kept-parent"),
                ("enabled", "true"),
                ("variants", ""),
            ],
        ),
    ];
    for (path, mut fields) in posts {
        fields.push(("_csrf", &csrf));
        let typed = fields[0].1.to_string();
        let typed = if path.ends_with("dependency") {
            typed
        } else {
            fields[1].1.to_string()
        };
        let answer = http
            .post(url(path))
            .header(COOKIE, &cookie)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form(&fields))
            .send()
            .await
            .expect("post");
        let status = answer.status();
        let body = answer.text().await.expect("body");
        assert!(status.is_server_error(), "{path}: {status}");
        assert!(body.contains("<form"), "{path}: the form again: {body}");
        assert!(
            body.contains(&typed),
            "{path}: what was typed ({typed}): {body}"
        );
        assert!(body.contains("What you typed is kept"), "{path}: {body}");
    }
    app.stop().await;
}

/// Only pages and posts count against the admin rate limit: the assets a page loads and the
/// as-you-type name check do not (the session cookie is sent with them too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assets_and_the_name_check_do_not_use_up_the_rate_limit() {
    let backend = Backend::embedded();
    let mut settings = backend.settings();
    settings.auth.rate_limit_admin = 1.0;
    let app = TestApp::spawn_with(settings).await;
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client");
    let url = |path: &str| format!("{}{path}", app.base);
    let signed = http
        .post(url("/ui/sign-in"))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form(&[("name", "Ann"), ("next", "/ui/toggles")]))
        .send()
        .await
        .expect("sign in");
    let cookie = signed.headers()[SET_COOKIE]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_string();
    let page = http
        .get(url("/ui/new-toggle"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("body");
    let script = page
        .split("src=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a script")
        .to_string();
    for i in 0..20 {
        for path in [
            script.clone(),
            format!("/ui/new-toggle/name-check?name=typed-{i}"),
        ] {
            let answer = http
                .get(url(&path))
                .header(COOKIE, &cookie)
                .send()
                .await
                .expect("GET");
            assert_ne!(answer.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
        }
    }
    // Pages still do.
    let mut refused = false;
    for _ in 0..10 {
        let answer = http
            .get(url("/ui/toggles"))
            .header(COOKIE, &cookie)
            .send()
            .await
            .expect("GET");
        refused |= answer.status() == StatusCode::TOO_MANY_REQUESTS;
    }
    assert!(refused, "pages count against the limit");
    app.stop().await;
}
