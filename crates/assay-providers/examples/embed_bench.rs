//! Throughput of the local (candle) embedder: embeds N sentences in batches and prints one JSON
//! object with sentences/s on stdout.
//!
//! ```sh
//! scripts/fetch-test-model.sh
//! RAYON_NUM_THREADS=1 cargo run --release -p assay-providers --example embed_bench -- \
//!     [--model-dir DIR] [--file SENTENCES.txt | --count N] [--batch-size 32]
//! ```
//! The model directory defaults to `$ASSAY_MODEL_DIR`, then `target/test-models/all-minilm-l6-v2`.
//! Without `--file`, N (default 500) sentences of 8–40 words are generated deterministically.
//! The model load and one warm-up batch are not timed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use assay_providers::{Embedder, EmbedderOptions, InputKind, LocalEmbedder, model_dir_from_env};

struct Args {
    model_dir: PathBuf,
    file: Option<PathBuf>,
    count: usize,
    batch_size: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        model_dir: model_dir_from_env()
            .unwrap_or_else(|| PathBuf::from("target/test-models/all-minilm-l6-v2")),
        file: None,
        count: 500,
        batch_size: 32,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--model-dir" => args.model_dir = value()?.into(),
            "--file" => args.file = Some(value()?.into()),
            "--count" => args.count = value()?.parse().map_err(|e| format!("--count: {e}"))?,
            "--batch-size" => {
                args.batch_size = value()?.parse().map_err(|e| format!("--batch-size: {e}"))?;
            }
            other => return Err(format!("unknown argument {other}; see the example's docs")),
        }
    }
    Ok(args)
}

/// Deterministic, varied sentences (a tiny linear congruential generator over a word list).
fn generate(count: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "parent",
        "child",
        "schedule",
        "email",
        "court",
        "holiday",
        "weekend",
        "school",
        "agreement",
        "mediator",
        "calm",
        "reply",
        "message",
        "custody",
        "plan",
        "exchange",
        "late",
        "pickup",
        "doctor",
        "birthday",
        "angry",
        "brief",
        "friendly",
        "firm",
        "lawyer",
        "summer",
        "homework",
        "support",
        "payment",
        "calendar",
    ];
    let mut state: u64 = 42;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % n as u64) as usize
    };
    (0..count)
        .map(|_| {
            let len = 8 + next(33);
            let words: Vec<&str> = (0..len).map(|_| WORDS[next(WORDS.len())]).collect();
            format!("{}.", words.join(" "))
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("embed_bench: {e}");
            return ExitCode::from(2);
        }
    };
    let sentences = match &args.file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect(),
            Err(e) => {
                eprintln!("embed_bench: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
        None => generate(args.count),
    };
    let options = EmbedderOptions {
        batch_size: Some(args.batch_size),
        ..EmbedderOptions::default()
    };
    let load_start = Instant::now();
    let embedder = match LocalEmbedder::load(&args.model_dir, &options) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("embed_bench: {e} (run scripts/fetch-test-model.sh?)");
            return ExitCode::from(3);
        }
    };
    let load_seconds = load_start.elapsed().as_secs_f64();
    let warm_up: Vec<String> = sentences.iter().take(args.batch_size).cloned().collect();
    if let Err(e) = embedder.embed(&warm_up, InputKind::Document).await {
        eprintln!("embed_bench: {e}");
        return ExitCode::from(3);
    }

    let start = Instant::now();
    let result = embedder
        .embed_with_usage(&sentences, InputKind::Document)
        .await;
    let seconds = start.elapsed().as_secs_f64();
    let usage = match result {
        Ok(out) => out.usage,
        Err(e) => {
            eprintln!("embed_bench: {e}");
            return ExitCode::from(3);
        }
    };
    let report = serde_json::json!({
        "embedder": embedder.model(),
        "sentences": sentences.len(),
        "tokens": usage.input_tokens,
        "batch_size": args.batch_size,
        "rayon_num_threads": std::env::var("RAYON_NUM_THREADS").ok(),
        "load_seconds": (load_seconds * 1000.0).round() / 1000.0,
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "sentences_per_second": (sentences.len() as f64 / seconds * 10.0).round() / 10.0,
    });
    println!("{report}");
    ExitCode::SUCCESS
}
