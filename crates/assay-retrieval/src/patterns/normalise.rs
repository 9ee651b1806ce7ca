//! `[patterns] normalise`: the views of a message a hardened matcher reads, so that a crisis
//! written to dodge the rules (look-alike letters, invisible characters, letters spaced or
//! dotted apart) still fires.
//!
//! The first view is the message folded: Unicode NFKC (full-width and mathematical letters,
//! ligatures), look-alike letters of other scripts folded to the Latin ones they imitate,
//! typographic quotes and dashes to ASCII, invisible characters (zero-width, joiners, soft
//! hyphens, direction marks, variation selectors, tag characters) removed, diacritics removed
//! when no crisis rule needs one, every run of separators (punctuation other than the
//! apostrophe, whitespace) collapsed into one space, and runs of three or more single letters
//! (`s u i c i d e`) joined into the word they spell. The second view also deletes a separator
//! that sits alone between two letters (`sui.cide`, `end-my-life` reads `endmylife` there, and
//! `end my life` in the first view). A rule fires when it fires on the message or on a view.
//! Leetspeak is left alone: a digit is too often a digit.

use unicode_normalization::UnicodeNormalization;

/// The views of `message` to match besides the message itself (none when folding changes
/// nothing). `fold_marks`: remove combining marks (diacritics).
pub(super) fn views(message: &str, fold_marks: bool) -> Vec<String> {
    let folded = fold(message, fold_marks);
    let first = separators(&folded, false);
    let second = separators(&folded, true);
    let mut out = Vec::with_capacity(2);
    for view in [first, second] {
        if view != message && !out.contains(&view) {
            out.push(view);
        }
    }
    out
}

/// NFKC, look-alikes, invisible characters and (with `fold_marks`) diacritics.
fn fold(message: &str, fold_marks: bool) -> String {
    let mut out = String::with_capacity(message.len());
    let base: String = if fold_marks {
        message
            .nfkd()
            .filter(|c| !is_mark(*c))
            .collect::<String>()
            .nfkc()
            .collect()
    } else {
        message.nfkc().collect()
    };
    for c in base.chars() {
        if is_invisible(c) {
            continue;
        }
        out.push(look_alike(c).unwrap_or(c));
    }
    out
}

/// Separators collapsed, single letters joined; with `join_inner`, a lone separator between
/// two letters deleted first.
fn separators(text: &str, join_inner: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut collapsed = String::with_capacity(text.len());
    let mut pending_space = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_separator(c) {
            let start = i;
            while i < chars.len() && is_separator(chars[i]) {
                i += 1;
            }
            let lone_inner = i - start == 1
                && !c.is_whitespace()
                && start > 0
                && chars[start - 1].is_alphabetic()
                && chars.get(i).is_some_and(|n| n.is_alphabetic());
            if !(join_inner && lone_inner) {
                pending_space = true;
            }
            continue;
        }
        if pending_space && !collapsed.is_empty() {
            collapsed.push(' ');
        }
        pending_space = false;
        collapsed.push(c);
        i += 1;
    }
    join_spelled(&collapsed)
}

/// `s u i c i d e` -> `suicide`: three or more one-letter words in a row become one word.
fn join_spelled(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let single = |w: &str| {
        let mut cs = w.chars();
        cs.next().is_some_and(char::is_alphabetic) && cs.next().is_none()
    };
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let mut j = i;
        while j < words.len() && single(words[j]) {
            j += 1;
        }
        if j - i >= 3 {
            out.push(words[i..j].concat());
            i = j;
        } else {
            out.push(words[i].to_owned());
            i += 1;
        }
    }
    out.join(" ")
}

/// Whitespace and punctuation that can be slipped between letters, but not the apostrophe
/// (`can't`), which rules match.
fn is_separator(c: char) -> bool {
    c != '\'' && (c.is_whitespace() || (c.is_ascii_punctuation()) || is_unicode_punct(c))
}

fn is_unicode_punct(c: char) -> bool {
    matches!(c, '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{205E}' | '\u{00B7}' | '\u{3000}'..='\u{3003}')
}

/// Combining marks (diacritics, Zalgo stacks).
fn is_mark(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}' | '\u{0483}'..='\u{0489}' | '\u{1AB0}'..='\u{1AFF}'
        | '\u{1DC0}'..='\u{1DFF}' | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}')
}

/// Characters that render as nothing.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}')
}

