//! What the HTTP clients share: the API key type and how it is sent ([`AuthScheme`]), one JSON
//! POST with error mapping, `retry-after` and rate-limit header parsing, the batching loop of
//! the embedders, and reassembling indexed vectors. Wire formats stay in each client's module.
//!
//! Rate-limit headers reach the call wrapper without changing any client's answer type: the
//! wrapper runs a request inside [`observing`], and every response (success or error) records
//! what its headers said there ([`RateHeaders`]).

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::future::Future;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::embed::{Embeddings, Usage, l2_normalize};
use crate::limit::{LimitKind, LimitObservation, RateHeaders};
use crate::{ProviderError, ProviderErrorKind};

tokio::task_local! {
    /// What the last response of the request being observed said about the provider's limits,
    /// and the account it was sent to.
    static OBSERVED: RefCell<Observed>;
}

/// What [`observing`] saw of the responses of one request.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// What the last response that described the provider's limits said (`None`: none did).
    pub(crate) headers: Option<RateHeaders>,
    /// A fingerprint of the account the request went to: the URL's scheme, host and port and
    /// the API key, hashed in memory (never shown or stored). Models with the same fingerprint
    /// may share one key-wide limit.
    pub(crate) account: Option<u64>,
}

/// Runs `request` and returns its output with what the responses it received said about the
/// provider's rate limits and the account they came from.
pub(crate) async fn observing<F: Future>(request: F) -> (F::Output, Observed) {
    OBSERVED
        .scope(RefCell::new(Observed::default()), async move {
            let output = request.await;
            let seen = OBSERVED.with(|cell| std::mem::take(&mut *cell.borrow_mut()));
            (output, seen)
        })
        .await
}

/// Records the account of a request for the enclosing [`observing`], if any.
fn record_account(url: &str, key: Option<&ApiKey>) {
    use std::hash::{Hash, Hasher};
    let origin = reqwest::Url::parse(url).ok().map(|u| {
        (
            u.scheme().to_owned(),
            u.host_str().unwrap_or_default().to_owned(),
            u.port_or_known_default(),
        )
    });
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    origin.hash(&mut hasher);
    key.map(|k| k.0.as_str()).hash(&mut hasher);
    let account = hasher.finish();
    let _ = OBSERVED.try_with(|cell| cell.borrow_mut().account = Some(account));
}

/// Records `headers` for the enclosing [`observing`], if any. Reset times given as instants
/// (Anthropic's) are taken relative to `sent`, when the request left: the provider states its
/// limits as of admitting the request, and the answer's own latency must not shorten them.
fn record_rate_headers(headers: &HeaderMap, sent: SystemTime) {
    let seen = parse_rate_headers(headers, sent);
    if !seen.is_empty() {
        let _ = OBSERVED.try_with(|cell| cell.borrow_mut().headers = Some(seen));
    }
}

/// An API key. It is read from the environment, sent only in its authentication header
/// (`Authorization: Bearer …` or Anthropic's `x-api-key`, marked sensitive), and never shown:
/// `Debug` prints `ApiKey(<redacted>)` and there is no `Display`.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Reads the key from the environment variable `var`; an unset or blank variable is `None`.
    pub fn from_env(var: &str) -> Option<ApiKey> {
        Self::from_lookup(var, &|name| std::env::var(name).ok())
    }

    pub(crate) fn from_lookup(var: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<ApiKey> {
        env(var)
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .map(ApiKey)
    }

    /// Wraps a key obtained elsewhere (tests, or a host that sandboxes the environment). assay
    /// itself reads keys only from environment variables.
    pub fn new(secret: impl Into<String>) -> ApiKey {
        ApiKey(secret.into())
    }

    fn header(&self, scheme: AuthScheme) -> Result<(HeaderName, HeaderValue), ProviderError> {
        let (name, text) = match scheme {
            AuthScheme::Bearer => (AUTHORIZATION, format!("Bearer {}", self.0)),
            AuthScheme::XApiKey => (HeaderName::from_static("x-api-key"), self.0.clone()),
        };
        let mut value = HeaderValue::from_str(&text).map_err(|_| {
            ProviderError::config("the API key contains characters not allowed in an HTTP header")
        })?;
        value.set_sensitive(true);
        Ok((name, value))
    }

    /// Replaces every occurrence of the key in `text` (servers sometimes quote it back).
    fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            text.to_owned()
        } else {
            text.replace(&self.0, "<redacted>")
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// How a client sends its [`ApiKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthScheme {
    /// `Authorization: Bearer <key>` (OpenAI, Voyage and compatible servers).
    Bearer,
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
}

