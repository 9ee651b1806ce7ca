//! Benchmark of the knowledge-base stores' vector search: PostgreSQL's HNSW index (through
//! [`PgStore::nearest`], the store's own query) against the exact scan assay does over the
//! embeddings it reads from the SQLite store ([`FlatIndex`]).
//!
//! ```text
//! cargo run --release -p assay-retrieval --features postgres --example store_bench -- --url postgres://USER@HOST:PORT/DB \
//!     [--n 100000] [--dim 384] [--queries 200] [--k 15] [--m 16] [--ef-construction 64] \
//!     [--ef-search 40,100,200] [--clusters 1000] [--decay 1.0] [--seed 1] [--workers 1] [--clients 1] [--skip-sqlite]
//! ```
//!
//! The data is generated, deterministically (SplitMix64 from `--seed`): `--clusters` random
//! unit centroids, each row a centroid plus Gaussian noise (noise norm ~0.6, so a row's nearest
//! neighbours are mostly, not all, in its own cluster and ANN recall is meaningful), normalised;
//! the queries come from the same distribution with another seed. Dimension `i` has variance
//! `∝ i^-decay` (`--decay`, default 1.0) in the centroids and in the noise: sentence embeddings
//! are far from isotropic, and a decay of 1.0 matches the principal-component spectrum of
//! all-MiniLM-L6-v2's embeddings of the example's 312 entity views (50/80/90/95 % of the
//! variance in 20/64/101/136 components; the generated data: 14/63/106/146). `--decay 0` makes
//! every dimension alike: noise that fills all 384 dimensions, a worst case where a row's
//! cluster-mates are all nearly equally far and the exact top 15 among them is fragile.
//!
//! 1. SQLite: the rows go into a new SQLite store (`kb_view_embeddings`, one transaction, as
//!    `assay kb embed` writes them), are read back into a [`FlatIndex`] as a run reads them, and
//!    every query is answered by the exact scan, single-threaded: the exact top-k and its
//!    queries/s.
//! 2. PostgreSQL: a new database on the server `--url` names (dropped afterwards); the store's
//!    migrations; the rows copied (binary COPY) into `kb_content_entities` as current entities
//!    with a fresh embedding; the HNSW index built with the store's own statement
//!    ([`hnsw_index_sql`]) and `--m`/`--ef-construction` (timed; `maintenance_work_mem` 4 GB,
//!    `--workers` parallel maintenance workers); then, for each `--ef-search`, every query
//!    through [`PgStore::nearest`], one after another: recall@k against the exact top-k, and
//!    queries/s, with the server's own execution time of the search (`EXPLAIN ANALYZE`, the
//!    floor under any client).
//! 3. With `--clients C` (C > 1), both are measured again with C threads querying at once (the
//!    exact scan on C threads, C connections for PostgreSQL): `qps_clients` in the lines.
//!
//! Prints one JSON object per line: `{"phase":"sqlite",…}`, `{"phase":"build",…}`, and one
//! `{"phase":"hnsw","ef_search":…,"recall":…,"qps":…,"speedup":…}` per `--ef-search`.

use std::collections::HashSet;
use std::process::ExitCode;
use std::time::Instant;

use assay_kb::{KbStore, PgStore, SqliteStore, ViewEmbedding, store::hnsw_index_sql};
use assay_retrieval::vector::{FlatIndex, VectorIndex};
use serde_json::json;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

const MODEL: &str = "bench/clustered";

