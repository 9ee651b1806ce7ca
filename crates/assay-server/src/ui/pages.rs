//! The retrieval test and the statistics page.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::get;

use assay_core::UserState;
use assay_core::entity::DEFAULT_AUDIENCE;
use assay_kb::EntityFilter;
use assay_kbtools::kbedit;
use assay_project::{engine, retrieve};
use assay_retrieval::pipeline::Retrieval;

use super::links::entity_link;
use super::{Ctx, Html, UiError, blocking, esc, has_kb, no_kb, open_store};
use crate::AppState;

/// The largest `top_k` the retrieval test accepts.
pub const MAX_TOP_K: usize = 50;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/retrieval", get(retrieval))
        .route("/stats", get(stats))
}

/// The retrieval test's form, parsed by hand.
#[derive(Debug, Clone, PartialEq)]
struct RetrievalQuery {
    query: String,
    audience: String,
    top_k: Option<usize>,
    state: UserState,
    state_text: String,
}

impl RetrievalQuery {
    fn parse(q: &HashMap<String, String>) -> Result<RetrievalQuery, UiError> {
        let mut out = RetrievalQuery {
            query: String::new(),
            audience: DEFAULT_AUDIENCE.to_owned(),
            top_k: None,
            state: UserState::new(),
            state_text: String::new(),
        };
        for (k, v) in q {
            match k.as_str() {
                "query" => v.trim().clone_into(&mut out.query),
                "audience" | "audience_type" if !v.trim().is_empty() => {
                    v.trim().clone_into(&mut out.audience);
                }
                "audience" | "audience_type" => {}
                "top_k" | "state" if v.trim().is_empty() => {}
                "top_k" => {
                    out.top_k = Some(
                        v.trim()
                            .parse()
                            .ok()
                            .filter(|k| (1..=MAX_TOP_K).contains(k))
                            .ok_or_else(|| {
                                UiError::bad_request(format!(
                                    "top_k: `{v}` is not a number from 1 to {MAX_TOP_K}"
                                ))
                            })?,
                    );
                }
                "state" => {
                    v.trim().clone_into(&mut out.state_text);
                    out.state = match serde_json::from_str(v) {
                        Ok(serde_json::Value::Object(map)) => map,
                        Ok(_) => {
                            return Err(UiError::bad_request(
                                "state: expected a JSON object, e.g. {\"days_since_last\": 9}",
                            ));
                        }
                        Err(e) => {
                            return Err(UiError::bad_request(format!(
                                "state: not valid JSON: {e}"
                            )));
                        }
                    };
                }
                _ => return Err(UiError::bad_request(format!("unknown parameter `{k}`"))),
            }
        }
        Ok(out)
    }
}

async fn retrieval(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let form = RetrievalQuery::parse(&q)?;
    let env = ctx.state.env();
    let run = form.clone();
    let (kb, audiences, answer) = blocking(&ctx.state, move |project| {
        if !has_kb(project) {
            return Ok((false, BTreeSet::new(), None));
        }
        let store = open_store(project)?;
        let audiences: BTreeSet<String> = store
            .list(&EntityFilter::default())?
            .into_iter()
            .flat_map(|e| e.audience_types)
            .collect();
        if run.query.is_empty() {
            return Ok((true, audiences, None));
        }
        let lookup = |name: &str| env(name);
        let choice = engine::choose_embedder(&project.settings, None, &lookup)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                UiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot start a runtime: {e}"),
                )
            })?;
        let ask = retrieve::Ask {
            message: run.query.clone(),
            audience: run.audience.clone(),
            state: run.state.clone(),
            top_k: run.top_k,
        };
        let test = rt.block_on(retrieve::retrieve(project, &store, &choice, &ask))?;
        Ok((true, audiences, Some(test)))
    })
    .await?;

    let mut body = String::from(
        "<h1>Retrieval test</h1><p class=\"muted\">Answers a message as the pipeline would (the same trace as <code>assay retrieve --explain</code>): what each stage proposed with its scores, what was selected, and what was dropped and why. Nothing is recorded.</p>",
    );
    if !kb {
        body.push_str(&no_kb(&ctx.state));
    }
    let _ = write!(
        body,
        "<form class=\"stack\" method=\"get\" action=\"/ui/retrieval\"><label for=\"query\">Message</label><textarea id=\"query\" name=\"query\" required data-search placeholder=\"What a user might write\">{}</textarea><div class=\"row\"><label>Audience <input type=\"text\" name=\"audience\" list=\"audiences\" value=\"{}\"></label><label>top_k <span class=\"hint\">empty: the project's setting</span><input type=\"number\" name=\"top_k\" min=\"1\" max=\"{MAX_TOP_K}\" value=\"{}\"></label></div><datalist id=\"audiences\">",
        esc(&form.query),
        esc(&form.audience),
        form.top_k.map_or_else(String::new, |k| k.to_string())
    );
    for a in &audiences {
        let _ = write!(body, "<option value=\"{}\">", esc(a));
    }
    let _ = write!(
        body,
        "</datalist><label for=\"state\">User state <span class=\"hint\">optional JSON object for STATE entities, e.g. {{\"days_since_last\": 9}}</span></label><textarea id=\"state\" name=\"state\" class=\"mono\">{}</textarea><div class=\"actions\"><button type=\"submit\">Retrieve</button></div></form>",
        esc(&form.state_text)
    );
    if let Some(test) = answer {
        explain(&mut body, &test.retrieval, &test.embedder, &form.audience);
    }
    Ok(ctx.page("Retrieval test", "retrieval", &body))
}

