//! Times importing a `kb/` folder into a fresh SQLite store: the first import, then an import
//! of the same, unchanged files (which must write no version).
//!
//! ```sh
//! cargo run -p assay-kb --release --example import_timing [KB_DIR] [RUNS]
//! ```
//! `KB_DIR` defaults to the bundled example project's `kb/`, `RUNS` to 20.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use assay_kb::{Edit, KbStore, SqliteStore};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let kb_dir = args.next().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/coparent/kb"),
        PathBuf::from,
    );
    let runs: u32 = args.next().map_or(Ok(20), |n| n.parse())?.max(1);
    let entities = assay_kb::load_dir(&kb_dir)?.kb.entities().to_vec();

    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path().join("kb.db"))?;
    let start = Instant::now();
    let first = store.import(&entities, &Edit::now("import"))?;
    let first_time = start.elapsed();

    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let report = store.import(&entities, &Edit::now("import"))?;
        times.push(start.elapsed());
        assert_eq!(
            report.unchanged.len(),
            entities.len(),
            "an unchanged import wrote versions"
        );
    }
    times.sort();
    println!("{} entities from {}", entities.len(), kb_dir.display());
    println!(
        "first import ({} created): {:.2} ms",
        first.created.len(),
        ms(first_time)
    );
    println!(
        "unchanged import, {runs} runs: median {:.2} ms, min {:.2} ms, max {:.2} ms",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1])
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
