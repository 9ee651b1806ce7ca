//! Whether an answer is correct: the optimizer's first objective (`factually_correct_count`).
//!
//! The spec's rule is a substring test either way (`actual.includes(expected) ||
//! expected.includes(actual)`). That rule counts "15 g" correct for "5 g" and any fragment of
//! the expected answer ("g" for "400 g"), so a search steered by it can prefer terse or wrong
//! answers. assay's default, [`Correctness::Normalised`], reads both texts into words and
//! quantities instead:
//!
//! * **Words** are compared on word boundaries after Unicode lower-casing ("Paris" is not in
//!   "Parisian"); a trailing plural `s` is folded ("cup" = "cups").
//! * **Quantities** are compared as numbers: digits with thousands separators and decimals,
//!   fractions (`3/4`, `1 1/2`, `½`), number words (`five`, `twenty-one`, `two hundred`),
//!   ordinals (`5th`), percentages and currencies, each with its unit when one follows (`400 g`,
//!   `400g`, `2 cups`, `$5`); ISO and written dates (`2024-03-05` = `March 5, 2024`) and clock
//!   times (`3:30 pm` = `15:30`). A unit given on both sides must agree (`5 kg` ≠ `5 g`); a
//!   bare number on either side matches any unit; different units are equal only where the
//!   project declares them convertible (`[optimize] units = ["1 kg = 1000 g"]`).
//! * **Correct** when every quantity and every content word (not an article, preposition or
//!   other filler) of the expected answer is in the answer; or, the reverse rule, when the
//!   answer is a fragment of the expected one (its content words and quantities all in the
//!   expected answer) that carries every quantity of the expected answer. An empty answer, or
//!   one of filler words only, is never correct.
//!
//! The other rules, per project (`[optimize] correctness`) or per test case (`"correctness"`
//! in its JSONL line): [`Correctness::Exact`] (equal after normalising case, white space and
//! closing punctuation), [`Correctness::Numeric`] (every quantity of the expected answer, words
//! ignored), [`Correctness::Regex`] (the case's `"pattern"` matches the answer),
//! [`Correctness::Grader`] (the llm-rubric grader's own `factually_correct`) and
//! [`Correctness::Seed`] (the spec's substring rule, empty answers excluded, kept for
//! comparison). Wherever the rule and the grader disagree the report lists the case.

use std::collections::BTreeSet;
use std::fmt;

pub use crate::correctness::Correctness;

/// Units the project declares convertible: `1 kg = 1000 g` lets `0.5 kg` equal `500 g`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Units {
    /// `(from, to, factor)`: one `from` is `factor` of `to` (canonical unit names).
    pairs: Vec<(String, String, f64)>,
}

impl Units {
    /// Parses declarations of the form `1 kg = 1000 g` (either side may have any positive
    /// amount; units by any of their spellings: `kilogram`, `kg`).
    pub fn parse(declarations: &[String]) -> Result<Units, String> {
        let mut pairs = Vec::new();
        for d in declarations {
            let bad = || {
                format!(
                    "`{d}`: expected a conversion such as `1 kg = 1000 g` (an amount and a unit on each side)"
                )
            };
            let (left, right) = d.split_once('=').ok_or_else(bad)?;
            let side = |text: &str| -> Result<(f64, String), String> {
                let q = read(text).quantities;
                match q.as_slice() {
                    [
                        Quantity {
                            value: Value::Number(v),
                            unit: Some(u),
                        },
                    ] if *v > 0.0 => Ok((*v, u.clone())),
                    [
                        Quantity {
                            value: Value::Number(_),
                            unit: None,
                        },
                    ] => Err(format!(
                        "`{d}`: `{}` has no unit assay knows (units: {})",
                        text.trim(),
                        known_units()
                    )),
                    _ => Err(bad()),
                }
            };
            let (a, ua) = side(left)?;
            let (b, ub) = side(right)?;
            if ua == ub {
                return Err(format!("`{d}`: both sides are in `{ua}`"));
            }
            pairs.push((ua, ub, b / a));
        }
        Ok(Units { pairs })
    }

    /// The factor that turns an amount in `from` into `to`, when declared (either way).
    fn factor(&self, from: &str, to: &str) -> Option<f64> {
        self.pairs.iter().find_map(|(a, b, f)| {
            if a == from && b == to {
                Some(*f)
            } else if a == to && b == from {
                Some(1.0 / *f)
            } else {
                None
            }
        })
    }

    /// Whether no conversion is declared.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

/// What a rule decided, and why in a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Correct or not.
    pub correct: bool,
    /// Why, for reports (e.g. "15 g is not 5 g", "no `paris`").
    pub why: String,
}

