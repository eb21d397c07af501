//! The browser's way to pass the admin token: `GET /admin/login` shows a form, `POST
//! /admin/login` with the right token sets the cookie [`COOKIE`] and sends the browser on to
//! the status page, `POST /admin/logout` clears it.
//!
//! The cookie holds a session id, 128 random bits from the kernel (`getrandom`), not the
//! token (hex-encoded; the header parsed and written by the `cookie` crate): the
//! balancer keeps the ids it issued ([`Sessions`], at most [`MAX_SESSIONS`], each valid for
//! [`SESSION_TTL`], forgotten at logout and at restart), so a stolen cookie opens only what
//! the cookie opens and only until then. It is `HttpOnly` (no script reads it),
//! `SameSite=Strict` (no other site's page sends it), `Path=/admin`, `Max-Age` the session's
//! life. The admin middleware accepts it for `GET` and `HEAD` only: the read-only views
//! (status, explain, table, replicas); every change still needs the `Authorization`
//! header. A wrong token costs [`WRONG_TOKEN_DELAY`] before its answer, and the form's body
//! is read up to [`MAX_FORM_BYTES`]. The admin listener speaks plain HTTP, so the cookie
//! crosses the network as the header does: keep the listener on a private address.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State as AxState;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use cookie::{Cookie, SameSite};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::page::esc;
use crate::App;

/// The cookie's name.
pub const COOKIE: &str = "ballot_admin";
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at once; a new login past it ends the oldest.
pub const MAX_SESSIONS: usize = 64;
/// The wait before the answer to a wrong token (guessing costs time).
pub const WRONG_TOKEN_DELAY: Duration = Duration::from_millis(500);
/// Largest login form body.
pub const MAX_FORM_BYTES: usize = 4096;

/// The session ids issued by the login form, with when each ends.
#[derive(Debug, Default)]
pub struct Sessions {
    live: Mutex<VecDeque<([u8; 16], Instant)>>,
}

impl Sessions {
    /// A new session id (`None` when the kernel gives no random bytes).
    fn open(&self) -> Option<[u8; 16]> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).ok()?;
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        live.retain(|(_, until)| *until > now);
        if live.len() >= MAX_SESSIONS {
            live.pop_front();
        }
        live.push_back((id, now + SESSION_TTL));
        Some(id)
    }

    /// Whether `id` is a session that has not ended. Compares every id in full.
    pub fn is_open(&self, id: &[u8]) -> bool {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let mut found = false;
        for (open, until) in live.iter() {
            found |= bool::from(open[..].ct_eq(id)) && *until > now;
        }
        found
    }

    /// Ends session `id`.
    fn close(&self, id: &[u8]) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(open, _)| open[..] != *id);
    }
}

/// The session id a request's [`COOKIE`] carries, decoded (`None`: no such cookie, or not
/// hex).
pub fn cookie_session(headers: &HeaderMap) -> Option<Vec<u8>> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == COOKIE)
        .and_then(|c| hex::decode(c.value()).ok())
}

/// The `Set-Cookie` value of session `value` (empty: the cookie cleared) lasting `age`.
fn session_cookie(value: String, age: Duration) -> String {
    Cookie::build((COOKIE, value))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/admin")
        .max_age(cookie::time::Duration::seconds(age.as_secs() as i64))
        .build()
        .to_string()
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
        tokio::time::sleep(WRONG_TOKEN_DELAY).await;
        return form_page(StatusCode::UNAUTHORIZED, "Wrong token: try again.");
    }
    let Some(id) = app.sessions.open() else {
        return form_page(
            StatusCode::SERVICE_UNAVAILABLE,
            "No session could be opened (no random bytes from the kernel).",
        );
    };
    let cookie = session_cookie(hex::encode(id), SESSION_TTL);
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie),
            (header::LOCATION, "/admin/status".to_owned()),
        ],
    )
        .into_response()
}

/// `POST /admin/logout`: ends the session and clears the cookie.
pub async fn logout(AxState(app): AxState<Arc<App>>, headers: HeaderMap) -> Response {
    if let Some(id) = cookie_session(&headers) {
        app.sessions.close(&id);
    }
    (
        StatusCode::SEE_OTHER,
        [
            (
                header::SET_COOKIE,
                session_cookie(String::new(), Duration::ZERO),
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
    fn sessions_open_check_and_close_and_the_cookie_round_trips() {
        let s = Sessions::default();
        let id = s.open().expect("random bytes");
        assert!(s.is_open(&id));
        let mut other = id;
        other[0] ^= 1;
        assert!(!s.is_open(&other) && !s.is_open(&id[..15]));
        let mut h = HeaderMap::new();
        let v = format!("a=b; {COOKIE}={}; c=d", hex::encode(id));
        h.insert(header::COOKIE, HeaderValue::from_str(&v).unwrap());
        assert_eq!(cookie_session(&h).as_deref(), Some(&id[..]));
        s.close(&id);
        assert!(!s.is_open(&id));
        h.insert(header::COOKIE, HeaderValue::from_static("ballot_admin=zz"));
        assert_eq!(cookie_session(&h), None);
        assert_eq!(cookie_session(&HeaderMap::new()), None);
        // Past MAX_SESSIONS the oldest ends.
        let first = s.open().unwrap();
        for _ in 0..MAX_SESSIONS {
            s.open().unwrap();
        }
        assert!(!s.is_open(&first));
    }
}