/// A JSON-over-HTTP client with assay's error mapping.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    /// Built on the first request: making one loads the system's TLS root certificates (~2 ms),
    /// which a run answered from the call cache, or a command that never calls out, skips.
    /// `[0]` for `https://` URLs; `[1]` for plain `http://` ones (a local server), made without
    /// any root certificate, as it never verifies one.
    clients: [OnceLock<reqwest::Client>; 2],
    timeout: Duration,
    key: Option<ApiKey>,
    scheme: AuthScheme,
    /// Fixed headers sent with every request (e.g. `anthropic-version`); never secrets.
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Http {
    pub(crate) fn new(timeout: Duration, key: Option<ApiKey>) -> Result<Http, ProviderError> {
        if timeout.is_zero() {
            return Err(ProviderError::config(
                "the request timeout must be greater than zero",
            ));
        }
        Ok(Http {
            clients: [OnceLock::new(), OnceLock::new()],
            timeout,
            key,
            scheme: AuthScheme::Bearer,
            headers: Vec::new(),
        })
    }

    /// The client for `url`, made on first use.
    fn client(&self, url: &str) -> Result<&reqwest::Client, ProviderError> {
        let plain = url.starts_with("http://");
        let slot = &self.clients[usize::from(plain)];
        if let Some(client) = slot.get() {
            return Ok(client);
        }
        // A client per provider, not per process: a pooled connection belongs to the runtime that
        // opened it, and the harness may run on several runtimes (the HTTP API runs each request
        // on its own).
        assay_telemetry::tls::ensure_provider();
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("assay/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(self.timeout.min(Duration::from_secs(10)));
        if plain {
            builder = builder.tls_certs_only(std::iter::empty());
        }
        let client = builder.build().map_err(|e| {
            ProviderError::config(format!(
                "cannot create the HTTP client: {}",
                error_chain(&e)
            ))
        })?;
        // Two first requests at once may both build one; either will do.
        Ok(slot.get_or_init(|| client))
    }

    /// Sends the key with `scheme` instead of `Authorization: Bearer`.
    pub(crate) fn with_auth(mut self, scheme: AuthScheme) -> Http {
        self.scheme = scheme;
        self
    }

    /// Adds a fixed, non-secret header to every request.
    pub(crate) fn with_header(mut self, name: &'static str, value: &'static str) -> Http {
        self.headers.push((
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        ));
        self
    }

    /// POSTs `body` as JSON to `url` and decodes a 2xx JSON answer.
    pub(crate) async fn post_json<B, R>(&self, url: &str, body: &B) -> Result<R, ProviderError>
    where
        B: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        let request = self.client(url)?.post(url).timeout(self.timeout).json(body);
        self.send_decode(url, request).await
    }

    /// POSTs `body` (of `content_type`, e.g. a multipart form) to `url` and decodes a 2xx JSON
    /// answer.
    pub(crate) async fn post_bytes<R: DeserializeOwned>(
        &self,
        url: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<R, ProviderError> {
        let request = self
            .client(url)?
            .post(url)
            .timeout(self.timeout)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
        self.send_decode(url, request).await
    }

    /// GETs `url` and decodes a 2xx JSON answer.
    pub(crate) async fn get_json<R: DeserializeOwned>(
        &self,
        url: &str,
    ) -> Result<R, ProviderError> {
        let request = self.client(url)?.get(url).timeout(self.timeout);
        self.send_decode(url, request).await
    }

    /// GETs `url` and returns a 2xx answer's body; another status is an error.
    pub(crate) async fn get_bytes(&self, url: &str) -> Result<Vec<u8>, ProviderError> {
        let (status, body) = self.get_raw(url).await?;
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(self.status_error(status, &body))
        }
    }

    /// Sends `request` with the key and fixed headers, and decodes a 2xx JSON answer.
    async fn send_decode<R: DeserializeOwned>(
        &self,
        url: &str,
        mut request: reqwest::RequestBuilder,
    ) -> Result<R, ProviderError> {
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(key) = &self.key {
            let (name, value) = key.header(self.scheme)?;
            request = request.header(name, value);
        }
        record_account(url, self.key.as_ref());
        let sent = SystemTime::now();
        let response = request.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        let retry_after = parse_retry_after(response.headers(), SystemTime::now());
        record_rate_headers(response.headers(), sent);
        let bytes = response.bytes().await;
        if !status.is_success() {
            let message = match &bytes {
                Ok(bytes) => error_message(self.redact(&String::from_utf8_lossy(bytes)).as_bytes()),
                Err(e) => format!(
                    "(the error body could not be read: {})",
                    self.redact(&error_chain(e))
                ),
            };
            let message = match status.canonical_reason() {
                Some(reason) if message.is_empty() => reason.to_owned(),
                _ => message,
            };
            return Err(ProviderErrorKind::Http {
                status: status.as_u16(),
                retry_after,
                message,
            }
            .into());
        }
        let bytes = bytes.map_err(|e| self.transport_error(&e))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            let body = self.redact(&String::from_utf8_lossy(&bytes));
            ProviderError::malformed(format!("{e} (body starts: {:?})", shorten(&body, 120)))
        })
    }

    /// GETs `url` (with the key and fixed headers) and returns the status and the body, whatever
    /// the status: the caller decides what a 404 means. Transport failures are errors.
    pub(crate) async fn get_raw(&self, url: &str) -> Result<(u16, Vec<u8>), ProviderError> {
        let mut request = self.client(url)?.get(url).timeout(self.timeout);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(key) = &self.key {
            let (name, value) = key.header(self.scheme)?;
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&e))?;
        Ok((status, bytes.to_vec()))
    }

    /// The error of a non-2xx answer to a preflight request.
    pub(crate) fn status_error(&self, status: u16, body: &[u8]) -> ProviderError {
        let message = error_message(self.redact(&String::from_utf8_lossy(body)).as_bytes());
        ProviderErrorKind::Http {
            status,
            retry_after: None,
            message,
        }
        .into()
    }

    fn transport_error(&self, e: &reqwest::Error) -> ProviderError {
        if e.is_timeout() {
            ProviderErrorKind::Timeout {
                after: self.timeout,
            }
            .into()
        } else {
            ProviderErrorKind::Connection {
                message: self.redact(&error_chain(e)),
            }
            .into()
        }
    }

    fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(key) => key.redact(text),
            None => text.to_owned(),
        }
    }
}

