//! BM25 over short documents (an entity's retrieval views), built in memory, for the lexical
//! half of hybrid ranking.
//!
//! Text is lower-cased, split on anything that is not a letter or a digit (apostrophes are
//! dropped first, so `don't` is `dont`), English stop words are removed and every word is
//! stemmed with the Snowball English stemmer (`rust-stemmers`, the stemmer tantivy uses: the
//! reference Snowball algorithms, no I/O, no unsafe code in our build). Scores are Okapi BM25
//! with `k1 = 1.2`, `b = 0.75` and Lucene's idf `ln(1 + (N − df + 0.5) / (df + 0.5))`, so a
//! score is never negative. Each document belongs to an item (an entity); an item's score is
//! the best score of its documents.
//!
//! ```
//! use assay_retrieval::lexical::Bm25Index;
//! let index = Bm25Index::new(2, &[(0, "Gray rock: staying unreactive"), (1, "Holiday schedules")]);
//! let scores = index.scores("how do I stay calm and unreactive?");
//! assert!(scores[0] > 0.0 && scores[1] == 0.0);
//! ```

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

/// Okapi BM25 term-frequency saturation.
pub const K1: f32 = 1.2;
/// Okapi BM25 length normalisation.
pub const B: f32 = 0.75;

/// English stop words (the Snowball list, apostrophes removed as the tokenizer does).
#[rustfmt::skip]
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "arent", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
    "but", "by", "cannot", "cant", "could", "couldnt", "did", "didnt", "do", "does", "doesnt",
    "doing", "dont", "down", "during", "each", "few", "for", "from", "further", "had", "hadnt",
    "has", "hasnt", "have", "havent", "having", "he", "hed", "hell", "her", "here", "heres",
    "hers", "herself", "hes", "him", "himself", "his", "how", "hows", "i", "id", "if", "ill",
    "im", "in", "into", "is", "isnt", "it", "its", "itself", "ive", "lets", "me", "more", "most",
    "mustnt", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or",
    "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shant", "she",
    "shed", "shell", "shes", "should", "shouldnt", "so", "some", "such", "than", "that", "thats",
    "the", "their", "theirs", "them", "themselves", "then", "there", "theres", "these", "they",
    "theyd", "theyll", "theyre", "theyve", "this", "those", "through", "to", "too", "under",
    "until", "up", "very", "was", "wasnt", "we", "wed", "well", "were", "werent", "weve", "what",
    "whats", "when", "whens", "where", "wheres", "which", "while", "who", "whom", "whos", "why",
    "whys", "will", "with", "wont", "would", "wouldnt", "you", "youd", "youll", "your", "youre",
    "yours", "yourself", "yourselves", "youve",
];

/// Splits, drops stop words and stems.
#[derive(Clone)]
pub struct Analyzer {
    stemmer: std::sync::Arc<Stemmer>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Analyzer(english)")
    }
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer {
            stemmer: std::sync::Arc::new(Stemmer::create(Algorithm::English)),
        }
    }
}

impl Analyzer {
    /// The terms of `text`, in order (repeats kept).
    pub fn terms(&self, text: &str) -> Vec<String> {
        let lower = text.to_lowercase().replace(['\'', '’'], "");
        lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty() && STOP_WORDS.binary_search(w).is_err())
            .map(|w| self.stemmer.stem(w).into_owned())
            .collect()
    }
}

/// A BM25 index of documents, each belonging to an item `0..items`.
#[derive(Debug, Clone)]
pub struct Bm25Index {
    analyzer: Analyzer,
    /// term → its postings: (document, `tf × (k1 + 1) / (tf + k1 × (1 − b + b × len / avg))`),
    /// so a query only multiplies by the idf and adds.
    postings: HashMap<String, Vec<(u32, f32)>>,
    /// Per document: its item.
    doc_item: Vec<u32>,
    items: usize,
}

