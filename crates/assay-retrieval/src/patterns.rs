//! Crisis regexes and keyword boosts (000 §5.5, §6.3).
//!
//! Semantics are the seed's: a crisis regex matches case-insensitively (Python `re.IGNORECASE`,
//! including its `i`/`I` ~ `İ`/`ı` equivalence, which the `regex` crate lacks), a keyword matches
//! as a substring of the lower-cased message, unless its rule sets `whole_word`.
//!
//! How a message is matched, so that the cost barely grows with the number of rules:
//!
//! - **ASCII messages** (nearly all of them), and non-ASCII ones with no character that could
//!   change the answer (see `RiskyChars`), are scanned once, ignoring ASCII case, for a set of
//!   literals: every keyword, plus, for each crisis regex, a *factor*: a few strings one of which
//!   every match of the regex must contain (`can'?t (go on|…) anymore` needs ` anymore`), found
//!   by `ascii_factor` from the regex's syntax tree. With up to 48 distinct 4-byte windows and
//!   AVX2, the scan is the gram filter of `grams.rs` over the message as it is; otherwise the
//!   message is lower-cased into a buffer, Teddy finds the first literal and the Aho-Corasick
//!   automaton reports the rest. Only the crisis rules whose factor was found run their own
//!   regex, to confirm, and not even those when the factor's strings are exactly the regex's
//!   matches (`better off (dead|…)`); a rule whose factor is a common word also waits for a
//!   second, rarer piece of the regex (`required_groups`).
//! - **Other messages** run every crisis regex at once in one lazy DFA (a `regex-automata` set
//!   with Unicode word boundaries removed, since one `\b` makes that DFA give up on non-ASCII
//!   text; rules that had one are confirmed with their own regex; the set is built for the
//!   first such message), then the keyword scan over the message lower-cased as Python
//!   lower-cases it.

mod grams;
mod normalise;

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind, packed};
use assay_core::bank::PatternRules;
use assay_core::runlog::{CrisisMatch, KeywordMatch};
use grams::{GramFilter, Rarity};
use regex_automata::meta::{self, Regex};
use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::{Input, PatternSet};
use regex_syntax::hir::{
    Capture, Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, LookSet, Repetition,
};

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
/// Up to this many literals, a SIMD search (Teddy) finds the first one before the automaton
/// runs (Teddy's own limit).
const PACKED_LIMIT: usize = 64;
/// Up to this many literals, the automaton is a DFA (fastest; ~1.7 KiB per literal, so at most
/// ~35 MiB); past it, aho-corasick picks a smaller one.
const DFA_LIMIT: usize = 20_000;

struct Crisis {
    /// The regex as written.
    pattern: String,
    /// The regex, with Python's case-insensitivity: says whether and where the rule matches.
    regex: Regex,
    entities: Vec<String>,
    /// The rule is in `unicode_set` without its word boundaries: a set match must be confirmed.
    loose_in_set: bool,
    /// The groups of literals that an ASCII message must all hold before the regex runs, as a
    /// mask (bit `g` for group `g`; see [`required_groups`]).
    required: u8,
}

struct Boost {
    keywords: Vec<String>,
    entity: String,
    whole_word: bool,
}

/// Who a literal of the scan belongs to.
#[derive(Debug, Clone, Copy)]
enum Owner {
    /// A keyword (lower-cased) of a keyword group.
    Keyword { boost: usize, keyword: usize },
    /// A factor of a crisis rule: the rule matches if `certain`, else its regex must confirm,
    /// once one string of each of the rule's groups was found (this one is of group `group`).
    Crisis {
        rule: usize,
        certain: bool,
        group: u8,
    },
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
    crisis: Vec<Crisis>,
    boosts: Vec<Boost>,
    /// Keywords and crisis factors; `None` when there are neither.
    literals: Option<LiteralScan>,
    /// Crisis rules without a factor: their regex runs on every ASCII message.
    unfactored: Vec<usize>,
    /// Every crisis rule's syntax tree, without Unicode word boundaries.
    loose: Vec<Hir>,
    /// Those in one regex, for messages of the Unicode path: built the first time one comes
    /// (most runs have none); `None` when there are no crisis rules or it could not be built,
    /// and then each rule's own regex runs.
    unicode_set: OnceLock<Option<Regex>>,
    /// The characters that make a non-ASCII message take the Unicode path; `None`: every
    /// non-ASCII message does (a keyword is not ASCII).
    plain_non_ascii: Option<RiskyChars>,
    /// `[patterns] normalise`: `Some(fold_marks)` when messages are also matched folded (see
    /// [`normalise`]); `fold_marks` when no rule holds a non-ASCII character, so diacritics can
    /// be removed.
    normalise: Option<bool>,
}