/// Checks that `base` is an http(s) URL and returns `{base}/{path}`.
pub(crate) fn endpoint(base: &str, path: &str) -> Result<String, ProviderError> {
    let url = reqwest::Url::parse(base)
        .map_err(|e| ProviderError::config(format!("invalid base URL `{base}`: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ProviderError::config(format!(
            "invalid base URL `{base}`: expected http:// or https://"
        )));
    }
    Ok(format!("{}/{path}", base.trim_end_matches('/')))
}

/// The host of `base`, if it parses.
pub(crate) fn host(base: &str) -> Option<String> {
    reqwest::Url::parse(base)
        .ok()?
        .host_str()
        .map(str::to_owned)
}

/// An error with its sources: `error sending request: connection refused`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The message of an error body: `error.message` (OpenAI), `detail` (Voyage), `message` or a
/// string `error`, else the body itself, shortened.
fn error_message(body: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        let candidates = [
            json.pointer("/error/message"),
            json.get("detail"),
            json.get("message"),
            json.get("error"),
        ];
        for value in candidates.into_iter().flatten() {
            match value {
                serde_json::Value::String(s) => return shorten(s, 500),
                serde_json::Value::Null => {}
                other => return shorten(&other.to_string(), 500),
            }
        }
    }
    shorten(String::from_utf8_lossy(body).trim(), 500)
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The wait a server asks for: `retry-after-ms` (OpenAI), else `retry-after` as seconds
/// (integer or decimal) or as an HTTP date (IMF-fixdate, relative to `now`).
pub(crate) fn parse_retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The rate limits a response describes: OpenAI's `x-ratelimit-limit-requests`,
/// `x-ratelimit-remaining-requests`, `x-ratelimit-reset-requests` (a duration such as `6m0s`,
/// `1.5s` or `20ms`) and the same for `tokens`; Anthropic's
/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`
/// (the reset an RFC 3339 time, relative to `now`). A limit without both its size and what
/// remains is left out.
pub(crate) fn parse_rate_headers(headers: &HeaderMap, now: SystemTime) -> RateHeaders {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let number = |name: &str| {
        header(name)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    let mut limits = Vec::new();
    for (kind, part) in [
        (LimitKind::Requests, "requests"),
        (LimitKind::Tokens, "tokens"),
    ] {
        if let (Some(limit), Some(remaining)) = (
            number(&format!("x-ratelimit-limit-{part}")),
            number(&format!("x-ratelimit-remaining-{part}")),
        ) {
            limits.push(LimitObservation {
                kind,
                limit,
                remaining,
                reset: header(&format!("x-ratelimit-reset-{part}")).and_then(parse_go_duration),
            });
        }
    }
    for (kind, part) in [
        (LimitKind::Requests, "requests"),
        (LimitKind::Tokens, "tokens"),
        (LimitKind::InputTokens, "input-tokens"),
        (LimitKind::OutputTokens, "output-tokens"),
    ] {
        if let (Some(limit), Some(remaining)) = (
            number(&format!("anthropic-ratelimit-{part}-limit")),
            number(&format!("anthropic-ratelimit-{part}-remaining")),
        ) {
            // A time given to the second (as Anthropic writes it) lies somewhere in that
            // second: read as its middle, not its start, or a bucket that refills within a
            // second or two looks up to twice as fast as it is.
            let reset = header(&format!("anthropic-ratelimit-{part}-reset")).and_then(|text| {
                let at = parse_rfc3339(text)?;
                // Only a fraction of a second has a '.' in an RFC 3339 time.
                let at = if text.contains('.') {
                    at
                } else {
                    at + Duration::from_millis(500)
                };
                Some(at.duration_since(now).unwrap_or(Duration::ZERO))
            });
            limits.push(LimitObservation {
                kind,
                limit,
                remaining,
                reset,
            });
        }
    }
    RateHeaders { limits }
}

/// A duration as OpenAI writes it (Go's format): `6m0s`, `1h2m3.5s`, `1.5s`, `20ms`, `100us`,
/// `0s`; a bare number is seconds.
pub(crate) fn parse_go_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let mut total = 0f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// An RFC 3339 time (`2026-11-25T06:33:53Z`, `2026-11-25T06:33:53.250+01:00`).
pub(crate) fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    let (date, time) = text.split_once(['T', 't', ' '])?;
    let mut ymd = date.splitn(3, '-');
    let year: i64 = ymd.next()?.parse().ok()?;
    let month: i64 = ymd.next()?.parse().ok()?;
    let day: i64 = ymd.next()?.parse().ok()?;
    let (clock, offset_secs) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0i64)
    } else {
        let at = time.rfind(['+', '-'])?;
        let (clock, offset) = time.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (h, m) = offset[1..].split_once(':')?;
        (
            clock,
            sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60),
        )
    };
    let mut hms = clock.splitn(3, ':');
    let h: i64 = hms.next()?.parse().ok()?;
    let m: i64 = hms.next()?.parse().ok()?;
    let s: f64 = hms.next()?.parse().ok()?;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0.0..61.0).contains(&s)
    {
        return None;
    }
    let whole = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 - offset_secs;
    let secs = u64::try_from(whole).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::try_from_secs_f64(s).ok()?)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT` (the format RFC 9110 requires).
