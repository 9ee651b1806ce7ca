//! `hf/<repo>`: a sentence-transformer fetched from the Hugging Face Hub on first use into
//! `<cache>/<repo>/` (see [`crate::default_model_cache_dir`]), then loaded as `local/`.
//! Files already in the cache are not fetched again; public repositories only (no token).

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::sync::OnceCell;

use crate::embed::{Embedder, Embeddings, InputKind};
use crate::local::{LocalEmbedder, MODEL_FILES};
use crate::{EmbedderOptions, ProviderError, ProviderErrorKind};

/// The download URL of `file` in the main branch of `repo`.
pub fn hf_file_url(repo: &str, file: &str) -> String {
    format!("https://huggingface.co/{repo}/resolve/main/{file}")
}

/// Where `repo` is cached under the cache root `root`.
pub fn hf_cache_dir(root: &Path, repo: &str) -> PathBuf {
    repo.split('/')
        .fold(root.to_path_buf(), |dir, part| dir.join(part))
}

/// A Hub model, downloaded and loaded on the first call.
#[derive(Debug)]
pub struct HfEmbedder {
    name: String,
    repo: String,
    dir: PathBuf,
    options: EmbedderOptions,
    client: reqwest::Client,
    model: OnceCell<LocalEmbedder>,
}

impl HfEmbedder {
    /// An embedder for `repo`, cached under the cache root `root`. Nothing is fetched yet.
    pub fn new(
        repo: &str,
        root: &Path,
        options: &EmbedderOptions,
    ) -> Result<HfEmbedder, ProviderError> {
        assay_telemetry::tls::ensure_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(options.timeout.min(Duration::from_secs(10)))
            .read_timeout(options.timeout)
            .build()
            .map_err(|e| ProviderError::config(format!("cannot create the HTTP client: {e}")))?;
        let (name, dir) = (format!("hf/{repo}"), hf_cache_dir(root, repo));
        Ok(HfEmbedder {
            name,
            repo: repo.to_owned(),
            dir,
            options: options.clone(),
            client,
            model: OnceCell::new(),
        })
    }

    async fn fetch(&self, file: &str) -> Result<(), ProviderError> {
        let (path, url) = (self.dir.join(file), hf_file_url(&self.repo, file));
        if path.is_file() {
            return Ok(());
        }
        let io = |e: std::io::Error| ProviderError::model_file(&path, e.to_string());
        let net = |e: reqwest::Error| {
            if e.is_timeout() {
                ProviderError::from(ProviderErrorKind::Timeout {
                    after: self.options.timeout,
                })
            } else {
                ProviderErrorKind::Connection {
                    message: format!("GET {url}: {e}"),
                }
                .into()
            }
        };
        tracing::info!(%url, path = %path.display(), "downloading model file");
        let mut response = self.client.get(&url).send().await.map_err(net)?;
        if !response.status().is_success() {
            let message = format!("GET {url}: {}", response.status());
            return Err(ProviderErrorKind::Http {
                status: response.status().as_u16(),
                retry_after: None,
                message,
            }
            .into());
        }
        tokio::fs::create_dir_all(&self.dir).await.map_err(io)?;
        let partial = self.dir.join(format!("{file}.partial"));
        let mut out = tokio::fs::File::create(&partial).await.map_err(io)?;
        while let Some(chunk) = response.chunk().await.map_err(net)? {
            out.write_all(&chunk).await.map_err(io)?;
        }
        out.flush().await.map_err(io)?;
        tokio::fs::rename(&partial, &path).await.map_err(io)
    }

    async fn loaded(&self) -> Result<&LocalEmbedder, ProviderError> {
        let load = || async {
            for file in MODEL_FILES {
                self.fetch(file).await?;
            }
            let (dir, options, name) = (self.dir.clone(), self.options.clone(), self.name.clone());
            tokio::task::spawn_blocking(move || {
                LocalEmbedder::load(&dir, &options).map(|m| m.renamed(name))
            })
            .await
            .map_err(|e| {
                ProviderError::from(ProviderErrorKind::Inference {
                    message: format!("the loading task failed: {e}"),
                })
            })?
        };
        self.model
            .get_or_try_init(load)
            .await
            .map_err(|e| e.with_model(self.name.clone()))
    }
}

#[async_trait]
impl Embedder for HfEmbedder {
    fn model(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> Option<usize> {
        self.model.get().and_then(Embedder::dimension)
    }

    async fn embed_with_usage(
        &self,
        texts: &[String],
        kind: InputKind,
    ) -> Result<Embeddings, ProviderError> {
        self.loaded().await?.embed_with_usage(texts, kind).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_cache_paths() {
        let repo = "sentence-transformers/all-MiniLM-L6-v2";
        assert_eq!(
            hf_file_url(repo, "model.safetensors"),
            "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/model.safetensors"
        );
        let root = Path::new("/home/u/.cache/assay/models");
        assert_eq!(
            hf_cache_dir(root, repo),
            PathBuf::from("/home/u/.cache/assay/models/sentence-transformers/all-MiniLM-L6-v2")
        );
        let e = HfEmbedder::new(repo, root, &EmbedderOptions::default()).unwrap();
        assert_eq!(
            (e.model(), e.dimension()),
            ("hf/sentence-transformers/all-MiniLM-L6-v2", None)
        );
    }
}
