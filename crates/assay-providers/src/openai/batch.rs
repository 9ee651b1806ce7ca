//! The OpenAI Batch API (the only place its wire format lives).
//!
//! Submit: the requests as JSON Lines, `{"custom_id", "method": "POST", "url":
//! "/v1/chat/completions", "body": <the chat request's body>}`, uploaded with `POST
//! {base}/files` (multipart: `purpose=batch`, `file`) → `{"id": "file-…"}`; then `POST
//! {base}/batches` `{"input_file_id", "endpoint": "/v1/chat/completions", "completion_window":
//! "24h"}` → `{"id": "batch_…", "status": "validating"}`.
//!
//! Poll: `GET {base}/batches/{id}` → `{"status": "validating" | "in_progress" | "finalizing" |
//! "cancelling" | "completed" | "failed" | "expired" | "cancelled", "output_file_id"?,
//! "error_file_id"?}`. Once it ended, `GET {base}/files/{file}/content` of both files: JSON
//! Lines `{"custom_id", "response": {"status_code", "body"} | null, "error": {"code",
//! "message"} | null}`; a 200 `body` is a chat completion; `error.code` `batch_expired` or
//! `batch_cancelled` says the request was not run.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::OpenAiChat;
use crate::ProviderError;
use crate::chat::{BatchApi, BatchPoll, ItemResult};
use crate::chat::{ChatRequest, ChatResponse};

/// The batch API of one OpenAI chat model.
#[derive(Debug)]
pub(crate) struct OpenAiBatch {
    chat: OpenAiChat,
    base: String,
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

#[derive(Deserialize)]
struct Batch {
    status: String,
    #[serde(default)]
    output_file_id: Option<String>,
    #[serde(default)]
    error_file_id: Option<String>,
}

#[derive(Deserialize)]
struct OutputLine {
    custom_id: String,
    #[serde(default)]
    response: Option<OutputResponse>,
    #[serde(default)]
    error: Option<OutputError>,
}

#[derive(Deserialize)]
struct OutputResponse {
    status_code: u16,
    #[serde(default)]
    body: Value,
}

#[derive(Deserialize)]
struct OutputError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl OpenAiBatch {
    pub(crate) fn new(chat: OpenAiChat, base: String) -> OpenAiBatch {
        OpenAiBatch { chat, base }
    }

    fn name(&self) -> &str {
        self.chat.parts().0
    }

    /// The JSON Lines file of `requests`.
    pub(crate) fn input_file(&self, requests: &[(String, ChatRequest)]) -> String {
        let mut out = String::new();
        for (id, request) in requests {
            let line = json!({
                "custom_id": id,
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": self.chat.wire_body(request),
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        out
    }
}

/// A `multipart/form-data` body with `purpose=batch` and `file` (`batch.jsonl`); returns the
/// content type and the body.
pub(crate) fn multipart(file: &str) -> (String, Vec<u8>) {
    let digest = Sha256::digest(file.as_bytes());
    let mut boundary = String::from("assay-batch-");
    for b in &digest[..12] {
        boundary.push_str(&format!("{b:02x}"));
    }
    let mut body = Vec::with_capacity(file.len() + 400);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"batch.jsonl\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file.as_bytes());
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// The results in an output or error file.
pub(crate) fn parse_output(text: &str) -> Vec<(String, ItemResult)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(line) = serde_json::from_str::<OutputLine>(line) else {
            tracing::warn!(
                "a line of a batch's output does not parse; its request counts as not run"
            );
            continue;
        };
        let result = match (line.response, line.error) {
            (Some(r), _) if (200..300).contains(&r.status_code) => ItemResult::Answer(r.body),
            (Some(r), _) => {
                let message = r
                    .body
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map_or_else(|| r.body.to_string(), str::to_owned);
                ItemResult::Failed(format!("HTTP {}: {message}", r.status_code))
            }
            (None, Some(e))
                if matches!(e.code.as_deref(), Some("batch_expired" | "batch_cancelled")) =>
            {
                ItemResult::NotRun
            }
            (None, Some(e)) => ItemResult::Failed(format!(
                "{}{}",
                e.code.map(|c| format!("{c}: ")).unwrap_or_default(),
                e.message.unwrap_or_default()
            )),
            (None, None) => ItemResult::NotRun,
        };
        out.push((line.custom_id, result));
    }
    out
}

#[async_trait]
impl BatchApi for OpenAiBatch {
    fn provider(&self) -> &'static str {
        "openai"
    }

    fn base_url(&self) -> &str {
        &self.base
    }

    fn model(&self) -> &str {
        self.name()
    }

    async fn submit(&self, requests: &[(String, ChatRequest)]) -> Result<String, ProviderError> {
        let http = self.chat.parts().1;
        let with_name = |e: ProviderError| e.with_model(self.name().to_owned());
        let (content_type, body) = multipart(&self.input_file(requests));
        let file: Created = http
            .post_bytes(&format!("{}/files", self.base), &content_type, body)
            .await
            .map_err(with_name)?;
        let batch: Created = http
            .post_json(
                &format!("{}/batches", self.base),
                &json!({
                    "input_file_id": file.id,
                    "endpoint": "/v1/chat/completions",
                    "completion_window": "24h",
                }),
            )
            .await
            .map_err(with_name)?;
        Ok(batch.id)
    }

    async fn poll(&self, id: &str) -> Result<BatchPoll, ProviderError> {
        let http = self.chat.parts().1;
        let with_name = |e: ProviderError| e.with_model(self.name().to_owned());
        let batch: Batch = http
            .get_json(&format!("{}/batches/{id}", self.base))
            .await
            .map_err(with_name)?;
        if !matches!(
            batch.status.as_str(),
            "completed" | "failed" | "expired" | "cancelled"
        ) {
            return Ok(BatchPoll::Pending(batch.status));
        }
        let mut results = Vec::new();
        for file in [batch.output_file_id, batch.error_file_id]
            .into_iter()
            .flatten()
        {
            let bytes = http
                .get_bytes(&format!("{}/files/{file}/content", self.base))
                .await
                .map_err(with_name)?;
            results.extend(parse_output(&String::from_utf8_lossy(&bytes)));
        }
        Ok(BatchPoll::Ended {
            status: batch.status,
            results,
        })
    }

    fn parse(&self, answer: Value, _request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        super::parse_answer(answer)
    }
}