fn explain(body: &mut String, r: &Retrieval, model: &str, audience: &str) {
    let pct = if r.token_budget == 0 {
        0.0
    } else {
        r.tokens_used as f64 / r.token_budget as f64 * 100.0
    };
    let _ = write!(
        body,
        "<section id=\"explain\"><h2>Selected: {} entities</h2><p class=\"muted\">audience <code>{}</code> · embedder <code>{}</code> · {} of {} tokens</p><div class=\"meter\" role=\"img\" aria-label=\"{pct:.0}% of the token budget\"><span style=\"width:{pct:.1}%\"></span></div>",
        r.entities.len(),
        esc(audience),
        esc(model),
        r.tokens_used,
        r.token_budget
    );
    body.push_str("<div class=\"table-wrap\"><table class=\"grid\" id=\"selected\"><thead><tr><th class=\"num\">#</th><th>Entity</th><th>Title</th><th>Type</th><th>Stage</th><th class=\"num\">Similarity</th><th class=\"num\">Priority bonus</th><th class=\"num\">Final</th><th class=\"num\">Tokens</th></tr></thead><tbody>");
    for (i, e) in r.entities.iter().enumerate() {
        let mut stage = e.stage.to_string();
        for s in &e.also {
            let _ = write!(stage, "+{s}");
        }
        let _ = write!(
            body,
            "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{stage}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{}</td></tr>",
            i + 1,
            entity_link(&e.entity_id),
            esc(&e.title),
            e.entity_type.as_str(),
            e.similarity,
            e.priority_bonus,
            e.final_score,
            e.tokens
        );
    }
    if r.entities.is_empty() {
        body.push_str("<tr><td colspan=\"9\" class=\"muted\">Nothing selected.</td></tr>");
    }
    body.push_str("</tbody></table></div><h2>Stages</h2><div class=\"table-wrap\"><table class=\"grid\" id=\"stages\"><thead><tr><th>Stage</th><th>Candidates (score)</th></tr></thead><tbody>");
    for s in &r.stages {
        let list: Vec<String> = s
            .candidates
            .iter()
            .map(|(id, score)| {
                format!(
                    "{} <span class=\"muted\">{score:.3}</span>",
                    entity_link(id)
                )
            })
            .collect();
        let _ = write!(
            body,
            "<tr><th scope=\"row\">{}</th><td>{}</td></tr>",
            s.stage,
            if list.is_empty() {
                "—".to_owned()
            } else {
                list.join(", ")
            }
        );
    }
    body.push_str("</tbody></table></div>");
    let _ = write!(body, "<h2>Dropped: {}</h2>", r.dropped.len());
    if !r.dropped.is_empty() {
        body.push_str("<div class=\"table-wrap\"><table class=\"grid\" id=\"dropped\"><thead><tr><th>Entity</th><th>Stage</th><th>Why</th></tr></thead><tbody>");
        for d in &r.dropped {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                entity_link(&d.entity_id),
                d.stage,
                esc(&d.reason.to_string())
            );
        }
        body.push_str("</tbody></table></div>");
    }
    if !r.matches.is_empty() {
        body.push_str("<h2>Semantic matches</h2><p class=\"muted\">score = cosine of the best view + lexical bonus</p><div class=\"table-wrap\"><table class=\"grid\" id=\"matches\"><thead><tr><th>Entity</th><th class=\"num\">Score</th><th class=\"num\">Cosine</th><th>Via</th><th class=\"num\">Lexical</th><th>Lexical via</th></tr></thead><tbody>");
        for m in &r.matches {
            let _ = write!(
                body,
                "<tr><td>{}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                entity_link(&m.entity_id),
                m.score,
                m.dense,
                esc(m.view.as_deref().unwrap_or("embedding text")),
                m.lexical.map_or_else(String::new, |l| format!("{l:.3}")),
                esc(m.lexical_view.as_deref().unwrap_or(""))
            );
        }
        body.push_str("</tbody></table></div>");
    }
    for n in &r.notes {
        let _ = write!(body, "<p class=\"notice\">{}</p>", esc(n));
    }
    body.push_str("</section>");
}

