//! The browser's way to pass the admin token: `GET /admin/login` shows a form, `POST
//! /admin/login` with the right token sets the cookie [`COOKIE`] and sends the browser on to
//! the status page, `POST /admin/logout` clears it.
//!
//! The cookie holds the token itself (hex-encoded, so any token fits a cookie value) with
//! `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends it) and
//! `Path=/admin`. The admin middleware accepts it for `GET` and `HEAD` only: the cookie
//! opens the read-only views (status, explain, table, replicas), and every change still
//! needs the `Authorization` header. The admin listener speaks plain HTTP, so the cookie
//! crosses the network as the header does: keep the listener on a private address.

use std::sync::Arc;

use axum::extract::State as AxState;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use serde::Deserialize;

use super::page::esc;
use crate::App;

/// The cookie's name.
pub const COOKIE: &str = "ballot_admin";

/// The token a request's [`COOKIE`] carries, decoded (`None`: no such cookie, or not hex).
pub fn cookie_token(headers: &HeaderMap) -> Option<Vec<u8>> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| from_hex(value))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn form_page(status: StatusCode, message: &str) -> Response {
    let html = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>ballot balancer: log in</title><style>body{{font:14px system-ui,sans-serif;\
         margin:2em}}</style></head><body><h1>ballot balancer</h1><p>{}</p>\
         <form method=\"post\" action=\"/admin/login\"><label>admin token \
         <input type=\"password\" name=\"token\" autofocus></label> \
         <button>log in</button></form></body></html>\n",
        esc(message)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response()
}

/// `GET /admin/login`.
pub async fn login_form(AxState(app): AxState<Arc<App>>) -> Response {
    if app.admin_token.is_none() {
        return form_page(
            StatusCode::UNAUTHORIZED,
            "The admin API is disabled: no admin token is configured.",
        );
    }
    form_page(
        StatusCode::OK,
        "Enter the admin token to see the status page.",
    )
}

/// The login form's field.
#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

/// `POST /admin/login`.
pub async fn login(AxState(app): AxState<Arc<App>>, Form(form): Form<LoginForm>) -> Response {
    let Some(token) = &app.admin_token else {
        return form_page(
            StatusCode::UNAUTHORIZED,
            "The admin API is disabled: no admin token is configured.",
        );
    };
    if !token.matches(form.token.as_bytes()) {
        return form_page(StatusCode::UNAUTHORIZED, "Wrong token: try again.");
    }
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/admin",
        to_hex(form.token.as_bytes())
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie),
            (header::LOCATION, "/admin/status".to_owned()),
        ],
    )
        .into_response()
}

/// `POST /admin/logout`: clears the cookie.
pub async fn logout() -> Response {
    (
        StatusCode::SEE_OTHER,
        [
            (
                header::SET_COOKIE,
                format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/admin; Max-Age=0"),
            ),
            (header::LOCATION, "/admin/login".to_owned()),
        ],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_cookie_round_trips_any_token() {
        let token = b"t0k en;=\"\xff";
        let mut h = HeaderMap::new();
        let v = format!("a=b; {COOKIE}={}; c=d", to_hex(token));
        h.insert(header::COOKIE, HeaderValue::from_str(&v).unwrap());
        assert_eq!(cookie_token(&h).as_deref(), Some(&token[..]));
        h.insert(header::COOKIE, HeaderValue::from_static("ballot_admin=zz"));
        assert_eq!(cookie_token(&h), None);
        assert_eq!(cookie_token(&HeaderMap::new()), None);
    }
}
