//! Provider names (`vendor/model`), options, and [`build_embedder`]: the registry that turns a
//! name into an [`Embedder`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::builtin::HashedNgramEmbedder;
use crate::embed::Embedder;
use crate::http::{ApiKey, host};
use crate::openai::OpenAiEmbedder;
use crate::voyage::VoyageEmbedder;
use crate::{ProviderError, ProviderErrorKind};

/// The environment variables this crate reads. Keys are read only from here, never from files.
#[derive(Debug, Clone, Copy)]
pub struct EnvVars;

impl EnvVars {
    /// The Voyage AI API key (required for `voyage/…`).
    pub const VOYAGE_API_KEY: &'static str = "VOYAGE_API_KEY";
    /// The OpenAI API key (required for `openai/…` at api.openai.com; optional elsewhere).
    pub const OPENAI_API_KEY: &'static str = "OPENAI_API_KEY";
    /// A local sentence-transformer directory; see [`model_dir_from_env`].
    pub const ASSAY_MODEL_DIR: &'static str = "ASSAY_MODEL_DIR";
    /// The XDG cache root, for the `hf/` model cache.
    pub const XDG_CACHE_HOME: &'static str = "XDG_CACHE_HOME";
    /// The home directory, for the `hf/` model cache when `XDG_CACHE_HOME` is unset.
    pub const HOME: &'static str = "HOME";
}

/// The accepted name forms, for error messages.
const ACCEPTED: &str =
    "builtin/hashed-ngrams, local/<model dir>, hf/<owner>/<repo>, voyage/<model> or openai/<model>";

/// The built-in embedders, by the name after `builtin/`.
const BUILTINS: &[&str] = &["hashed-ngrams"];

/// A parsed embedder name. `Display` gives back the canonical `vendor/model` name.
///
/// ```
/// use assay_providers::EmbedderSpec;
/// let spec: EmbedderSpec = "local//opt/models/minilm".parse().unwrap();
/// assert_eq!(spec, EmbedderSpec::Local("/opt/models/minilm".into()));
/// let err = "minilm".parse::<EmbedderSpec>().unwrap_err();
/// assert!(err.to_string().contains("builtin/hashed-ngrams"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EmbedderSpec {
    /// `builtin/<name>`: an embedder that needs no setup (`builtin/hashed-ngrams`).
    Builtin(String),
    /// `local/<dir>`: a sentence-transformer (BERT) directory with `config.json`,
    /// `tokenizer.json` and `model.safetensors`. Absolute (`local//opt/m`) or relative to the
    /// working directory (`local/models/m`); callers may resolve it against a project first.
    Local(PathBuf),
    /// `hf/<owner>/<repo>`: a sentence-transformer downloaded from the Hugging Face Hub into a
    /// cache directory, then loaded as `local/`.
    HuggingFace(String),
    /// `voyage/<model>`: Voyage AI, e.g. `voyage/voyage-2`.
    Voyage(String),
    /// `openai/<model>`: an OpenAI-compatible server (OpenAI, or vLLM, llama.cpp, Ollama … via
    /// [`EmbedderOptions::openai_base_url`]).
    OpenAi(String),
}

impl FromStr for EmbedderSpec {
    type Err = ProviderError;

