//! Sessions of the insecure mode: login by email, a signed cookie (HttpOnly, SameSite=Lax,
//! two days), the current user, logout.

use flagpole::config::{AuthMode, ClientAuth};
use reqwest::Method;
use serde_json::json;

use super::settings;
use crate::common::{send, Backend, TestApp};
use crate::conformance;

conformance!(a_session_identifies_its_user_until_logout);

async fn a_session_identifies_its_user_until_logout(backend: &Backend) {
    let app = TestApp::spawn_with(settings(backend, AuthMode::Insecure, ClientAuth::Token)).await;
    send(app.anonymous(Method::GET, "/api/admin/features"))
        .await
        .expect(401);
    let login = send(
        app.anonymous(Method::POST, "/api/admin/login")
            .json(&json!({"email": "ann@example.com"})),
    )
    .await
    .expect(200);
    assert_eq!(login.json["username"], "ann@example.com");
    let cookie = login.header("set-cookie").expect("set-cookie");
    for attribute in ["HttpOnly", "SameSite=Lax", "Max-Age=172800", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let pair = cookie.split(';').next().expect("pair").to_string();
    let me = send(
        app.anonymous(Method::GET, "/api/admin/user")
            .header("Cookie", &pair),
    )
    .await
    .expect(200);
    assert_eq!(me.json["username"], "ann@example.com");
    send(
        app.anonymous(Method::POST, "/api/admin/features")
            .header("Cookie", &pair)
            .json(&json!({"name": "by-session", "strategies": [{"name": "default"}]})),
    )
    .await
    .expect(200);
    let events = app
        .get("/api/admin/events/by-session")
        .await
        .expect(200)
        .json;
    assert_eq!(events["events"][0]["createdBy"], "ann@example.com");

    // A cookie signed with another key, or changed, identifies nobody.
    let (payload, _) = pair.split_once('.').expect("signed");
    send(
        app.anonymous(Method::GET, "/api/admin/user")
            .header("Cookie", format!("{payload}.AAAA")),
    )
    .await
    .expect(401);
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let logout = send(
        no_redirects
            .get(format!("{}/logout", app.base))
            .header("Cookie", &pair),
    )
    .await;
    assert_eq!(logout.status.as_u16(), 302);
    assert!(logout
        .header("set-cookie")
        .is_some_and(|c| c.contains("Max-Age=0")));

    for body in [
        json!({"email": "not an email"}),
        json!({}),
        json!({"email": "a@b", "role": "admin"}),
    ] {
        send(app.anonymous(Method::POST, "/api/admin/login").json(&body))
            .await
            .expect(400)
            .error_message();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_is_only_offered_in_insecure_mode() {
    let backend = Backend::embedded();
    let app = TestApp::spawn_with(settings(&backend, AuthMode::Token, ClientAuth::Token)).await;
    send(
        app.anonymous(Method::POST, "/api/admin/login")
            .json(&json!({"email": "ann@example.com"})),
    )
    .await
    .expect(404);
}