/// Non-ASCII characters that can change what a message matches beyond its ASCII text.
///
/// A non-ASCII message with none of them is *plain*: the ASCII scan gives the seed's answer
/// for it. Every crisis match in it is ASCII text (the regexes' classes and literals allow no
/// non-ASCII character it holds), so it contains the rule's factor; and lower-casing it changes
/// no character into ASCII (only `İ` and the Kelvin sign `K` lower-case to ASCII letters), so
/// every keyword found in the lower-cased message is ASCII text of the message, equal to the
/// keyword but for ASCII case.
#[derive(Debug, Clone)]
struct RiskyChars(ClassUnicode);

impl RiskyChars {
    /// The characters, for `crisis` (syntax trees, case-insensitivity applied).
    fn new<'h>(crisis: impl Iterator<Item = &'h Hir>) -> RiskyChars {
        let mut class = ClassUnicode::new(['\u{130}', '\u{212a}'].map(char_range));
        let non_ascii = ClassUnicode::new([ClassUnicodeRange::new('\u{80}', char::MAX)]);
        for hir in crisis {
            collect_non_ascii(hir, &non_ascii, &mut class);
        }
        RiskyChars(class)
    }

    /// Whether `text` holds one of the characters.
    fn contains_any(&self, text: &str) -> bool {
        let ranges = self.0.ranges();
        text.chars().any(|c| {
            !c.is_ascii() && {
                let i = ranges.partition_point(|r| r.end() < c);
                ranges.get(i).is_some_and(|r| r.start() <= c)
            }
        })
    }
}

