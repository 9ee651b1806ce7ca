//! Issue 42: what a product replies is believed only as far as it can be checked: contexts
//! naming an entity the knowledge base lacks are an error of the case, a long reply is kept
//! clipped (assertions read it whole), and a bank that computes no metric runs with no judge.

use std::sync::Arc;

use assay_core::answer::{AnswerCase, ContextItem, ContextSource, KEPT_REPLY_BYTES, Metric};
use serde_json::json;

use super::*;

/// A product that replies `text`, saying it used `contexts` when given.
struct Product {
    text: String,
    contexts: Option<Vec<ContextItem>>,
}

#[async_trait::async_trait]
impl AnswerSystem for Product {
    fn describe(&self) -> String {
        "command `product`".into()
    }
    fn stateless(&self) -> bool {
        true
    }
    async fn respond(&self, _: &AnswerAsk<'_>) -> Result<AnswerReply, String> {
        Ok(AnswerReply {
            text: self.text.clone(),
            contexts: self.contexts.clone(),
            latency_ms: 1.0,
            ..AnswerReply::default()
        })
    }
}

/// A knowledge base of two entities.
struct Kb;

#[async_trait::async_trait]
impl ContextProvider for Kb {
    async fn context(&self, _: &str, _: &UserState, _: &str) -> Result<Vec<ContextItem>, String> {
        Ok(vec![ContextItem {
            entity: Some("loan_periods".into()),
            text: "Books are lent for three weeks.".into(),
        }])
    }
    fn unknown_entity(&self, entity: &str) -> Option<String> {
        let known = ["loan_periods", "printing"];
        (!known.contains(&entity)).then(|| {
            let hint = assay_core::text::closest(entity, known)
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            format!("`{entity}` is not an active entity of the knowledge base{hint}")
        })
    }
}

fn backend(product: Product) -> AnswerBackend {
    AnswerBackend {
        system: Arc::new(product),
        context: Arc::new(Kb),
        judge: None,
        config: AnswerConfig {
            metrics: Vec::new(),
            ..AnswerConfig::default()
        },
    }
}

fn case(extra: &serde_json::Value) -> AnswerCase {
    let mut c = json!({"test_id": "LIB-1", "message": "How long can I keep a book?"});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    serde_json::from_value(c).unwrap()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn contexts_naming_an_entity_the_knowledge_base_lacks_are_an_error_of_the_case() {
    let b = backend(Product {
        text: "Three weeks.".into(),
        contexts: Some(vec![
            ContextItem {
                entity: Some("loan_periods".into()),
                text: "Books are lent for three weeks.".into(),
            },
            ContextItem {
                entity: Some("loan_period".into()),
                text: "Three weeks.".into(),
            },
        ]),
    });
    let r = block_on(run_case(&b, &case(&json!({"metrics": []}))));
    assert_eq!(
        r.error.as_deref(),
        Some(
            "the product's reply: contexts[1].entity: `loan_period` is not an active entity of the knowledge base (did you mean `loan_periods`?)"
        ),
        "{r:?}"
    );
    assert_eq!(r.score, None, "an error is never scored");
    assert_eq!(r.reply.as_deref(), Some("Three weeks."));
    assert_eq!(r.contexts_from, ContextSource::Target);
    assert_eq!(r.contexts.len(), 2);

    // A context with no entity is the product's own note: nothing to check.
    let b = backend(Product {
        text: "Three weeks.".into(),
        contexts: Some(vec![ContextItem {
            entity: None,
            text: "own note".into(),
        }]),
    });
    let r = block_on(run_case(&b, &case(&json!({"metrics": []}))));
    assert_eq!(r.error, None, "{r:?}");
}

#[test]
fn a_long_reply_is_kept_clipped_and_checked_whole() {
    let long = format!("{}THE END", "word ".repeat(20_000));
    let b = backend(Product {
        text: long.clone(),
        contexts: Some(vec![ContextItem {
            entity: Some("printing".into()),
            text: "p".repeat(3 * KEPT_REPLY_BYTES),
        }]),
    });
    let c = case(&json!({"metrics": [], "assert": [{"type": "contains", "value": "THE END"}]}));
    let r = block_on(run_case(&b, &c));
    assert_eq!(r.error, None, "{r:?}");
    // The assertion read the whole reply: its end is past what is kept.
    assert!(r.assertions.as_ref().unwrap().passed, "{:?}", r.assertions);
    let kept = r.reply.unwrap();
    assert!(kept.len() < KEPT_REPLY_BYTES + 64, "{}", kept.len());
    assert!(
        kept.ends_with(&format!(" … [clipped: {} bytes in all]", long.len())),
        "{}",
        &kept[kept.len() - 60..]
    );
    assert!(!kept.contains("THE END"));
    assert!(r.contexts[0].text.len() < KEPT_REPLY_BYTES + 64);
}

#[test]
fn a_bank_that_computes_no_metric_needs_no_judge() {
    let none = case(&json!({"metrics": []}));
    let own = case(&json!({"metrics": ["faithfulness"]}));
    let default = case(&json!({}));
    assert!(!AnswerBackend::needs_judge(&[], [&none, &default]));
    assert!(!AnswerBackend::needs_judge(&Metric::ALL, [&none]));
    assert!(AnswerBackend::needs_judge(&[], [&none, &own]));
    assert!(AnswerBackend::needs_judge(&Metric::ALL, [&none, &default]));

    let b = backend(Product {
        text: "Three weeks.".into(),
        contexts: None,
    });
    assert_eq!(
        b.describe(),
        "command `product`, no judge (every metric is off: assertions and trajectory only)"
    );
    let r = block_on(run_case(
        &b,
        &case(&json!({"assert": [{"type": "contains", "value": "weeks"}]})),
    ));
    assert_eq!((r.error.as_deref(), r.score), (None, Some(100)), "{r:?}");
    assert!(r.metrics.is_empty());

    // A case that asks for a metric where no judge was built is an error, never a score.
    let r = block_on(run_case(&b, &own));
    assert_eq!(
        r.error.as_deref(),
        Some("judge: the case computes faithfulness but this run built no judge"),
        "{r:?}"
    );
}