/// Letters of other scripts and typographic marks, with the Latin letter (or ASCII mark) each
/// imitates.
const LOOK_ALIKES: &[(char, char)] = &[
    ('а', 'a'),
    ('в', 'b'),
    ('е', 'e'),
    ('ё', 'e'),
    ('к', 'k'),
    ('м', 'm'),
    ('н', 'h'),
    ('о', 'o'),
    ('р', 'p'),
    ('с', 'c'),
    ('т', 't'),
    ('у', 'y'),
    ('х', 'x'),
    ('і', 'i'),
    ('ї', 'i'),
    ('ј', 'j'),
    ('ѕ', 's'),
    ('ԁ', 'd'),
    ('ӏ', 'l'),
    ('ԛ', 'q'),
    ('ԝ', 'w'),
    ('А', 'A'),
    ('В', 'B'),
    ('Е', 'E'),
    ('К', 'K'),
    ('М', 'M'),
    ('Н', 'H'),
    ('О', 'O'),
    ('Р', 'P'),
    ('С', 'C'),
    ('Т', 'T'),
    ('У', 'Y'),
    ('Х', 'X'),
    ('І', 'I'),
    ('Ј', 'J'),
    ('Ѕ', 'S'),
    ('α', 'a'),
    ('ο', 'o'),
    ('ι', 'i'),
    ('κ', 'k'),
    ('ν', 'v'),
    ('ρ', 'p'),
    ('τ', 't'),
    ('υ', 'u'),
    ('χ', 'x'),
    ('Α', 'A'),
    ('Β', 'B'),
    ('Ε', 'E'),
    ('Ζ', 'Z'),
    ('Η', 'H'),
    ('Ι', 'I'),
    ('Κ', 'K'),
    ('Μ', 'M'),
    ('Ν', 'N'),
    ('Ο', 'O'),
    ('Ρ', 'P'),
    ('Τ', 'T'),
    ('Υ', 'Y'),
    ('Χ', 'X'),
    ('ı', 'i'),
    ('ȷ', 'j'),
    ('ɡ', 'g'),
    ('ſ', 's'),
    ('ꓲ', 'I'),
    ('\u{2018}', '\''),
    ('\u{2019}', '\''),
    ('\u{201B}', '\''),
    ('\u{2032}', '\''),
    ('\u{02BC}', '\''),
    ('`', '\''),
    ('\u{00B4}', '\''),
];

/// The Latin letter (or ASCII mark) a character of another script imitates.
pub(crate) fn look_alike(c: char) -> Option<char> {
    if c.is_ascii() && c != '`' {
        return None;
    }
    LOOK_ALIKES
        .iter()
        .find(|(from, _)| *from == c)
        .map(|(_, to)| *to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_each_kind_of_evasion() {
        let v = |m: &str| views(m, true);
        // Cyrillic о and е, a zero-width space, full-width letters.
        assert!(v("I want to еnd it").contains(&"I want to end it".to_owned()));
        assert!(v("sui\u{200B}cidal").contains(&"suicidal".to_owned()));
        assert!(v("ｓｕｉｃｉｄａｌ").contains(&"suicidal".to_owned()));
        assert!(v("s u i c i d a l thoughts").contains(&"suicidal thoughts".to_owned()));
        assert!(v("s.u.i.c.i.d.e").contains(&"suicide".to_owned()));
        assert!(v("want__to...die").contains(&"want to die".to_owned()));
        assert!(v("sui-cide").contains(&"suicide".to_owned()));
        assert!(v("sùïcidé").contains(&"suicide".to_owned()));
        assert!(v("can’t go on anymore").contains(&"can't go on anymore".to_owned()));
        // Diacritics are kept when a rule needs them.
        assert!(views("está", false).is_empty());
        // Plain text has no other view.
        assert!(v("I don't feel safe").is_empty());
    }

    #[test]
    fn ordinary_text_keeps_its_words() {
        // Two one-letter words are not a spelled word; "I a" stays apart.
        assert_eq!(separators("I a m fine", false), "Iam fine");
        assert_eq!(separators("it's a good day", false), "it's a good day");
        assert_eq!(separators("a b", false), "a b");
        assert_eq!(separators("pick-up at 5:30", true), "pickup at 5 30");
        assert_eq!(separators("pick-up at 5:30", false), "pick up at 5 30");
    }
}