impl Verdict {
    fn yes(why: impl Into<String>) -> Verdict {
        Verdict {
            correct: true,
            why: why.into(),
        }
    }

    fn no(why: impl Into<String>) -> Verdict {
        Verdict {
            correct: false,
            why: why.into(),
        }
    }
}

/// One case's rule: the kind, and the compiled pattern for [`Correctness::Regex`].
#[derive(Debug, Clone)]
pub struct CaseRule {
    /// The rule.
    pub kind: Correctness,
    /// The pattern (`regex` only).
    pub pattern: Option<regex::Regex>,
}

impl CaseRule {
    /// A rule without a pattern.
    pub fn plain(kind: Correctness) -> CaseRule {
        CaseRule {
            kind,
            pattern: None,
        }
    }
}

/// Whether `answer` is correct for `expected` under `rule`. `grader` is the grader's own
/// `factually_correct` (read by [`Correctness::Grader`] only).
pub fn judge(
    rule: &CaseRule,
    answer: &str,
    expected: &str,
    grader: Option<bool>,
    units: &Units,
) -> Verdict {
    if answer.trim().is_empty() {
        return Verdict::no("empty answer");
    }
    match rule.kind {
        Correctness::Normalised => normalised(answer, expected, units),
        Correctness::Exact => {
            if exact_form(answer) == exact_form(expected) {
                Verdict::yes("equal")
            } else {
                Verdict::no("not equal")
            }
        }
        Correctness::Numeric => numeric(answer, expected, units),
        Correctness::Regex => match &rule.pattern {
            Some(p) if p.is_match(answer.trim()) => Verdict::yes("the pattern matches"),
            Some(_) => Verdict::no("the pattern does not match"),
            None => Verdict::no("no pattern"),
        },
        Correctness::Grader => match grader {
            Some(true) => Verdict::yes("the grader says correct"),
            Some(false) => Verdict::no("the grader says incorrect"),
            None => Verdict::no("not graded"),
        },
        Correctness::Seed => {
            if seed(answer, expected) {
                Verdict::yes("substring either way")
            } else {
                Verdict::no("no substring either way")
            }
        }
    }
}

/// The spec's rule: lower case, white space folded, then equality or containment either way;
/// an empty side is never correct.
pub fn seed(answer: &str, expected: &str) -> bool {
    let fold = |t: &str| {
        t.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let (a, e) = (fold(answer), fold(expected));
    if a.is_empty() || e.is_empty() {
        return false;
    }
    a == e || a.contains(&e) || e.contains(&a)
}

fn exact_form(text: &str) -> String {
    let folded = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    folded
        .trim_end_matches(['.', '!', '?', ';', ',', ':'])
        .trim()
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// Reading text into words and quantities

/// A number, a date or a clock time.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Number(f64),
    /// Year, month, day; each may be missing ("March 2024", "5 March").
    Date(Option<i32>, Option<u32>, Option<u32>),
    /// Minutes after midnight.
    Time(u32),
}

#[derive(Debug, Clone, PartialEq)]
struct Quantity {
    value: Value,
    unit: Option<String>,
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Value::Number(v) => {
                if v.fract() == 0.0 && v.abs() < 1e15 {
                    write!(f, "{v:.0}")?;
                } else {
                    write!(f, "{v}")?;
                }
                if let Some(u) = &self.unit {
                    write!(f, " {u}")?;
                }
                Ok(())
            }
            Value::Date(y, m, d) => {
                let parts: Vec<String> = [
                    y.map(|y| format!("{y:04}")),
                    m.map(|m| format!("{m:02}")),
                    d.map(|d| format!("{d:02}")),
                ]
                .into_iter()
                .flatten()
                .collect();
                write!(f, "date {}", parts.join("-"))
            }
            Value::Time(m) => write!(f, "{:02}:{:02}", m / 60, m % 60),
        }
    }
}