/// Adds to `out` every non-ASCII character that a literal or class of `hir` allows.
fn collect_non_ascii(hir: &Hir, non_ascii: &ClassUnicode, out: &mut ClassUnicode) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(text) => out.union(&ClassUnicode::new(
                text.chars().filter(|c| !c.is_ascii()).map(char_range),
            )),
            Err(_) => out.union(non_ascii),
        },
        HirKind::Class(Class::Unicode(class)) => {
            let mut high = class.clone();
            high.intersect(non_ascii);
            out.union(&high);
        }
        HirKind::Class(Class::Bytes(class)) => {
            if class.ranges().iter().any(|r| r.end() >= 0x80) {
                out.union(non_ascii);
            }
        }
        HirKind::Repetition(rep) => collect_non_ascii(&rep.sub, non_ascii, out),
        HirKind::Capture(cap) => collect_non_ascii(&cap.sub, non_ascii, out),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => {
            for sub in subs {
                collect_non_ascii(sub, non_ascii, out);
            }
        }
    }
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
        let mut literals = LiteralsBuilder::default();
        let rarity = Rarity::new(MIN_GROUP_LEN);
        let mut crisis = Vec::with_capacity(rules.crisis_patterns.len());
        let mut loose = Vec::with_capacity(rules.crisis_patterns.len());
        let mut unfactored = Vec::new();
        for (index, rule) in rules.crisis_patterns.iter().enumerate() {
            let bad = |message: String| RuleError::Regex {
                index,
                pattern: rule.pattern.clone(),
                message,
            };
            let parsed = regex_syntax::ParserBuilder::new()
                .case_insensitive(true)
                .build()
                .parse(&rule.pattern)
                .map_err(|e| bad(e.to_string()))?;
            let hir = python_case(&parsed);
            let regex = meta::Builder::new()
                .configure(
                    // A rule's own regex runs only where its factor was found (or on the few
                    // messages of the Unicode path): no prefilter, full or one-pass DFA or
                    // backtracker to build, the lazy DFA alone answers.
                    meta::Config::new()
                        .which_captures(WhichCaptures::Implicit)
                        .auto_prefilter(false)
                        .onepass(false)
                        .backtrack(false)
                        .dfa(false)
                        .nfa_size_limit(Some(REGEX_SIZE_LIMIT))
                        .hybrid_cache_capacity(REGEX_SIZE_LIMIT),
                )
                .build_from_hir(&hir)
                .map_err(|e| bad(e.to_string()))?;
            let mut required = 0u8;
            match ascii_factor(&hir) {
                Factor::AnyOf { strings, certain } => {
                    let extra = if certain {
                        Vec::new()
                    } else {
                        required_groups(&hir, &strings, &rarity)
                    };
                    for (group, strings) in std::iter::once(strings).chain(extra).enumerate() {
                        let group = u8::try_from(group).expect("at most MAX_GROUPS groups");
                        required |= 1 << group;
                        for s in strings {
                            literals.add(
                                s,
                                Owner::Crisis {
                                    rule: index,
                                    certain,
                                    group,
                                },
                            );
                        }
                    }
                }
                Factor::Unknown => unfactored.push(index),
                Factor::Never => {}
            }
            let (without_boundaries, loose_in_set) = without_unicode_word_boundaries(&hir);
            loose.push(without_boundaries);
            crisis.push(Crisis {
                pattern: rule.pattern.clone(),
                regex,
                entities: rule.entities.clone(),
                loose_in_set,
                required,
            });
        }
        let mut boosts = Vec::with_capacity(rules.keyword_boosts.len());
        for (index, rule) in rules.keyword_boosts.iter().enumerate() {
            let mut keywords = Vec::with_capacity(rule.keywords.len());
            for (k, keyword) in rule.keywords.iter().enumerate() {
                if keyword.is_empty() {
                    return Err(RuleError::EmptyKeyword { index, keyword: k });
                }
                let lower = keyword.to_lowercase();
                literals.add(
                    lower.clone().into_bytes(),
                    Owner::Keyword {
                        boost: index,
                        keyword: k,
                    },
                );
                keywords.push(lower);
            }
            boosts.push(Boost {
                keywords,
                entity: rule.entity.clone(),
                whole_word: rule.whole_word,
            });
        }
        let keywords_ascii = boosts
            .iter()
            .all(|b| b.keywords.iter().all(|k| k.is_ascii()));
        Ok(PatternMatcher {
            crisis,
            boosts,
            literals: literals.build()?,
            unfactored,
            plain_non_ascii: keywords_ascii.then(|| RiskyChars::new(loose.iter())),
            loose,
            unicode_set: OnceLock::new(),
            normalise: None,
        })
    }

    /// With `on`, a message also matches as `[patterns] normalise` folds it (Unicode NFKC,
    /// look-alike letters, invisible characters, separators; see the `normalise` module): a
    /// rule fires when it fires on the message or on a folded view of it.
    #[must_use]
    pub fn normalising(mut self, on: bool) -> PatternMatcher {
        let ascii_rules = self.crisis.iter().all(|c| c.pattern.is_ascii())
            && self
                .boosts
                .iter()
                .all(|b| b.keywords.iter().all(|k| k.is_ascii()));
        self.normalise = on.then_some(ascii_rules);
        self
    }

    /// Whether messages are also matched folded (`[patterns] normalise`).
    pub fn normalises(&self) -> bool {
        self.normalise.is_some()
    }

    /// The texts a message is matched as: itself, then its folded views when normalising.
    fn views<'m>(&self, message: &'m str) -> Vec<std::borrow::Cow<'m, str>> {
        let mut out = vec![std::borrow::Cow::Borrowed(message)];
        if let Some(fold_marks) = self.normalise {
            out.extend(
                normalise::views(message, fold_marks)
                    .into_iter()
                    .map(std::borrow::Cow::Owned),
            );
        }
        out
    }

    /// How many crisis rules and keyword groups there are.
    pub fn rule_counts(&self) -> (usize, usize) {
        (self.crisis.len(), self.boosts.len())
    }

    /// Indices of the crisis rules and keyword groups that fire on `message` or (normalising)
    /// one of its views, each sorted.
    fn fired(&self, message: &str) -> (Vec<usize>, Vec<(usize, usize)>) {
        if self.normalise.is_none() {
            return self.fired_one(message);
        }
        let (mut crisis, mut hits) = (Vec::new(), Vec::new());
        for view in self.views(message) {
            let (c, h) = self.fired_one(&view);
            crisis.extend(c);
            hits.extend(h);
        }
        crisis.sort_unstable();
        crisis.dedup();
        hits.sort_unstable();
        hits.dedup_by_key(|(boost, _)| *boost);
        (crisis, hits)
    }

    /// [`Self::fired`] for one text.
    fn fired_one(&self, message: &str) -> (Vec<usize>, Vec<(usize, usize)>) {
        let first_non_ascii = match self.literals.as_ref().and_then(|l| l.grams.as_ref()) {
            Some(grams) => grams.first_non_ascii(message.as_bytes()),
            None => message.bytes().position(|b| !b.is_ascii()),
        };
        let plain = first_non_ascii.is_none_or(|at| {
            self.plain_non_ascii
                .as_ref()
                .is_some_and(|risky| !risky.contains_any(&message[at..]))
        });
        let (mut crisis, mut hits) = if plain {
            self.scan_ascii(message)
        } else {
            self.scan_unicode(message)
        };
        crisis.sort_unstable();
        crisis.dedup();
        // Per group, keep the first keyword in list order that was found (as the seed).
        hits.sort_unstable();
        hits.dedup_by_key(|(boost, _)| *boost);
        (crisis, hits)
    }

    /// A message that is ASCII, or *plain* (see [`RiskyChars`]): one literal scan over it,
    /// ignoring ASCII case, then the regexes of the crisis rules that may match.
    fn scan_ascii(&self, message: &str) -> (Vec<usize>, Vec<(usize, usize)>) {
        let mut crisis = Vec::new();
        let mut maybe = Vec::new();
        let mut hits = Vec::new();
        if let Some(scan) = &self.literals {
            scan.for_each_ascii(message.as_bytes(), |owners, start, end| {
                for owner in owners {
                    match *owner {
                        Owner::Crisis {
                            rule,
                            certain: true,
                            ..
                        } => crisis.push(rule),
                        Owner::Crisis {
                            rule,
                            certain: false,
                            group,
                        } => maybe.push((rule, 1u8 << group)),
                        Owner::Keyword { boost, keyword } => {
                            if !self.boosts[boost].whole_word || whole_word_at(message, start, end)
                            {
                                hits.push((boost, keyword));
                            }
                        }
                    }
                }
            });
        }
        // A rule's regex runs once every one of its groups was found.
        maybe.sort_unstable();
        let mut candidates = Vec::with_capacity(self.unfactored.len() + maybe.len());
        candidates.extend_from_slice(&self.unfactored);
        for run in maybe.chunk_by(|a, b| a.0 == b.0) {
            let rule = run[0].0;
            let found = run.iter().fold(0u8, |mask, (_, bit)| mask | bit);
            if found == self.crisis[rule].required {
                candidates.push(rule);
            }
        }
        crisis.extend(
            candidates
                .into_iter()
                .filter(|&rule| self.crisis[rule].regex.is_match(message)),
        );
        (crisis, hits)
    }

    /// Any other `message`: the crisis set, then the keyword scan over `message.to_lowercase()`.
    fn scan_unicode(&self, message: &str) -> (Vec<usize>, Vec<(usize, usize)>) {
        let mut crisis = Vec::new();
        if let Some(set) = self.unicode_set.get_or_init(|| self.build_unicode_set()) {
            let input = Input::new(message);
            if set.is_match(input.clone()) {
                let mut found = PatternSet::new(set.pattern_len());
                set.which_overlapping_matches(&input, &mut found);
                for rule in found.iter().map(|pid| pid.as_usize()) {
                    let confirmed = !self.crisis[rule].loose_in_set
                        || self.crisis[rule].regex.is_match(message);
                    if confirmed {
                        crisis.push(rule);
                    }
                }
            }
        } else {
            crisis
                .extend((0..self.crisis.len()).filter(|&r| self.crisis[r].regex.is_match(message)));
        }
        let mut hits = Vec::new();
        if let Some(scan) = &self.literals {
            let lower = message.to_lowercase();
            scan.for_each(lower.as_bytes(), |owners, start, end| {
                for owner in owners {
                    // Crisis factors hold for ASCII text only; the set has decided above.
                    if let Owner::Keyword { boost, keyword } = *owner
                        && (!self.boosts[boost].whole_word || whole_word_at(&lower, start, end))
                    {
                        hits.push((boost, keyword));
                    }
                }
            });
        }
        (crisis, hits)
    }

    /// All crisis rules in one regex (`None` if there are none, or if the set is too large).
    fn build_unicode_set(&self) -> Option<Regex> {
        if self.loose.is_empty() {
            return None;
        }
        meta::Builder::new()
            .configure(
                meta::Config::new()
                    .match_kind(regex_automata::MatchKind::All)
                    .which_captures(WhichCaptures::Implicit)
                    // The prefilter would stop at every "not" and "can"; the lazy DFA is
                    // faster (and a full DFA would take long to build).
                    .auto_prefilter(false)
                    .dfa(false)
                    .nfa_size_limit(Some(REGEX_SIZE_LIMIT))
                    .hybrid_cache_capacity(REGEX_SIZE_LIMIT),
            )
            .build_many_from_hir(&self.loose)
            .ok()
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
            // The message first; the folded views (normalising) only when the rule fired on one.
            let matched_text = match rule.regex.find(message) {
                Some(m) => message[m.range()].to_owned(),
                None => self
                    .views(message)
                    .iter()
                    .skip(1)
                    .find_map(|view| {
                        let view: &str = view;
                        rule.regex.find(view).map(|m| view[m.range()].to_owned())
                    })
                    .unwrap_or_default(),
            };
            result.crisis_matches.push(CrisisMatch {
                pattern: rule.pattern.clone(),
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

/// The literal scan: keywords and crisis factors, each reported with its owners.
struct LiteralScan {
    /// Finds every literal in ASCII text with SIMD, when there are few literals and the CPU
    /// has AVX2 (`grams`); otherwise `first` and `all` do it.
    grams: Option<GramFilter>,
    /// Finds the leftmost literal with SIMD, when there are few literals: most messages hold
    /// none, and the automaton then never runs.
    first: Option<packed::Searcher>,
    /// Finds every occurrence of every literal (overlapping).
    all: AhoCorasick,
    /// Owners of each literal (a literal can be a keyword of several groups, or a factor too).
    owners: Vec<Vec<Owner>>,
}

impl LiteralScan {
    /// Calls `found(owners, start, end)` for each occurrence of a literal in `message` (ASCII,
    /// or plain: its non-ASCII bytes never match), ignoring ASCII case.
    fn for_each_ascii(&self, message: &[u8], mut found: impl FnMut(&[Owner], usize, usize)) {
        if let Some(grams) = &self.grams {
            grams.for_each(message, |literal, start, end| {
                found(&self.owners[literal], start, end);
            });
            return;
        }
        let mut on_stack = [0u8; 512];
        let mut on_heap;
        let lower: &mut [u8] = if message.len() <= on_stack.len() {
            &mut on_stack[..message.len()]
        } else {
            on_heap = vec![0u8; message.len()];
            &mut on_heap
        };
        for (to, from) in lower.iter_mut().zip(message) {
            *to = from.to_ascii_lowercase();
        }
        self.for_each(lower, found);
    }

    /// Calls `found(owners, start, end)` for each occurrence of a literal in `haystack`
    /// (lower-cased).
    fn for_each(&self, haystack: &[u8], mut found: impl FnMut(&[Owner], usize, usize)) {
        let start = match &self.first {
            None => 0,
            Some(first) => match first.find(haystack) {
                None => return,
                // Every occurrence starts at or after the leftmost one.
                Some(m) => m.start(),
            },
        };
        let input = aho_corasick::Input::new(haystack).range(start..);
        for m in self.all.find_overlapping_iter(input) {
            found(&self.owners[m.pattern().as_usize()], m.start(), m.end());
        }
    }
}

#[derive(Default)]
struct LiteralsBuilder {
    index: HashMap<Vec<u8>, usize>,
    literals: Vec<Vec<u8>>,
    owners: Vec<Vec<Owner>>,
}

impl LiteralsBuilder {
    fn add(&mut self, literal: Vec<u8>, owner: Owner) {
        let next = self.literals.len();
        let i = *self.index.entry(literal.clone()).or_insert(next);
        if i == next {
            self.literals.push(literal);
            self.owners.push(Vec::new());
        }
        self.owners[i].push(owner);
    }

    fn build(self) -> Result<Option<LiteralScan>, RuleError> {
        if self.literals.is_empty() {
            return Ok(None);
        }
        let teddy = |fat| {
            packed::Config::new()
                .match_kind(packed::MatchKind::LeftmostFirst)
                .only_teddy(true)
                .only_teddy_fat(fat)
                .builder()
                .extend(&self.literals)
                .build()
        };
        let grams = GramFilter::new(&self.literals);
        // With the gram filter, the automaton serves only messages of the Unicode path (a few
        // per cent): a contiguous NFA, which takes a fraction of a DFA's time to build.
        // Otherwise fat Teddy (16 buckets, AVX2), which has fewer false candidates on
        // lower-case text than slim (8 buckets), finds the first literal: ~160 vs ~230 ns per
        // bench message for the seed's 41 literals.
        let first = if grams.is_none() && self.literals.len() <= PACKED_LIMIT {
            teddy(Some(true)).or_else(|| teddy(None))
        } else {
            None
        };
        let kind = if grams.is_some() {
            Some(AhoCorasickKind::ContiguousNFA)
        } else {
            (self.literals.len() <= DFA_LIMIT).then_some(AhoCorasickKind::DFA)
        };
        let all = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .kind(kind)
            .prefilter(first.is_none() && grams.is_none())
            .build(&self.literals)
            .map_err(|e| RuleError::Automaton(e.to_string()))?;
        Ok(Some(LiteralScan {
            grams,
            first,
            all,
            owners: self.owners,
        }))
    }
}

// ---- Regex syntax trees: Python's case-insensitivity, word boundaries ----------------------

const DOTTED_CAPITAL_I: char = '\u{130}';
const DOTLESS_SMALL_I: char = '\u{131}';

/// Rebuilds `hir` bottom-up, replacing each leaf (literal, class, look-around) for which
/// `leaf` returns `Some`.
fn rewrite(hir: &Hir, leaf: &mut dyn FnMut(&Hir) -> Option<Hir>) -> Hir {
    match hir.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {
            leaf(hir).unwrap_or_else(|| hir.clone())
        }
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            min: rep.min,
            max: rep.max,
            greedy: rep.greedy,
            sub: Box::new(rewrite(&rep.sub, leaf)),
        }),
        HirKind::Capture(cap) => Hir::capture(Capture {
            index: cap.index,
            name: cap.name.clone(),
            sub: Box::new(rewrite(&cap.sub, leaf)),
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(|s| rewrite(s, leaf)).collect()),
        HirKind::Alternation(subs) => {
            Hir::alternation(subs.iter().map(|s| rewrite(s, leaf)).collect())
        }
    }
}

/// Python's `re.IGNORECASE` treats `i`, `I`, `İ` (U+0130) and `ı` (U+0131) as one letter; the
/// `regex` crate's case folding pairs only `i` and `I`. So: a class that holds `i` and `I` (the
/// fold of a case-insensitive `i`, `[a-z]`, `\w`, ...) gains `İ` and `ı`; one that holds neither
/// `i` nor `I` but both Turkish letters (a negated class such as `[^i]` or `[^a-z]`) loses
/// them; a literal `İ` or `ı` becomes all four. Assumes the whole pattern is case-insensitive:
/// inside a `(?-i)` group, a class written with both `i` and `I` also gains `İ` and `ı`.
fn python_case(hir: &Hir) -> Hir {
    let turkish = ClassUnicode::new([DOTTED_CAPITAL_I, DOTLESS_SMALL_I].map(char_range));
    let all_i = ClassUnicode::new(['i', 'I', DOTTED_CAPITAL_I, DOTLESS_SMALL_I].map(char_range));
    rewrite(hir, &mut |leaf| match leaf.kind() {
        HirKind::Class(Class::Unicode(class)) => {
            let has = |c: char| class.iter().any(|r| r.start() <= c && c <= r.end());
            let (ascii, dotted, dotless) = (
                has('i') && has('I'),
                has(DOTTED_CAPITAL_I),
                has(DOTLESS_SMALL_I),
            );
            if ascii && !(dotted && dotless) {
                let mut class = class.clone();
                class.union(&turkish);
                Some(Hir::class(Class::Unicode(class)))
            } else if !has('i') && !has('I') && dotted && dotless {
                let mut class = class.clone();
                class.difference(&turkish);
                Some(Hir::class(Class::Unicode(class)))
            } else {
                None
            }
        }
        HirKind::Literal(lit) => {
            let text = std::str::from_utf8(&lit.0).ok()?;
            if !text.contains([DOTTED_CAPITAL_I, DOTLESS_SMALL_I]) {
                return None;
            }
            let pieces = text
                .chars()
                .map(|c| {
                    if c == DOTTED_CAPITAL_I || c == DOTLESS_SMALL_I {
                        Hir::class(Class::Unicode(all_i.clone()))
                    } else {
                        Hir::literal(c.to_string().into_bytes())
                    }
                })
                .collect();
            Some(Hir::concat(pieces))
        }
        _ => None,
    })
}

fn char_range(c: char) -> ClassUnicodeRange {
    ClassUnicodeRange::new(c, c)
}

/// `hir` without its Unicode word boundaries (`\b`, `\B`, `\<`, `\b{start}`, ...): a looser
/// regex, which the lazy DFA can run on non-ASCII text. Also says whether any was removed.
fn without_unicode_word_boundaries(hir: &Hir) -> (Hir, bool) {
    if !hir.properties().look_set().contains_word_unicode() {
        return (hir.clone(), false);
    }
    let out = rewrite(hir, &mut |leaf| match leaf.kind() {
        HirKind::Look(look) if LookSet::singleton(*look).contains_word_unicode() => {
            Some(Hir::empty())
        }
        _ => None,
    });
    (out, true)
}

// ---- Factors: literals a crisis regex needs in lower-cased ASCII text ----------------------

/// Literal strings, sorted, distinct.
type Strings = Vec<Vec<u8>>;

/// Most strings in one factor (or in the exact strings of a sub-expression).
const SET_LIMIT: usize = 16;
/// A class with at most this many lower-cased ASCII bytes counts as that many strings.
const CLASS_LIMIT: usize = 4;
/// Factors this long are rare enough in chat text: a longer one is not much better.
const GOOD_LEN: usize = 8;
/// Runs of exact sub-expressions are not extended past this length.
const MAX_FACTOR_LEN: usize = 32;
/// A factor shorter than this would fire on most messages: the rule runs its regex always.
const MIN_FACTOR_LEN: usize = 3;

/// What a crisis regex needs in an ASCII message, lower-cased ASCII-wise.
#[derive(Debug, PartialEq, Eq)]
enum Factor {
    /// Any match contains one of these strings. `certain`: and the regex matches wherever one
    /// of them is found (they are exactly its matches), so its regex need not confirm.
    AnyOf { strings: Strings, certain: bool },
    /// It can never match ASCII text (every way through has a non-ASCII character).
    Never,
    /// Nothing useful is known.
    Unknown,
}

/// A factor for a crisis regex's syntax tree (case-insensitivity already applied).
///
/// If the regex matches an ASCII text, the text lower-cased (ASCII) contains one of the
/// strings: each character of a match is in the class (or is the literal) at its position, so
/// its lower-case form is in that class's lower-cased ASCII part. Assertions (`\b`, `^`) and
/// non-ASCII alternatives can only narrow the matches, so they are ignored or dropped. When
/// the regex's matches are a few strings (no repetition, no assertion) and its classes do not
/// tell cases apart, finding one of them is the same as matching: the factor is `certain`.
fn ascii_factor(hir: &Hir) -> Factor {
    let lits = lits(hir);
    if let Some(exact) = &lits.exact
        && lits.precise
        && !exact.is_empty()
        && exact.iter().all(|s| s.len() >= MIN_FACTOR_LEN)
    {
        return Factor::AnyOf {
            strings: exact.clone(),
            certain: true,
        };
    }
    match lits.best() {
        Some(strings) if strings.is_empty() => Factor::Never,
        Some(strings) if strings.iter().all(|s| s.len() >= MIN_FACTOR_LEN) => Factor::AnyOf {
            strings: strings.clone(),
            certain: false,
        },
        _ => Factor::Unknown,
    }
}

/// Most groups of a rule, its factor included (they are bits of a `u8`).
const MAX_GROUPS: usize = 2;
/// A further group's strings are at least this long: shorter ones (`the`, `her`) are in most
/// messages, so they would rule out little and cost a report each.
const MIN_GROUP_LEN: usize = 4;

/// More literal sets an ASCII match of `hir` must contain besides its factor `factor`: the
/// factors of the pieces of a top-level concatenation (every match is a match of each piece in
/// turn, so it contains one string of each piece's factor), the rarest in chat text first (by
/// the rarest 4-byte window of each string, as `grams.rs` ranks them), at most
/// [`MAX_GROUPS`] `- 1`. The rule's regex runs only on a message holding one string of every
/// group: a factor such as `call` alone (`(call|called|calling)\s+(the\s+)?(police|cops)…`)
/// is in many chat messages, `call` and `police` or `cops` together in few.
fn required_groups(hir: &Hir, factor: &Strings, rarity: &Rarity) -> Vec<Strings> {
    let mut hir = hir;
    while let HirKind::Capture(cap) = hir.kind() {
        hir = &cap.sub;
    }
    let HirKind::Concat(subs) = hir.kind() else {
        return Vec::new();
    };
    // How common one of the strings is: the sum of each one's chance (its rarest window's).
    let commonness = |strings: &Strings| -> f64 {
        strings
            .iter()
            .map(|s| {
                s.windows(MIN_GROUP_LEN)
                    .map(|w| rarity.of(w))
                    .fold(f64::INFINITY, f64::min)
                    .exp()
            })
            .sum()
    };
    let mut groups: Vec<(f64, Strings)> = Vec::new();
    for sub in subs {
        let lits = lits(sub);
        let Some(strings) = lits.best() else { continue };
        if strings.is_empty()
            || strings == factor
            || strings.iter().any(|s| s.len() < MIN_GROUP_LEN)
            || groups.iter().any(|(_, g)| g == strings)
        {
            continue;
        }
        groups.push((commonness(strings), strings.clone()));
    }
    groups.sort_by(|a, b| a.0.total_cmp(&b.0));
    groups
        .into_iter()
        .take(MAX_GROUPS - 1)
        .map(|(_, strings)| strings)
        .collect()
}

/// What is known of the lower-cased ASCII text a sub-expression matches.
#[derive(Debug)]
struct Lits {
    /// It matches (lower-cased) one of these (`None`: too many, or unbounded). Empty: it
    /// cannot match ASCII text.
    exact: Option<Strings>,
    /// `exact` is precise: an ASCII text matches if and only if its lower-cased form is in it.
    precise: bool,
    /// Every match contains one of these (`None`: no useful factor).
    need: Option<Strings>,
}

impl Lits {
    fn exactly(strings: Strings, precise: bool) -> Lits {
        Lits {
            exact: Some(strings),
            precise,
            need: None,
        }
    }

    fn empty_string(precise: bool) -> Lits {
        Lits::exactly(vec![Vec::new()], precise)
    }

    fn never() -> Lits {
        Lits::exactly(Vec::new(), true)
    }

    fn unknown() -> Lits {
        Lits {
            exact: None,
            precise: false,
            need: None,
        }
    }

    fn is_never(&self) -> bool {
        self.exact.as_ref().is_some_and(Vec::is_empty)
    }

    /// The better of `exact` and `need` as a factor.
    fn best(&self) -> Option<&Strings> {
        let mut best = Best::default();
        for strings in [&self.exact, &self.need].into_iter().flatten() {
            best.offer(strings);
        }
        best.0.map(|(_, strings)| strings)
    }
}

/// How good `strings` are as a factor, higher is better; `None` if one of them is empty (it
/// would match everywhere). No strings at all (can never match) is best. Past [`GOOD_LEN`],
/// fewer strings count more than longer ones.
fn rank(strings: &Strings) -> Option<Rank> {
    match strings.iter().map(Vec::len).min() {
        None => Some((usize::MAX, Reverse(0), 0)),
        Some(0) => None,
        Some(shortest) => Some((shortest.min(GOOD_LEN), Reverse(strings.len()), shortest)),
    }
}

/// Shortest string up to [`GOOD_LEN`], fewest strings, shortest string.
type Rank = (usize, Reverse<usize>, usize);

/// The best-ranked of the strings offered.
#[derive(Default)]
struct Best<'a>(Option<(Rank, &'a Strings)>);

