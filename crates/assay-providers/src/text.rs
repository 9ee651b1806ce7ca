//! Small text helpers shared by the call wrapper, structured output and the LLM reranker (a
//! module of their own, so none of those imports another for them).

/// The first `max_chars` characters of `text`, with `…` when cut.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