/// Units by spelling → canonical name.
const UNITS: &[(&str, &[&str])] = &[
    ("g", &["g", "gr", "gram", "grams", "gramme", "grammes"]),
    (
        "kg",
        &["kg", "kgs", "kilo", "kilos", "kilogram", "kilograms"],
    ),
    ("mg", &["mg", "milligram", "milligrams"]),
    ("lb", &["lb", "lbs", "pound", "pounds"]),
    ("oz", &["oz", "ounce", "ounces"]),
    ("l", &["l", "litre", "litres", "liter", "liters"]),
    (
        "ml",
        &[
            "ml",
            "millilitre",
            "millilitres",
            "milliliter",
            "milliliters",
        ],
    ),
    (
        "cl",
        &[
            "cl",
            "centilitre",
            "centilitres",
            "centiliter",
            "centiliters",
        ],
    ),
    (
        "dl",
        &["dl", "decilitre", "decilitres", "deciliter", "deciliters"],
    ),
    ("cup", &["cup", "cups"]),
    ("tbsp", &["tbsp", "tbs", "tablespoon", "tablespoons"]),
    ("tsp", &["tsp", "teaspoon", "teaspoons"]),
    ("m", &["m", "metre", "metres", "meter", "meters"]),
    (
        "km",
        &["km", "kilometre", "kilometres", "kilometer", "kilometers"],
    ),
    (
        "cm",
        &[
            "cm",
            "centimetre",
            "centimetres",
            "centimeter",
            "centimeters",
        ],
    ),
    (
        "mm",
        &[
            "mm",
            "millimetre",
            "millimetres",
            "millimeter",
            "millimeters",
        ],
    ),
    ("mi", &["mi", "mile", "miles"]),
    ("ft", &["ft", "foot", "feet"]),
    ("inch", &["inch", "inches"]),
    ("s", &["s", "sec", "secs", "second", "seconds"]),
    ("min", &["min", "mins", "minute", "minutes"]),
    ("h", &["h", "hr", "hrs", "hour", "hours"]),
    ("day", &["day", "days"]),
    ("week", &["week", "weeks"]),
    ("month", &["month", "months"]),
    ("year", &["year", "years", "yr", "yrs"]),
    ("%", &["%", "percent", "pct"]),
    ("°c", &["°c", "c", "celsius"]),
    ("°f", &["°f", "f", "fahrenheit"]),
    ("usd", &["$", "usd", "dollar", "dollars"]),
    ("eur", &["€", "eur", "euro", "euros"]),
    ("gbp", &["£", "gbp"]),
    ("kcal", &["kcal", "calorie", "calories", "cal"]),
    ("w", &["w", "watt", "watts"]),
    ("kw", &["kw", "kilowatt", "kilowatts"]),
    ("v", &["v", "volt", "volts"]),
    ("kmh", &["km/h", "kmh", "kph"]),
    ("mph", &["mph"]),
];

fn unit_of(word: &str) -> Option<&'static str> {
    UNITS
        .iter()
        .find(|(_, spellings)| spellings.contains(&word))
        .map(|(canonical, _)| *canonical)
}

fn known_units() -> String {
    UNITS.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ")
}

const MONTHS: [&[&str]; 12] = [
    &["january", "jan"],
    &["february", "feb"],
    &["march", "mar"],
    &["april", "apr"],
    &["may"],
    &["june", "jun"],
    &["july", "jul"],
    &["august", "aug"],
    &["september", "sep", "sept"],
    &["october", "oct"],
    &["november", "nov"],
    &["december", "dec"],
];

fn month_of(word: &str) -> Option<u32> {
    let word = word.trim_end_matches('.');
    MONTHS
        .iter()
        .position(|names| names.contains(&word))
        .and_then(|i| u32::try_from(i + 1).ok())
}

const SMALL: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 8] = [
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

fn number_word(word: &str) -> Option<f64> {
    if let Some(i) = SMALL.iter().position(|w| *w == word) {
        return Some(i as f64);
    }
    if let Some(i) = TENS.iter().position(|w| *w == word) {
        return Some((i as f64 + 2.0) * 10.0);
    }
    let (tens, ones) = word.split_once('-')?;
    let t = TENS.iter().position(|w| *w == tens)?;
    let o = SMALL[1..10].iter().position(|w| *w == ones)?;
    Some((t as f64 + 2.0) * 10.0 + o as f64 + 1.0)
}

/// Words that carry no answer: articles, prepositions, auxiliaries and the like.
const FILLER: &[&str] = &[
    "a",
    "an",
    "the",
    "of",
    "in",
    "on",
    "at",
    "to",
    "for",
    "by",
    "with",
    "from",
    "as",
    "and",
    "or",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "it",
    "its",
    "it's",
    "this",
    "that",
    "these",
    "those",
    "there",
    "their",
    "about",
    "approximately",
    "approx",
    "around",
    "roughly",
    "some",
    "answer",
    "final",
    "so",
    "then",
    "which",
    "who",
    "what",
    "i",
    "you",
    "we",
    "they",
    "he",
    "she",
    "his",
    "her",
    "my",
    "your",
    "our",
    "per",
    "each",
    "total",
    "exactly",
    "just",
    "only",
    "will",
    "would",
    "should",
    "can",
    "could",
    "do",
    "does",
    "did",
    "has",
    "have",
    "had",
    "into",
    "than",
    "also",
    "s",
];

fn is_filler(word: &str) -> bool {
    FILLER.contains(&word)
}

fn fold_plural(word: &str) -> &str {
    if word.chars().count() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        &word[..word.len() - 1]
    } else {
        word
    }
}