impl<'a> Best<'a> {
    fn offer(&mut self, strings: &'a Strings) {
        if let Some(r) = rank(strings)
            && self.0.as_ref().is_none_or(|(best, _)| r > *best)
        {
            self.0 = Some((r, strings));
        }
    }
}

fn lits(hir: &Hir) -> Lits {
    match hir.kind() {
        HirKind::Empty => Lits::empty_string(true),
        // An assertion matches the empty string, but not everywhere.
        HirKind::Look(_) => Lits::empty_string(false),
        // A letter in a literal is case-sensitive (under `(?i)` it would be a class).
        HirKind::Literal(lit) if lit.0.is_ascii() => Lits::exactly(
            vec![lit.0.to_ascii_lowercase()],
            !lit.0.iter().any(u8::is_ascii_alphabetic),
        ),
        HirKind::Literal(_) => Lits::never(),
        HirKind::Class(class) => class_lits(class),
        HirKind::Capture(cap) => lits(&cap.sub),
        HirKind::Repetition(rep) => repetition_lits(rep),
        HirKind::Concat(subs) => concat_lits(&subs.iter().map(lits).collect::<Vec<_>>()),
        HirKind::Alternation(subs) => {
            let subs: Vec<Lits> = subs.iter().map(lits).collect();
            Lits {
                exact: union(subs.iter().map(|s| s.exact.as_ref())),
                precise: subs.iter().all(|s| s.precise),
                need: union(subs.iter().map(Lits::best)),
            }
        }
    }
}

