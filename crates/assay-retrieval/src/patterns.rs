//! Crisis regexes and keyword boosts (000 §5.5, §6.3).
//!
//! Crisis patterns are compiled once, case-insensitively, into one [`RegexSet`], so a message
//! is scanned once whatever the number of rules. Keywords of every boost are compiled into one
//! Aho-Corasick automaton; as in the seed, a keyword matches as a case-insensitive substring,
//! unless its rule sets `whole_word`.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use assay_core::bank::PatternRules;
use assay_core::runlog::{CrisisMatch, KeywordMatch};
use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

/// A pattern rule that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A crisis regex is not valid.
    #[error("crisis_patterns[{index}]: bad regex `{pattern}`: {message}")]
    Regex {
        /// Index of the rule in `crisis_patterns`.
        index: usize,
        /// The regex as written.
        pattern: String,
        /// The regex engine's explanation.
        message: String,
    },
    /// A keyword group has an empty keyword.
    #[error("keyword_boosts[{index}].keywords[{keyword}]: empty keyword would match every message")]
    EmptyKeyword {
        /// Index of the rule in `keyword_boosts`.
        index: usize,
        /// Index of the keyword.
        keyword: usize,
    },
    /// The keyword automaton could not be built.
    #[error("keyword_boosts: {0}")]
    Automaton(String),
}

const REGEX_SIZE_LIMIT: usize = 512 * (1 << 20);

struct Crisis {
    regex: Regex,
    entities: Vec<String>,
}

struct Boost {
    keywords: Vec<String>,
    entity: String,
    whole_word: bool,
}

/// Everything a message matched.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PatternMatch {
    /// Entities brought in: crisis entities in rule order, then keyword entities in rule order,
    /// each once.
    pub entities: Vec<String>,
    /// The crisis rules that fired, in rule order.
    pub crisis_matches: Vec<CrisisMatch>,
    /// The keyword groups that fired, in rule order, each with its first listed keyword found.
    pub keyword_matches: Vec<KeywordMatch>,
}

/// Compiled pattern rules.
pub struct PatternMatcher {
    crisis_set: RegexSet,
    crisis: Vec<Crisis>,
    keywords: Option<AhoCorasick>,
    /// For each automaton pattern: (boost index, keyword index).
    owners: Vec<(usize, usize)>,
    boosts: Vec<Boost>,
}

impl std::fmt::Debug for PatternMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatternMatcher")
            .field("crisis_rules", &self.crisis.len())
            .field("keyword_rules", &self.boosts.len())
            .finish_non_exhaustive()
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn whole_word_at(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start]
        .chars()
        .next_back()
        .is_none_or(|c| !is_word_char(c));
    let after = text[end..].chars().next().is_none_or(|c| !is_word_char(c));
    before && after
}

impl PatternMatcher {
    /// Compiles the rules. A bad regex is an error naming the rule's index.
    pub fn new(rules: &PatternRules) -> Result<PatternMatcher, RuleError> {
        let mut crisis = Vec::with_capacity(rules.crisis_patterns.len());
        for (index, rule) in rules.crisis_patterns.iter().enumerate() {
            let regex = RegexBuilder::new(&rule.pattern)
                .case_insensitive(true)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| RuleError::Regex {
                    index,
                    pattern: rule.pattern.clone(),
                    message: e.to_string(),
                })?;
            crisis.push(Crisis {
                regex,
                entities: rule.entities.clone(),
            });
        }
        let crisis_set = RegexSetBuilder::new(rules.crisis_patterns.iter().map(|r| &r.pattern))
            .case_insensitive(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| RuleError::Regex {
                index: 0,
                pattern: "(all crisis patterns together)".to_owned(),
                message: e.to_string(),
            })?;

