//! Throughput benchmark of [`PatternMatcher`] (crisis regexes and keyword boosts, 000 §5.5).
//!
//! ```text
//! cargo run --release -p assay-retrieval --example pattern_bench -- RULES.json CORPUS.txt [--repeat N]
//! ```
//!
//! `RULES.json` is a pattern-rules file (000 §5.5 shape); `CORPUS.txt` holds one message per
//! line (`\n`-separated, UTF-8). The example builds the matcher (timed on its own), then calls
//! [`PatternMatcher::matched_entities`] on every message, single-threaded, `N` times (default
//! 3), and keeps the fastest pass. It prints one JSON line:
//!
//! ```text
//! {"engine":"assay","rules":…,"crisis_rules":…,"keyword_groups":…,"messages":…,"seconds":…,
//!  "messages_per_second":…,"cpu_seconds":…,"cpu_messages_per_second":…,
//!  "matched_entity_total":…,"checksum":…,"build_seconds":…,"repeat":…}
//! ```
//!
//! `cpu_seconds` is the fastest pass in the thread's CPU time (Linux's
//! `/proc/thread-self/schedstat`; `null` elsewhere): on a loaded machine the wall time also
//! counts the time the thread waited for a core. `bench/patterns/hs_bench.c` reports the same.
//!
//! `matched_entity_total` is the number of distinct entities matched, summed over messages.
//! `checksum` is FNV-1a 64 (lower-case hex) over, for each message in order, its matched entity
//! ids sorted and joined by `,`, followed by `\n`. `bench/patterns/seed_loop.py` computes the
//! same checksum with the seed's Python loop (000 §6.3), so the two outputs can be compared.
//! The whole harness is `bench/patterns/run.sh`.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use assay_core::bank::PatternRules;
use assay_retrieval::patterns::PatternMatcher;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

struct Args {
    rules: String,
    corpus: String,
    repeat: usize,
}

fn parse_args() -> Result<Args, String> {
    let usage = "usage: pattern_bench RULES.json CORPUS.txt [--repeat N]";
    let mut positional = Vec::new();
    let mut repeat = 3;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        if arg == "--repeat" {
            let n = it
                .next()
                .ok_or_else(|| format!("--repeat needs a value\n{usage}"))?;
            repeat = n
                .parse()
                .map_err(|_| format!("--repeat: not a number: {n}\n{usage}"))?;
            if repeat == 0 {
                return Err(format!("--repeat must be at least 1\n{usage}"));
            }
        } else if arg == "-h" || arg == "--help" {
            return Err(usage.to_owned());
        } else {
            positional.push(arg);
        }
    }
    let [rules, corpus]: [String; 2] = positional.try_into().map_err(|_| usage.to_owned())?;
    Ok(Args {
        rules,
        corpus,
        repeat,
    })
}

/// CPU time this thread has run, in seconds (`None` where the kernel does not say). The
/// kernel brings the figure up to date at a scheduler tick (up to ~4 ms late), or when the
/// thread enters the scheduler: hence the yield first.
fn thread_cpu_seconds() -> Option<f64> {
    std::thread::yield_now();
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 * 1e-9)
}

fn run(args: &Args) -> Result<(), String> {
    let rules_text =
        std::fs::read_to_string(&args.rules).map_err(|e| format!("{}: {e}", args.rules))?;
    let rules: PatternRules =
        serde_json::from_str(&rules_text).map_err(|e| format!("{}: {e}", args.rules))?;
    let corpus =
        std::fs::read_to_string(&args.corpus).map_err(|e| format!("{}: {e}", args.corpus))?;
    let mut messages: Vec<&str> = corpus.split('\n').collect();
    if messages.last() == Some(&"") {
        messages.pop();
    }

    let start = Instant::now();
    let matcher = PatternMatcher::new(&rules).map_err(|e| format!("{}: {e}", args.rules))?;
    let build_seconds = start.elapsed().as_secs_f64();
    let (crisis_rules, keyword_groups) = matcher.rule_counts();

    // Untimed pass: what the engine answers, for the checksum.
    let mut checksum = FNV_OFFSET;
    let mut matched_entity_total = 0usize;
    for message in &messages {
        let mut ids = matcher.matched_entities(message);
        matched_entity_total += ids.len();
        ids.sort_unstable();
        checksum = fnv1a(checksum, ids.join(",").as_bytes());
        checksum = fnv1a(checksum, b"\n");
    }

    // Timed passes: matching only, best of N.
    let mut best = f64::INFINITY;
    let mut best_cpu: Option<f64> = None;
    for _ in 0..args.repeat {
        let cpu_start = thread_cpu_seconds();
        let start = Instant::now();
        let mut total = 0usize;
        for message in &messages {
            let ids = matcher.matched_entities(black_box(message));
            total += black_box(ids).len();
        }
        let seconds = start.elapsed().as_secs_f64();
        if let (Some(before), Some(after)) = (cpu_start, thread_cpu_seconds()) {
            best_cpu = Some(best_cpu.map_or(after - before, |b: f64| b.min(after - before)));
        }
        assert_eq!(total, matched_entity_total, "matcher is not deterministic");
        best = best.min(seconds);
    }

    let line = serde_json::json!({
        "engine": "assay",
        "rules": args.rules,
        "crisis_rules": crisis_rules,
        "keyword_groups": keyword_groups,
        "messages": messages.len(),
        "seconds": best,
        "messages_per_second": messages.len() as f64 / best,
        "cpu_seconds": best_cpu,
        "cpu_messages_per_second": best_cpu.map(|s| messages.len() as f64 / s),
        "matched_entity_total": matched_entity_total,
        "checksum": format!("{checksum:016x}"),
        "build_seconds": build_seconds,
        "repeat": args.repeat,
    });
    println!("{line}");
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(|args| run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}
