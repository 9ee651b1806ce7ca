//! The admin token: writes to the knowledge base need `Authorization: Bearer <token>`, where
//! the token is `ASSAY_ADMIN_TOKEN` as the server found it at start. Without one the KB admin
//! API is read-only.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// The environment variable that holds the admin token.
pub const ASSAY_ADMIN_TOKEN: &str = "ASSAY_ADMIN_TOKEN";

/// The admin token, kept as its SHA-256 digest (compared in constant time, whatever the
/// lengths).
#[derive(Clone)]
pub struct AdminToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(…)")
    }
}

impl AdminToken {
    /// The token `value`; `None` when it is empty or only white space.
    pub fn new(value: &str) -> Option<AdminToken> {
        let value = value.trim();
        (!value.is_empty()).then(|| AdminToken {
            digest: Sha256::digest(value.as_bytes()).into(),
        })
    }

    /// Whether `candidate` is the token, compared in constant time.
    pub fn matches(&self, candidate: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(candidate.as_bytes()).into();
        self.digest[..].ct_eq(&digest[..]).into()
    }
}

/// Lets a write through when the request carries the admin token: **403** `read_only` when the
/// server has none, **401** `unauthorized` without a bearer token, **403** `forbidden` with a
/// wrong one.
pub fn authorize(token: Option<&AdminToken>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = token else {
        return Err(ApiError::forbidden(
            "read_only",
            format!(
                "the KB admin API is read-only: the server was started without {ASSAY_ADMIN_TOKEN}"
            ),
        ));
    };
    let given = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .filter(|t| !t.is_empty());
    match given {
        None => Err(ApiError::unauthorized(
            "this write needs the admin token: `Authorization: Bearer <ASSAY_ADMIN_TOKEN>`",
        )),
        Some(t) if token.matches(t) => Ok(()),
        Some(_) => Err(ApiError::forbidden(
            "forbidden",
            "the bearer token is not the admin token",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(AUTHORIZATION, HeaderValue::from_str(a).unwrap());
        }
        h
    }

    #[test]
    fn bearer_tokens_are_checked() {
        let token = AdminToken::new(" s3cret ").unwrap();
        assert!(AdminToken::new("  ").is_none());
        assert!(authorize(Some(&token), &headers(Some("Bearer s3cret"))).is_ok());
        assert!(authorize(Some(&token), &headers(Some("bearer   s3cret"))).is_ok());
        let e = authorize(Some(&token), &headers(None)).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (401, "unauthorized"));
        let e = authorize(Some(&token), &headers(Some("Basic s3cret"))).unwrap_err();
        assert_eq!(e.status.as_u16(), 401);
        let e = authorize(Some(&token), &headers(Some("Bearer s3cret2"))).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (403, "forbidden"));
        let e = authorize(None, &headers(Some("Bearer s3cret"))).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (403, "read_only"));
        assert!(!format!("{token:?}").contains("s3cret"));
    }
}
