//! Benchmark of issue 20's "HNSW candidates in runs": the semantic stage of a run on a
//! PostgreSQL store of N generated entities, with its candidates from the HNSW index against
//! the exact path (every fresh embedding scored in memory), through the harness's own code.
//!
//! ```text
//! cargo run --release -p assay-cli --example hnsw_runs_bench -- create-database --url postgres://USER@HOST:PORT/postgres --database DB
//! cargo run --release -p assay-cli --example hnsw_runs_bench -- load --url postgres://USER@HOST:PORT/DB \
//!     [--n 1000000] [--m 16] [--ef-construction 64] [--workers 2]
//! cargo run --release -p assay-cli --example hnsw_runs_bench -- measure --url postgres://USER@HOST:PORT/DB \
//!     --dir DIR [--queries 200] [--ef-search 100,200,400] [--assay target/release/assay]
//! ```
//!
//! `load` fills the database `--url` names (which it empties first: give it a database of its
//! own) through the store's migrations and a binary `COPY`: N current, active SITUATION entities
//! `e0000000`… titled by their id, every tenth for the CLINICIAN audience only and the others for
//! PARENT, each with a fresh embedding of the model `openai/bench-clustered` (the text hash of its
//! embedding text, so a run finds nothing to re-embed). The vectors are the store bench's
//! (`crates/assay-retrieval/examples/store_bench.rs`, the same generator and seed): clustered,
//! 384 dimensions, variance decaying as i^-1 like MiniLM's. Then the store's own HNSW index
//! statement (`hnsw_index_sql`, timed) and `VACUUM ANALYZE`.
//!
//! `measure` serves the query vectors as an OpenAI-compatible embeddings endpoint on loopback
//! (`POST /v1/embeddings`: the text `q0042` is the 42nd query of the store bench's generator;
//! any other text is refused, so a run that tried to re-embed the entities would fail), writes a
//! project in `--dir` that uses the database and that endpoint (a semantic bank of one case per
//! query, every tenth for a CLINICIAN user, and the same messages in `messages.jsonl`), and
//! loads it. Then, through `assay_project::engine`, it builds the exact pipeline (the run's
//! exact path: the store's fresh embeddings read into memory) and, for each `--ef-search`, the
//! index pipeline (`[semantic] search = "index"`), and runs every case's semantic stage
//! (`SemanticSearch::retrieve`, the semantic bank's system under test: 15 candidates, 6
//! selected) on both, one after another: the time a query, the recall@15 of the index path's
//! candidates against the exact path's, and how many selections are the same. With `--assay`
//! it then runs `assay kb check-index --k 15 --ef-search E --json` on the same project and
//! messages, and reports its recall beside the bench's; and `assay run --bank semantic` once
//! with `search = "exact"` and once with `"index"` (the last `--ef-search`), timed end to end.
//!
//! One JSON object per line on stdout: `{"phase":"load",…}`, `{"phase":"setup",…}`,
//! `{"phase":"exact",…}`, one `{"phase":"index","ef_search":…}` per value,
//! `{"phase":"check_index",…}` and `{"phase":"run",…}`.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use assay_core::UserState;
use assay_core::entity::Entity;
use assay_kb::{PgStore, store::hnsw_index_sql};
use assay_project::engine::{self, SemanticSearch};
use assay_project::project::Project;
use assay_retrieval::pipeline::{IndexSearch, Pipeline};
use assay_run::runners::SemanticRetriever;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

/// The embedding model the entities' vectors are stored under (the OpenAI-compatible client
/// names its model `openai/<model>`).
const MODEL_ID: &str = "bench-clustered";
const DIM: usize = 384;
const CLUSTERS: usize = 1000;
const SEED: u64 = 1;
const DECAY: f64 = 1.0;
/// The semantic bank's first stage and selection (`[semantic] candidates`, `top_k`).
const CANDIDATES: usize = 15;
const TOP_K: usize = 6;

fn model() -> String {
    format!("openai/{MODEL_ID}")
}

/// The store bench's generator (one file, included by both benches).
#[path = "../../assay-retrieval/examples/support/clustered.rs"]
mod clustered;
use clustered::{Generator, Rng, centroids, spectrum};

/// The spectrum and centroids of the store bench's data.
fn clusters() -> (Vec<f64>, Vec<Vec<f32>>) {
    let scale = spectrum(DIM, DECAY);
    let centres = centroids(CLUSTERS, &scale, SEED);
    (scale, centres)
}

