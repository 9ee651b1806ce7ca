//! A SIMD filter that finds every occurrence of a few dozen ASCII literals in a text, ignoring
//! ASCII case, for the pattern matcher's literal scan.
//!
//! Each literal is represented by one window of `W` bytes of it (its *gram*, `W` at most 4: the
//! shortest literal's length if shorter), its rarest window by English letter frequencies and a
//! list of common words. The distinct grams are spread over sixteen buckets. For every position
//! of the text, and for each byte offset `k < W` of a window starting there, two 16-entry
//! tables indexed by the low and the high nibble of the byte say which buckets have a gram that
//! allows that byte at offset `k`; a position where some bucket allows all `W` bytes is a
//! *candidate*. This is the idea of Teddy (the `aho-corasick` crate's packed searcher) with
//! changes that suit short chat messages and rules that mostly do not match: four-byte windows
//! instead of at most three and sixteen buckets (far fewer false candidates on English text),
//! every position reported rather than the first, and ASCII case folded in the registers (bit
//! `0x20` set on every byte before the lookup), so the text is never copied or lower-cased.
//! Every candidate is then checked against the grams of its buckets and, where a gram is
//! really there, against the whole literals it stands for: the tables only have to be fast and
//! never miss a real occurrence.
//!
//! Folding by `| 0x20` gives the two cases of a letter the same byte, so a text byte equal to a
//! literal's byte but for ASCII case passes the same table entries; the other bytes it merges
//! (control characters with punctuation, `@` with `` ` ``) only make false candidates, which the
//! check rejects. Bytes of non-ASCII characters pass no table.
//!
//! The scan needs AVX2 (x86-64, checked at run time through `pulp`, whose intrinsics are safe
//! once the CPU feature is proven); elsewhere [`GramFilter::new`] returns `None` and the pattern
//! matcher uses its Aho-Corasick scan.

use std::collections::HashMap;

/// Most distinct grams the filter takes: past this, false candidates would eat its advantage.
pub(super) const MAX_GRAMS: usize = 48;
/// Buckets: one bit each in a table entry.
const BUCKETS: usize = 16;
/// The widest window.
const MAX_WIDTH: usize = 4;

/// Approximate frequencies, in parts per 10,000, of the bytes of English chat text after ASCII
/// case folding (an upper-case letter counts as its lower-case one). Bytes not listed are rare.
/// Only the order matters much: it steers which window of a literal becomes its gram and which
/// grams share a bucket.
fn frequency(folded: u8) -> f64 {
    let per_10k = match folded {
        b' ' => 1700,
        b'e' => 950,
        b't' => 700,
        b'a' => 630,
        b'o' => 600,
        b'i' => 550,
        b'n' => 540,
        b's' => 500,
        b'h' | b'r' => 450,
        b'd' => 330,
        b'l' => 320,
        b'u' => 230,
        b'c' | b'm' => 200,
        b'w' => 180,
        b'f' => 170,
        b'g' | b'y' => 160,
        b'p' => 140,
        b'b' => 120,
        b'.' => 100,
        b',' => 90,
        b'v' => 80,
        b'k' => 60,
        b'\'' => 40,
        b'0'..=b'9' => 30,
        b'-' | b'?' => 20,
        b'x' => 15,
        b'!' | b'j' => 10,
        b'q' => 8,
        b'z' => 6,
        _ => 2,
    };
    f64::from(per_10k) / 10_000.0
}

/// Some of the most common words of English chat, with the spaces around them: a window
/// inside one of these is far more common than its letters alone suggest.
const COMMON_WORDS: &str = " the be to of and a in that have i it for not on with he as you do at \
    this but his by from they we say her she or an will my one all would there their what so up \
    out if about who get which go me when make can like time no just him know take people into \
    year your good some could them see other than then now look only come its over think also \
    back after use two how our work first well way even new want wants because any these give \
    day most us is was are been has had were said did going really very being feel keep thing \
    things something nothing everything anything always never again still every much more many \
    need help tell told ask asked let right sure okay yes where why week weekend today tomorrow \
    tonight home school kids kid child children son daughter mom dad parent parents family since \
    before should doesn't don't didn't can't won't it's i'm he's she's that's though through \
    while around down off last long little same next talk talking trying try made put call \
    called already plan pick pickup drop late money pay please thanks night morning ";

