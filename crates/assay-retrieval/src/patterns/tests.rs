//! The pattern matcher's tests.

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
fn non_ascii_look_alikes_take_the_unicode_path() {
    let m = matcher();
    // Plain non-ASCII text (no character that folds or lower-cases to ASCII) is scanned
    // like ASCII text.
    assert!(m.plain_non_ascii.is_some());
    let plain = "Café — I’m BEING HURT at home, BIFF é";
    assert!(!m.plain_non_ascii.as_ref().unwrap().contains_any(plain));
    assert_eq!(
        m.matched_entities(plain),
        vec!["handler_crisis", "domestic_violence", "biff_response"]
    );
    // The long s matches `s` case-insensitively (as in Python), the Kelvin sign lower-cases
    // to `k`: both are found, through the Unicode path.
    assert_eq!(
        m.matched_entities("é: I dont feel \u{17f}afe"),
        vec!["handler_crisis"]
    );
    let kelvin = "try GRAY ROC\u{212a}, it works";
    assert!(m.plain_non_ascii.as_ref().unwrap().contains_any(kelvin));
    assert_eq!(m.matched_entities(kelvin), vec!["gray_rock"]);
    // A keyword that is not ASCII turns the shortcut off.
    let mut rules = seed_rules();
    rules.keyword_boosts[0].keywords.push("gris roché".into());
    let m = PatternMatcher::new(&rules).unwrap();
    assert!(m.plain_non_ascii.is_none());
    assert_eq!(m.matched_entities("GRIS ROCHÉ !"), vec!["gray_rock"]);
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

fn rules_from(crisis: &[&str], keywords: &[(&[&str], bool)]) -> PatternRules {
    PatternRules {
        schema: None,
        crisis_patterns: crisis
            .iter()
            .enumerate()
            .map(|(i, p)| CrisisPattern {
                pattern: (*p).to_owned(),
                entities: vec![format!("crisis_{i}")],
                is_critical: true,
            })
            .collect(),
        keyword_boosts: keywords
            .iter()
            .enumerate()
            .map(|(i, (kws, whole_word))| KeywordBoost {
                keywords: kws.iter().map(|k| (*k).to_owned()).collect(),
                entity: format!("kw_{i}"),
                whole_word: *whole_word,
            })
            .collect(),
    }
}

#[test]
fn dotted_capital_i_matches_i_as_in_python() {
    let m = matcher();
    assert_eq!(
        m.matched_entities("I WANT TO KİLL MYSELF"),
        vec!["handler_crisis", "rule_crisis_detection"]
    );
    let details = m.match_message("I WANT TO KİLL MYSELF");
    assert_eq!(
        details.crisis_matches[0].matched_text,
        "WANT TO KİLL MYSELF"
    );
    assert_eq!(
        details.crisis_matches[0].pattern,
        "want(s)? to (die|end it|hurt myself|kill myself)"
    );
}

#[test]
fn dotless_i_matches_i_as_in_python() {
    assert_eq!(
        matcher().matched_entities("some days i want to dıe"),
        vec!["handler_crisis", "rule_crisis_detection"]
    );
}

#[test]
fn negated_classes_exclude_both_turkish_i_as_in_python() {
    // Python: re.search("k[^i]ll", "kİll", re.I) is None; [a-z] matches İ and ı.
    let m = PatternMatcher::new(&rules_from(&["k[^i]ll", "^[a-z]+$"], &[])).unwrap();
    assert!(m.matched_entities("kİll kıll kill").is_empty());
    assert_eq!(m.matched_entities("kall"), vec!["crisis_0", "crisis_1"]);
    assert_eq!(m.matched_entities("kİll"), vec!["crisis_1"]);
}

#[test]
fn case_sensitive_groups_stay_case_sensitive() {
    let m = PatternMatcher::new(&rules_from(&["(?-i:[a-c])ll me", "(?-i:OK) go"], &[])).unwrap();
    assert_eq!(m.matched_entities("call ME"), vec!["crisis_0"]);
    assert!(m.matched_entities("CALL ME").is_empty());
    assert_eq!(m.matched_entities("OK GO"), vec!["crisis_1"]);
    assert!(m.matched_entities("ok go").is_empty());
}

#[test]
fn word_boundaries_next_to_non_ascii_letters_apostrophes_and_digits() {
    let m = PatternMatcher::new(&rules_from(&[r"\bkill\b", r"\Bhurt"], &[])).unwrap();
    let check = |message: &str, expect: &[&str]| {
        assert_eq!(m.matched_entities(message), expect, "{message:?}");
    };
    check("kill", &["crisis_0"]);
    check("’kill’ it", &["crisis_0"]);
    check("don't kill's", &["crisis_0"]);
    check("ékill", &[]);
    check("killé", &[]);
    check("İkill", &[]);
    check("kill2", &[]);
    check("_kill", &[]);
    check("—KILL—", &["crisis_0"]);
    check("ıhurt", &["crisis_1"]);
    check("é hurt", &[]);
    check("éhurt", &["crisis_1"]);
    check("2hurt", &["crisis_1"]);
}

/// Issue 32: a regex whose factor is a common word (`call`) also needs a rarer piece of it
/// (`police|cops|911`) in the message before it runs, and still matches as before.
#[test]
fn issue_32_regexes_run_only_when_every_required_group_is_found() {
    let pattern = r"(call|called|calling)\s+(the\s+)?(police|cops)\s+on\s+(him|her|me)";
    let hir = python_case(
        &regex_syntax::ParserBuilder::new()
            .case_insensitive(true)
            .build()
            .parse(pattern)
            .unwrap(),
    );
    let Factor::AnyOf { strings, certain } = ascii_factor(&hir) else {
        panic!("no factor");
    };
    assert!(!certain);
    let groups = required_groups(&hir, &strings, &Rarity::new(MIN_GROUP_LEN));
    let text = |g: Vec<Vec<u8>>| -> Vec<String> {
        g.into_iter()
            .map(|s| String::from_utf8(s).unwrap())
            .collect()
    };
    // The factor and one more group (`him|her|me` is too short to be one).
    let mut all: Vec<Vec<String>> = std::iter::once(strings).chain(groups).map(text).collect();
    all.sort();
    assert_eq!(all, [vec!["call"], vec!["cops", "police"]]);

    let m = PatternMatcher::new(&rules_from(&[pattern], &[(&["police"], false)])).unwrap();
    let check = |message: &str, expect: &[&str]| {
        assert_eq!(m.matched_entities(message), expect, "{message:?}");
    };
    check("I CALLED   the Police on him", &["crisis_0", "kw_0"]);
    check("she is calling cops on me\tagain", &["crisis_0"]);
    check("did you call your mom", &[]);
    check("the police on him, call me", &["kw_0"]);
    check("call\u{a0}the police on him, café", &["crisis_0", "kw_0"]);
}

#[test]
fn factors_are_rare_literals_every_match_needs() {
    let factor = |pattern: &str| {
        let hir = regex_syntax::ParserBuilder::new()
            .case_insensitive(true)
            .build()
            .parse(pattern)
            .unwrap();
        match ascii_factor(&python_case(&hir)) {
            Factor::AnyOf { strings, certain } => {
                let strings: Vec<String> = strings
                    .into_iter()
                    .map(|s| String::from_utf8(s).unwrap())
                    .collect();
                format!("{}{strings:?}", if certain { "=" } else { "~" })
            }
            Factor::Never => "never".to_owned(),
            Factor::Unknown => "unknown".to_owned(),
        }
    };
    // "=": the strings are the regex's matches; "~": every match contains one.
    assert_eq!(
        factor("better off (dead|without me)"),
        r#"=["better off dead", "better off without me"]"#
    );
    assert_eq!(
        factor("(not|don't|dont) feel safe"),
        r#"=["don't feel safe", "dont feel safe", "not feel safe"]"#
    );
    assert_eq!(
        factor("can'?t (go on|take it|do this) anymore"),
        concat!(
            r#"=["can't do this anymore", "can't go on anymore", "can't take it anymore", "#,
            r#""cant do this anymore", "cant go on anymore", "cant take it anymore"]"#
        )
    );
    assert_eq!(factor(r"can'?t\s+go on"), r#"~["go on"]"#);
    assert_eq!(factor(r"\bKILL\b"), r#"~["kill"]"#);
    assert_eq!(factor(r"(?-i:ID)\s+theft"), r#"~["theft"]"#);
    assert_eq!(factor("(?-i:kill)"), r#"~["kill"]"#);
    assert_eq!(factor("[a-z]ill"), r#"~["ill"]"#);
    assert_eq!(factor("k[aeio]ll"), r#"=["kall", "kell", "kill", "koll"]"#);
    assert_eq!(factor("(?-i:k[aA]ll)"), r#"~["kall"]"#);
    assert_eq!(
        factor(r"(he|she) (hit|choked)( me)?\b"),
        r#"~["he choked", "he hit", "she choked", "she hit"]"#
    );
    assert_eq!(factor("café|naïve"), "never");
    assert_eq!(factor(r"\d+"), "unknown");
    assert_eq!(factor("no(pe)?"), "unknown");
}

// ---- The optimised matcher against a naive one, on generated rules and messages --------

use assay_core::bank::{CrisisPattern, KeywordBoost};

/// The seed's loop, naively: each rule's own regex (case-insensitive, with Python's `İ`/`ı`
/// ~ `i` modelled by mapping them to `i` in the message), keywords as substrings of the
/// lower-cased message (`whole_word`: at some occurrence with no word character around).
struct Naive<'r> {
    rules: &'r PatternRules,
    regexes: Vec<regex::Regex>,
}

impl<'r> Naive<'r> {
    fn new(rules: &'r PatternRules) -> Naive<'r> {
        let regexes = rules
            .crisis_patterns
            .iter()
            .map(|rule| {
                regex::RegexBuilder::new(&rule.pattern)
                    .case_insensitive(true)
                    .build()
                    .unwrap()
            })
            .collect();
        Naive { rules, regexes }
    }

    fn matched_entities(&self, message: &str) -> Vec<String> {
        let python_i: String = message
            .chars()
            .map(|c| if matches!(c, 'İ' | 'ı') { 'i' } else { c })
            .collect();
        let mut out: Vec<String> = Vec::new();
        let mut add = |id: &String| {
            if !out.contains(id) {
                out.push(id.clone());
            }
        };
        for (rule, regex) in self.rules.crisis_patterns.iter().zip(&self.regexes) {
            if regex.is_match(&python_i) {
                rule.entities.iter().for_each(&mut add);
            }
        }
        let lower = message.to_lowercase();
        for boost in &self.rules.keyword_boosts {
            let found = boost.keywords.iter().any(|k| {
                let k = k.to_lowercase();
                lower.char_indices().any(|(i, _)| {
                    lower[i..].starts_with(&k)
                        && (!boost.whole_word || whole_word_at(&lower, i, i + k.len()))
                })
            });
            if found {
                add(&boost.entity);
            }
        }
        out
    }
}

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Words the generated rules are built from; messages use them and their neighbours.
const RULE_WORDS: &[&str] = &[
    "kill",
    "die",
    "hurt",
    "myself",
    "safe",
    "feel",
    "want",
    "being",
    "hit",
    "anymore",
    "go",
    "on",
    "can't",
    "cant",
    "not",
    "better",
    "off",
    "dead",
    "pills",
    "gun",
    "threatened",
    "choked",
    "passport",
    "phone",
    "stalking",
    "me",
    "us",
    "he",
    "she",
    "im",
    "i'm",
    "done",
    "gray",
    "rock",
    "biff",
    "boundary",
    "boundaries",
    "alienation",
    "café",
    "naïve",
    "résumé",
    "straße",
];
const EXTRA_WORDS: &[&str] = &[
    "KİLL",
    "dıe",
    "İ",
    "ı",
    "I",
    "i",
    "é",
    "É",
    "ékill",
    "killé",
    "kill’s",
    "’",
    "'",
    "—",
    "3",
    "12",
    "kill2",
    "_kill",
    "KILL",
    "Kill",
    "WANT",
    "TO",
    "to",
    "the",
    "a",
    "and",
    "pickup",
    "emma",
    "soccer",
    "ok",
    "alienations",
    "boundaryless",
    "GRAY",
    "ROCK",
    "gray-rock",
    "CAFÉ",
    "STRASSE",
    "K",
    "ſafe",
    "x",
    "",
    "all",
    "OK",
];
const SEPARATORS: &[&str] = &[
    " ", " ", " ", " ", "", "'", "’", "-", ", ", ". ", "\t", "\u{a0}", " é ", " — ",
];

fn message(rng: &mut Rng, rules: &PatternRules) -> String {
    let mut words: Vec<String> = Vec::new();
    for _ in 0..=rng.below(16) {
        let word = if rng.chance(60) {
            rng.pick(RULE_WORDS)
        } else {
            rng.pick(EXTRA_WORDS)
        };
        words.push(word.to_owned());
    }
    // Sometimes a keyword, as written in a rule, somewhere in the message.
    if rng.chance(25) && !rules.keyword_boosts.is_empty() {
        let boost = &rules.keyword_boosts[rng.below(rules.keyword_boosts.len())];
        let keyword = &boost.keywords[rng.below(boost.keywords.len())];
        let at = rng.below(words.len() + 1);
        words.insert(at, keyword.clone());
    }
    let mut text = String::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            text.push_str(rng.pick(SEPARATORS));
        }
        // Non-ASCII look-alikes that case-insensitive matching or lower-casing can turn
        // into ASCII letters (dotted and dotless i, long s, the Kelvin sign).
        let word = match rng.below(14) {
            0 => word.to_uppercase(),
            1 => word.replace('i', "İ"),
            2 => word.replace('i', "ı"),
            3 => word.replace('s', "ſ"),
            4 => word.replace('k', "\u{212a}"),
            _ => word.clone(),
        };
        text.push_str(&word);
    }
    text
}

fn crisis_regex(rng: &mut Rng) -> String {
    let mut word = || {
        let w = rng.pick(RULE_WORDS);
        regex::escape(w)
    };
    let (a, b, c) = (word(), word(), word());
    let mut rx = match rng.below(12) {
        0 => format!("{a} {b}"),
        1 => format!("({a}|{b}) {c}"),
        2 => format!("{a}( {b})? {c}"),
        3 => format!(r"\b{a}\b"),
        4 => format!(r"{a}\s+{b}"),
        5 => format!("{a}[- ]?{b}"),
        6 => format!("{a}.{{0,6}}{b}"),
        7 => format!(r"\d+ {a}"),
        8 => format!("[a-z]+ {a}"),
        9 => format!(r"\b{a}'?s?\b"),
        10 => format!(r"(?:{a}|{b})\B"),
        _ => format!("^{a}|{b}$"),
    };
    if rng.chance(15) {
        rx = format!(r"\b{rx}\b");
    }
    rx
}

fn keyword_rules(rng: &mut Rng, groups: usize) -> Vec<KeywordBoost> {
    (0..groups)
        .map(|i| {
            let keywords = (0..=rng.below(3))
                .map(|_| {
                    let mut k = rng.pick(RULE_WORDS).to_owned();
                    if rng.chance(40) {
                        k = format!("{k}{}{}", rng.pick(&[" ", "-", ""]), rng.pick(RULE_WORDS));
                    }
                    if rng.chance(10) {
                        k = k.to_uppercase();
                    }
                    k
                })
                .collect();
            KeywordBoost {
                keywords,
                entity: format!("kw_{}", i % (groups - groups / 20)),
                whole_word: rng.chance(15),
            }
        })
        .collect()
}

fn large_rules(rng: &mut Rng) -> PatternRules {
    let mut rules = seed_rules();
    while rules.crisis_patterns.len() < 150 {
        let i = rules.crisis_patterns.len();
        rules.crisis_patterns.push(CrisisPattern {
            pattern: crisis_regex(rng),
            entities: vec![format!("crisis_{i}"), "handler_crisis".to_owned()],
            is_critical: true,
        });
    }
    rules.keyword_boosts.extend(keyword_rules(rng, 400));
    rules
}

fn assert_same_as_naive(rules: &PatternRules, rng: &mut Rng, messages: usize) {
    let m = PatternMatcher::new(rules).unwrap();
    let naive = Naive::new(rules);
    let mut fired = 0;
    for _ in 0..messages {
        let text = message(rng, rules);
        let got = m.matched_entities(&text);
        assert_eq!(got, naive.matched_entities(&text), "message {text:?}");
        fired += usize::from(!got.is_empty());
        let details = m.match_message(&text);
        assert_eq!(details.entities, got, "message {text:?}");
    }
    // The generator must exercise both outcomes.
    assert!(
        fired > messages / 10 && fired < messages,
        "{fired} of {messages} fired"
    );
}

#[test]
fn same_entities_as_naive_with_seed_like_rules() {
    let mut rules = seed_rules();
    rules.crisis_patterns.extend(
        [
            r"\bkill(ed|ing)?\b",
            r"\bi'?m (so )?done\b",
            r"\b\d+ pills\b",
            r"k[^i]ll",
            r"[a-z]+ me\b",
            r"\Bdie",
            r"^(he|she) .{0,20}gun",
            // Case-sensitive parts: their factors are not certain.
            r"(?-i:OK) (kill|die)",
            r"(?-i:[a-c])ll me",
        ]
        .into_iter()
        .enumerate()
        .map(|(i, p)| CrisisPattern {
            pattern: p.to_owned(),
            entities: vec![format!("extra_{i}")],
            is_critical: true,
        }),
    );
    rules.keyword_boosts.push(KeywordBoost {
        keywords: vec!["Café".into(), "STRASSE".into(), "straße".into()],
        entity: "non_ascii".into(),
        whole_word: false,
    });
    rules.keyword_boosts.push(KeywordBoost {
        keywords: vec!["can't".into(), "i'm done".into()],
        entity: "apostrophes".into(),
        whole_word: true,
    });
    assert_same_as_naive(&rules, &mut Rng(0x5eed_0001), 4000);
}

#[test]
fn same_entities_as_naive_with_generated_large_rules() {
    let mut rng = Rng(0x5eed_0002);
    let rules = large_rules(&mut rng);
    assert_same_as_naive(&rules, &mut rng, 3000);
}

#[test]
fn normalising_catches_folded_evasions_and_nothing_else() {
    let plain = matcher();
    let hard = matcher().normalising(true);
    assert!(hard.normalises() && !plain.normalises());
    for evasion in [
        "I want to еnd it",      // Cyrillic е
        "i want to die\u{200B}", // harmless zero-width at the end: fires either way
        "I want to d\u{200B}ie", // zero-width inside the word
        "I want to ｄｉｅ",      // full-width letters
        "I want to d.i.e",       // dotted letters
        "I want to d-i-e",       // hyphenated letters
        "I want...to...die",     // punctuation between words
        "want   to\n\ndie",      // runs of whitespace
        "i want to dïé",         // diacritics (every rule is ASCII)
    ] {
        assert!(
            !hard.match_message(evasion).crisis_matches.is_empty(),
            "normalised matcher missed {evasion:?}"
        );
    }
    assert!(
        plain
            .match_message("I want to d.i.e")
            .crisis_matches
            .is_empty()
    );
    // The matched text is the folded one.
    assert_eq!(
        hard.match_message("I want to d.i.e").crisis_matches[0].matched_text,
        "want to die"
    );
    // Ordinary messages fire what they fired before, no more.
    for message in [
        "I'm dying to know when the pick-up is",
        "This schedule is killing me.",
        "w.a.n.t.e.d: a new co-parenting plan",
        "Can you explain gray rock?",
    ] {
        assert_eq!(
            hard.match_message(message),
            plain.match_message(message),
            "{message:?}"
        );
    }
}
