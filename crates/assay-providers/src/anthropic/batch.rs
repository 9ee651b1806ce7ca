//! Anthropic Message Batches (the only place their wire format lives).
//!
//! Submit: `POST {base}/v1/messages/batches` `{"requests": [{"custom_id", "params": <the
//! Messages API body>}]}` → `{"id": "msgbatch_…", "processing_status": "in_progress"}`.
//!
//! Poll: `GET {base}/v1/messages/batches/{id}` → `{"processing_status": "in_progress" |
//! "canceling" | "ended", "results_url"}`; once ended, `GET {results_url}`: JSON Lines
//! `{"custom_id", "result": {"type": "succeeded", "message": <a message>} | {"type": "errored",
//! "error": {"type": "error", "error": {"type", "message"}}} | {"type": "canceled"} | {"type":
//! "expired"}}`.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AnthropicChat;
use crate::ProviderError;
use crate::chat::{BatchApi, BatchPoll, ItemResult};
use crate::chat::{ChatRequest, ChatResponse};

/// The batch API of one Claude model.
#[derive(Debug)]
pub(crate) struct AnthropicBatch {
    chat: AnthropicChat,
    base: String,
}

#[derive(Deserialize)]
struct Batch {
    id: String,
    processing_status: String,
    #[serde(default)]
    results_url: Option<String>,
}

#[derive(Deserialize)]
struct ResultLine {
    custom_id: String,
    result: Value,
}

impl AnthropicBatch {
    pub(crate) fn new(chat: AnthropicChat, base: String) -> AnthropicBatch {
        AnthropicBatch { chat, base }
    }

    fn name(&self) -> &str {
        self.chat.parts().0
    }

    /// The body of the submission.
    pub(crate) fn submission(&self, requests: &[(String, ChatRequest)]) -> Value {
        let requests: Vec<Value> = requests
            .iter()
            .map(|(id, r)| json!({"custom_id": id, "params": self.chat.wire_body(r)}))
            .collect();
        json!({ "requests": requests })
    }
}

/// The results file; the status the batch ended with (`expired` or `cancelled` when some
/// request was, else `ended`).
pub(crate) fn parse_results(text: &str) -> (String, Vec<(String, ItemResult)>) {
    let mut out = Vec::new();
    let (mut expired, mut canceled) = (false, false);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(line) = serde_json::from_str::<ResultLine>(line) else {
            tracing::warn!(
                "a line of a batch's results does not parse; its request counts as not run"
            );
            continue;
        };
        let result = match line.result["type"].as_str() {
            Some("succeeded") => ItemResult::Answer(line.result["message"].clone()),
            Some("errored") => {
                let error = &line.result["error"]["error"];
                ItemResult::Failed(format!(
                    "{}: {}",
                    error["type"].as_str().unwrap_or("error"),
                    error["message"].as_str().unwrap_or_default()
                ))
            }
            Some("expired") => {
                expired = true;
                ItemResult::NotRun
            }
            _ => {
                canceled = true;
                ItemResult::NotRun
            }
        };
        out.push((line.custom_id, result));
    }
    let status = if expired {
        "expired"
    } else if canceled {
        "cancelled"
    } else {
        "ended"
    };
    (status.to_owned(), out)
}

#[async_trait]
impl BatchApi for AnthropicBatch {
    fn provider(&self) -> &'static str {
        "anthropic"
    }

    fn base_url(&self) -> &str {
        &self.base
    }

    fn model(&self) -> &str {
        self.name()
    }

    async fn submit(&self, requests: &[(String, ChatRequest)]) -> Result<String, ProviderError> {
        let batch: Batch = self
            .chat
            .parts()
            .1
            .post_json(
                &format!("{}/v1/messages/batches", self.base),
                &self.submission(requests),
            )
            .await
            .map_err(|e| e.with_model(self.name().to_owned()))?;
        Ok(batch.id)
    }

    async fn poll(&self, id: &str) -> Result<BatchPoll, ProviderError> {
        let http = self.chat.parts().1;
        let with_name = |e: ProviderError| e.with_model(self.name().to_owned());
        let batch: Batch = http
            .get_json(&format!("{}/v1/messages/batches/{id}", self.base))
            .await
            .map_err(with_name)?;
        if batch.processing_status != "ended" {
            return Ok(BatchPoll::Pending(batch.processing_status));
        }
        let Some(url) = batch.results_url else {
            return Err(with_name(ProviderError::malformed(
                "the batch ended without a results_url",
            )));
        };
        let bytes = http.get_bytes(&url).await.map_err(with_name)?;
        let (status, results) = parse_results(&String::from_utf8_lossy(&bytes));
        Ok(BatchPoll::Ended { status, results })
    }

    fn parse(&self, answer: Value, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        super::parse_message(answer, request)
    }
}