struct Args {
    url: String,
    n: usize,
    dim: usize,
    queries: usize,
    k: usize,
    m: u32,
    ef_construction: u32,
    ef_search: Vec<u32>,
    clusters: usize,
    seed: u64,
    workers: u32,
    clients: usize,
    decay: f64,
    skip_sqlite: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        url: String::new(),
        n: 100_000,
        dim: 384,
        queries: 200,
        k: 15,
        m: 16,
        ef_construction: 64,
        ef_search: vec![40, 100, 200],
        clusters: 1000,
        seed: 1,
        workers: 1,
        clients: 1,
        decay: 1.0,
        skip_sqlite: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--skip-sqlite" {
            args.skip_sqlite = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag}: needs a value"))?;
        let number = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--url" => args.url = value,
            "--n" => args.n = number(&value)? as usize,
            "--dim" => args.dim = number(&value)? as usize,
            "--queries" => args.queries = number(&value)? as usize,
            "--k" => args.k = number(&value)? as usize,
            "--m" => args.m = number(&value)? as u32,
            "--ef-construction" => args.ef_construction = number(&value)? as u32,
            "--ef-search" => {
                args.ef_search = value
                    .split(',')
                    .map(|v| number(v).map(|n| n as u32))
                    .collect::<Result<_, _>>()?;
            }
            "--clusters" => args.clusters = number(&value)? as usize,
            "--seed" => args.seed = number(&value)?,
            "--workers" => args.workers = number(&value)? as u32,
            "--decay" => {
                args.decay = value
                    .parse::<f64>()
                    .map_err(|e| format!("{flag} {value}: {e}"))?;
            }
            "--clients" => args.clients = (number(&value)? as usize).max(1),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.url.is_empty() {
        return Err("--url: the PostgreSQL server (with pgvector) is required".into());
    }
    if args.n == 0 || args.dim == 0 || args.queries == 0 || args.k == 0 || args.clusters == 0 {
        return Err("--n, --dim, --queries, --k and --clusters must be at least 1".into());
    }
    Ok(args)
}

#[path = "support/clustered.rs"]
mod clustered;
use clustered::{centroids, generate, spectrum};

fn id(row: usize) -> String {
    format!("e{row:07}")
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("store_bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn emit(value: &serde_json::Value) {
    println!("{value}");
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let (n, dim, k) = (args.n, args.dim, args.k);
    let started = Instant::now();
    let scale = spectrum(dim, args.decay);
    let centroids = centroids(args.clusters, &scale, args.seed);
    let data = generate(n, &centroids, &scale, args.seed);
    let queries = generate(
        args.queries,
        &centroids,
        &scale,
        args.seed.wrapping_add(1_000_003),
    );
    eprintln!(
        "generated {n} x {dim} and {} queries in {:.1}s",
        args.queries,
        started.elapsed().as_secs_f64()
    );

    // The exact answer, and the exact scan's speed over what SQLite stores.
    let ids: Vec<String> = (0..n).map(id).collect();
    let exact_index = if args.skip_sqlite {
        FlatIndex::from_vec(dim, data.clone(), ids.clone())?
    } else {
        let dir = tempfile::tempdir()?;
        let store = SqliteStore::open(dir.path().join("kb.db"))?;
        let t = Instant::now();
        let rows: Vec<ViewEmbedding> = (0..n)
            .map(|row| ViewEmbedding {
                entity_id: ids[row].clone(),
                view: "title".into(),
                text_hash: String::new(),
                vector: data[row * dim..(row + 1) * dim].to_vec(),
            })
            .collect();
        store.set_view_embeddings(MODEL, &rows, &[])?;
        drop(rows);
        let load_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let stored = store.view_embeddings(MODEL)?;
        let mut flat = Vec::with_capacity(n * dim);
        let mut stored_ids = Vec::with_capacity(n);
        for v in stored {
            flat.extend_from_slice(&v.vector);
            stored_ids.push(v.entity_id);
        }
        let read_s = t.elapsed().as_secs_f64();
        if stored_ids != ids {
            return Err("the SQLite store returned the rows in another order".into());
        }
        let index = FlatIndex::from_vec(dim, flat, stored_ids)?;
        emit(&json!({"phase": "sqlite_load", "rows": n, "write_s": load_s, "read_s": read_s}));
        index
    };
    let t = Instant::now();
    let exact: Vec<Vec<String>> = (0..args.queries)
        .map(|q| {
            exact_index
                .search(&queries[q * dim..(q + 1) * dim], k, None)
                .into_iter()
                .map(|h| ids[h.row].clone())
                .collect()
        })
        .collect();
    let exact_s = t.elapsed().as_secs_f64();
    let exact_qps = args.queries as f64 / exact_s;
    let exact_qps_clients = (args.clients > 1).then(|| {
        let secs = in_parallel(args.queries, args.clients, |q| {
            exact_index.search(&queries[q * dim..(q + 1) * dim], k, None);
            Ok(())
        })
        .unwrap_or(f64::NAN);
        args.queries as f64 / secs
    });
    emit(
        &json!({"phase": "exact", "rows": n, "dim": dim, "decay": args.decay, "queries": args.queries,
                 "k": k, "qps": exact_qps, "clients": args.clients,
                 "qps_clients": exact_qps_clients}),
    );
    drop(exact_index);

    // PostgreSQL: a database of its own.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let admin = connect(&rt, &args.url)?;
    let database = format!("assay_store_bench_{}", std::process::id());
    rt.block_on(admin.batch_execute(&format!("CREATE DATABASE {database}")))?;
    let (base, _) = args
        .url
        .rsplit_once('/')
        .ok_or("--url: expected postgres://USER@HOST:PORT/DB")?;
    let url = format!("{base}/{database}");
    let result = bench_postgres(
        &rt,
        &url,
        &args,
        &data,
        &queries,
        &exact,
        (exact_qps, exact_qps_clients),
    );
    let _ = rt.block_on(admin.batch_execute(&format!("DROP DATABASE {database} WITH (FORCE)")));
    result
}

/// Runs `work(q)` for every query `q` on `clients` threads at once (thread `t` takes queries
/// `t`, `t + clients`, …); the wall time in seconds.
fn in_parallel(
    queries: usize,
    clients: usize,
    work: impl Fn(usize) -> Result<(), assay_kb::KbError> + Sync,
) -> Result<f64, assay_kb::KbError> {
    let t = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let work = &work;
                scope.spawn(move || (c..queries).step_by(clients).try_for_each(work))
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })?;
    Ok(t.elapsed().as_secs_f64())
}

