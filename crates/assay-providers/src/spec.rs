//! Provider names (`vendor/model`), options, and the registry that turns a name into a provider:
//! [`build_embedder`] (an [`Embedder`]), [`build_chat_model`] (a [`ChatModel`]) and
//! [`build_reranker`] (a [`Reranker`], or none).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::anthropic::AnthropicChat;
use crate::builtin::HashedNgramEmbedder;
use crate::chat::ChatModel;
use crate::embed::Embedder;
use crate::http::{ApiKey, host};
use crate::llm_rerank::LlmReranker;
use crate::openai::{OpenAiChat, OpenAiEmbedder};
use crate::rerank::Reranker;
use crate::voyage::{VoyageEmbedder, VoyageReranker};
use crate::{ProviderError, ProviderErrorKind};

/// The environment variables this crate reads. Keys are read only from here, never from files.
#[derive(Debug, Clone, Copy)]
pub struct EnvVars;

impl EnvVars {
    /// The Voyage AI API key (required for `voyage/…`).
    pub const VOYAGE_API_KEY: &'static str = "VOYAGE_API_KEY";
    /// The OpenAI API key (required for `openai/…` at api.openai.com; optional elsewhere).
    pub const OPENAI_API_KEY: &'static str = "OPENAI_API_KEY";
    /// The Anthropic API key (required for `anthropic/…`).
    pub const ANTHROPIC_API_KEY: &'static str = "ANTHROPIC_API_KEY";
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

/// The key in `var`, or an [`ProviderErrorKind::Auth`] error naming `var` and the provider.
fn required_key(
    var: &'static str,
    env: &dyn Fn(&str) -> Option<String>,
    name: &dyn fmt::Display,
) -> Result<ApiKey, ProviderError> {
    ApiKey::from_lookup(var, env).ok_or_else(|| {
        ProviderError::from(ProviderErrorKind::Auth { env_var: var }).with_model(name.to_string())
    })
}

/// `OPENAI_API_KEY`: required for api.openai.com, optional for other (local) servers.
fn openai_key(
    base_url: &str,
    env: &dyn Fn(&str) -> Option<String>,
    name: &dyn fmt::Display,
) -> Result<Option<ApiKey>, ProviderError> {
    if host(base_url).is_some_and(|h| h == "api.openai.com") {
        required_key(EnvVars::OPENAI_API_KEY, env, name).map(Some)
    } else {
        Ok(ApiKey::from_lookup(EnvVars::OPENAI_API_KEY, env))
    }
}

/// Settings for [`build_chat_model`] and [`build_reranker`]; `Default` gives the public
/// endpoints, a 120 s timeout and [`LlmReranker::DEFAULT_RETRIES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderOptions {
    /// Base URL of the Anthropic API (default `https://api.anthropic.com`; requests go to
    /// `{base}/v1/messages`).
    pub anthropic_base_url: String,
    /// Base URL of the OpenAI-compatible API (default `https://api.openai.com/v1`; requests go
    /// to `{base}/chat/completions`), e.g. `http://localhost:8080/v1` for vLLM, llama.cpp or
    /// Ollama.
    pub openai_base_url: String,
    /// Base URL of the Voyage AI API (default `https://api.voyageai.com/v1`; reranking goes to
    /// `{base}/rerank`).
    pub voyage_base_url: String,
    /// Timeout of one HTTP request, connection to last byte.
    pub timeout: Duration,
    /// How many times an LLM reranker asks again after a reply it cannot parse.
    pub llm_rerank_retries: u32,
}

impl ProviderOptions {
    /// The default Anthropic base URL.
    pub const ANTHROPIC_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The default request timeout (chat answers take longer than embeddings).
    pub const TIMEOUT: Duration = Duration::from_secs(120);
}

impl Default for ProviderOptions {
    fn default() -> ProviderOptions {
        ProviderOptions {
            anthropic_base_url: Self::ANTHROPIC_BASE_URL.into(),
            openai_base_url: EmbedderOptions::OPENAI_BASE_URL.into(),
            voyage_base_url: EmbedderOptions::VOYAGE_BASE_URL.into(),
            timeout: Self::TIMEOUT,
            llm_rerank_retries: LlmReranker::DEFAULT_RETRIES,
        }
    }
}

/// The accepted chat model names, for error messages.
const CHAT_ACCEPTED: &str = "anthropic/<model> or openai/<model>";

/// The accepted reranker names, for error messages.
const RERANKER_ACCEPTED: &str =
    "none, voyage/<model>, anthropic/<model>, openai/<model> or llm:<vendor>/<model>";