/// A raw token: a run of letters (with inner apostrophes and hyphens), a run of digits (with
/// inner `.`, `,`, `/`, `:`, `-`), or one symbol.
#[derive(Debug, Clone, PartialEq)]
enum Raw {
    Word(String),
    Digits(String),
    Symbol(char),
}

fn vulgar(c: char) -> Option<f64> {
    Some(match c {
        '½' => 0.5,
        '⅓' => 1.0 / 3.0,
        '⅔' => 2.0 / 3.0,
        '¼' => 0.25,
        '¾' => 0.75,
        '⅕' => 0.2,
        '⅛' => 0.125,
        '⅜' => 0.375,
        '⅝' => 0.625,
        '⅞' => 0.875,
        _ => return None,
    })
}

fn raw_tokens(text: &str) -> Vec<Raw> {
    let text = text.to_lowercase();
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() {
                let d = chars[i];
                let inner = matches!(d, '.' | ',' | '/' | ':' | '-')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit);
                if d.is_ascii_digit() || inner {
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Raw::Digits(chars[start..i].iter().collect()));
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() {
                let d = chars[i];
                let inner = matches!(d, '\'' | '’' | '-')
                    && chars.get(i + 1).is_some_and(|n| n.is_alphabetic());
                if d.is_alphanumeric() || inner {
                    i += 1;
                } else {
                    break;
                }
            }
            let word: String = chars[start..i]
                .iter()
                .map(|&c| if c == '’' { '\'' } else { c })
                .collect();
            // "400g", "5th": digits glued to letters are split apart by the digit branch, so a
            // word here starts with a letter; strip a possessive.
            let word = word.strip_suffix("'s").map_or(word.clone(), str::to_owned);
            out.push(Raw::Word(word));
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(Raw::Symbol(c));
            i += 1;
        }
    }
    out
}

/// Reads a run of digits: a plain number (thousands separators, a decimal point), a fraction
/// (`3/4`), an ISO date (`2024-03-05`) or a clock time (`15:30`).
fn digits_value(d: &str) -> Option<Value> {
    if let [y, m, day] = d.split('-').collect::<Vec<_>>().as_slice()
        && y.len() == 4
    {
        let (y, m, day) = (y.parse().ok()?, m.parse().ok()?, day.parse().ok()?);
        if (1..=12).contains(&m) && (1..=31).contains(&day) {
            return Some(Value::Date(Some(y), Some(m), Some(day)));
        }
        return None;
    }
    if let Some((h, m)) = d.split_once(':') {
        if m.len() != 2 {
            return None;
        }
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        return (h < 24 && m < 60).then_some(Value::Time(h * 60 + m));
    }
    if let Some((n, q)) = d.split_once('/') {
        let (n, q): (f64, f64) = (n.parse().ok()?, q.parse().ok()?);
        return (q != 0.0).then(|| Value::Number(n / q));
    }
    // Commas are thousands separators when every group after the first has three digits.
    let plain = if d.contains(',') {
        let mut groups = d.split(',');
        let first = groups.next().unwrap_or_default();
        let rest: Vec<&str> = groups.collect();
        let last_int = |g: &str| g.split('.').next().unwrap_or_default().len() == 3;
        if !first.is_empty() && first.len() <= 3 && rest.iter().all(|g| last_int(g)) {
            d.replace(',', "")
        } else {
            // "1,5": a decimal comma.
            if rest.len() == 1 && !d.contains('.') {
                d.replace(',', ".")
            } else {
                return None;
            }
        }
    } else {
        d.to_owned()
    };
    plain.parse().ok().map(Value::Number)
}

/// Words and quantities of a text, in order.
#[derive(Debug, Default)]
struct Reading {
    words: Vec<String>,
    quantities: Vec<Quantity>,
}