/// The query vectors: the store bench's queries (its seed + 1,000,003).
fn queries(count: usize) -> Vec<Vec<f32>> {
    let (scale, centres) = clusters();
    let mut generator = Generator {
        scale: &scale,
        centroids: &centres,
        rng: Rng(SEED.wrapping_add(1_000_003)),
    };
    (0..count)
        .map(|_| {
            let mut v = vec![0f32; DIM];
            generator.next_row(&mut v);
            v
        })
        .collect()
}

fn entity_id(row: usize) -> String {
    format!("e{row:07}")
}

fn prompt(q: usize) -> String {
    format!("q{q:04}")
}

/// Every tenth entity and every tenth query are for clinicians.
fn audience(i: usize) -> &'static str {
    if i % 10 == 9 { "CLINICIAN" } else { "PARENT" }
}

struct Args {
    command: String,
    url: String,
    database: String,
    dir: PathBuf,
    n: usize,
    queries: usize,
    m: u32,
    ef_construction: u32,
    workers: u32,
    ef_search: Vec<u32>,
    assay: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let command = it.next().ok_or("expected `load` or `measure`")?;
    let mut args = Args {
        command,
        url: String::new(),
        database: String::new(),
        dir: PathBuf::new(),
        n: 1_000_000,
        queries: 200,
        m: 16,
        ef_construction: 64,
        workers: 2,
        ef_search: vec![100, 200, 400],
        assay: None,
    };
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag}: needs a value"))?;
        let number = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--url" => args.url = value,
            "--database" => args.database = value,
            "--dir" => args.dir = PathBuf::from(value),
            "--n" => args.n = number(&value)? as usize,
            "--queries" => args.queries = number(&value)? as usize,
            "--m" => args.m = number(&value)? as u32,
            "--ef-construction" => args.ef_construction = number(&value)? as u32,
            "--workers" => args.workers = number(&value)? as u32,
            "--ef-search" => {
                args.ef_search = value
                    .split(',')
                    .map(|v| number(v).map(|n| n as u32))
                    .collect::<Result<_, _>>()?;
            }
            "--assay" => args.assay = Some(PathBuf::from(value)),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.url.is_empty() {
        return Err("--url: the PostgreSQL database (with pgvector) is required".into());
    }
    Ok(args)
}

fn emit(value: &Value) {
    println!("{value}");
}

fn main() -> ExitCode {
    let result = parse_args()
        .map_err(Into::into)
        .and_then(|args| match args.command.as_str() {
            "create-database" => create_database(&args),
            "load" => load(&args),
            "measure" => measure(&args),
            other => Err(format!("unknown command `{other}` (expected load or measure)").into()),
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hnsw_runs_bench: {e}");
            ExitCode::from(2)
        }
    }
}

type Error = Box<dyn std::error::Error>;

fn connect(
    rt: &tokio::runtime::Runtime,
    url: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = rt.block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))?;
    rt.spawn(connection);
    Ok(client)
}

/// Creates `--database` on the server `--url` names, unless it exists.
fn create_database(args: &Args) -> Result<(), Error> {
    let name = &args.database;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err("--database: a name of letters, digits and underscores".into());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = connect(&rt, &args.url)?;
    let exists = rt
        .block_on(client.query("SELECT 1 FROM pg_database WHERE datname = $1", &[name]))?
        .len()
        == 1;
    if !exists {
        rt.block_on(client.batch_execute(&format!("CREATE DATABASE {name}")))?;
    }
    Ok(())
}