fn class_lits(class: &Class) -> Lits {
    // The class's ASCII bytes, as a bit set.
    let mut ascii = 0u128;
    let mut add = |start: u32, end: u32| {
        if start <= 0x7f {
            let end = end.min(0x7f);
            ascii |= u128::MAX >> (0x7f - (end - start)) << start;
        }
    };
    match class {
        Class::Unicode(class) => class
            .iter()
            .for_each(|r| add(r.start().into(), r.end().into())),
        Class::Bytes(class) => class
            .iter()
            .for_each(|r| add(r.start().into(), r.end().into())),
    }
    const LETTERS: u128 = (1 << 26) - 1;
    let upper = ascii & LETTERS << b'A';
    let lowered = (ascii & !upper) | upper << (b'a' - b'A');
    if lowered.count_ones() as usize > CLASS_LIMIT {
        return Lits::unknown();
    }
    let strings = set_bits(lowered).map(|b| vec![b]).collect();
    let case_blind = (ascii >> b'a' ^ ascii >> b'A') & LETTERS == 0;
    Lits::exactly(strings, case_blind)
}

/// The positions of the set bits of `set`, lowest first.
fn set_bits(set: u128) -> impl Iterator<Item = u8> {
    std::iter::successors((set != 0).then_some(set), |rest| {
        let rest = rest & (rest - 1);
        (rest != 0).then_some(rest)
    })
    .map(|rest| rest.trailing_zeros() as u8)
}