fn connect(
    rt: &tokio::runtime::Runtime,
    url: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = rt.block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))?;
    rt.spawn(connection);
    Ok(client)
}

fn bench_postgres(
    rt: &tokio::runtime::Runtime,
    url: &str,
    args: &Args,
    data: &[f32],
    queries: &[f32],
    exact: &[Vec<String>],
    (exact_qps, exact_qps_clients): (f64, Option<f64>),
) -> Result<(), Box<dyn std::error::Error>> {
    let (n, dim, k) = (args.n, args.dim, args.k);
    let store = PgStore::connect(url)?;
    let client = connect(rt, url)?;
    let vector_type: Type = rt
        .block_on(client.prepare("SELECT embedding FROM kb_content_entities"))?
        .columns()[0]
        .type_()
        .clone();
    let t = Instant::now();
    rt.block_on(async {
        let sink = client
            .copy_in(
                "COPY kb_content_entities (entity_id, entity_type, title, created_by, \
                 embedding, embedding_model, embedding_dim, embedding_text_hash) \
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
                vector_type,
                Type::TEXT,
                Type::INT4,
                Type::TEXT,
            ],
        );
        let mut writer = std::pin::pin!(writer);
        let dim32 = i32::try_from(dim).unwrap_or(i32::MAX);
        for row in 0..n {
            let entity_id = id(row);
            let vector = pgvector::Vector::from(data[row * dim..(row + 1) * dim].to_vec());
            let values: [&(dyn ToSql + Sync); 8] = [
                &entity_id,
                &"KNOWLEDGE",
                &entity_id,
                &"bench",
                &vector,
                &MODEL,
                &dim32,
                &"",
            ];
            writer.as_mut().write(&values).await?;
        }
        writer.as_mut().finish().await?;
        Ok::<_, tokio_postgres::Error>(())
    })?;
    let copy_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    rt.block_on(client.batch_execute(&format!(
        "SET maintenance_work_mem = '4GB'; SET max_parallel_maintenance_workers = {}; {}",
        args.workers,
        hnsw_index_sql(dim as u32, args.m, args.ef_construction)
    )))?;
    let build_s = t.elapsed().as_secs_f64();
    rt.block_on(client.batch_execute("VACUUM ANALYZE kb_content_entities"))?;
    let size: i64 = rt
        .block_on(client.query_one(
            &format!("SELECT pg_relation_size('idx_kb_embedding_hnsw_{dim}')"),
            &[],
        ))?
        .get(0);
    emit(
        &json!({"phase": "build", "rows": n, "dim": dim, "m": args.m,
                 "ef_construction": args.ef_construction, "workers": args.workers,
                 "copy_s": copy_s, "build_s": build_s, "index_bytes": size}),
    );

    // Check the plan uses the index, as the store sends it: a prepared statement, whose plan
    // may be generic after a few executions (so check the generic plan).
    let near_sql = format!(
        "SELECT entity_id FROM kb_content_entities \
         WHERE embedding_dim = {dim} AND is_current AND is_active \
         AND embedding_model = $2 \
         ORDER BY embedding::vector({dim}) <=> $1 LIMIT {k}"
    );
    let probe_text = format!(
        "[{}]",
        queries[..dim]
            .iter()
            .map(f32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    rt.block_on(client.batch_execute(&format!(
        "SET plan_cache_mode = force_generic_plan; \
         PREPARE near(vector, text) AS {near_sql}"
    )))?;
    let plan: Vec<String> = rt
        .block_on(client.query(
            &format!("EXPLAIN EXECUTE near('{probe_text}', '{MODEL}')"),
            &[],
        ))?
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect();
    rt.block_on(client.batch_execute("DEALLOCATE near; RESET plan_cache_mode"))?;
    if !plan.iter().any(|l| l.contains("idx_kb_embedding_hnsw")) {
        return Err(format!(
            "the query does not use the HNSW index:\n{}",
            plan.join("\n")
        )
        .into());
    }

    for &ef in &args.ef_search {
        // One untimed pass warms the cache (the index is read from shared buffers after).
        for q in 0..args.queries.min(20) {
            store.nearest(MODEL, &queries[q * dim..(q + 1) * dim], k, ef)?;
        }
        let t = Instant::now();
        let mut found = 0usize;
        for (q, truth) in exact.iter().enumerate() {
            let hits = store.nearest(MODEL, &queries[q * dim..(q + 1) * dim], k, ef)?;
            let truth: HashSet<&String> = truth.iter().collect();
            found += hits.iter().filter(|(id, _)| truth.contains(id)).count();
        }
        let secs = t.elapsed().as_secs_f64();
        let qps = args.queries as f64 / secs;
        // The server's own time for the same search (EXPLAIN ANALYZE), the floor of a query.
        let sample = args.queries.min(50);
        let mut server_ms = 0.0;
        rt.block_on(client.batch_execute(&format!("SET hnsw.ef_search = {ef}")))?;
        for q in 0..sample {
            let probe = pgvector::Vector::from(queries[q * dim..(q + 1) * dim].to_vec());
            let row = rt.block_on(client.query_one(
                &format!("EXPLAIN (ANALYZE, FORMAT JSON) {near_sql}"),
                &[&probe, &MODEL],
            ))?;
            let plan: serde_json::Value = row.try_get(0)?;
            server_ms += plan[0]["Execution Time"].as_f64().unwrap_or(f64::NAN);
        }
        server_ms /= sample as f64;
        let qps_clients = if args.clients > 1 {
            let secs = in_parallel(args.queries, args.clients, |q| {
                store.nearest(MODEL, &queries[q * dim..(q + 1) * dim], k, ef)?;
                Ok(())
            })?;
            Some(args.queries as f64 / secs)
        } else {
            None
        };
        emit(
            &json!({"phase": "hnsw", "rows": n, "dim": dim, "decay": args.decay, "m": args.m,
                     "ef_construction": args.ef_construction, "ef_search": ef, "k": k,
                     "recall": found as f64 / (k * args.queries) as f64, "qps": qps,
                     "server_ms": server_ms, "clients": args.clients,
                     "qps_clients": qps_clients,
                     "speedup_clients": qps_clients.zip(exact_qps_clients).map(|(h, e)| h / e),
                     "speedup": qps / exact_qps}),
        );
    }
    Ok(())
}