fn parse_http_date(value: &str) -> Option<SystemTime> {
    let parts: Vec<&str> = value.split_ascii_whitespace().collect();
    let [_weekday, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = i64::try_from(MONTHS.iter().position(|m| m == month)?).ok()? + 1;
    let day: i64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day)
        || !(0..24).contains(h)
        || !(0..60).contains(m)
        || !(0..61).contains(s)
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = u64::try_from(days * 86_400 + h * 3600 + m * 60 + s).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Puts `(index, vector)` pairs back in input order, checking that every index in
/// `0..expected` appears exactly once and that all vectors share one length, and normalises them.
pub(crate) fn reassemble(
    items: Vec<(usize, Vec<f32>)>,
    expected: usize,
) -> Result<Vec<Vec<f32>>, ProviderError> {
    if items.len() != expected {
        return Err(ProviderError::malformed(format!(
            "expected {expected} embeddings, got {}",
            items.len()
        )));
    }
    let mut seen = HashSet::with_capacity(expected);
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    let mut dimension = None;
    for (index, mut vector) in items {
        if index >= expected || !seen.insert(index) {
            return Err(ProviderError::malformed(format!(
                "embedding index {index} is out of range or repeated (batch of {expected})"
            )));
        }
        if vector.is_empty() || vector.iter().any(|x| !x.is_finite()) {
            return Err(ProviderError::malformed(format!(
                "embedding {index} is empty or not finite"
            )));
        }
        match dimension {
            None => dimension = Some(vector.len()),
            Some(d) if d != vector.len() => {
                return Err(ProviderError::malformed(format!(
                    "embeddings of different lengths in one answer ({d} and {})",
                    vector.len()
                )));
            }
            Some(_) => {}
        }
        l2_normalize(&mut vector);
        slots[index] = Some(vector);
    }
    Ok(slots.into_iter().flatten().collect())
}

/// The vector length a remote embedder learns from its first answer, then enforces.
#[derive(Debug, Default)]
pub(crate) struct DimensionCell(OnceLock<usize>);

impl DimensionCell {
    pub(crate) fn get(&self) -> Option<usize> {
        self.0.get().copied()
    }

    /// Records the length of `vectors`, or checks it against the one recorded.
    pub(crate) fn check(&self, vectors: &[Vec<f32>]) -> Result<(), ProviderError> {
        let Some(first) = vectors.first() else {
            return Ok(());
        };
        let known = *self.0.get_or_init(|| first.len());
        if known == first.len() {
            Ok(())
        } else {
            Err(ProviderError::malformed(format!(
                "the embedding length changed from {known} to {}",
                first.len()
            )))
        }
    }
}

/// The answer of one embeddings request: `(index, vector)` pairs put back in input order and
/// normalised ([`reassemble`]), their length checked against `dimension`, and the usage of
/// one request with `input_tokens`.
pub(crate) fn one_request_embeddings(
    items: Vec<(usize, Vec<f32>)>,
    expected: usize,
    dimension: &DimensionCell,
    input_tokens: u64,
) -> Result<Embeddings, ProviderError> {
    let vectors = reassemble(items, expected)?;
    dimension.check(&vectors)?;
    Ok(Embeddings {
        vectors,
        usage: Usage {
            input_tokens,
            output_tokens: 0,
            requests: 1,
        },
    })
}

/// The embedders' batching loop: embeds `texts` in batches of at most `batch_size` with
/// `embed_batch` (one request each, in order), concatenates the vectors, sums the usage, and
/// tags errors with the provider `name`. Empty `texts` sends nothing.
pub(crate) async fn embed_in_batches<'a, F, Fut>(
    name: &str,
    texts: &'a [String],
    batch_size: usize,
    mut embed_batch: F,
) -> Result<Embeddings, ProviderError>
where
    F: FnMut(&'a [String]) -> Fut,
    Fut: Future<Output = Result<Embeddings, ProviderError>>,
{
    let mut out = Embeddings {
        vectors: Vec::with_capacity(texts.len()),
        usage: Usage::default(),
    };
    for range in batches(texts.len(), batch_size) {
        let batch = embed_batch(&texts[range])
            .await
            .map_err(|e| e.with_model(name))?;
        out.vectors.extend(batch.vectors);
        out.usage += batch.usage;
    }
    Ok(out)
}

/// Splits `0..len` into batches of at most `batch_size`.
pub(crate) fn batches(
    len: usize,
    batch_size: usize,
) -> impl Iterator<Item = std::ops::Range<usize>> {
    let size = batch_size.max(1);
    (0..len)
        .step_by(size)
        .map(move |start| start..(start + size).min(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn retry_after_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        let parse = |pairs| parse_retry_after(&headers(pairs), now);
        assert_eq!(parse(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(
            parse(&[("retry-after", " 1.5 ")]),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse(&[("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse(&[("retry-after", "Sunday, 06-Nov-94 08:49:37 GMT")]),
            None
        );
        assert_eq!(parse(&[("retry-after", "-3")]), None);
        assert_eq!(parse(&[("retry-after", "soon")]), None);
        assert_eq!(parse(&[]), None);
    }

    #[test]
    fn go_durations() {
        let d = |s| parse_go_duration(s);
        assert_eq!(d("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(d("1s"), Some(Duration::from_secs(1)));
        assert_eq!(d("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(d("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(d("1h2m3.5s"), Some(Duration::from_millis(3_723_500)));
        assert_eq!(d("250us"), Some(Duration::from_micros(250)));
        assert_eq!(d("0s"), Some(Duration::ZERO));
        assert_eq!(d("2"), Some(Duration::from_secs(2)));
        assert_eq!(d(""), None);
        assert_eq!(d("3 fortnights"), None);
        assert_eq!(d("ms"), None);
    }

    #[test]
    fn rfc3339_times() {
        let at = |s| parse_rfc3339(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_millis());
        assert_eq!(at("1994-11-06T08:49:37Z"), Some(784_111_777_000));
        assert_eq!(at("1994-11-06T08:49:37.250Z"), Some(784_111_777_250));
        assert_eq!(at("1994-11-06T09:49:37+01:00"), Some(784_111_777_000));
        assert_eq!(at("1994-11-06T07:49:37-01:00"), Some(784_111_777_000));
        assert_eq!(at("1994-13-06T08:49:37Z"), None);
        assert_eq!(at("yesterday"), None);
    }

    #[test]
    fn rate_limit_headers_of_both_vendors() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let openai = parse_rate_headers(
            &headers(&[
                ("x-ratelimit-limit-requests", "60"),
                ("x-ratelimit-remaining-requests", "59"),
                ("x-ratelimit-reset-requests", "1s"),
                ("x-ratelimit-limit-tokens", "150000"),
                ("x-ratelimit-remaining-tokens", "149984"),
                ("x-ratelimit-reset-tokens", "6ms"),
            ]),
            now,
        );
        assert_eq!(
            openai.limits,
            vec![
                LimitObservation {
                    kind: LimitKind::Requests,
                    limit: 60.0,
                    remaining: 59.0,
                    reset: Some(Duration::from_secs(1)),
                },
                LimitObservation {
                    kind: LimitKind::Tokens,
                    limit: 150_000.0,
                    remaining: 149_984.0,
                    reset: Some(Duration::from_millis(6)),
                },
            ]
        );
        let anthropic = parse_rate_headers(
            &headers(&[
                ("anthropic-ratelimit-requests-limit", "50"),
                ("anthropic-ratelimit-requests-remaining", "49"),
                (
                    "anthropic-ratelimit-requests-reset",
                    "1994-11-06T08:49:38.200Z",
                ),
                ("anthropic-ratelimit-input-tokens-limit", "40000"),
                ("anthropic-ratelimit-input-tokens-remaining", "39000"),
                (
                    "anthropic-ratelimit-input-tokens-reset",
                    "1994-11-06T08:49:38Z",
                ),
                ("anthropic-ratelimit-output-tokens-limit", "8000"),
                ("anthropic-ratelimit-output-tokens-remaining", "7000"),
                (
                    "anthropic-ratelimit-output-tokens-reset",
                    "1994-11-06T08:49:30Z",
                ),
            ]),
            now,
        );
        let kinds: Vec<_> = anthropic.limits.iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            vec![
                LimitKind::Requests,
                LimitKind::InputTokens,
                LimitKind::OutputTokens
            ]
        );
        assert_eq!(anthropic.limits[0].reset, Some(Duration::from_millis(1200)));
        // To the second: the middle of that second.
        assert_eq!(anthropic.limits[1].reset, Some(Duration::from_millis(1500)));
        assert_eq!(
            anthropic.limits[2].reset,
            Some(Duration::ZERO),
            "in the past"
        );
        assert!(
            parse_rate_headers(&headers(&[("x-ratelimit-limit-requests", "9")]), now).is_empty()
        );
    }

    #[test]
    fn http_dates() {
        let at = |s| parse_http_date(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(at("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(at("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(at("Tue, 29 Feb 2028 23:59:59 GMT"), Some(1_835_481_599));
        assert_eq!(at("Tue, 29 Foo 2028 23:59:59 GMT"), None);
        assert_eq!(at("Tue, 29 Feb 2028 24:00:00 GMT"), None);
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error_message(br#"{"error":{"message":"Invalid key","type":"x"}}"#),
            "Invalid key"
        );
        assert_eq!(
            error_message(br#"{"detail":"Rate limit exceeded"}"#),
            "Rate limit exceeded"
        );
        assert_eq!(error_message(br#"{"error":"bad model"}"#), "bad model");
        assert_eq!(error_message(b"  <html>oops</html>\n"), "<html>oops</html>");
        assert_eq!(error_message(&[b'x'; 600]).chars().count(), 501);
    }

    #[test]
    fn keys_are_redacted() {
        let key = ApiKey::new("sk-secret-123");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(key.redact("bad key sk-secret-123!"), "bad key <redacted>!");
        let env = |name: &str| (name == "K").then(|| " sk-1 ".to_string());
        assert_eq!(
            ApiKey::from_lookup("K", &env).map(|k| k.0),
            Some("sk-1".into())
        );
        assert!(ApiKey::from_lookup("OTHER", &env).is_none());
        assert!(ApiKey::from_lookup("K", &|_| Some("  ".into())).is_none());
    }

    #[test]
    fn reassembles_by_index() {
        let out = reassemble(vec![(1, vec![0.0, 2.0]), (0, vec![3.0, 4.0])], 2).unwrap();
        assert_eq!(out, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
        for bad in [
            vec![(0, vec![1.0])],
            vec![(0, vec![1.0]), (0, vec![1.0])],
            vec![(0, vec![1.0]), (2, vec![1.0])],
            vec![(0, vec![1.0]), (1, vec![1.0, 2.0])],
            vec![(0, vec![1.0]), (1, vec![])],
            vec![(0, vec![1.0]), (1, vec![f32::NAN])],
        ] {
            let e = reassemble(bad.clone(), 2).unwrap_err();
            assert!(
                matches!(e.kind(), ProviderErrorKind::Malformed { .. }),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn batch_ranges() {
        assert_eq!(
            batches(300, 128).collect::<Vec<_>>(),
            vec![0..128, 128..256, 256..300]
        );
        assert_eq!(batches(0, 128).count(), 0);
        assert_eq!(batches(3, 0).count(), 3);
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            endpoint("http://localhost:8080/v1/", "embeddings").unwrap(),
            "http://localhost:8080/v1/embeddings"
        );
        assert!(endpoint("localhost:8080", "embeddings").is_err());
        assert!(endpoint("not a url", "embeddings").is_err());
        assert_eq!(
            host("https://api.openai.com/v1").as_deref(),
            Some("api.openai.com")
        );
    }
}
