//! `builtin/hashed-ngrams`: the built-in lexical embedder.

use async_trait::async_trait;

use crate::ProviderError;
use crate::embed::{Embedder, Embeddings, InputKind, Usage, l2_normalize};

/// The FNV-1a hash of a feature: its tag, then its parts' bytes.
fn feature(tag: u8, parts: &[&str]) -> u64 {
    let mut hash = Fnv1a::new();
    hash.write(&[tag]);
    for part in parts {
        hash.write(part.as_bytes());
    }
    hash.finish()
}

/// `builtin/hashed-ngrams`: a LEXICAL embedder that needs no setup, weights or network.
///
/// It matches words and word pieces, not meaning: "custody schedule" is close to "schedule for
/// custody" and to "custody schedules", but not to "when do the kids stay with me". Use it for
/// smoke tests, offline demos and as a baseline; use `local/`, `hf/`, `voyage/` or `openai/` for
/// semantic search.
///
/// # The algorithm
///
/// A stable format: changing any step changes every stored vector, so it needs a new name.
///
/// 1. Lowercase the text (Unicode `to_lowercase`) and split it into words: maximal runs of
///    Unicode alphanumeric characters (`char::is_alphanumeric`); everything else separates.
/// 2. Features, each a string with a one-byte group tag and a weight:
///    * `W` + word, weight 1.0 (word unigrams);
///    * `B` + word + ` ` + next word, weight 0.5 (word bigrams);
///    * `C` + each character 3-, 4- and 5-gram of `<` + word + `>`, weight 0.25 (sub-word pieces,
///      so that "parent", "parents" and "parenting" overlap; `<a>` alone for a one-letter word).
/// 3. Count each distinct feature (`tf`) and give it the value `weight * (1 + ln tf)`
///    (sublinear term frequency).
/// 4. Hash the feature's UTF-8 bytes (tag first) with 64-bit FNV-1a (offset basis
///    `0xcbf29ce484222325`, prime `0x100000001b3`). Add the value to dimension `hash % 1024`,
///    negated when bit 63 of the hash is set (signed feature hashing: collisions cancel out
///    on average instead of piling up).
/// 5. L2-normalise (in f64, stored as f32). A text without any word gives the zero vector.
#[derive(Debug, Clone, Copy, Default)]
pub struct HashedNgramEmbedder;

impl HashedNgramEmbedder {
    /// Its `vendor/model` name.
    pub const NAME: &'static str = "builtin/hashed-ngrams";
    /// Its vector length.
    pub const DIMENSION: usize = 1024;

    const WORD_WEIGHT: f64 = 1.0;
    const BIGRAM_WEIGHT: f64 = 0.5;
    const CHAR_WEIGHT: f64 = 0.25;
    const CHAR_NGRAMS: std::ops::RangeInclusive<usize> = 3..=5;

    /// The built-in embedder.
    pub fn new() -> HashedNgramEmbedder {
        HashedNgramEmbedder
    }

    /// Embeds one text (synchronously; it is cheap).
    pub fn embed_text(&self, text: &str) -> Vec<f32> {
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();

        // Every occurrence of every feature as (hash, order of appearance), sorted: the
        // features are summed in hash order (so the floats do not depend on the order of the
        // text), and the first occurrence of a hash gives its weight.
        let mut features: Vec<(u64, u32)> = Vec::with_capacity(words.len() * 16);
        let mut weights: Vec<f64> = Vec::with_capacity(words.len() * 16);
        let mut add = |hash: u64, weight: f64| {
            features.push((hash, weights.len() as u32));
            weights.push(weight);
        };
        let mut chars = Vec::new();
        for (i, word) in words.iter().enumerate() {
            add(feature(b'W', &[word]), Self::WORD_WEIGHT);
            if let Some(next) = words.get(i + 1) {
                add(feature(b'B', &[word, " ", next]), Self::BIGRAM_WEIGHT);
            }
            chars.clear();
            chars.push('<');
            chars.extend(word.chars());
            chars.push('>');
            for n in Self::CHAR_NGRAMS {
                for window in chars.windows(n) {
                    let mut hash = Fnv1a::new();
                    hash.write(b"C");
                    for c in window {
                        hash.write(c.encode_utf8(&mut [0; 4]).as_bytes());
                    }
                    add(hash.finish(), Self::CHAR_WEIGHT);
                }
            }
        }
        features.sort_unstable();

        let mut acc = vec![0.0f64; Self::DIMENSION];
        for run in features.chunk_by(|a, b| a.0 == b.0) {
            let (hash, first) = run[0];
            let weight = weights[first as usize];
            let value = weight * (1.0 + (run.len() as f64).ln());
            let index = (hash % Self::DIMENSION as u64) as usize;
            acc[index] += if hash >> 63 == 1 { -value } else { value };
        }
        let mut v: Vec<f32> = acc.into_iter().map(|x| x as f32).collect();
        l2_normalize(&mut v);
        v
    }
}

impl HashedNgramEmbedder {
    /// Below this many texts a batch is embedded on one thread.
    const PARALLEL_FROM: usize = 32;