/// How rare windows of one width (lower-case ASCII) are in English chat text, as a
/// log-probability: lower is rarer. Letters are taken as independent, except that a window
/// inside a common word is counted as common.
pub(super) struct Rarity {
    /// The windows of [`COMMON_WORDS`], as [`key`]s, sorted.
    common: Vec<u32>,
    /// The log-frequency of each folded byte.
    logs: [f64; 128],
}

/// A window of at most four bytes as a number.
fn key(window: &[u8]) -> u32 {
    window.iter().fold(0, |k, &b| k << 8 | u32::from(b))
}

impl Rarity {
    pub(super) fn new(width: usize) -> Rarity {
        let mut common: Vec<u32> = COMMON_WORDS.as_bytes().windows(width).map(key).collect();
        common.sort_unstable();
        common.dedup();
        Rarity {
            common,
            logs: std::array::from_fn(|b| frequency(fold(b as u8)).ln()),
        }
    }

    pub(super) fn of(&self, window: &[u8]) -> f64 {
        let letters: f64 = window
            .iter()
            .map(|&b| self.logs[usize::from(b & 0x7f)])
            .sum();
        if self.common.binary_search(&key(window)).is_ok() {
            letters + 5.0
        } else {
            letters
        }
    }
}

/// The byte the tables see for `b`.
fn fold(b: u8) -> u8 {
    b | 0x20
}

/// One distinct gram and the literals it stands for.
#[derive(Debug, Clone)]
struct Gram {
    /// The gram, lower-case ASCII (only the first `width` bytes are used).
    bytes: [u8; MAX_WIDTH],
    /// `(literal, offset of the gram in it)`.
    literals: Vec<(usize, usize)>,
}

/// Which bytes, per window offset, the grams of one bucket allow (as nibble sets, the way
/// the tables see them).
#[derive(Debug, Clone, Copy, Default)]
struct NibbleSets {
    lo: [u16; MAX_WIDTH],
    hi: [u16; MAX_WIDTH],
}

impl NibbleSets {
    fn with(mut self, gram: &[u8]) -> NibbleSets {
        for (k, &b) in gram.iter().enumerate() {
            let f = fold(b);
            self.lo[k] |= 1 << (f & 0x0f);
            self.hi[k] |= 1 << (f >> 4);
        }
        self
    }

    /// The chance that a random position of English text passes this bucket's tables.
    fn pass_rate(&self, width: usize) -> f64 {
        let bits = |set: u16| super::set_bits(u128::from(set));
        (0..width)
            .map(|k| {
                bits(self.hi[k])
                    .flat_map(|h| bits(self.lo[k]).map(move |l| h << 4 | l))
                    .filter(|&f| f < 0x80 && fold(f) == f)
                    .map(frequency)
                    .sum::<f64>()
            })
            .product()
    }
}

/// The filter: tables, buckets and the literals to check candidates against.
pub(super) struct GramFilter {
    width: usize,
    tables: Tables,
    buckets: [Vec<Gram>; BUCKETS],
    /// The literals, by their index in the caller's list (`None`: not ASCII, so never found in
    /// ASCII text).
    literals: Vec<Option<Vec<u8>>>,
    #[cfg(target_arch = "x86_64")]
    simd: pulp::x86::V3,
}

/// Per window offset, the 16-entry nibble tables, each repeated in both 128-bit halves of an
/// AVX2 register: `lo`/`hi` for buckets 0-7 (one bit each), `lo2`/`hi2` for buckets 8-15.
#[derive(Debug, Clone, Copy)]
struct Tables {
    lo: [[u8; 32]; MAX_WIDTH],
    hi: [[u8; 32]; MAX_WIDTH],
    lo2: [[u8; 32]; MAX_WIDTH],
    hi2: [[u8; 32]; MAX_WIDTH],
}

impl std::fmt::Debug for GramFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GramFilter")
            .field("width", &self.width)
            .field("grams", &self.buckets.iter().map(Vec::len).sum::<usize>())
            .finish_non_exhaustive()
    }
}