    fn from_str(name: &str) -> Result<EmbedderSpec, ProviderError> {
        let bad = |why: String| {
            ProviderError::config(format!(
                "invalid embedder name `{name}`: {why}; expected {ACCEPTED}"
            ))
        };
        let Some((vendor, rest)) = name.split_once('/') else {
            return Err(bad("no vendor prefix".into()));
        };
        let model_name = |what: &str| {
            if rest.is_empty() {
                Err(bad(format!("missing the {what} after `{vendor}/`")))
            } else if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
                Err(bad(format!("the {what} contains whitespace")))
            } else {
                Ok(rest.to_owned())
            }
        };
        match vendor {
            "builtin" if BUILTINS.contains(&rest) => Ok(EmbedderSpec::Builtin(rest.to_owned())),
            "builtin" => Err(bad(format!(
                "unknown built-in embedder `{rest}` (built-ins: {})",
                BUILTINS.join(", ")
            ))),
            "local" if rest.is_empty() => {
                Err(bad("missing the model directory after `local/`".into()))
            }
            "local" => Ok(EmbedderSpec::Local(PathBuf::from(rest))),
            "hf" => {
                let repo = model_name("repository")?;
                validate_hf_repo(&repo).map_err(bad)?;
                Ok(EmbedderSpec::HuggingFace(repo))
            }
            "voyage" => Ok(EmbedderSpec::Voyage(model_name("model")?)),
            "openai" => Ok(EmbedderSpec::OpenAi(model_name("model")?)),
            other => Err(bad(format!("unknown vendor `{other}`"))),
        }
    }
}

/// A Hub repository id: `name` or `owner/name`, of ASCII letters, digits, `-`, `_` and `.`,
/// no part starting with `.` (so it is also a safe relative path for the cache).
fn validate_hf_repo(repo: &str) -> Result<(), String> {
    let parts: Vec<&str> = repo.split('/').collect();
    let ok_part = |p: &&str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if parts.len() <= 2 && parts.iter().all(ok_part) {
        Ok(())
    } else {
        Err(format!(
            "`{repo}` is not a Hugging Face repository id like sentence-transformers/all-MiniLM-L6-v2"
        ))
    }
}

impl fmt::Display for EmbedderSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmbedderSpec::Builtin(name) => write!(f, "builtin/{name}"),
            EmbedderSpec::Local(dir) => write!(f, "local/{}", dir.display()),
            EmbedderSpec::HuggingFace(repo) => write!(f, "hf/{repo}"),
            EmbedderSpec::Voyage(model) => write!(f, "voyage/{model}"),
            EmbedderSpec::OpenAi(model) => write!(f, "openai/{model}"),
        }
    }
}

/// Settings for [`build_embedder`]; `Default` gives the public endpoints and a 60 s timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderOptions {
    /// Base URL of the OpenAI-compatible API (default `https://api.openai.com/v1`); e.g.
    /// `http://localhost:8080/v1` for vLLM, llama.cpp or Ollama.
    pub openai_base_url: String,
    /// Base URL of the Voyage AI API (default `https://api.voyageai.com/v1`).
    pub voyage_base_url: String,
    /// Timeout of one HTTP request, connection to last byte (for `hf/` downloads: of each read).
    pub timeout: Duration,
    /// Inputs per request or forward pass; `None` for each provider's default (Voyage 128, its
    /// maximum; OpenAI-compatible 128; local 32). Ignored by the built-in embedder.
    pub batch_size: Option<usize>,
    /// Where `hf/` models are cached; `None` for [`default_model_cache_dir`].
    pub model_cache_dir: Option<PathBuf>,
}

impl EmbedderOptions {
    /// The default OpenAI base URL.
    pub const OPENAI_BASE_URL: &'static str = "https://api.openai.com/v1";
    /// The default Voyage AI base URL.
    pub const VOYAGE_BASE_URL: &'static str = "https://api.voyageai.com/v1";
    /// The default request timeout.
    pub const TIMEOUT: Duration = Duration::from_secs(60);
}

impl Default for EmbedderOptions {
    fn default() -> EmbedderOptions {
        EmbedderOptions {
            openai_base_url: Self::OPENAI_BASE_URL.into(),
            voyage_base_url: Self::VOYAGE_BASE_URL.into(),
            timeout: Self::TIMEOUT,
            batch_size: None,
            model_cache_dir: None,
        }
    }
}