fn load(args: &Args) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let client = connect(&rt, &args.url)?;
    rt.block_on(client.batch_execute(
        "DROP TABLE IF EXISTS kb_content_entities, kb_view_embeddings, user_state, \
         schema_migrations CASCADE",
    ))?;
    // The store's schema, as a run would find it.
    drop(PgStore::connect(&args.url)?);
    let vector_type: Type = rt
        .block_on(client.prepare("SELECT embedding FROM kb_content_entities"))?
        .columns()[0]
        .type_()
        .clone();
    let model = model();
    let t = Instant::now();
    rt.block_on(async {
        let sink = client
            .copy_in(
                "COPY kb_content_entities (entity_id, entity_type, title, created_by, \
                 audience_types, embedding, embedding_model, embedding_dim, embedding_text_hash) \
                 FROM STDIN (FORMAT binary)",
            )
            .await?;
        let writer = BinaryCopyInWriter::new(
            sink,
            &[
                Type::TEXT,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT_ARRAY,
                vector_type,
                Type::TEXT,
                Type::INT4,
                Type::TEXT,
            ],
        );
        let mut writer = std::pin::pin!(writer);
        let dim = i32::try_from(DIM).unwrap_or(i32::MAX);
        let (scale, centres) = clusters();
        let mut generator = Generator {
            scale: &scale,
            centroids: &centres,
            rng: Rng(SEED),
        };
        let mut v = vec![0f32; DIM];
        for i in 0..args.n {
            generator.next_row(&mut v);
            let id = entity_id(i);
            let entity: Entity = serde_json::from_value(
                json!({"entity_id": id, "entity_type": "KNOWLEDGE", "title": id}),
            )?;
            let hash = assay_kb::embedding_text_hash(&entity);
            let audiences = vec![audience(i).to_owned()];
            let vector = pgvector::Vector::from(v.clone());
            let values: [&(dyn ToSql + Sync); 9] = [
                &id,
                &"KNOWLEDGE",
                &id,
                &"bench",
                &audiences,
                &vector,
                &model,
                &dim,
                &hash,
            ];
            writer.as_mut().write(&values).await?;
        }
        writer.as_mut().finish().await?;
        Ok::<(), Error>(())
    })?;
    let copy_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    rt.block_on(client.batch_execute(&format!(
        "SET maintenance_work_mem = '4GB'; SET max_parallel_maintenance_workers = {}; {}",
        args.workers,
        hnsw_index_sql(DIM as u32, args.m, args.ef_construction)
    )))?;
    let build_s = t.elapsed().as_secs_f64();
    rt.block_on(client.batch_execute("VACUUM ANALYZE kb_content_entities"))?;
    let size: i64 = rt
        .block_on(client.query_one(
            &format!("SELECT pg_relation_size('idx_kb_embedding_hnsw_{DIM}')"),
            &[],
        ))?
        .get(0);
    emit(
        &json!({"phase": "load", "entities": args.n, "dim": DIM, "m": args.m,
                  "ef_construction": args.ef_construction, "workers": args.workers,
                  "copy_s": copy_s, "build_s": build_s, "index_bytes": size}),
    );
    Ok(())
}

/// The embeddings endpoint: `q0042` → the 42nd query vector.
async fn embeddings(
    State(vectors): State<Arc<Vec<Vec<f32>>>>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, (StatusCode, String)> {
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => return Err((StatusCode::BAD_REQUEST, "no input".into())),
    };
    let mut data = Vec::with_capacity(inputs.len());
    for (index, text) in inputs.iter().enumerate() {
        let vector = text
            .strip_prefix('q')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| vectors.get(n))
            .ok_or_else(|| {
                (
                    StatusCode::BAD_REQUEST,
                    format!("the bench embeds only its queries, not {text:?}"),
                )
            })?;
        data.push(json!({"object": "embedding", "index": index, "embedding": vector}));
    }
    Ok(Json(
        json!({"object": "list", "data": data, "model": MODEL_ID, "usage": {"prompt_tokens": 0, "total_tokens": 0}}),
    ))
}

/// Writes the bench project into `dir`: `assay.toml`, the semantic bank (its expected primary
/// entity the exact top 1 when known) and `messages.jsonl`.
fn write_project(
    dir: &Path,
    url: &str,
    base_url: &str,
    search: &str,
    ef_search: u32,
    count: usize,
    top1: &HashMap<String, String>,
) -> Result<(), Error> {
    std::fs::create_dir_all(dir.join("test_banks/semantic"))?;
    std::fs::create_dir_all(dir.join("kb"))?;
    std::fs::write(
        dir.join("assay.toml"),
        format!(
            "# Written by hnsw_runs_bench.\nstore = \"{url}\"\n\n[embedder]\nmodel = \"openai/{MODEL_ID}\"\nopenai_base_url = \"{base_url}\"\n\n[retrieval]\nmode = \"dense\"\n\n[semantic]\ncandidates = {CANDIDATES}\ntop_k = {TOP_K}\nsearch = \"{search}\"\nef_search = {ef_search}\nconcurrency = 1\n"
        ),
    )?;
    let tests: Vec<Value> = (0..count)
        .map(|q| {
            let p = prompt(q);
            let expected: Vec<&String> = top1.get(&p).into_iter().collect();
            json!({"test_id": format!("B{q:04}"), "name": p, "category": "bench",
                   "prompt": p, "expected_primary": expected,
                   "user_state": {"user_type": audience(q)}})
        })
        .collect();
    let bank = json!({"bank_type": "SEMANTIC", "version": "2.0", "tests": tests});
    std::fs::write(
        dir.join("test_banks/semantic/bench.json"),
        serde_json::to_string_pretty(&bank)?,
    )?;
    let messages: Vec<String> = (0..count)
        .map(|q| {
            json!({"id": format!("B{q:04}"), "message": prompt(q), "audience": audience(q)})
                .to_string()
        })
        .collect();
    std::fs::write(dir.join("messages.jsonl"), messages.join("\n") + "\n")?;
    Ok(())
}