    /// Embeds a batch, in order; a large one on every core (each text on its own, so the
    /// vectors are the same).
    pub fn embed_texts(&self, texts: &[String]) -> Vec<Vec<f32>> {
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        if threads < 2 || texts.len() < Self::PARALLEL_FROM {
            return texts.iter().map(|t| self.embed_text(t)).collect();
        }
        let embed = |part: &[String]| part.iter().map(|t| self.embed_text(t)).collect::<Vec<_>>();
        let mut parts = texts.chunks(texts.len().div_ceil(threads));
        let first = parts.next().unwrap_or_default();
        std::thread::scope(|scope| {
            // The first part on this thread, the others on their own.
            let others: Vec<_> = parts.map(|part| scope.spawn(move || embed(part))).collect();
            let mut out = embed(first);
            for other in others {
                out.extend(
                    other
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                );
            }
            out
        })
    }
}

#[async_trait]
impl Embedder for HashedNgramEmbedder {
    fn model(&self) -> &str {
        Self::NAME
    }

    fn dimension(&self) -> Option<usize> {
        Some(Self::DIMENSION)
    }

    async fn embed_with_usage(
        &self,
        texts: &[String],
        _kind: InputKind,
    ) -> Result<Embeddings, ProviderError> {
        Ok(Embeddings {
            vectors: self.embed_texts(texts),
            usage: Usage::default(),
        })
    }
}

/// 64-bit FNV-1a.
struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Fnv1a {
        Fnv1a(Self::OFFSET_BASIS)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    fn embed(text: &str) -> Vec<f32> {
        HashedNgramEmbedder::new().embed_text(text)
    }

    fn norm(v: &[f32]) -> f32 {
        v.iter().map(|x| x * x).sum::<f32>().sqrt()
    }

    #[test]
    fn fnv1a_known_values() {
        // Published FNV-1a 64 test vectors.
        let hash = |s: &str| {
            let mut h = Fnv1a::new();
            h.write(s.as_bytes());
            h.finish()
        };
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn identical_texts_have_cosine_one() {
        let a = embed("How do I respond to a nasty email from my co-parent?");
        assert_eq!(a.len(), HashedNgramEmbedder::DIMENSION);
        assert!((norm(&a) - 1.0).abs() < 1e-6);
        let b = embed("How do I respond to a nasty email from my co-parent?");
        assert_eq!(a, b);
        assert!((cosine(&a, &b) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn case_and_punctuation_do_not_matter() {
        let a = embed("Custody schedule, please!");
        let b = embed("custody   SCHEDULE please");
        assert!((cosine(&a, &b) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn shared_words_score_higher_than_unrelated_text() {
        let query = embed("my ex sent me a nasty email");
        let related = embed("how to answer a nasty email from your ex");
        let unrelated = embed("the recipe needs two cups of flour and butter");
        let (close, far) = (cosine(&query, &related), cosine(&query, &unrelated));
        assert!(close > far + 0.2, "related {close} vs unrelated {far}");
        assert!(far.abs() < 0.15, "unrelated {far}");
    }

    #[test]
    fn sub_word_pieces_match_inflections() {
        let a = embed("parenting");
        let b = embed("parents");
        let c = embed("holiday");
        assert!(cosine(&a, &b) > cosine(&a, &c) + 0.2);
    }

    #[test]
    fn unicode_words() {
        let a = embed("Élève à l'école");
        let b = embed("ÉLÈVE À L'ÉCOLE");
        assert!((cosine(&a, &b) - 1.0).abs() < 1e-6);
        assert!((norm(&embed("子供の養育")) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn empty_text_gives_the_zero_vector() {
        for text in ["", "  ?! "] {
            let v = embed(text);
            assert_eq!(v.len(), HashedNgramEmbedder::DIMENSION);
            assert!(v.iter().all(|x| *x == 0.0));
        }
    }

    /// Regression guard: vectors are stored next to KB rows, so this format must not drift.
    /// If this test fails the algorithm changed: give the embedder a new name instead.
    #[test]
    fn stable_vector_for_a_fixed_input() {
        let v = embed("BIFF: brief, informative, friendly, firm.");
        let nonzero: Vec<(usize, f32)> = v
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, x)| *x != 0.0)
            .take(8)
            .collect();
        // Cross-checked against an independent Python implementation of the documented steps.
        let expected: [(usize, f32); 8] = [
            (2, 0.075_406_39),
            (8, 0.075_406_39),
            (33, -0.075_406_39),
            (48, 0.075_406_39),
            (63, 0.075_406_39),
            (103, -0.150_812_77),
            (118, -0.301_625_55),
            (137, -0.075_406_39),
        ];
        for ((i, x), (j, y)) in nonzero.iter().zip(expected) {
            assert_eq!(*i, j, "{nonzero:?}");
            assert!((x - y).abs() < 1e-6, "{nonzero:?}");
        }
        assert_eq!(nonzero.len(), expected.len());
    }

    #[tokio::test]
    async fn trait_contract() {
        let e = HashedNgramEmbedder::new();
        assert_eq!(e.model(), "builtin/hashed-ngrams");
        assert_eq!(e.dimension(), Some(1024));
        let texts = vec!["one".to_string(), "two".to_string()];
        let out = e.embed_with_usage(&texts, InputKind::Query).await.unwrap();
        assert_eq!(out.vectors.len(), 2);
        assert_eq!(out.vectors[0], embed("one"));
        assert_eq!(out.usage, Usage::default());
        assert!(e.embed(&[], InputKind::Document).await.unwrap().is_empty());
    }
}