/// The model part of `vendor/<model>`: not empty, no whitespace or control characters.
fn model_part(rest: &str) -> Result<String, String> {
    if rest.is_empty() {
        Err("missing the model name".into())
    } else if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err("the model name contains whitespace".into())
    } else {
        Ok(rest.to_owned())
    }
}

/// A parsed chat model name. `Display` gives back the canonical `vendor/model` name.
///
/// ```
/// use assay_providers::ChatSpec;
/// let spec: ChatSpec = "anthropic/claude-haiku-4-5".parse().unwrap();
/// assert_eq!(spec, ChatSpec::Anthropic("claude-haiku-4-5".into()));
/// assert!("gemini/pro".parse::<ChatSpec>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChatSpec {
    /// `anthropic/<model>`: the Anthropic Messages API, e.g. `anthropic/claude-haiku-4-5`.
    Anthropic(String),
    /// `openai/<model>`: an OpenAI-compatible chat completions API (OpenAI, or vLLM, llama.cpp,
    /// Ollama … via [`ProviderOptions::openai_base_url`]).
    OpenAi(String),
}

/// Parses `vendor/<model>` as a chat model, or says why not.
fn parse_chat(name: &str) -> Result<ChatSpec, String> {
    let Some((vendor, rest)) = name.split_once('/') else {
        return Err("no vendor prefix".into());
    };
    match vendor {
        "anthropic" => Ok(ChatSpec::Anthropic(model_part(rest)?)),
        "openai" => Ok(ChatSpec::OpenAi(model_part(rest)?)),
        other => Err(format!("unknown vendor `{other}`")),
    }
}

impl FromStr for ChatSpec {
    type Err = ProviderError;

    fn from_str(name: &str) -> Result<ChatSpec, ProviderError> {
        parse_chat(name).map_err(|why| {
            ProviderError::config(format!(
                "invalid chat model name `{name}`: {why}; expected {CHAT_ACCEPTED}"
            ))
        })
    }
}

impl fmt::Display for ChatSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatSpec::Anthropic(model) => write!(f, "anthropic/{model}"),
            ChatSpec::OpenAi(model) => write!(f, "openai/{model}"),
        }
    }
}

/// A parsed reranker name. `Display` gives the canonical name (`llm:` for LLM rerankers, as
/// [`Reranker::model`] reports it).
///
/// ```
/// use assay_providers::{ChatSpec, RerankerSpec};
/// let spec: RerankerSpec = "anthropic/claude-haiku-4-5".parse().unwrap();
/// assert_eq!(spec, RerankerSpec::Llm(ChatSpec::Anthropic("claude-haiku-4-5".into())));
/// assert_eq!(spec.to_string(), "llm:anthropic/claude-haiku-4-5");
/// assert_eq!("none".parse::<RerankerSpec>().unwrap(), RerankerSpec::None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RerankerSpec {
    /// `none`: no reranking.
    None,
    /// `voyage/<model>`: the Voyage rerank API, e.g. `voyage/rerank-2.5`.
    Voyage(String),
    /// `anthropic/<model>`, `openai/<model>` or `llm:<vendor>/<model>`: an [`LlmReranker`] over
    /// that chat model.
    Llm(ChatSpec),
}

impl FromStr for RerankerSpec {
    type Err = ProviderError;

    fn from_str(name: &str) -> Result<RerankerSpec, ProviderError> {
        let parse = || -> Result<RerankerSpec, String> {
            if name == "none" {
                return Ok(RerankerSpec::None);
            }
            if let Some(chat) = name.strip_prefix("llm:") {
                return parse_chat(chat).map(RerankerSpec::Llm);
            }
            match name.split_once('/') {
                None => Err("no vendor prefix".into()),
                Some(("voyage", rest)) => Ok(RerankerSpec::Voyage(model_part(rest)?)),
                Some(_) => parse_chat(name).map(RerankerSpec::Llm),
            }
        };
        parse().map_err(|why| {
            ProviderError::config(format!(
                "invalid reranker name `{name}`: {why}; expected {RERANKER_ACCEPTED}"
            ))
        })
    }
}

impl fmt::Display for RerankerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RerankerSpec::None => f.write_str("none"),
            RerankerSpec::Voyage(model) => write!(f, "voyage/{model}"),
            RerankerSpec::Llm(chat) => write!(f, "llm:{chat}"),
        }
    }
}

/// Builds the chat model `spec` names, reading API keys from the process environment.
pub fn build_chat_model(
    spec: &ChatSpec,
    options: &ProviderOptions,
) -> Result<Arc<dyn ChatModel>, ProviderError> {
    build_chat_model_with_env(spec, options, &|name| std::env::var(name).ok())
}