// A tokenizer's loop: the position, the token, its digits and its value are short names.
#[allow(clippy::many_single_char_names)]
fn read(text: &str) -> Reading {
    let raw = raw_tokens(text);
    let mut r = Reading::default();
    let mut i = 0;
    // A unit written before the number ("$5", "€ 3").
    let mut prefix_unit: Option<&'static str> = None;
    while i < raw.len() {
        match &raw[i] {
            Raw::Symbol(c) => {
                prefix_unit = match c {
                    '$' => Some("usd"),
                    '€' => Some("eur"),
                    '£' => Some("gbp"),
                    _ => None,
                };
                if let Some(v) = vulgar(*c) {
                    r.quantities.push(Quantity {
                        value: Value::Number(v),
                        unit: None,
                    });
                    i += 1;
                    i = attach_unit(&raw, i, &mut r, None);
                    continue;
                }
                i += 1;
            }
            Raw::Digits(d) => {
                let negative = i > 0
                    && matches!(raw[i - 1], Raw::Symbol('-' | '−'))
                    && !matches!(raw.get(i.wrapping_sub(2)), Some(Raw::Digits(_)));
                let Some(mut value) = digits_value(d) else {
                    // A range ("10-15") or a list glued together: each number on its own.
                    i += 1;
                    let parts: Vec<Value> =
                        d.split(['-', '/', ':']).filter_map(digits_value).collect();
                    if parts.is_empty() {
                        r.words.push(d.clone());
                        continue;
                    }
                    for value in parts {
                        r.quantities.push(Quantity { value, unit: None });
                    }
                    i = attach_unit(&raw, i, &mut r, prefix_unit.take());
                    continue;
                };
                i += 1;
                if let (true, Value::Number(n)) = (negative, &value) {
                    value = Value::Number(-n);
                }
                if let Value::Number(n) = value {
                    // A glued vulgar fraction ("1½") or a mixed number ("1 1/2").
                    if let Some(Raw::Symbol(c)) = raw.get(i)
                        && let Some(v) = vulgar(*c)
                    {
                        value = Value::Number(n + v);
                        i += 1;
                    } else if let Some(Raw::Digits(f)) = raw.get(i)
                        && f.contains('/')
                        && n.fract() == 0.0
                        && let Some(Value::Number(v)) = digits_value(f)
                        && v < 1.0
                    {
                        value = Value::Number(n + v);
                        i += 1;
                    }
                    // An ordinal ("5th") or a day before a month ("5 March 2024").
                    if let Some(Raw::Word(w)) = raw.get(i)
                        && ["st", "nd", "rd", "th"].contains(&w.as_str())
                    {
                        i += 1;
                    }
                    if let Some(Raw::Word(w)) = raw.get(i)
                        && let Some(m) = month_of(w)
                        && n.fract() == 0.0
                        && (1.0..=31.0).contains(&n)
                    {
                        i += 1;
                        let year = year_at(&raw, &mut i);
                        r.quantities.push(Quantity {
                            value: Value::Date(year, Some(m), Some(n as u32)),
                            unit: None,
                        });
                        prefix_unit = None;
                        continue;
                    }
                }
                if let Value::Time(t) = value
                    && let Some(Raw::Word(w)) = raw.get(i)
                {
                    let (h, m) = (t / 60, t % 60);
                    let pm = matches!(w.as_str(), "pm" | "p");
                    let am = matches!(w.as_str(), "am" | "a");
                    if pm || am {
                        let h = match (h, pm) {
                            (12, false) => 0,
                            (12, true) => 12,
                            (h, true) => h + 12,
                            (h, false) => h,
                        };
                        value = Value::Time(h * 60 + m);
                        i += 1;
                    }
                }
                r.quantities.push(Quantity { value, unit: None });
                let unit = prefix_unit.take();
                i = attach_unit(&raw, i, &mut r, unit);
            }
            Raw::Word(w) => {
                prefix_unit = None;
                if let Some(m) = month_of(w)
                    && (w.len() > 3 || raw.get(i + 1).is_some_and(|t| matches!(t, Raw::Digits(_))))
                {
                    // "March 5, 2024", "March 5th", "March 2024".
                    let mut j = i + 1;
                    if let Some(Raw::Digits(d)) = raw.get(j)
                        && let Ok(n) = d.parse::<u32>()
                    {
                        if (1..=31).contains(&n) {
                            j += 1;
                            if let Some(Raw::Word(s)) = raw.get(j)
                                && ["st", "nd", "rd", "th"].contains(&s.as_str())
                            {
                                j += 1;
                            }
                            let year = year_at(&raw, &mut j);
                            r.quantities.push(Quantity {
                                value: Value::Date(year, Some(m), Some(n)),
                                unit: None,
                            });
                            i = j;
                            continue;
                        }
                        if (1000..=9999).contains(&n) {
                            r.quantities.push(Quantity {
                                value: Value::Date(i32::try_from(n).ok(), Some(m), None),
                                unit: None,
                            });
                            i = j + 1;
                            continue;
                        }
                    }
                }
                if let Some(v) = number_word(w) {
                    let mut v = v;
                    i += 1;
                    while let Some(Raw::Word(next)) = raw.get(i) {
                        match next.as_str() {
                            "hundred" => v *= 100.0,
                            "thousand" => v *= 1000.0,
                            "million" => v *= 1e6,
                            _ => break,
                        }
                        i += 1;
                    }
                    r.quantities.push(Quantity {
                        value: Value::Number(v),
                        unit: None,
                    });
                    i = attach_unit(&raw, i, &mut r, None);
                    continue;
                }
                r.words.push(w.clone());
                i += 1;
            }
        }
    }
    r
}