/// Builds the embedder `spec` names, reading API keys from the process environment.
///
/// Fails early, before any request: a missing required key ([`ProviderErrorKind::Auth`]), a bad
/// base URL ([`ProviderErrorKind::Config`]), or a `local/` model that cannot be loaded
/// ([`ProviderErrorKind::Model`], naming the file). Loading a `local/` model reads ~100 MB and
/// blocks; `hf/` models are downloaded and loaded on first use.
pub fn build_embedder(
    spec: &EmbedderSpec,
    options: &EmbedderOptions,
) -> Result<Box<dyn Embedder>, ProviderError> {
    build_embedder_with_env(spec, options, &|name| std::env::var(name).ok())
}

/// [`build_embedder`] with the environment given as a lookup function (for tests, and hosts that
/// pass a filtered environment).
pub fn build_embedder_with_env(
    spec: &EmbedderSpec,
    options: &EmbedderOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Embedder>, ProviderError> {
    match spec {
        EmbedderSpec::Builtin(name) if name == "hashed-ngrams" => {
            Ok(Box::new(HashedNgramEmbedder::new()))
        }
        EmbedderSpec::Builtin(name) => Err(ProviderError::config(format!(
            "unknown built-in embedder `builtin/{name}` (built-ins: {})",
            BUILTINS.join(", ")
        ))),
        EmbedderSpec::Voyage(model) => {
            let key = ApiKey::from_lookup(EnvVars::VOYAGE_API_KEY, env).ok_or_else(|| {
                ProviderError::from(ProviderErrorKind::Auth {
                    env_var: EnvVars::VOYAGE_API_KEY,
                })
                .with_model(spec.to_string())
            })?;
            Ok(Box::new(VoyageEmbedder::new(model, key, options)?))
        }
        EmbedderSpec::OpenAi(model) => {
            let key = ApiKey::from_lookup(EnvVars::OPENAI_API_KEY, env);
            if key.is_none()
                && host(&options.openai_base_url).is_some_and(|h| h == "api.openai.com")
            {
                return Err(ProviderError::from(ProviderErrorKind::Auth {
                    env_var: EnvVars::OPENAI_API_KEY,
                })
                .with_model(spec.to_string()));
            }
            Ok(Box::new(OpenAiEmbedder::new(model, key, options)?))
        }
        #[cfg(feature = "local")]
        EmbedderSpec::Local(dir) => Ok(Box::new(crate::local::LocalEmbedder::load(dir, options)?)),
        #[cfg(feature = "local")]
        EmbedderSpec::HuggingFace(repo) => {
            let root = match &options.model_cache_dir {
                Some(dir) => dir.clone(),
                None => default_model_cache_dir_with(env).ok_or_else(|| {
                    ProviderError::config(format!(
                        "no cache directory for `{spec}`: set {} or {}, or configure a model cache directory",
                        EnvVars::XDG_CACHE_HOME,
                        EnvVars::HOME
                    ))
                })?,
            };
            Ok(Box::new(crate::hf::HfEmbedder::new(repo, &root, options)?))
        }
        #[cfg(not(feature = "local"))]
        EmbedderSpec::Local(_) | EmbedderSpec::HuggingFace(_) => {
            Err(ProviderError::config(format!(
                "`{spec}` needs a local model runtime, but assay-providers was built without its `local` feature"
            )))
        }
    }
}

/// The model directory named by `ASSAY_MODEL_DIR`, if set and not blank. Callers decide its
/// precedence against names in configuration.
pub fn model_dir_from_env() -> Option<PathBuf> {
    std::env::var_os(EnvVars::ASSAY_MODEL_DIR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Where `hf/` models are cached by default: `$XDG_CACHE_HOME/assay/models` (when set and
/// absolute), else `$HOME/.cache/assay/models`; `None` when neither is known.
pub fn default_model_cache_dir() -> Option<PathBuf> {
    default_model_cache_dir_with(&|name| std::env::var(name).ok())
}

pub(crate) fn default_model_cache_dir_with(
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    let absolute = |var| env(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let cache = absolute(EnvVars::XDG_CACHE_HOME)
        .or_else(|| absolute(EnvVars::HOME).map(|home| home.join(".cache")))?;
    Some(cache.join(Path::new("assay")).join("models"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(name: &str) -> Result<EmbedderSpec, String> {
        name.parse::<EmbedderSpec>().map_err(|e| e.to_string())
    }

    #[test]
    fn accepted_names() {
        let cases = [
            (
                "builtin/hashed-ngrams",
                EmbedderSpec::Builtin("hashed-ngrams".into()),
            ),
            (
                "local//opt/models/minilm",
                EmbedderSpec::Local("/opt/models/minilm".into()),
            ),
            (
                "local/models/minilm",
                EmbedderSpec::Local("models/minilm".into()),
            ),
            (
                "local/My Models/mini lm",
                EmbedderSpec::Local("My Models/mini lm".into()),
            ),
            (
                "hf/sentence-transformers/all-MiniLM-L6-v2",
                EmbedderSpec::HuggingFace("sentence-transformers/all-MiniLM-L6-v2".into()),
            ),
            (
                "hf/bert-base-uncased",
                EmbedderSpec::HuggingFace("bert-base-uncased".into()),
            ),
            ("voyage/voyage-2", EmbedderSpec::Voyage("voyage-2".into())),
            (
                "openai/text-embedding-3-small",
                EmbedderSpec::OpenAi("text-embedding-3-small".into()),
            ),
            (
                "openai/BAAI/bge-small-en-v1.5",
                EmbedderSpec::OpenAi("BAAI/bge-small-en-v1.5".into()),
            ),
        ];
        for (name, expected) in cases {
            let spec = parse(name).unwrap();
            assert_eq!(spec, expected, "{name}");
            assert_eq!(spec.to_string(), name, "round trip");
        }
    }

    #[test]
    fn rejected_names_list_the_accepted_forms() {
        let cases = [
            ("minilm", "no vendor prefix"),
            ("", "no vendor prefix"),
            (
                "builtin/bm25",
                "unknown built-in embedder `bm25` (built-ins: hashed-ngrams)",
            ),
            ("local/", "missing the model directory"),
            ("voyage/", "missing the model after `voyage/`"),
            ("openai/text embedding", "contains whitespace"),
            ("hf/a/b/c", "not a Hugging Face repository id"),
            ("hf/../etc", "not a Hugging Face repository id"),
            ("hf/owner/.hidden", "not a Hugging Face repository id"),
            ("anthropic/claude", "unknown vendor `anthropic`"),
            ("Voyage/voyage-2", "unknown vendor `Voyage`"),
        ];
        for (name, why) in cases {
            let err = parse(name).unwrap_err();
            assert!(
                err.starts_with(&format!("invalid embedder name `{name}`: ")),
                "{err}"
            );
            assert!(err.contains(why), "{name}: {err}");
            assert!(err.ends_with(&format!("expected {ACCEPTED}")), "{err}");
        }
    }

    #[test]
    fn cache_dir_from_env() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        let dir = |pairs| default_model_cache_dir_with(&env(pairs));
        assert_eq!(
            dir(&[("XDG_CACHE_HOME", "/xdg"), ("HOME", "/home/u")]),
            Some("/xdg/assay/models".into())
        );
        assert_eq!(
            dir(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/home/u")]),
            Some("/home/u/.cache/assay/models".into())
        );
        assert_eq!(
            dir(&[("HOME", "/home/u")]),
            Some("/home/u/.cache/assay/models".into())
        );
        assert_eq!(dir(&[]), None);
    }

    #[test]
    fn default_options() {
        let o = EmbedderOptions::default();
        assert_eq!(o.openai_base_url, "https://api.openai.com/v1");
        assert_eq!(o.voyage_base_url, "https://api.voyageai.com/v1");
        assert_eq!(o.timeout, Duration::from_secs(60));
    }
}