impl Bm25Index {
    /// Indexes `(item, text)` documents for `items` items.
    pub fn new<S: AsRef<str>>(items: usize, docs: &[(usize, S)]) -> Bm25Index {
        let analyzer = Analyzer::default();
        let mut lens = Vec::with_capacity(docs.len());
        let mut doc_item = Vec::with_capacity(docs.len());
        let mut doc_terms: Vec<HashMap<String, f32>> = Vec::with_capacity(docs.len());
        for (item, text) in docs {
            let terms = analyzer.terms(text.as_ref());
            lens.push(terms.len() as f32);
            doc_item.push(u32::try_from(*item).unwrap_or(u32::MAX));
            let mut tf: HashMap<String, f32> = HashMap::new();
            for t in terms {
                *tf.entry(t).or_default() += 1.0;
            }
            doc_terms.push(tf);
        }
        let avg = if lens.is_empty() {
            1.0
        } else {
            (lens.iter().sum::<f32>() / lens.len() as f32).max(1.0)
        };
        let mut postings: HashMap<String, Vec<(u32, f32)>> = HashMap::new();
        for (doc, tf) in doc_terms.into_iter().enumerate() {
            let norm = K1 * (1.0 - B + B * lens[doc] / avg);
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            for (t, f) in tf {
                postings
                    .entry(t)
                    .or_default()
                    .push((doc, f * (K1 + 1.0) / (f + norm)));
            }
        }
        for list in postings.values_mut() {
            list.sort_unstable_by_key(|(d, _)| *d);
        }
        Bm25Index {
            analyzer,
            postings,
            doc_item,
            items,
        }
    }

    /// Number of documents.
    pub fn docs(&self) -> usize {
        self.doc_item.len()
    }

    /// Each item's best document score for `query` (0 for items no query term reaches), and
    /// the document that gave it (`None` for those).
    pub fn scores_with_docs(&self, query: &str) -> (Vec<f32>, Vec<Option<usize>>) {
        let mut terms = self.analyzer.terms(query);
        terms.sort_unstable();
        terms.dedup();
        let n = self.doc_item.len() as f32;
        let mut doc_scores = vec![0.0f32; self.doc_item.len()];
        for t in &terms {
            let Some(list) = self.postings.get(t) else {
                continue;
            };
            let df = list.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, weight) in list {
                doc_scores[doc as usize] += idf * weight;
            }
        }
        let mut best = vec![0.0f32; self.items];
        let mut best_doc = vec![None; self.items];
        for (doc, (&score, &item)) in doc_scores.iter().zip(&self.doc_item).enumerate() {
            if score > 0.0
                && let Some(slot) = best.get_mut(item as usize)
                && score > *slot
            {
                *slot = score;
                best_doc[item as usize] = Some(doc);
            }
        }
        (best, best_doc)
    }

    /// Each item's best document score for `query`.
    pub fn scores(&self, query: &str) -> Vec<f32> {
        self.scores_with_docs(query).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(
            STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
            "STOP_WORDS must be sorted"
        );
    }

    #[test]
    fn terms_are_stemmed_without_stop_words() {
        let a = Analyzer::default();
        assert_eq!(
            a.terms("He keeps BAITING me, doesn't he?"),
            ["keep", "bait"]
        );
        assert_eq!(a.terms("holidays"), a.terms("holiday"));
    }

    #[test]
    fn bm25_matches_a_hand_computation() {
        // Two docs of item 0 and 1; query term "rock" occurs once in doc 0 only.
        let index = Bm25Index::new(2, &[(0, "gray rock rock"), (1, "holiday plan")]);
        let s = index.scores("rock");
        let (n, df) = (2.0f32, 1.0f32);
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let avg = 2.5; // mean length of the two documents: (3 + 2) / 2
        let norm = K1 * (1.0 - B + B * 3.0 / avg);
        let want = idf * 2.0 * (K1 + 1.0) / (2.0 + norm);
        assert!((s[0] - want).abs() < 1e-6, "{} {want}", s[0]);
        assert_eq!(s[1], 0.0);
    }

    #[test]
    fn an_item_scores_its_best_document() {
        let index = Bm25Index::new(
            2,
            &[(0, "schedule"), (0, "holiday schedule"), (1, "holiday")],
        );
        let (s, docs) = index.scores_with_docs("holiday schedule");
        assert_eq!(docs[0], Some(1));
        assert!(s[0] > s[1] && s[1] > 0.0);
        assert_eq!(index.docs(), 3);
    }
}
