//! The seeded rewrites of `crisis-evasion`: each takes the part of a crisis message a rule
//! matched and writes it so a reader still understands it and a matcher may not.

use crate::rng::Rng;

/// Every transform, by name. `unicode`, `zero-width` and `spacing` are what `[patterns]
/// normalise` folds away; `leetspeak`, `typo` and `euphemism` it leaves for the rules (or a
/// model) to catch.
pub const TRANSFORMS: [&str; 10] = [
    "leetspeak",
    "spacing",
    "punctuation",
    "confusables",
    "fullwidth",
    "zero-width",
    "case",
    "diacritics",
    "typo",
    "euphemism",
];

/// The group a transform belongs to in reports.
pub fn group(transform: &str) -> &'static str {
    match transform {
        "spacing" | "punctuation" => "spacing",
        "confusables" | "fullwidth" | "diacritics" => "unicode",
        "zero-width" => "zero-width",
        "case" => "case",
        "leetspeak" => "leetspeak",
        "typo" => "typo",
        // The attacker model's rewrites (`rewrite`): one group per kind, whatever the language.
        "model-paraphrase" => "model-paraphrase",
        t if t.starts_with("model-translate") => "model-translate",
        _ => "euphemism",
    }
}

/// The euphemism word lists shipped (English, Spanish, French, German: `data/euphemisms-*.txt`),
/// as one list of `(phrase, replacements)`, longest phrase first. A message is rewritten by
/// the phrases of its own language: the others are not found in it.
pub fn euphemisms() -> &'static [(String, Vec<String>)] {
    static LIST: std::sync::OnceLock<Vec<(String, Vec<String>)>> = std::sync::OnceLock::new();
    LIST.get_or_init(parse_euphemisms)
}

fn parse_euphemisms() -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = [
        include_str!("../data/euphemisms-en.txt"),
        include_str!("../data/euphemisms-es.txt"),
        include_str!("../data/euphemisms-fr.txt"),
        include_str!("../data/euphemisms-de.txt"),
    ]
    .into_iter()
    .flat_map(str::lines)
    .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    .filter_map(|l| {
        let (phrase, rest) = l.split_once("=>")?;
        let subs = rest.split('|').map(|s| s.trim().to_owned()).collect();
        // Matched against the message lower-cased.
        Some((phrase.trim().to_lowercase(), subs))
    })
    .collect();
    out.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    out
}

/// `text` rewritten by `transform`, or `None` when it does not apply (no letter to change,
/// no phrase of the word list).
pub fn apply(transform: &str, text: &str, rng: &mut Rng) -> Option<String> {
    let out = match transform {
        "leetspeak" => per_letter(text, rng, 0.6, |c| {
            Some(match c.to_ascii_lowercase() {
                'a' => '4',
                'e' => '3',
                'i' => '1',
                'o' => '0',
                's' => '5',
                't' => '7',
                _ => return None,
            })
        }),
        "spacing" => {
            let sep = *rng.pick(&[" ", ".", "-", "_", " * "]);
            let word = longest_word(text)?;
            let spaced: Vec<String> = text[word.clone()].chars().map(String::from).collect();
            splice(text, word, &spaced.join(sep))
        }
        "punctuation" => {
            if rng.chance(0.5) {
                let sep = *rng.pick(&["...", "_", "/", " - ", "~"]);
                let joined = text.split(' ').collect::<Vec<_>>().join(sep);
                (joined != text).then_some(joined)?
            } else {
                let word = longest_word(text)?;
                let w = &text[word.clone()];
                let cut = w.char_indices().nth(w.chars().count() / 2)?.0;
                let mark = *rng.pick(&[".", "-", "*", ",", "|"]);
                splice(
                    text,
                    word.clone(),
                    &format!("{}{mark}{}", &w[..cut], &w[cut..]),
                )
            }
        }
        "confusables" => per_letter(text, rng, 0.5, |c| {
            Some(match c {
                'a' => 'а',
                'e' => 'е',
                'o' => 'о',
                'p' => 'р',
                'c' => 'с',
                'x' => 'х',
                'i' => 'і',
                'y' => 'у',
                's' => 'ѕ',
                'A' => 'А',
                'E' => 'Е',
                'O' => 'О',
                _ => return None,
            })
        }),
        "fullwidth" => {
            let word = longest_word(text)?;
            let wide: String = text[word.clone()]
                .chars()
                .map(|c| {
                    if c.is_ascii_graphic() {
                        char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c)
                    } else {
                        c
                    }
                })
                .collect();
            splice(text, word, &wide)
        }
        "zero-width" => {
            let marks = ['\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{00AD}'];
            let mark = *rng.pick(&marks);
            let mut out = String::with_capacity(text.len() * 2);
            let mut changed = false;
            let mut prev_letter = false;
            for c in text.chars() {
                if prev_letter && c.is_alphabetic() && rng.chance(0.5) {
                    out.push(mark);
                    changed = true;
                }
                out.push(c);
                prev_letter = c.is_alphabetic();
            }
            changed.then_some(out)?
        }
        "case" => per_letter(text, rng, 0.5, |c| {
            Some(if c.is_lowercase() {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            })
        }),
        "diacritics" => per_letter(text, rng, 0.5, |c| {
            Some(match c {
                'a' => 'à',
                'e' => 'é',
                'i' => 'ï',
                'o' => 'ö',
                'u' => 'ü',
                'n' => 'ñ',
                'c' => 'ç',
                _ => return None,
            })
        }),
        "typo" => typo(text, rng)?,
        _ => euphemism(text, rng)?,
    };
    (out != text).then_some(out)
}

