//! The in-process cost of hybrid ranking on a generated knowledge base.
//!
//! ```sh
//! cargo run --release -p assay-retrieval --example hybrid_bench -- [ENTITIES] [QUERIES]
//! ```
//!
//! Generates ENTITIES (default 10,000) SITUATION entities of 9 views each (title, 5 recognition
//! lines, keywords, 2 examples) over a Zipf-distributed vocabulary of 5,000 words, a random unit
//! vector of 384 dimensions per view, and QUERIES (default 200) messages of 12 words with
//! their own vectors. Times, per query on one thread: `rank` in dense multi-view mode, `rank`
//! in hybrid mode, and BM25 scoring alone. The hybrid stage is what hybrid adds to the dense
//! ranking (BM25, normalisation, fusion). Prints JSON.

use std::time::Instant;

use assay_core::entity::Entity;
use assay_kb::MemoryKb;
use assay_retrieval::lexical::Bm25Index;
use assay_retrieval::pipeline::{Pipeline, RankMode, RetrievalConfig, ViewVector};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn unit(&mut self) -> f32 {
        (self.next() as f32 / (1u64 << 31) as f32) - 0.5
    }
}

fn word(i: usize) -> String {
    const SYL: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "pe", "da", "gu", "ri", "so", "fe", "ba",
        "zu",
    ];
    let mut w = String::new();
    let mut x = i + 17;
    while x > 0 {
        w.push_str(SYL[x % 16]);
        x /= 16;
    }
    w
}

fn words(rng: &mut Rng, vocab: &[String], zipf: &[f64], n: usize) -> String {
    (0..n)
        .map(|_| {
            let u = rng.next() as f64 / (1u64 << 31) as f64 * zipf[zipf.len() - 1];
            let i = zipf.partition_point(|c| *c < u).min(vocab.len() - 1);
            vocab[i].as_str()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn vector(rng: &mut Rng, dim: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..dim).map(|_| rng.unit()).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    for x in &mut v {
        *x /= n;
    }
    v
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[allow(clippy::many_single_char_names)]
fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(10_000);
    let q = args.get(1).copied().unwrap_or(200);
    let dim = 384;
    let mut rng = Rng(42);
    let vocab: Vec<String> = (0..5000).map(word).collect();
    let mut acc = 0.0;
    let zipf: Vec<f64> = (1..=vocab.len())
        .map(|r| {
            acc += 1.0 / r as f64;
            acc
        })
        .collect();
    let mut entities = Vec::with_capacity(n);
    for i in 0..n {
        let recognition: Vec<String> = (0..5)
            .map(|_| format!("- \"{}\"", words(&mut rng, &vocab, &zipf, 10)))
            .collect();
        let examples = format!(
            "Parent: {}\nCoach: {}\n\nParent: {}\nCoach: {}",
            words(&mut rng, &vocab, &zipf, 15),
            words(&mut rng, &vocab, &zipf, 25),
            words(&mut rng, &vocab, &zipf, 15),
            words(&mut rng, &vocab, &zipf, 25)
        );
        let e: Entity = serde_json::from_value(serde_json::json!({
            "entity_id": format!("e{i}"), "entity_type": "KNOWLEDGE",
            "title": words(&mut rng, &vocab, &zipf, 5),
            "recognition": recognition.join("\n"),
            "keywords": words(&mut rng, &vocab, &zipf, 10),
            "examples": examples,
        }))
        .expect("entity");
        entities.push(e);
    }
    let mut views = Vec::new();
    let mut docs = Vec::new();
    for (slot, e) in entities.iter().enumerate() {
        for (key, text) in e.views() {
            views.push(ViewVector {
                entity_id: e.entity_id.clone(),
                view: Some(key),
                vector: vector(&mut rng, dim),
            });
            docs.push((slot, text));
        }
    }
    let kb = MemoryKb::new(entities).expect("kb");
    let queries: Vec<(String, Vec<f32>)> = (0..q)
        .map(|_| (words(&mut rng, &vocab, &zipf, 12), vector(&mut rng, dim)))
        .collect();

    let t = Instant::now();
    let dense = Pipeline::with_views(&kb, None, &views, RetrievalConfig::default()).expect("dense");
    let build_dense_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let hybrid = Pipeline::with_views(
        &kb,
        None,
        &views,
        RetrievalConfig {
            mode: RankMode::Hybrid,
            ..RetrievalConfig::default()
        },
    )
    .expect("hybrid");
    let build_hybrid_ms = t.elapsed().as_secs_f64() * 1e3;
    let bm25 = Bm25Index::new(n, &docs);

    let (mut d_us, mut h_us, mut b_us, mut extra_us) = (vec![], vec![], vec![], vec![]);
    for (text, v) in &queries {
        let t = Instant::now();
        let a = dense.rank(v, text, "PARENT", 15).expect("dense");
        let d = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        let b = hybrid.rank(v, text, "PARENT", 15).expect("hybrid");
        let h = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        let s = bm25.scores(text);
        let l = t.elapsed().as_secs_f64() * 1e6;
        assert!(a.len() == 15 && b.len() == 15 && s.len() == n);
        d_us.push(d);
        h_us.push(h);
        b_us.push(l);
        extra_us.push(h - d);
    }
    let doc = serde_json::json!({
        "entities": n,
        "views": views.len(),
        "bm25_documents": bm25.docs(),
        "dimension": dim,
        "queries": q,
        "build_dense_ms": build_dense_ms,
        "build_hybrid_ms": build_hybrid_ms,
        "rank_dense_multi_p50_ms": percentile(d_us.clone(), 0.5) / 1e3,
        "rank_hybrid_p50_ms": percentile(h_us.clone(), 0.5) / 1e3,
        "hybrid_stage_p50_ms": percentile(extra_us.clone(), 0.5) / 1e3,
        "hybrid_stage_p95_ms": percentile(extra_us, 0.95) / 1e3,
        "bm25_alone_p50_ms": percentile(b_us.clone(), 0.5) / 1e3,
        "bm25_alone_p95_ms": percentile(b_us, 0.95) / 1e3,
    });
    println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
}