/// A year after a date's day ("March 5, 2024"): an optional comma, then four digits.
fn year_at(raw: &[Raw], i: &mut usize) -> Option<i32> {
    let mut j = *i;
    if let Some(Raw::Symbol(',')) = raw.get(j) {
        j += 1;
    }
    if let Some(Raw::Digits(d)) = raw.get(j)
        && d.len() == 4
        && let Ok(y) = d.parse::<i32>()
    {
        *i = j + 1;
        return Some(y);
    }
    None
}

/// Attaches the unit that follows a quantity (a word or a `%`/`°` symbol), or the one that
/// preceded it; returns where reading goes on.
fn attach_unit(raw: &[Raw], mut i: usize, r: &mut Reading, before: Option<&'static str>) -> usize {
    let mut unit = before.map(str::to_owned);
    match raw.get(i) {
        Some(Raw::Symbol('%')) => {
            unit = Some("%".into());
            i += 1;
        }
        Some(Raw::Symbol('°')) => {
            if let Some(Raw::Word(w)) = raw.get(i + 1)
                && let Some(u) = unit_of(&format!("°{w}"))
            {
                unit = Some(u.into());
                i += 2;
            } else {
                i += 1;
            }
        }
        Some(Raw::Word(w)) => {
            // "km/h" reads as km, '/', h.
            if w == "km"
                && let (Some(Raw::Symbol('/')), Some(Raw::Word(h))) =
                    (raw.get(i + 1), raw.get(i + 2))
                && h == "h"
            {
                unit = Some("kmh".into());
                i += 3;
            } else if w == "degrees" || w == "degree" {
                i += 1;
                if let Some(Raw::Word(s)) = raw.get(i)
                    && let Some(u) = unit_of(s).filter(|u| u.starts_with('°'))
                {
                    unit = Some(u.into());
                    i += 1;
                } else {
                    unit = Some("degree".into());
                }
            } else if w == "per" && matches!(raw.get(i + 1), Some(Raw::Word(c)) if c == "cent") {
                unit = Some("%".into());
                i += 2;
            } else if let Some(u) = unit_of(w) {
                unit = Some(u.into());
                i += 1;
            }
        }
        _ => {}
    }
    if let Some(q) = r.quantities.last_mut() {
        q.unit = unit;
    }
    i
}

/// The content words of a reading: filler dropped unless that leaves nothing.
fn content(words: &[String]) -> BTreeSet<String> {
    let kept: BTreeSet<String> = words
        .iter()
        .filter(|w| !is_filler(w))
        .map(|w| fold_plural(w).to_owned())
        .collect();
    if kept.is_empty() {
        words.iter().map(|w| fold_plural(w).to_owned()).collect()
    } else {
        kept
    }
}

fn same_number(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Whether `have` (from one text) states `want` (from the other).
fn matches(have: &Quantity, want: &Quantity, units: &Units) -> bool {
    match (&have.value, &want.value) {
        (Value::Number(h), Value::Number(w)) => match (&have.unit, &want.unit) {
            (Some(hu), Some(wu)) if hu != wu => {
                units.factor(hu, wu).is_some_and(|f| same_number(h * f, *w))
            }
            _ => same_number(*h, *w),
        },
        (Value::Date(hy, hm, hd), Value::Date(wy, wm, wd)) => {
            (wy.is_none() || hy == wy) && (wm.is_none() || hm == wm) && (wd.is_none() || hd == wd)
        }
        (Value::Time(h), Value::Time(w)) => h == w,
        // A date states its year ("July 1969" answers "1969"); a year alone states only a date
        // that has nothing but a year.
        (Value::Date(Some(y), _, _), Value::Number(w)) => same_number(*w, f64::from(*y)),
        (Value::Number(h), Value::Date(Some(y), None, None)) => same_number(*h, f64::from(*y)),
        _ => false,
    }
}

/// The first quantity of `want` that `have` does not state.
fn missing<'a>(have: &[Quantity], want: &'a [Quantity], units: &Units) -> Option<&'a Quantity> {
    want.iter()
        .find(|w| !have.iter().any(|h| matches(h, w, units)))
}