fn repetition_lits(rep: &Repetition) -> Lits {
    let sub = lits(&rep.sub);
    if sub.is_never() {
        return if rep.min == 0 {
            Lits::empty_string(true)
        } else {
            Lits::never()
        };
    }
    let exact = match (rep.min, rep.max) {
        (0, Some(0)) => Some(vec![Vec::new()]),
        (0, Some(1)) => union([Some(&vec![Vec::new()]), sub.exact.as_ref()].into_iter()),
        (1, Some(1)) => sub.exact.clone(),
        _ => None,
    };
    let need = if rep.min >= 1 {
        sub.best().cloned()
    } else {
        None
    };
    Lits {
        exact,
        precise: sub.precise,
        need,
    }
}

fn concat_lits(subs: &[Lits]) -> Lits {
    if subs.iter().any(Lits::is_never) {
        return Lits::never();
    }
    // Runs of sub-expressions with exact strings give factors (their products); so does any
    // sub-expression's own factor.
    // (Offered in this order, the first of equals wins; only a better one is copied.)
    let mut best: Option<(Rank, Strings)> = None;
    let mut offer = |strings: &Strings| {
        if let Some(r) = rank(strings)
            && best.as_ref().is_none_or(|(b, _)| r > *b)
        {
            best = Some((r, strings.clone()));
        }
    };
    for strings in subs.iter().filter_map(Lits::best) {
        offer(strings);
    }
    for start in 0..subs.len() {
        let mut run = vec![Vec::new()];
        for sub in &subs[start..] {
            let Some(next) = sub.exact.as_ref().and_then(|e| product(&run, e)) else {
                break;
            };
            run = next;
            offer(&run);
            if run.iter().all(|s| s.len() >= MAX_FACTOR_LEN) {
                break;
            }
        }
    }
    let need = best.map(|(_, strings)| strings);
    let exact = subs.iter().try_fold(vec![Vec::new()], |acc, sub| {
        sub.exact.as_ref().and_then(|e| product(&acc, e))
    });
    Lits {
        exact,
        precise: subs.iter().all(|s| s.precise),
        need,
    }
}

/// Every concatenation of a string of `left` and one of `right`, if not too many.
fn product(left: &Strings, right: &Strings) -> Option<Strings> {
    if left.len() * right.len() > SET_LIMIT {
        return None;
    }
    let mut out: Strings = left
        .iter()
        .flat_map(|l| right.iter().map(move |r| [l.as_slice(), r].concat()))
        .collect();
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// The union of the sets, if each is known and the union is not too large.
fn union<'a>(sets: impl Iterator<Item = Option<&'a Strings>>) -> Option<Strings> {
    let mut out = Vec::new();
    for set in sets {
        out.extend(set?.iter().cloned());
    }
    out.sort_unstable();
    out.dedup();
    (out.len() <= SET_LIMIT).then_some(out)
}

#[cfg(test)]
mod tests;
