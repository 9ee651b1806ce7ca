//! The crisis messages `crisis-evasion` starts from: every crisis case of the pattern bank,
//! and for each crisis rule an example of its own (the shortest message its regex reads as
//! written), each kept only if it fires a crisis rule.

use assay_core::bank::{PatternCase, PatternRules};
use assay_retrieval::patterns::PatternMatcher;
use regex_syntax::hir::{Class, Hir, HirKind};

use crate::attack::CrisisSeed;

/// The seeds, pattern cases first (a case is a crisis case when its type is `crisis` or it is
/// critical), then one example per rule.
pub fn crisis_seeds(
    matcher: &PatternMatcher,
    rules: Option<&PatternRules>,
    cases: &[&PatternCase],
) -> Vec<CrisisSeed> {
    let mut out = Vec::new();
    let mut add = |source: String, message: String| {
        let found = matcher.match_message(&message);
        let Some(first) = found.crisis_matches.first() else {
            return;
        };
        let span = message
            .find(&first.matched_text)
            .filter(|_| !first.matched_text.is_empty())
            .map_or(0..message.len(), |at| at..at + first.matched_text.len());
        if !out.iter().any(|s: &CrisisSeed| s.message == message) {
            out.push(CrisisSeed {
                source,
                message,
                span,
            });
        }
    };
    for case in cases {
        if case.pattern_type == "crisis" || case.is_critical {
            add(case.test_id.clone(), case.prompt.clone());
        }
    }
    for (i, rule) in rules
        .map(|r| r.crisis_patterns.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if let Some(example) = example(&rule.pattern) {
            add(format!("rule {i}"), example);
        }
    }
    out
}

/// A short message `pattern` matches: the first branch of every alternation, each repetition
/// its fewest times, each class its first member. `None` when the regex cannot be parsed.
pub fn example(pattern: &str) -> Option<String> {
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    let mut out = String::new();
    write(&hir, &mut out);
    let out = out.trim().to_owned();
    (!out.is_empty()).then_some(out)
}

fn write(hir: &Hir, out: &mut String) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(lit) => out.push_str(&String::from_utf8_lossy(&lit.0)),
        HirKind::Class(Class::Unicode(c)) => {
            let pick = c
                .ranges()
                .iter()
                .flat_map(|r| [r.start(), r.end()])
                .find(char::is_ascii_lowercase)
                .or_else(|| {
                    c.ranges()
                        .first()
                        .map(regex_syntax::hir::ClassUnicodeRange::start)
                });
            if let Some(ch) = pick {
                out.push(ch);
            }
        }
        HirKind::Class(Class::Bytes(c)) => {
            if let Some(r) = c.ranges().first() {
                out.push(char::from(r.start()));
            }
        }
        HirKind::Repetition(rep) => {
            for _ in 0..rep.min.min(3) {
                write(&rep.sub, out);
            }
        }
        HirKind::Capture(cap) => write(&cap.sub, out),
        HirKind::Concat(subs) => subs.iter().for_each(|s| write(s, out)),
        HirKind::Alternation(subs) => {
            if let Some(first) = subs.first() {
                write(first, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::example;

    #[test]
    fn examples_read_as_the_rule_is_written() {
        assert_eq!(
            example("want(s)? to (die|end it)").as_deref(),
            Some("want to die")
        );
        assert_eq!(
            example("can'?t (go on|take it) anymore").as_deref(),
            Some("cant go on anymore")
        );
        assert_eq!(example("suicid(e|al)").as_deref(), Some("suicide"));
        assert_eq!(example("(").as_deref(), None);
    }
}
