//! [`ProviderError`]: what can go wrong when calling a model, and whether trying again may help.
//!
//! Invariant: no error carries an API key. Keys are never passed to an error constructor, and the
//! HTTP clients redact the key from any server text they quote (some servers echo it back).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// An error from a model provider: a [`ProviderErrorKind`] and, where known, the `vendor/model`
/// name of the provider that raised it.
#[derive(Debug)]
pub struct ProviderError {
    model: Option<String>,
    kind: ProviderErrorKind,
    attempts: Option<u32>,
}

/// What went wrong. New kinds may be added; match with a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderErrorKind {
    /// The server answered with a non-success HTTP status.
    #[error("HTTP {status}{}: {message}", RetryAfter(*retry_after))]
    Http {
        /// The HTTP status code.
        status: u16,
        /// How long the server asked us to wait (`retry-after` / `retry-after-ms`), if it did.
        retry_after: Option<Duration>,
        /// The server's error message (its JSON `message`/`detail` when present, else the body,
        /// shortened), with any API key redacted.
        message: String,
    },
    /// The request did not complete in time.
    #[error("request timed out after {}", Secs(*after))]
    Timeout {
        /// The configured timeout.
        after: Duration,
    },
    /// The server could not be reached, or the connection broke before the answer was complete.
    #[error("connection failed: {message}")]
    Connection {
        /// What the HTTP stack reported.
        message: String,
    },
    /// The server answered 2xx, but not with what the wire format promises.
    #[error("malformed response: {message}")]
    Malformed {
        /// What was wrong with it.
        message: String,
    },
    /// A required API key is missing. Names the environment variable, never a key.
    #[error("missing API key: set the environment variable {env_var}")]
    Auth {
        /// The environment variable to set, e.g. `VOYAGE_API_KEY`.
        env_var: &'static str,
    },
    /// A bad provider name or option.
    #[error("{message}")]
    Config {
        /// What is wrong and what is accepted.
        message: String,
    },
    /// A local model could not be loaded.
    #[error("cannot load model file {}: {message}", path.display())]
    Model {
        /// The missing or invalid file (or directory).
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A local model failed while computing (tokenisation or the forward pass).
    #[error("local inference failed: {message}")]
    Inference {
        /// What the runtime reported.
        message: String,
    },
    /// Replay mode found no recorded answer for a request, and replay never calls the network.
    #[error(
        "no recorded answer for this {call} request (cache key {key}; {request}) in replay mode; \
         re-run in read-write cache mode to record it"
    )]
    ReplayMiss {
        /// What kind of call: `chat`, `embed` or `rerank`.
        call: &'static str,
        /// The start of the request's cache key (hex SHA-256).
        key: String,
        /// A short excerpt of the request (the first words of the prompt, query or texts).
        request: String,
    },
    /// The provider's rate limits held a call past its time bound.
    #[error(
        "rate limited: still held back after {} ({throttled} answer(s) said to slow down); a call \
         may take at most {} (max_wait_seconds)",
        Secs(*waited),
        Secs(*bound)
    )]
    RateLimited {
        /// How long the call waited and tried.
        waited: Duration,
        /// The time bound of a call.
        bound: Duration,
        /// Answers that said "slow down" (429, 529).
        throttled: u32,
    },
    /// A request needs more than one of the provider's limits allows in a whole window: no wait
    /// can help.
    #[error(
        "this request needs about {need} {unit}, more than the provider's whole limit of {limit} \
         {unit}: it can never be sent; shorten it (or lower its max_tokens), or raise the limit \
         with the provider"
    )]
    TooLarge {
        /// What the request needs (estimated, about four characters a token).
        need: u64,
        /// The provider's limit, from its headers.
        limit: u64,
        /// What is counted: `requests`, `tokens`, `input tokens` or `output tokens`.
        unit: &'static str,
    },
    /// A request sent in a provider batch failed there (the batch API's own error for it).
    #[error("request failed in batch {batch}: {message}")]
    BatchItem {
        /// The provider's id of the batch.
        batch: String,
        /// What the provider said of the request.
        message: String,
    },
    /// A batch did not run the request (it expired or was cancelled, or could not be
    /// submitted); the call wrapper sends it interactively.
    #[error("the batch did not run this request; it is to be sent interactively")]
    BatchNotRun,
    /// The call cache (a SQLite file) could not be opened, read or written.
    #[error("call cache {}: {message}", path.display())]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl ProviderError {
    /// An error of `kind` not yet tied to a provider name.
    pub fn new(kind: ProviderErrorKind) -> ProviderError {
        ProviderError {
            model: None,
            kind,
            attempts: None,
        }
    }

    /// Records that this is the final error after `attempts` tries: the call wrapper (or a
    /// reranker that re-asks its model) already retried, so no outer layer retries again.
    pub fn with_attempts(mut self, attempts: u32) -> ProviderError {
        self.attempts = Some(attempts);
        self
    }

    /// How many attempts were made before giving up, when a retrying layer gave up.
    pub fn attempts(&self) -> Option<u32> {
        self.attempts
    }

    /// Ties the error to the `vendor/model` name of the provider that raised it.
    pub fn with_model(mut self, model: impl Into<String>) -> ProviderError {
        self.model = Some(model.into());
        self
    }

    /// A [`ProviderErrorKind::Config`] error.
    pub fn config(message: impl Into<String>) -> ProviderError {
        ProviderError::new(ProviderErrorKind::Config {
            message: message.into(),
        })
    }

    /// A [`ProviderErrorKind::Malformed`] error.
    pub fn malformed(message: impl Into<String>) -> ProviderError {
        ProviderError::new(ProviderErrorKind::Malformed {
            message: message.into(),
        })
    }

    /// A [`ProviderErrorKind::Model`] error about `path`.
    pub fn model_file(path: impl Into<PathBuf>, message: impl Into<String>) -> ProviderError {
        ProviderError::new(ProviderErrorKind::Model {
            path: path.into(),
            message: message.into(),
        })
    }

    /// What went wrong.
    pub fn kind(&self) -> &ProviderErrorKind {
        &self.kind
    }

    /// A short name of the kind (`http`, `timeout`, …), for telemetry's `error.type`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ProviderErrorKind::Http { .. } => "http",
            ProviderErrorKind::Timeout { .. } => "timeout",
            ProviderErrorKind::Connection { .. } => "connection",
            ProviderErrorKind::Malformed { .. } => "malformed",
            ProviderErrorKind::Auth { .. } => "auth",
            ProviderErrorKind::Config { .. } => "config",
            ProviderErrorKind::Model { .. } => "model",
            ProviderErrorKind::Inference { .. } => "inference",
            ProviderErrorKind::ReplayMiss { .. } => "replay_miss",
            ProviderErrorKind::RateLimited { .. } => "rate_limited",
            ProviderErrorKind::TooLarge { .. } => "too_large",
            ProviderErrorKind::Cache { .. } => "cache",
            ProviderErrorKind::BatchItem { .. } => "batch_item",
            ProviderErrorKind::BatchNotRun => "batch_not_run",
        }
    }

    /// The `vendor/model` name of the provider that raised the error, if known.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The HTTP status, for [`ProviderErrorKind::Http`].
    pub fn status(&self) -> Option<u16> {
        match self.kind {
            ProviderErrorKind::Http { status, .. } => Some(status),
            _ => None,
        }
    }

    /// How long the server asked to wait before trying again, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            ProviderErrorKind::Http { retry_after, .. } => retry_after,
            _ => None,
        }
    }

    /// Whether the same request may succeed if sent again later: HTTP 408, 409, 429 and 5xx
    /// (Anthropic's 529 "overloaded" included), timeouts and connection failures. Everything
    /// else (other 4xx, malformed answers, configuration, model, cache and replay errors) will
    /// fail the same way again. The call wrapper also retries malformed 2xx answers once in a
    /// while (a proxy may truncate a body), see [`crate::CallPolicy`].
    pub fn is_retryable(&self) -> bool {
        match self.kind {
            ProviderErrorKind::Http { status, .. } => {
                matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
            }
            ProviderErrorKind::Timeout { .. } | ProviderErrorKind::Connection { .. } => true,
            _ => false,
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.model {
            Some(model) => write!(f, "{model}: {}", self.kind)?,
            None => write!(f, "{}", self.kind)?,
        }
        match self.attempts {
            Some(n) if n > 1 => write!(f, " (gave up after {n} attempts)"),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for ProviderError {}

impl From<ProviderErrorKind> for ProviderError {
    fn from(kind: ProviderErrorKind) -> ProviderError {
        ProviderError::new(kind)
    }
}

/// Displays a duration in seconds, e.g. `2s` or `0.25s`.
struct Secs(Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs_f64();
        if secs.fract() == 0.0 {
            write!(f, "{secs:.0}s")
        } else {
            write!(f, "{secs}s")
        }
    }
}

/// Displays ` (retry after 2s)`, or nothing.
struct RetryAfter(Option<Duration>);

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => write!(f, " (retry after {})", Secs(d)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> ProviderError {
        ProviderError::new(ProviderErrorKind::Http {
            status,
            retry_after: None,
            message: "x".into(),
        })
    }

    #[test]
    fn retryable_statuses() {
        for status in [408, 409, 429, 500, 502, 503, 504, 529, 599] {
            assert!(http(status).is_retryable(), "{status}");
        }
        for status in [400, 401, 403, 404, 422, 600] {
            assert!(!http(status).is_retryable(), "{status}");
        }
    }

    #[test]
    fn retryable_kinds() {
        let timeout = ProviderErrorKind::Timeout {
            after: Duration::from_secs(1),
        };
        let connection = ProviderErrorKind::Connection {
            message: "refused".into(),
        };
        assert!(ProviderError::from(timeout).is_retryable());
        assert!(ProviderError::from(connection).is_retryable());
        assert!(!ProviderError::malformed("x").is_retryable());
        assert!(!ProviderError::config("x").is_retryable());
        assert!(!ProviderError::model_file("/m", "x").is_retryable());
        let auth = ProviderErrorKind::Auth {
            env_var: "VOYAGE_API_KEY",
        };
        assert!(!ProviderError::from(auth).is_retryable());
    }

    #[test]
    fn display() {
        let e = ProviderError::new(ProviderErrorKind::Http {
            status: 429,
            retry_after: Some(Duration::from_millis(2500)),
            message: "rate limited".into(),
        })
        .with_model("voyage/voyage-2");
        assert_eq!(
            e.to_string(),
            "voyage/voyage-2: HTTP 429 (retry after 2.5s): rate limited"
        );
        assert_eq!(e.retry_after(), Some(Duration::from_millis(2500)));
        assert_eq!(e.status(), Some(429));
        let e = e.with_attempts(5);
        assert_eq!(
            e.to_string(),
            "voyage/voyage-2: HTTP 429 (retry after 2.5s): rate limited (gave up after 5 attempts)"
        );
        assert_eq!(e.attempts(), Some(5));
        let e = ProviderError::from(ProviderErrorKind::Timeout {
            after: Duration::from_secs(30),
        });
        assert_eq!(e.to_string(), "request timed out after 30s");
        let e = ProviderError::from(ProviderErrorKind::Auth {
            env_var: "OPENAI_API_KEY",
        });
        assert_eq!(
            e.to_string(),
            "missing API key: set the environment variable OPENAI_API_KEY"
        );
        let e = ProviderError::model_file("/m/tokenizer.json", "not found");
        assert_eq!(
            e.to_string(),
            "cannot load model file /m/tokenizer.json: not found"
        );
    }
}