async fn stats(State(state): State<AppState>, headers: HeaderMap) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let env = ctx.state.env();
    let s = blocking(&ctx.state, move |project| {
        if !has_kb(project) {
            return Ok(None);
        }
        let store = open_store(project)?;
        let lookup = |name: &str| env(name);
        let model = kbedit::embedding_model(&project.settings, None, &lookup)?;
        Ok(Some(store.stats(&model)?))
    })
    .await?;
    let mut body = String::from("<h1>Knowledge base statistics</h1>");
    let Some(s) = s else {
        body.push_str(&no_kb(&ctx.state));
        return Ok(ctx.page("Stats", "stats", &body));
    };
    let _ = write!(
        body,
        "<div class=\"cols\"><section class=\"card\"><h2>Entities</h2><dl class=\"fields\"><dt>entities</dt><dd>{}</dd><dt>active</dt><dd>{}</dd><dt>inactive</dt><dd>{}</dd><dt>versions</dt><dd>{}</dd><dt>retrievals</dt><dd>{}</dd></dl></section>",
        s.entities, s.active, s.inactive, s.versions, s.total_retrievals
    );
    let e = &s.embeddings;
    let total = (e.fresh + e.stale + e.missing).max(1);
    let _ = write!(
        body,
        "<section class=\"card\"><h2>Embeddings</h2><p>model <code>{}</code></p><div class=\"meter\" role=\"img\" aria-label=\"{} of {} fresh\"><span style=\"width:{:.1}%\"></span></div><dl class=\"fields\"><dt>fresh</dt><dd>{}</dd><dt>stale</dt><dd>{}</dd><dt>missing</dt><dd>{}</dd></dl><p><a href=\"/ui/bulk#reembed\">Re-embed…</a></p></section></div>",
        esc(&e.model),
        e.fresh,
        total,
        e.fresh as f64 / total as f64 * 100.0,
        e.fresh,
        e.stale,
        e.missing
    );
    let max = s
        .by_type
        .values()
        .chain(s.by_load_mode.values())
        .copied()
        .max()
        .unwrap_or(1)
        .max(1);
    body.push_str("<div class=\"cols\"><section class=\"card\"><h2>By type (active)</h2><table class=\"grid\"><tbody>");
    for (t, n) in &s.by_type {
        let _ = write!(
            body,
            "<tr><th scope=\"row\"><a href=\"/ui/entities?entity_type={}\">{}</a></th><td class=\"num\">{n}</td><td style=\"width:55%\"><div class=\"meter\"><span style=\"width:{:.1}%\"></span></div></td></tr>",
            t.as_str(),
            t.as_str(),
            *n as f64 / max as f64 * 100.0
        );
    }
    body.push_str("</tbody></table></section><section class=\"card\"><h2>By load mode (active)</h2><table class=\"grid\"><tbody>");
    for (m, n) in &s.by_load_mode {
        let _ = write!(
            body,
            "<tr><th scope=\"row\"><a href=\"/ui/entities?load_mode={}\">{}</a></th><td class=\"num\">{n}</td><td style=\"width:55%\"><div class=\"meter\"><span style=\"width:{:.1}%\"></span></div></td></tr>",
            m.as_str(),
            m.as_str(),
            *n as f64 / max as f64 * 100.0
        );
    }
    body.push_str("</tbody></table></section></div><h2>Most retrieved</h2>");
    if s.top_retrieved.is_empty() {
        body.push_str("<p class=\"muted\">No retrievals counted yet (<code>assay retrieve</code> counts them).</p>");
    } else {
        body.push_str("<table class=\"grid\"><thead><tr><th>Entity</th><th class=\"num\">Retrievals</th></tr></thead><tbody>");
        for (id, n) in &s.top_retrieved {
            let _ = write!(
                body,
                "<tr><td>{}</td><td class=\"num\">{n}</td></tr>",
                entity_link(id)
            );
        }
        body.push_str("</tbody></table>");
    }
    Ok(ctx.page("Stats", "stats", &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retrieval_form_parses_and_rejects() {
        let q: HashMap<String, String> = [("query", "hi"), ("top_k", "3"), ("state", "{\"a\":1}")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let f = RetrievalQuery::parse(&q).unwrap();
        assert_eq!(f.top_k, Some(3));
        assert_eq!(f.audience, DEFAULT_AUDIENCE);
        assert_eq!(f.state["a"], 1);
        for (k, v) in [
            ("top_k", "0"),
            ("top_k", "x"),
            ("state", "[1]"),
            ("state", "{"),
            ("zzz", "1"),
        ] {
            let q: HashMap<String, String> = [(k.to_owned(), v.to_owned())].into_iter().collect();
            assert!(RetrievalQuery::parse(&q).is_err(), "{k}={v}");
        }
    }
}