/// [`build_chat_model`] with the environment given as a lookup function.
///
/// Fails early, before any request: a missing key ([`ProviderErrorKind::Auth`] naming
/// `ANTHROPIC_API_KEY`, or `OPENAI_API_KEY` for api.openai.com; other OpenAI-compatible servers
/// may go without one) or a bad base URL ([`ProviderErrorKind::Config`]).
pub fn build_chat_model_with_env(
    spec: &ChatSpec,
    options: &ProviderOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ChatModel>, ProviderError> {
    match spec {
        ChatSpec::Anthropic(model) => {
            let key = required_key(EnvVars::ANTHROPIC_API_KEY, env, spec)?;
            Ok(Arc::new(AnthropicChat::new(model, key, options)?))
        }
        ChatSpec::OpenAi(model) => {
            let key = openai_key(&options.openai_base_url, env, spec)?;
            Ok(Arc::new(OpenAiChat::new(model, key, options)?))
        }
    }
}

/// Builds the reranker `spec` names (`Ok(None)` for `none`), reading API keys from the process
/// environment.
pub fn build_reranker(
    spec: &RerankerSpec,
    options: &ProviderOptions,
) -> Result<Option<Arc<dyn Reranker>>, ProviderError> {
    build_reranker_with_env(spec, options, &|name| std::env::var(name).ok())
}

/// [`build_reranker`] with the environment given as a lookup function. `voyage/…` needs
/// `VOYAGE_API_KEY`; an LLM reranker needs its chat model's key (see
/// [`build_chat_model_with_env`]) and re-asks [`ProviderOptions::llm_rerank_retries`] times.
pub fn build_reranker_with_env(
    spec: &RerankerSpec,
    options: &ProviderOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Arc<dyn Reranker>>, ProviderError> {
    match spec {
        RerankerSpec::None => Ok(None),
        RerankerSpec::Voyage(model) => {
            let key = required_key(EnvVars::VOYAGE_API_KEY, env, spec)?;
            Ok(Some(Arc::new(VoyageReranker::new(model, key, options)?)))
        }
        RerankerSpec::Llm(chat) => {
            let chat = build_chat_model_with_env(chat, options, env)?;
            Ok(Some(Arc::new(
                LlmReranker::new(chat).with_retries(options.llm_rerank_retries),
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
    fn chat_and_reranker_names() {
        let chat = |n: &str| n.parse::<ChatSpec>().map_err(|e| e.to_string());
        assert_eq!(
            chat("openai/gpt-4o-mini").unwrap(),
            ChatSpec::OpenAi("gpt-4o-mini".into())
        );
        assert_eq!(
            chat("anthropic/claude-haiku-4-5").unwrap().to_string(),
            "anthropic/claude-haiku-4-5"
        );
        for (name, why) in [
            ("claude", "no vendor prefix"),
            ("anthropic/", "missing the model name"),
            ("voyage/rerank-2.5", "unknown vendor `voyage`"),
        ] {
            let err = chat(name).unwrap_err();
            assert!(err.contains(why) && err.ends_with(CHAT_ACCEPTED), "{err}");
        }

        let rr = |n: &str| n.parse::<RerankerSpec>().map_err(|e| e.to_string());
        assert_eq!(rr("none").unwrap(), RerankerSpec::None);
        assert_eq!(
            rr("voyage/rerank-2.5").unwrap(),
            RerankerSpec::Voyage("rerank-2.5".into())
        );
        let llm = RerankerSpec::Llm(ChatSpec::Anthropic("claude-haiku-4-5".into()));
        assert_eq!(rr("anthropic/claude-haiku-4-5").unwrap(), llm);
        assert_eq!(rr("llm:anthropic/claude-haiku-4-5").unwrap(), llm);
        assert_eq!(llm.to_string(), "llm:anthropic/claude-haiku-4-5");
        assert_eq!(
            rr("openai/gpt-4o").unwrap().to_string(),
            "llm:openai/gpt-4o"
        );
        for (name, why) in [
            ("None", "no vendor prefix"),
            ("llm:voyage/rerank-2", "unknown vendor `voyage`"),
            ("llm:anthropic/", "missing the model name"),
            ("cohere/rerank-3", "unknown vendor `cohere`"),
            ("voyage/ x", "the model name contains whitespace"),
        ] {
            let err = rr(name).unwrap_err();
            assert!(
                err.starts_with(&format!("invalid reranker name `{name}`: {why}; expected ")),
                "{err}"
            );
        }
    }

    #[test]
    fn default_options() {
        let o = EmbedderOptions::default();
        assert_eq!(o.openai_base_url, "https://api.openai.com/v1");
        assert_eq!(o.voyage_base_url, "https://api.voyageai.com/v1");
        assert_eq!(o.timeout, Duration::from_secs(60));
    }
}