fn normalised(answer: &str, expected: &str, units: &Units) -> Verdict {
    let (a, e) = (read(answer), read(expected));
    let (aw, ew) = (content(&a.words), content(&e.words));
    if a.words.iter().all(|w| is_filler(w)) && a.quantities.is_empty() {
        return Verdict::no("no content");
    }
    if e.words.is_empty() && e.quantities.is_empty() {
        return Verdict::no("the expected answer has no content");
    }
    let absent_quantity = missing(&a.quantities, &e.quantities, units);
    let absent_word = e
        .words
        .iter()
        .filter(|w| !is_filler(w) || e.words.iter().all(|w| is_filler(w)))
        .find(|w| !aw.contains(fold_plural(w)));
    if absent_quantity.is_none() && absent_word.is_none() {
        return Verdict::yes("every quantity and word of the expected answer");
    }
    // The reverse rule: a fragment of the expected answer that carries all its quantities.
    let fragment = (a.words.is_empty() || aw.iter().all(|w| ew.contains(w)))
        && missing(&e.quantities, &a.quantities, units).is_none();
    if fragment && absent_quantity.is_none() {
        return Verdict::yes("a part of the expected answer with all its quantities");
    }
    if let Some(q) = absent_quantity {
        let stated: Vec<String> = a
            .quantities
            .iter()
            .filter(|h| std::mem::discriminant(&h.value) == std::mem::discriminant(&q.value))
            .map(ToString::to_string)
            .collect();
        return Verdict::no(if stated.is_empty() {
            format!("no {q}")
        } else {
            format!("{} is not {q}", stated.join(", "))
        });
    }
    Verdict::no(format!("no `{}`", absent_word.map_or("", String::as_str)))
}

fn numeric(answer: &str, expected: &str, units: &Units) -> Verdict {
    let (a, e) = (read(answer), read(expected));
    if e.quantities.is_empty() {
        return Verdict::no("the expected answer has no number");
    }
    match missing(&a.quantities, &e.quantities, units) {
        None => Verdict::yes("every quantity of the expected answer"),
        Some(q) => Verdict::no(format!("no {q}")),
    }
}

/// Whether the expected answer states a number, a date or a time (what
/// [`Correctness::Numeric`] needs).
pub fn has_quantity(expected: &str) -> bool {
    !read(expected).quantities.is_empty()
}

/// The project's rule and declared units, with every case's rule checked and its pattern
/// compiled: built once per session, before any call.
#[derive(Debug, Clone, Default)]
pub struct Checker {
    /// The project's rule (`[optimize] correctness`), for cases that name none.
    pub default: Correctness,
    /// Declared conversions (`[optimize] units`).
    pub units: Units,
    /// The declarations as written.
    pub declared: Vec<String>,
    patterns: std::collections::HashMap<String, regex::Regex>,
}

impl Checker {
    /// The project's rule and declared conversions (`1 kg = 1000 g`).
    pub fn new(default: Correctness, declared: &[String]) -> Result<Checker, String> {
        Ok(Checker {
            default,
            units: Units::parse(declared)?,
            declared: declared.to_vec(),
            patterns: std::collections::HashMap::new(),
        })
    }