        let mut boosts = Vec::with_capacity(rules.keyword_boosts.len());
        let mut owners = Vec::new();
        let mut patterns = Vec::new();
        for (index, rule) in rules.keyword_boosts.iter().enumerate() {
            let mut keywords = Vec::with_capacity(rule.keywords.len());
            for (k, keyword) in rule.keywords.iter().enumerate() {
                if keyword.is_empty() {
                    return Err(RuleError::EmptyKeyword { index, keyword: k });
                }
                let lower = keyword.to_lowercase();
                patterns.push(lower.clone());
                owners.push((index, k));
                keywords.push(lower);
            }
            boosts.push(Boost {
                keywords,
                entity: rule.entity.clone(),
                whole_word: rule.whole_word,
            });
        }
        let keywords = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(&patterns)
                    .map_err(|e| RuleError::Automaton(e.to_string()))?,
            )
        };
        Ok(PatternMatcher {
            crisis_set,
            crisis,
            keywords,
            owners,
            boosts,
        })
    }

    /// How many crisis rules and keyword groups there are.
    pub fn rule_counts(&self) -> (usize, usize) {
        (self.crisis.len(), self.boosts.len())
    }

    /// Indices of the crisis rules and keyword groups that fire on `message`, each sorted.
    fn fired(&self, message: &str) -> (Vec<usize>, Vec<(usize, usize)>) {
        let crisis: Vec<usize> = if self.crisis_set.is_match(message) {
            self.crisis_set.matches(message).into_iter().collect()
        } else {
            Vec::new()
        };
        let mut hits: Vec<(usize, usize)> = Vec::new();
        if let Some(ac) = &self.keywords {
            // The seed lower-cases the message; ASCII text needs no copy for that.
            let lowered;
            let text = if message.is_ascii() {
                message
            } else {
                lowered = message.to_lowercase();
                lowered.as_str()
            };
            for m in ac.find_overlapping_iter(text) {
                let (boost, keyword) = self.owners[m.pattern().as_usize()];
                if self.boosts[boost].whole_word && !whole_word_at(text, m.start(), m.end()) {
                    continue;
                }
                hits.push((boost, keyword));
            }
            // Per group, keep the first keyword in list order that was found (as the seed).
            hits.sort_unstable();
            hits.dedup_by_key(|(boost, _)| *boost);
        }
        (crisis, hits)
    }

    /// The entity ids `message` brings in (the seed's `match`), without details.
    pub fn matched_entities(&self, message: &str) -> Vec<&str> {
        let (crisis, hits) = self.fired(message);
        let mut out: Vec<&str> = Vec::new();
        let all = crisis
            .iter()
            .flat_map(|i| self.crisis[*i].entities.iter().map(String::as_str))
            .chain(hits.iter().map(|(b, _)| self.boosts[*b].entity.as_str()));
        for id in all {
            if !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }

    /// Everything `message` matched, with what triggered it (the seed's `match_with_details`).
    pub fn match_message(&self, message: &str) -> PatternMatch {
        let (crisis, hits) = self.fired(message);
        let mut result = PatternMatch::default();
        for i in crisis {
            let rule = &self.crisis[i];
            let matched_text = rule
                .regex
                .find(message)
                .map(|m| m.as_str().to_owned())
                .unwrap_or_default();
            result.crisis_matches.push(CrisisMatch {
                pattern: rule.regex.as_str().to_owned(),
                matched_text,
                entities: rule.entities.clone(),
            });
            for e in &rule.entities {
                if !result.entities.contains(e) {
                    result.entities.push(e.clone());
                }
            }
        }
        for (b, k) in hits {
            let boost = &self.boosts[b];
            result.keyword_matches.push(KeywordMatch {
                keyword: boost.keywords[k].clone(),
                entity: boost.entity.clone(),
            });
            if !result.entities.contains(&boost.entity) {
                result.entities.push(boost.entity.clone());
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_rules() -> PatternRules {
        serde_json::from_value(serde_json::json!({
            "crisis_patterns": [
                {"pattern": "want(s)? to (die|end it|hurt myself|kill myself)", "entities": ["handler_crisis", "rule_crisis_detection"], "is_critical": true},
                {"pattern": "better off (dead|without me)", "entities": ["handler_crisis"], "is_critical": true},
                {"pattern": "(not|don't|dont) feel safe", "entities": ["handler_crisis"], "is_critical": true},
                {"pattern": "can'?t (go on|take it|do this) anymore", "entities": ["handler_crisis"], "is_critical": true},
                {"pattern": "being (hit|abused|hurt)", "entities": ["handler_crisis", "domestic_violence"], "is_critical": true}
            ],
            "keyword_boosts": [
                {"keywords": ["gray rock", "grey rock", "gray-rock"], "entity": "gray_rock"},
                {"keywords": ["biff", "biff response"], "entity": "biff_response"},
                {"keywords": ["boundaries", "boundary", "set boundaries"], "entity": "boundary_setting"},
                {"keywords": ["alienation"], "entity": "parental_alienation", "whole_word": true}
            ]
        }))
        .unwrap()
    }

    fn matcher() -> PatternMatcher {
        PatternMatcher::new(&seed_rules()).unwrap()
    }

    #[test]
    fn crisis_is_case_insensitive_and_reports_text() {
        let m = matcher().match_message("Honestly I WANT TO END IT all");
        assert_eq!(m.entities, vec!["handler_crisis", "rule_crisis_detection"]);
        assert_eq!(m.crisis_matches[0].matched_text, "WANT TO END IT");
    }

    #[test]
    fn several_rules_fire_and_entities_are_deduplicated() {
        let m = matcher().match_message("i dont feel safe, i am being hit");
        assert_eq!(m.entities, vec!["handler_crisis", "domestic_violence"]);
        assert_eq!(m.crisis_matches.len(), 2);
    }

    #[test]
    fn keywords_are_substrings_like_the_seed() {
        let m = matcher();
        assert_eq!(
            m.matched_entities("She has no BOUNDARIES"),
            vec!["boundary_setting"]
        );
        assert_eq!(
            m.matched_entities("a boundaryless ex"),
            vec!["boundary_setting"]
        );
        assert_eq!(
            m.matched_entities("the biffy clyro concert"),
            vec!["biff_response"]
        );
        let details = m.match_message("how do i write a biff response");
        // the first keyword of the group in list order, as in the seed
        assert_eq!(details.keyword_matches[0].keyword, "biff");
    }

    #[test]
    fn whole_word_rules_skip_longer_words() {
        let m = matcher();
        assert_eq!(
            m.matched_entities("is this alienation?"),
            vec!["parental_alienation"]
        );
        assert!(m.matched_entities("alienations everywhere").is_empty());
    }

    #[test]
    fn non_ascii_messages_are_lowercased_first() {
        let m = matcher();
        assert_eq!(
            m.matched_entities("GRÅ — GRAY ROCK, s'il vous plaît"),
            vec!["gray_rock"]
        );
    }

    #[test]
    fn nothing_matches_a_calm_message() {
        assert_eq!(
            matcher().match_message("what time is pickup"),
            PatternMatch::default()
        );
    }

    #[test]
    fn a_bad_regex_names_the_rule() {
        let mut rules = seed_rules();
        rules.crisis_patterns[3].pattern = "can't (go on".into();
        let err = PatternMatcher::new(&rules).unwrap_err();
        assert!(matches!(err, RuleError::Regex { index: 3, .. }));
        assert!(
            err.to_string()
                .starts_with("crisis_patterns[3]: bad regex `can't (go on`"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_keyword_is_rejected() {
        let mut rules = seed_rules();
        rules.keyword_boosts[1].keywords.push(String::new());
        assert_eq!(
            PatternMatcher::new(&rules).unwrap_err(),
            RuleError::EmptyKeyword {
                index: 1,
                keyword: 2
            }
        );
    }
}