/// One case's semantic stage: its candidates and its selections.
type CaseResult = (Vec<String>, Vec<String>);

/// Runs the semantic stage of every case on `search`: the candidates and selections of each,
/// and the seconds per query.
fn run_cases(
    rt: &tokio::runtime::Runtime,
    search: &SemanticSearch<'_>,
    prompts: &[String],
) -> Result<(Vec<CaseResult>, f64), Error> {
    let mut out = Vec::with_capacity(prompts.len());
    let t = Instant::now();
    for (q, p) in prompts.iter().enumerate() {
        let mut state = UserState::new();
        state.insert("user_type".into(), json!(audience(q)));
        let r = rt.block_on(search.retrieve(p, &state))?;
        out.push((
            r.candidates.into_iter().map(|c| c.entity_id).collect(),
            r.selections,
        ));
    }
    Ok((out, t.elapsed().as_secs_f64() / prompts.len() as f64))
}

fn measure(args: &Args) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let vectors = Arc::new(queries(args.queries));
    let listener = rt.block_on(tokio::net::TcpListener::bind(SocketAddr::from((
        [127, 0, 0, 1],
        0,
    ))))?;
    let base_url = format!("http://{}/v1", listener.local_addr()?);
    let app = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(vectors.clone());
    rt.spawn(async move { axum::serve(listener, app).await });
    let dir = &args.dir;
    let last_ef = args.ef_search.last().copied().unwrap_or(100);
    write_project(
        dir,
        &args.url,
        &base_url,
        "exact",
        last_ef,
        args.queries,
        &HashMap::new(),
    )?;

    // What a run reads: the project, the store, its snapshot.
    let t = Instant::now();
    let project = Project::load(dir)?;
    let store = engine::open_store(&project.settings)?;
    let kb = engine::snapshot(&*store)?;
    let snapshot_s = t.elapsed().as_secs_f64();
    let choice = engine::choose_embedder(&project.settings, None, &|n| std::env::var(n).ok())?;
    let config = engine::retrieval_config(&project.settings, &choice);
    let model = model();
    let prompts: Vec<String> = (0..args.queries).map(prompt).collect();
    let queries: HashMap<String, Result<Vec<f32>, String>> = prompts
        .iter()
        .zip(vectors.iter())
        .map(|(p, v)| (p.clone(), Ok(v.clone())))
        .collect();

    // The exact path: the fresh embeddings read into memory and scored.
    let t = Instant::now();
    let exact = engine::build_pipeline(&*store, &kb, &project, &model, config.clone())?;
    let exact_setup_s = t.elapsed().as_secs_f64();
    let search = SemanticSearch::new(&exact, &queries, CANDIDATES, TOP_K, &model, None);
    run_cases(&rt, &search, &prompts[..prompts.len().min(10)])?; // warm-up
    let (truth, exact_s) = run_cases(&rt, &search, &prompts)?;
    emit(&json!({"phase": "setup", "entities": kb.entities().len(),
                  "snapshot_s": snapshot_s, "exact_pipeline_s": exact_setup_s}));
    emit(
        &json!({"phase": "exact", "queries": args.queries, "ms_per_query": exact_s * 1000.0,
                  "qps": 1.0 / exact_s}),
    );
    let exact_indexed = exact.indexed();
    drop(search);
    drop(exact);

    let index = store
        .vector_index()
        .ok_or("the store has no vector index")?;
    let mut recall_by_ef = Vec::new();
    for &ef in &args.ef_search {
        let t = Instant::now();
        let indexed = Pipeline::with_index(
            &kb,
            project.patterns.clone(),
            IndexSearch {
                index: index.clone(),
                model: model.clone(),
                ef_search: ef,
            },
            config.clone(),
        )?;
        let setup_s = t.elapsed().as_secs_f64();
        let search = SemanticSearch::new(&indexed, &queries, CANDIDATES, TOP_K, &model, None);
        run_cases(&rt, &search, &prompts[..prompts.len().min(20)])?; // warm-up
        let before = indexed.index_stats().unwrap_or_default();
        let (got, index_s) = run_cases(&rt, &search, &prompts)?;
        let after = indexed.index_stats().unwrap_or_default();
        let mut recalls = [Vec::new(), Vec::new()];
        let mut same_selections = 0usize;
        for (q, ((exact_c, exact_sel), (index_c, index_sel))) in truth.iter().zip(&got).enumerate()
        {
            let found: HashSet<&String> = index_c.iter().collect();
            let hits = exact_c.iter().filter(|id| found.contains(id)).count();
            recalls[usize::from(audience(q) == "CLINICIAN")]
                .push(hits as f64 / exact_c.len().max(1) as f64);
            same_selections += usize::from(exact_sel == index_sel);
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let all: Vec<f64> = recalls.concat();
        let recall = mean(&all);
        recall_by_ef.push((ef, recall));
        emit(
            &json!({"phase": "index", "ef_search": ef, "queries": args.queries,
                      "recall_at_15": recall, "recall_parent": mean(&recalls[0]),
                      "recall_clinician": mean(&recalls[1]),
                      "same_selections": same_selections,
                      "ms_per_query": index_s * 1000.0, "qps": 1.0 / index_s,
                      "speedup": exact_s / index_s, "index_pipeline_s": setup_s,
                      "exact_fallbacks": after.exact_fallbacks - before.exact_fallbacks,
                      "exact_rows_in_memory": exact_indexed}),
        );
    }

    let Some(assay) = &args.assay else {
        return Ok(());
    };
    // The bank's expected entity: the exact top 1, so that both runs score something.
    let top1: HashMap<String, String> = prompts
        .iter()
        .zip(&truth)
        .filter_map(|(p, (c, _))| c.first().map(|id| (p.clone(), id.clone())))
        .collect();
    write_project(
        dir,
        &args.url,
        &base_url,
        "exact",
        last_ef,
        args.queries,
        &top1,
    )?;
    for (ef, recall) in &recall_by_ef {
        let output = std::process::Command::new(assay)
            .args(["kb", "check-index", "--project"])
            .arg(dir)
            .args(["--messages"])
            .arg(dir.join("messages.jsonl"))
            .args([
                "--k",
                &CANDIDATES.to_string(),
                "--ef-search",
                &ef.to_string(),
                "--json",
            ])
            .env("OPENAI_API_KEY", "bench")
            .output()?;
        let check: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
            format!(
                "assay kb check-index: {e}: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
        emit(&json!({"phase": "check_index", "ef_search": ef,
                      "exit": output.status.code(),
                      "mean_recall": check["mean_recall"], "bench_recall": recall,
                      "equal": check["mean_recall"].as_f64().is_some_and(|r| (r - recall).abs() < 1e-12),
                      "index_ms": check["index_ms"], "exact_ms": check["exact_ms"],
                      "exact_fallbacks": check["exact_fallbacks"]}));
    }
    for search in ["exact", "index"] {
        write_project(
            dir,
            &args.url,
            &base_url,
            search,
            last_ef,
            args.queries,
            &top1,
        )?;
        let t = Instant::now();
        let output = std::process::Command::new(assay)
            .arg("run")
            .arg(dir)
            .args(["--banks", "semantic", "--json", "--no-save"])
            .env("OPENAI_API_KEY", "bench")
            .output()?;
        let wall_s = t.elapsed().as_secs_f64();
        let log: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
            format!(
                "assay run: {e}: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
        emit(
            &json!({"phase": "run", "search": search, "ef_search": last_ef,
                      "exit": output.status.code(), "wall_s": wall_s,
                      "duration_ms": log["duration_ms"],
                      "semantic_average": log["semantic"]["average_score"],
                      "setup_search": log["setup"]["semantic_search"],
                      "setup_detail": log["setup"]["semantic_search_detail"]}),
        );
    }
    Ok(())
}