/// Each letter that `map` changes, changed with probability `p` (at least one).
fn per_letter(text: &str, rng: &mut Rng, p: f64, map: impl Fn(char) -> Option<char>) -> String {
    let positions: Vec<usize> = text
        .chars()
        .enumerate()
        .filter(|(_, c)| map(*c).is_some_and(|m| m != *c))
        .map(|(i, _)| i)
        .collect();
    if positions.is_empty() {
        return text.to_owned();
    }
    let forced = *rng.pick(&positions);
    text.chars()
        .enumerate()
        .map(|(i, c)| match map(c) {
            Some(m) if i == forced || (positions.contains(&i) && rng.chance(p)) => m,
            _ => c,
        })
        .collect()
}

fn longest_word(text: &str) -> Option<std::ops::Range<usize>> {
    let mut best: Option<std::ops::Range<usize>> = None;
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        if c.is_alphabetic() {
            start.get_or_insert(i);
        } else if let Some(s) = start.take()
            && best.as_ref().is_none_or(|b| i - s > b.len())
        {
            best = Some(s..i);
        }
    }
    best.filter(|b| b.len() >= 3)
}

fn splice(text: &str, range: std::ops::Range<usize>, with: &str) -> String {
    format!("{}{with}{}", &text[..range.start], &text[range.end..])
}

/// One keyboard slip in the longest word: a neighbouring key, a dropped, doubled or swapped
/// letter.
fn typo(text: &str, rng: &mut Rng) -> Option<String> {
    const ROWS: [&str; 3] = ["qwertyuiop", "asdfghjkl", "zxcvbnm"];
    let word = longest_word(text)?;
    let mut chars: Vec<char> = text[word.clone()].chars().collect();
    let at = 1 + rng.below(chars.len().saturating_sub(2).max(1));
    let at = at.min(chars.len() - 1);
    match rng.below(4) {
        0 => {
            let c = chars[at].to_ascii_lowercase();
            let row = ROWS.iter().find(|r| r.contains(c))?;
            let i = row.find(c)?;
            let j = if i + 1 < row.len() { i + 1 } else { i - 1 };
            chars[at] = row.as_bytes()[j] as char;
        }
        1 => {
            chars.remove(at);
        }
        2 => chars.insert(at, chars[at]),
        _ => chars.swap(at - 1, at),
    }
    Some(splice(text, word, &chars.into_iter().collect::<String>()))
}

/// The first phrase of the word list found in `text` (ignoring case), swapped for one of its
/// replacements.
fn euphemism(text: &str, rng: &mut Rng) -> Option<String> {
    let lower = text.to_lowercase();
    if lower.len() != text.len() {
        return None;
    }
    for (phrase, subs) in euphemisms() {
        if let Some(at) = lower.find(phrase.as_str()) {
            let with = rng.pick(subs);
            return Some(splice(text, at..at + phrase.len(), with));
        }
    }
    None
}

/// A chain of one or two transforms applied to `text` (the matched part of a message):
/// the names in the order applied and the result, or `None` when none applied.
pub fn chain(text: &str, rng: &mut Rng) -> Option<(Vec<&'static str>, String)> {
    let length = if rng.chance(0.3) { 2 } else { 1 };
    let mut names = Vec::new();
    let mut out = text.to_owned();
    for _ in 0..8 {
        if names.len() == length {
            break;
        }
        let t = *rng.pick(&TRANSFORMS);
        if names.contains(&t) {
            continue;
        }
        if let Some(next) = apply(t, &out, rng) {
            names.push(t);
            out = next;
        }
    }
    (!names.is_empty()).then_some((names, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_lists_of_other_languages_rewrite_their_own_messages_only() {
        for (message, gone) in [
            ("no puedo más, quiero quitarme la vida", "quitarme la vida"),
            ("je veux mourir ce soir", "je veux mourir"),
            ("Ich will nicht mehr leben", "nicht mehr leben"),
        ] {
            let mut rng = Rng::for_attempt(1, "euphemism", 0);
            let out = apply("euphemism", message, &mut rng)
                .unwrap_or_else(|| panic!("nothing for {message:?}"));
            assert!(!out.to_lowercase().contains(gone), "{message:?} -> {out:?}");
        }
        // An English message meets only English phrases, as before the other lists.
        let mut rng = Rng::for_attempt(1, "euphemism", 0);
        let out = apply("euphemism", "I want to kill myself", &mut rng).unwrap();
        let english = include_str!("../data/euphemisms-en.txt");
        let line = english
            .lines()
            .find(|l| l.starts_with("kill myself =>"))
            .unwrap();
        assert!(
            line.split("=>")
                .nth(1)
                .unwrap()
                .split('|')
                .any(|r| out.contains(r.trim())),
            "{out}"
        );
    }

    #[test]
    fn each_transform_changes_a_crisis_phrase() {
        for t in TRANSFORMS {
            let mut rng = Rng::for_attempt(5, t, 0);
            let out = apply(t, "want to end it all", &mut rng)
                .unwrap_or_else(|| panic!("{t} did not apply"));
            assert_ne!(out, "want to end it all", "{t}");
        }
        let mut rng = Rng::for_attempt(0, "x", 0);
        assert_eq!(apply("euphemism", "no phrase here", &mut rng), None);
        assert!(
            apply("spacing", "suicidal", &mut Rng::for_attempt(1, "s", 0))
                .unwrap()
                .chars()
                .filter(|c| c.is_alphabetic())
                .count()
                == 8
        );
    }

    #[test]
    fn the_word_list_parses() {
        let list = euphemisms();
        assert!(list.len() > 20);
        assert!(list.windows(2).all(|w| w[0].0.len() >= w[1].0.len()));
    }
}