impl GramFilter {
    /// A filter for `literals` (lower-case; non-empty), or `None` when this CPU has no AVX2,
    /// when there are too many distinct grams, or when no literal is ASCII.
    pub(super) fn new(literals: &[Vec<u8>]) -> Option<GramFilter> {
        #[cfg(target_arch = "x86_64")]
        {
            Self::build(literals, pulp::x86::V3::try_new()?)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = literals;
            None
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn build(literals: &[Vec<u8>], simd: pulp::x86::V3) -> Option<GramFilter> {
        let ascii: Vec<Option<Vec<u8>>> = literals
            .iter()
            .map(|l| (l.is_ascii() && !l.is_empty()).then(|| l.to_ascii_lowercase()))
            .collect();
        // Literals that share a gram share a bucket entry, but far more literals than grams is
        // not worth trying.
        if ascii.iter().flatten().count() > 4 * MAX_GRAMS {
            return None;
        }
        let width = ascii.iter().flatten().map(Vec::len).min()?.min(MAX_WIDTH);

        // Each literal's rarest window; literals with the same gram share it. Shortest
        // literals first, and a window some literal already uses counts as free, so literals
        // that contain one another (`alienation`, `parental alienation`) share their gram.
        let mut order: Vec<usize> = (0..ascii.len()).filter(|&i| ascii[i].is_some()).collect();
        order.sort_by_key(|&i| ascii[i].as_ref().map(Vec::len));
        let rarity = Rarity::new(width);
        let mut grams: Vec<Gram> = Vec::new();
        // Each gram's index in `grams`.
        let mut chosen: HashMap<Vec<u8>, usize> = HashMap::new();
        for index in order {
            let Some(literal) = &ascii[index] else {
                continue;
            };
            let cost = |o: usize| -> f64 {
                let window = &literal[o..o + width];
                if chosen.contains_key(window) {
                    f64::NEG_INFINITY
                } else {
                    rarity.of(window)
                }
            };
            let (_, offset) = (0..=literal.len() - width)
                .map(|o| (cost(o), o))
                .min_by(|a, b| a.0.total_cmp(&b.0))?;
            let window = &literal[offset..offset + width];
            let at = *chosen.entry(window.to_vec()).or_insert_with(|| {
                let mut bytes = [0u8; MAX_WIDTH];
                bytes[..width].copy_from_slice(window);
                grams.push(Gram {
                    bytes,
                    literals: Vec::new(),
                });
                grams.len() - 1
            });
            grams[at].literals.push((index, offset));
        }
        if grams.len() > MAX_GRAMS {
            return None;
        }

        // Rarest grams first, each into the bucket where it adds the least to the chance that
        // a position of ordinary text passes some bucket.
        let mut grams: Vec<(f64, Gram)> = grams
            .into_iter()
            .map(|g| {
                let rate = NibbleSets::default()
                    .with(&g.bytes[..width])
                    .pass_rate(width);
                (rate, g)
            })
            .collect();
        grams.sort_by(|(a, ga), (b, gb)| a.total_cmp(b).then_with(|| ga.bytes.cmp(&gb.bytes)));
        let mut sets = [NibbleSets::default(); BUCKETS];
        let mut rates = [0.0; BUCKETS];
        let mut buckets: [Vec<Gram>; BUCKETS] = Default::default();
        for (_, gram) in grams {
            let grown: [(NibbleSets, f64); BUCKETS] = std::array::from_fn(|b| {
                let set = sets[b].with(&gram.bytes[..width]);
                (set, set.pass_rate(width))
            });
            let cost = |b: usize| grown[b].1 - rates[b];
            let best = (0..BUCKETS).min_by(|&a, &b| cost(a).total_cmp(&cost(b)))?;
            (sets[best], rates[best]) = grown[best];
            buckets[best].push(gram);
        }

        let mut tables = Tables {
            lo: [[0; 32]; MAX_WIDTH],
            hi: [[0; 32]; MAX_WIDTH],
            lo2: [[0; 32]; MAX_WIDTH],
            hi2: [[0; 32]; MAX_WIDTH],
        };
        for (bucket, grams) in buckets.iter().enumerate() {
            let (lo, hi) = if bucket < 8 {
                (&mut tables.lo, &mut tables.hi)
            } else {
                (&mut tables.lo2, &mut tables.hi2)
            };
            let bit = 1u8 << (bucket % 8);
            for gram in grams {
                for (k, &b) in gram.bytes[..width].iter().enumerate() {
                    let f = fold(b);
                    let (l, h) = (usize::from(f & 0x0f), usize::from(f >> 4));
                    for lane in [0, 16] {
                        lo[k][lane + l] |= bit;
                        hi[k][lane + h] |= bit;
                    }
                }
            }
        }
        Some(GramFilter {
            width,
            tables,
            buckets,
            literals: ascii,
            simd,
        })
    }

    /// Where the first byte of `haystack` that is not ASCII is, if any.
    pub(super) fn first_non_ascii(&self, haystack: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        {
            let v3 = self.simd;
            v3.vectorize(
                #[inline(always)]
                || simd::first_non_ascii(v3, haystack),
            )
        }
        #[cfg(not(target_arch = "x86_64"))]
        haystack.iter().position(|b| !b.is_ascii())
    }

    /// Calls `found(literal, start, end)` for every occurrence of every ASCII literal in
    /// `haystack`, ignoring ASCII case; occurrences may overlap. `literal` is the index in the
    /// list the filter was built from.
    pub(super) fn for_each(&self, haystack: &[u8], mut found: impl FnMut(usize, usize, usize)) {
        let width = self.width;
        let mut check = |pos: usize, mut bits: u16| {
            let Some(window) = haystack.get(pos..pos + width) else {
                return;
            };
            while bits != 0 {
                let bucket = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                for gram in &self.buckets[bucket] {
                    if !window.eq_ignore_ascii_case(&gram.bytes[..width]) {
                        continue;
                    }
                    for &(index, offset) in &gram.literals {
                        let Some(literal) = &self.literals[index] else {
                            continue;
                        };
                        let Some(start) = pos.checked_sub(offset) else {
                            continue;
                        };
                        let end = start + literal.len();
                        if haystack
                            .get(start..end)
                            .is_some_and(|text| text.eq_ignore_ascii_case(literal))
                        {
                            found(index, start, end);
                        }
                    }
                }
            }
        };
        #[cfg(target_arch = "x86_64")]
        match width {
            1 => self.candidates::<1>(haystack, &mut check),
            2 => self.candidates::<2>(haystack, &mut check),
            3 => self.candidates::<3>(haystack, &mut check),
            _ => self.candidates::<4>(haystack, &mut check),
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = &mut check;
            unreachable!("GramFilter::new returns None off x86-64");
        }
    }

    /// Calls `candidate(pos, buckets)` for every position whose `W`-byte window passes the
    /// tables of some bucket, in order (`buckets`: one bit per bucket).
    #[cfg(target_arch = "x86_64")]
    fn candidates<const W: usize>(&self, haystack: &[u8], candidate: &mut impl FnMut(usize, u16)) {
        let v3 = self.simd;
        v3.vectorize(
            #[inline(always)]
            || simd::scan::<W>(v3, &self.tables, haystack, candidate),
        );
    }
}

/// The AVX2 block scans. `#[inline(always)]` throughout: the code must be inlined into pulp's
/// `vectorize` to be compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::inline_always)]
mod simd {
    use std::arch::x86_64::__m256i;

    use pulp::x86::V3;

    use super::{MAX_WIDTH, Tables};

    /// Positions (and bytes) per block.
    const N: usize = 32;

    #[inline(always)]
    fn load(bytes: &[u8]) -> __m256i {
        let chunk: &[u8; N] = bytes.first_chunk().expect("a block holds 32 bytes");
        pulp::cast(*chunk)
    }

    /// Where the first byte of `haystack` with its top bit set is, if any.
    #[inline(always)]
    pub(super) fn first_non_ascii(simd: V3, haystack: &[u8]) -> Option<usize> {
        let n = haystack.len();
        if n < N {
            return haystack.iter().position(|b| !b.is_ascii());
        }
        let mut at = 0;
        loop {
            // The last block overlaps the one before it: no copy of the tail.
            let start = at.min(n - N);
            let high = simd.avx2._mm256_movemask_epi8(load(&haystack[start..]));
            if high != 0 {
                return Some(start + high.trailing_zeros() as usize);
            }
            if start + N == n {
                return None;
            }
            at += N;
        }
    }

    /// One scan: the tables and constants.
    struct Scanner<'t, const W: usize> {
        simd: V3,
        tables: &'t Tables,
        fold: __m256i,
        nibble: __m256i,
    }

    impl<const W: usize> Scanner<'_, W> {
        /// Reports the candidates among the `N` positions at the start of `bytes` (which holds
        /// at least `N + W - 1` bytes) at `base + position`, but for the first `skip`.
        #[inline(always)]
        fn block(
            &self,
            bytes: &[u8],
            base: usize,
            skip: usize,
            candidate: &mut impl FnMut(usize, u16),
        ) {
            let avx2 = self.simd.avx2;
            let t = self.tables;
            let lookup =
                |table: &[u8; N], nibbles| avx2._mm256_shuffle_epi8(pulp::cast(*table), nibbles);
            let mut pass = avx2._mm256_cmpeq_epi8(self.fold, self.fold);
            let mut pass2 = pass;
            for k in 0..W {
                let v = avx2._mm256_or_si256(load(&bytes[k..]), self.fold);
                let low = avx2._mm256_and_si256(v, self.nibble);
                let high = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<4>(v), self.nibble);
                let both = |lo, hi| avx2._mm256_and_si256(lookup(lo, low), lookup(hi, high));
                pass = avx2._mm256_and_si256(pass, both(&t.lo[k], &t.hi[k]));
                pass2 = avx2._mm256_and_si256(pass2, both(&t.lo2[k], &t.hi2[k]));
            }
            let any = avx2._mm256_or_si256(pass, pass2);
            let none = avx2._mm256_cmpeq_epi8(any, self.simd.avx._mm256_setzero_si256());
            let mut hits = !avx2._mm256_movemask_epi8(none).cast_unsigned() >> skip << skip;
            if hits == 0 {
                return;
            }
            let (first, second): ([u8; N], [u8; N]) = (pulp::cast(pass), pulp::cast(pass2));
            while hits != 0 {
                let j = hits.trailing_zeros() as usize;
                hits &= hits - 1;
                candidate(base + j, u16::from(first[j]) | u16::from(second[j]) << 8);
            }
        }
    }

    /// Calls `candidate(pos, buckets)` for every position of `haystack` whose `W`-byte window
    /// passes some bucket's tables, in order.
    #[inline(always)]
    pub(super) fn scan<const W: usize>(
        simd: V3,
        tables: &Tables,
        haystack: &[u8],
        candidate: &mut impl FnMut(usize, u16),
    ) {
        let scanner = Scanner::<W> {
            simd,
            tables,
            fold: simd.avx._mm256_set1_epi8(0x20),
            nibble: simd.avx._mm256_set1_epi8(0x0f),
        };
        let n = haystack.len();
        let block = N + W - 1;
        if n < block {
            // A short text, padded with 0xff, which no table allows: no window running past
            // the end passes.
            let mut padded = [0xffu8; N + MAX_WIDTH - 1];
            padded[..n].copy_from_slice(haystack);
            scanner.block(&padded, 0, 0, candidate);
            return;
        }
        let mut at = 0;
        while at + block <= n {
            scanner.block(&haystack[at..], at, 0, candidate);
            at += N;
        }
        // The last positions: the whole block that ends at the end, without its positions
        // before `at` (scanned already).
        if at + W - 1 < n {
            let start = n - block;
            scanner.block(&haystack[start..], start, at - start, candidate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every occurrence, the slow way.
    fn naive(literals: &[&str], haystack: &str) -> Vec<(usize, usize, usize)> {
        let hay = haystack.to_ascii_lowercase();
        let mut out = Vec::new();
        for (i, l) in literals.iter().enumerate() {
            for start in 0..=hay.len().saturating_sub(l.len()) {
                if hay.len() >= l.len() && hay[start..].starts_with(l) {
                    out.push((i, start, start + l.len()));
                }
            }
        }
        out.sort_unstable();
        out
    }

    fn filtered(filter: &GramFilter, haystack: &str) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        filter.for_each(haystack.as_bytes(), |i, s, e| out.push((i, s, e)));
        out.sort_unstable();
        out
    }

    fn build(literals: &[&str]) -> Option<GramFilter> {
        let owned: Vec<Vec<u8>> = literals.iter().map(|l| l.as_bytes().to_vec()).collect();
        GramFilter::new(&owned)
    }

    #[test]
    fn finds_every_occurrence_at_every_position_and_case() {
        let literals = [
            "gray rock",
            "biff",
            "biff response",
            "boundar",
            "feel safe",
            " anymore",
            "being hit",
            "can't",
        ];
        let Some(filter) = build(&literals) else {
            return; // no AVX2 here: the matcher's other scan is used
        };
        // Each literal at every offset around the 32-byte block edges, in mixed case.
        for literal in literals {
            for pad in 0..70 {
                for upper in [false, true] {
                    let word = if upper {
                        literal.to_ascii_uppercase()
                    } else {
                        literal.to_owned()
                    };
                    let text = format!("{}{word}{}", "x".repeat(pad), ".".repeat(pad % 7));
                    assert_eq!(
                        filtered(&filter, &text),
                        naive(&literals, &text),
                        "{text:?}"
                    );
                }
            }
        }
        let text =
            "BIFF biff response, Gray Rock gray rockgray rock: I can't. not being hit anymore";
        assert_eq!(filtered(&filter, text), naive(&literals, text));
        assert!(filtered(&filter, "").is_empty());
        assert!(filtered(&filter, "bif").is_empty());
    }

    #[test]
    fn short_literals_narrow_the_window() {
        let literals = ["ex", "dad", "mom's", "a"];
        let Some(filter) = build(&literals) else {
            return;
        };
        assert_eq!(filter.width, 1);
        let text = "My EX and her dad said Mom's plan is a mess; the exam, a dad-joke";
        assert_eq!(filtered(&filter, text), naive(&literals, text));
    }

    #[test]
    fn control_characters_do_not_pass_for_spaces() {
        // `\0 | 0x20` is a space: the tables let it through, the check must not.
        let literals = ["feel safe"];
        let Some(filter) = build(&literals) else {
            return;
        };
        assert!(filtered(&filter, "feel\0safe").is_empty());
        assert!(filtered(&filter, "feel@safe feel`safe").is_empty());
        assert_eq!(filtered(&filter, "I feel safe"), vec![(0, 2, 11)]);
    }

    #[test]
    fn non_ascii_literals_are_left_out_and_too_many_grams_are_refused() {
        let Some(filter) = build(&["café", "cafe"]) else {
            return;
        };
        assert_eq!(filtered(&filter, "a cafe"), vec![(1, 2, 6)]);
        assert!(build(&["é"]).is_none());
        let many: Vec<String> = (0..=MAX_GRAMS).map(|i| format!("w{i:03}q")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(build(&many).is_none());
    }

    #[test]
    fn random_texts_agree_with_the_naive_search() {
        let literals = [
            "gray rock",
            "grey rock",
            "gray-rock",
            "biff",
            "parental alienation",
            "alienation",
            "documentation",
            "keep records",
            "boundaries",
            "boundary",
            "loyalty bind",
            "caught in the middle",
            "gatekeeping",
            "coercive control",
            "want to die",
            "wants to end it",
            "better off dead",
            "don't feel safe",
            " anymore",
            "being hurt",
        ];
        let Some(filter) = build(&literals) else {
            return;
        };
        let words = [
            "gray",
            "rock",
            "Grey",
            "the",
            "biff",
            "alienation",
            "keep",
            "records",
            "bound",
            "aries",
            "boundary",
            "to",
            "die",
            "want",
            "wants",
            "end",
            "it",
            "feel",
            "safe",
            "don't",
            "anymore",
            "being",
            "hurt",
            "caught",
            "in",
            "middle",
            "x",
            "",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..(state % 40) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push_str(words[(state % words.len() as u64) as usize]);
                text.push(if state.is_multiple_of(5) { '-' } else { ' ' });
            }
            assert_eq!(
                filtered(&filter, &text),
                naive(&literals, &text),
                "{text:?}"
            );
        }
    }
}