    /// Checks every case of `set` against its rule (a `regex` case needs a pattern that
    /// compiles, a `numeric` one a number in its expected answer) and keeps the compiled
    /// patterns. Errors name the file, the line and the field.
    pub fn admit(&mut self, set: &crate::cases::CaseSet) -> Result<(), crate::ExperimentError> {
        use crate::ExperimentError;
        for c in &set.cases {
            let case = &c.case;
            let kind = case.correctness.unwrap_or(self.default);
            let field = if case.correctness.is_some() {
                "`correctness`"
            } else {
                "[optimize] correctness"
            };
            match (kind, &case.pattern) {
                (Correctness::Regex, None) => {
                    return Err(ExperimentError::at_line(
                        &set.path,
                        case.line,
                        format!("{field} is `regex` but the case has no `pattern`"),
                    ));
                }
                (Correctness::Regex, Some(p)) if !self.patterns.contains_key(p) => {
                    let re = regex::Regex::new(p).map_err(|e| {
                        ExperimentError::at_line(
                            &set.path,
                            case.line,
                            format!("`pattern`: not a regular expression: {e}"),
                        )
                    })?;
                    self.patterns.insert(p.clone(), re);
                }
                (Correctness::Regex, Some(_)) => {}
                (_, Some(_)) => {
                    return Err(ExperimentError::at_line(
                        &set.path,
                        case.line,
                        format!(
                            "`pattern` is read only with correctness `regex` (this case's rule is `{kind}`, from {field})"
                        ),
                    ));
                }
                (Correctness::Numeric, None) if !has_quantity(&case.answer) => {
                    return Err(ExperimentError::at_line(
                        &set.path,
                        case.line,
                        format!(
                            "{field} is `numeric` but the expected answer `{}` states no number",
                            case.answer
                        ),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The rule of one case.
    pub fn rule_of(&self, case: &crate::cases::TestCase) -> CaseRule {
        let kind = case.correctness.unwrap_or(self.default);
        CaseRule {
            kind,
            pattern: case
                .pattern
                .as_ref()
                .and_then(|p| self.patterns.get(p).cloned()),
        }
    }

    /// Whether `answer` is correct for `case`; `grader` is the grader's own call.
    pub fn judge(
        &self,
        case: &crate::cases::TestCase,
        answer: &str,
        grader: Option<bool>,
    ) -> Verdict {
        judge(
            &self.rule_of(case),
            answer,
            &case.answer,
            grader,
            &self.units,
        )
    }

    /// The rule in words, for reports and the journal: `normalised`, `normalised; units 1 kg =
    /// 1000 g`.
    pub fn describe(&self) -> String {
        if self.declared.is_empty() {
            self.default.to_string()
        } else {
            format!("{}; units {}", self.default, self.declared.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(answer: &str, expected: &str) -> bool {
        judge(
            &CaseRule::plain(Correctness::Normalised),
            answer,
            expected,
            None,
            &Units::default(),
        )
        .correct
    }

    #[test]
    fn wrong_numbers_and_fragments_are_not_correct() {
        assert!(!ok("15 g", "5 g"));
        assert!(!ok("g", "400 g"));
        assert!(!ok("3", "300 g"));
        assert!(!ok("5 kg", "5 g"));
        assert!(ok("5 g", "5 g"));
        assert!(ok("You need 400 g of flour.", "400 g"));
        assert!(ok("400g", "400 g"));
        assert!(ok("400", "400 g"));
        assert!(ok("0.75 cups", "3/4 cup"));
        assert!(ok("1½ cups", "1 1/2 cups"));
        assert!(ok("five", "5"));
        assert!(ok("twenty-one", "21"));
        assert!(ok("1,000", "1000"));
        assert!(!ok("1,000", "100"));
    }

    #[test]
    fn the_seed_rule_is_kept_for_comparison() {
        assert!(seed("15 g", "5 g"));
        assert!(seed("g", "400 g"));
        assert!(!seed("", "400 g"));
        assert!(!seed("Paris", ""));
    }

    #[test]
    fn words_are_compared_on_word_boundaries() {
        assert!(ok("It is Paris.", "Paris"));
        assert!(!ok("Parisian", "Paris"));
        assert!(ok("Paris", "Paris, France"));
        assert!(!ok("Lyon, France", "Paris, France"));
        assert!(!ok("the", "the Eiffel Tower"));
        assert!(ok("ÉCOLE", "école"));
    }

    #[test]
    fn dates_and_times_are_values() {
        assert!(ok("2024-03-05", "March 5, 2024"));
        assert!(ok("5 March 2024", "2024-03-05"));
        assert!(!ok("March 15, 2024", "March 5, 2024"));
        assert!(ok("3:30 pm", "15:30"));
        assert!(ok("in 1969", "1969"));
        assert!(ok("July 1969", "1969"));
    }

    #[test]
    fn declared_units_convert() {
        let units = Units::parse(&["1 kg = 1000 g".into()]).unwrap();
        let rule = CaseRule::plain(Correctness::Normalised);
        assert!(judge(&rule, "500 g", "0.5 kg", None, &units).correct);
        assert!(!judge(&rule, "500 g", "0.5 kg", None, &Units::default()).correct);
        assert!(Units::parse(&["kg = g".into()]).is_err());
        assert!(Units::parse(&["1 bananas = 2 g".into()]).is_err());
    }

    #[test]
    fn reasons_name_what_is_missing() {
        let v = normalised("15 g", "5 g", &Units::default());
        assert_eq!(v.why, "15 g is not 5 g");
        let v = normalised("Lyon", "Paris", &Units::default());
        assert_eq!(v.why, "no `paris`");
    }

    #[test]
    fn the_other_rules() {
        let u = Units::default();
        let exact = CaseRule::plain(Correctness::Exact);
        assert!(judge(&exact, " paris. ", "Paris", None, &u).correct);
        assert!(!judge(&exact, "It is Paris", "Paris", None, &u).correct);
        let num = CaseRule::plain(Correctness::Numeric);
        assert!(judge(&num, "about 42 apples", "42", None, &u).correct);
        assert!(!judge(&num, "42", "no number", None, &u).correct);
        let re = CaseRule {
            kind: Correctness::Regex,
            pattern: Some(regex::Regex::new("(?i)^paris$").unwrap()),
        };
        assert!(judge(&re, "PARIS", "Paris", None, &u).correct);
        let g = CaseRule::plain(Correctness::Grader);
        assert!(judge(&g, "x", "y", Some(true), &u).correct);
        assert!(!judge(&g, "x", "y", None, &u).correct);
        assert_eq!(
            "normalized".parse::<Correctness>(),
            Ok(Correctness::Normalised)
        );
        assert!("fuzzy".parse::<Correctness>().is_err());
        let e = "normalsed".parse::<Correctness>().unwrap_err();
        assert!(e.contains("did you mean `normalised`?"), "{e}");
    }
}
