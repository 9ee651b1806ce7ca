//! Reading a run's cases back, whichever way they were kept: from the RunLog's lists when they
//! are complete (a small run, a run with no run log, a RunLog from before version 3), else
//! streamed from its run log, `results/cases_<stamp>.jsonl`.
//!
//! The run log is the run's journal, moved beside the RunLog when the run is saved:
//!
//! ```text
//! {"journal":1,"run_id":"…","timestamp":"…","request":"…","setup":"…"}
//! {"bank":"state","result":{…StateCaseResult…}}
//! {"bank":"pattern","result":{…PatternCaseResult…}}
//! ```
//!
//! Line 1 ties it to its RunLog (the same `run_id`); then one case a line, in the order the
//! cases finished (a resumed run's earlier cases first). Every case appears once. Readers
//! hold one line at a time, and believe nothing they cannot check: a line that is not a case
//! of a known bank, a case that appears twice (a line replaced by a copy of another), a count
//! other than the RunLog's, and a file whose SHA-256 differs from the one the RunLog recorded
//! at the save are each an error naming the file (and the line where there is one).
//! [`verify`] makes that pass alone, for a reader (the HTTP API) that must know before it
//! answers.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use assay_core::aggregate::CaseRecord;
use assay_core::bank::BankType;
use assay_core::rundiff::CaseScore;
use assay_core::runlog::RunLog;

use crate::journal::JournalHeader;

/// Why a run's cases could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum CaseLogError {
    /// The run log is missing or unreadable.
    #[error("{path}: {message}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A line is not what a run log holds.
    #[error("{path}:{line}: {message}")]
    Bad {
        /// The file.
        path: PathBuf,
        /// Its line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// What the caller does with a case failed.
    #[error("{0}")]
    Each(String),
}

/// Where the run log of `log` is, when its lists are not complete (`None`: the lists hold
/// every case). `results_dir` is the folder the RunLog was read from.
pub fn cases_file(results_dir: &Path, log: &RunLog) -> Option<PathBuf> {
    if log.is_complete() {
        return None;
    }
    log.cases.as_ref().map(|c| results_dir.join(&c.file))
}

/// Calls `each` with every case of `log` in `bank` (every bank with `None`): from the lists
/// when they are complete, else read from `file` (the run log) a line at a time. A run log
/// that belongs to another run, or has a line that is not a case, is an error naming the line.
pub fn for_each_case(
    log: &RunLog,
    file: Option<&Path>,
    bank: Option<BankType>,
    each: &mut dyn FnMut(CaseRecord) -> Result<(), String>,
) -> Result<(), CaseLogError> {
    let wanted = |b: BankType| bank.is_none_or(|w| w == b);
    let file = match file {
        Some(f) if !log.is_complete() => f,
        _ => {
            let mut call = |r: CaseRecord| each(r).map_err(CaseLogError::Each);
            if let Some(r) = log.semantic.as_ref().filter(|_| wanted(BankType::Semantic)) {
                r.results
                    .iter()
                    .cloned()
                    .map(CaseRecord::Semantic)
                    .try_for_each(&mut call)?;
            }
            if let Some(r) = log.state.as_ref().filter(|_| wanted(BankType::State)) {
                r.results
                    .iter()
                    .cloned()
                    .map(CaseRecord::State)
                    .try_for_each(&mut call)?;
            }
            if let Some(r) = log.pattern.as_ref().filter(|_| wanted(BankType::Pattern)) {
                r.results
                    .iter()
                    .cloned()
                    .map(CaseRecord::Pattern)
                    .try_for_each(&mut call)?;
            }
            if let Some(r) = log.always.as_ref().filter(|_| wanted(BankType::Always)) {
                r.results
                    .iter()
                    .cloned()
                    .map(CaseRecord::Always)
                    .try_for_each(&mut call)?;
            }
            if let Some(r) = log.answer.as_ref().filter(|_| wanted(BankType::Answer)) {
                r.results
                    .iter()
                    .cloned()
                    .map(CaseRecord::Answer)
                    .try_for_each(&mut call)?;
            }
            return Ok(());
        }
    };
    let unreadable = |e: std::io::Error| CaseLogError::Unreadable {
        path: file.to_owned(),
        message: if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "the run log of run {} is missing (its RunLog lists only the worst cases; every case is in this file)",
                log.run_id
            )
        } else {
            format!("cannot read the run log: {e}")
        },
    };
    if file.is_dir() {
        return Err(CaseLogError::Unreadable {
            path: file.to_owned(),
            message: format!(
                "is a folder where the run log of run {} belongs",
                log.run_id
            ),
        });
    }
    let mut reader = std::io::BufReader::new(std::fs::File::open(file).map_err(unreadable)?);
    let bad = |line: usize, message: String| CaseLogError::Bad {
        path: file.to_owned(),
        line,
        message,
    };
    let mut count = 0usize;
    let mut hash = Sha256::new();
    // Each case's bank and a 64-bit digest of its id, with the line it was first seen on.
    let mut seen: HashMap<(BankType, u64), usize> = HashMap::new();
    let mut raw = String::new();
    let mut n = 0usize;
    loop {
        raw.clear();
        if reader.read_line(&mut raw).map_err(unreadable)? == 0 {
            break;
        }
        hash.update(raw.as_bytes());
        n += 1;
        let line = raw.trim_end_matches(['\n', '\r']);
        if n == 1 {
            let header: JournalHeader = serde_json::from_str(line)
                .map_err(|e| bad(n, format!("not a run log header: {e}")))?;
            if header.run_id != log.run_id {
                return Err(bad(
                    n,
                    format!(
                        "the run log of run {}, not of this RunLog's run {}",
                        header.run_id, log.run_id
                    ),
                ));
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        // Only the bank and the id are parsed when the bank is not wanted: a record of another
        // bank costs a scan, not an allocation per field.
        let key: CaseKey =
            serde_json::from_str(line).map_err(|e| bad(n, format!("not a case: {e}")))?;
        let Some(line_bank) = BankType::from_key(&key.bank) else {
            return Err(bad(
                n,
                format!(
                    "unknown bank `{}` (a run log holds semantic, state, pattern and always cases)",
                    key.bank
                ),
            ));
        };
        let id = key.result.test_id.as_deref().unwrap_or_default();
        if let Some(first) = seen.insert((line_bank, id_digest(id)), n) {
            return Err(bad(
                n,
                format!(
                    "the {} case `{id}` again (first on line {first}): every case appears once, so the run log was changed",
                    line_bank.key()
                ),
            ));
        }
        count += 1;
        if !wanted(line_bank) {
            continue;
        }
        let record: CaseRecord =
            serde_json::from_str(line).map_err(|e| bad(n, format!("not a case: {e}")))?;
        each(record).map_err(CaseLogError::Each)?;
    }
    if n == 0 {
        return Err(bad(1, "empty: no run log header".into()));
    }
    if let Some(expected) = log.cases.as_ref().and_then(|c| c.sha256.as_deref()) {
        let got = format!("{:x}", hash.finalize());
        if got != expected {
            return Err(CaseLogError::Unreadable {
                path: file.to_owned(),
                message: format!(
                    "changed since run {} was saved: its SHA-256 is {got}, the RunLog recorded {expected}",
                    log.run_id
                ),
            });
        }
    }
    if let Some(expected) = log.cases.as_ref().map(|c| c.count)
        && count != expected
    {
        return Err(CaseLogError::Unreadable {
            path: file.to_owned(),
            message: format!(
                "the run log holds {count} cases where its RunLog counts {expected}: it was cut short or changed"
            ),
        });
    }
    Ok(())
}

/// The bank and case id of a run-log line, read without the rest.
#[derive(serde::Deserialize)]
struct CaseKey<'a> {
    #[serde(borrow)]
    bank: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    result: IdKey<'a>,
}

#[derive(serde::Deserialize, Default)]
struct IdKey<'a> {
    #[serde(borrow, default)]
    test_id: Option<std::borrow::Cow<'a, str>>,
}

/// A 64-bit digest of a case id (the first 8 bytes of its SHA-256): the duplicate check holds
/// 8 bytes a case, not the id.
fn id_digest(id: &str) -> u64 {
    let d = Sha256::digest(id.as_bytes());
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// The SHA-256 (hex) of a run log, as the save records it.
pub fn digest(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hash = Sha256::new();
    std::io::copy(&mut file, &mut hash)?;
    Ok(format!("{:x}", hash.finalize()))
}

/// The SHA-256 of a run's cases as stored: each case record serialised as JSON (as a run log
/// line holds it) and ended by a newline, in the order [`for_each_case`] gives them. A shard
/// records it when it is saved (`ShardRun::cases_sha256`), over whatever its case results
/// hold, so a score, a verdict or any other field changed afterwards is found by the merge,
/// whether the shard's cases are listed in its RunLog or streamed to its run log.
#[derive(Default)]
pub struct CasesDigest {
    hash: Sha256,
    count: usize,
}

impl CasesDigest {
    /// Adds one case.
    pub fn add(&mut self, record: &CaseRecord) -> Result<(), String> {
        let line =
            serde_json::to_string(record).map_err(|e| format!("cannot encode a case: {e}"))?;
        self.hash.update(line.as_bytes());
        self.hash.update(b"\n");
        self.count += 1;
        Ok(())
    }

    /// Cases added.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The digest, as hex.
    pub fn finish(self) -> String {
        format!("{:x}", self.hash.finalize())
    }
}

/// The [`CasesDigest`] of every case of `log` (its run log `file` when its lists are not
/// complete), checking the run log as [`for_each_case`] does.
pub fn cases_digest(log: &RunLog, file: Option<&Path>) -> Result<String, CaseLogError> {
    let mut digest = CasesDigest::default();
    for_each_case(log, file, None, &mut |r| digest.add(&r))?;
    Ok(digest.finish())
}

/// Reads the whole run log of `log` and checks it (see the module docs) without doing
/// anything with its cases: for a reader that must know before it answers.
pub fn verify(log: &RunLog, file: Option<&Path>) -> Result<(), CaseLogError> {
    for_each_case(log, file, None, &mut |_| Ok(()))
}

/// The score of every case of `log`, as a run comparison needs them (see [`for_each_case`]).
pub fn case_scores(log: &RunLog, file: Option<&Path>) -> Result<Vec<CaseScore>, CaseLogError> {
    if file.is_none() || log.is_complete() {
        return Ok(assay_core::rundiff::case_scores(log));
    }
    // One bank after another, so the scores come in bank order as from the lists.
    // One pass over the run log; grouped by bank (in run order within each), as the RunLog's
    // lists give them.
    let mut by_bank: Vec<Vec<CaseScore>> = BankType::ALL.iter().map(|_| Vec::new()).collect();
    for_each_case(log, file, None, &mut |r| {
        let bank = r.bank();
        if let Some(slot) = BankType::ALL.iter().position(|b| *b == bank) {
            by_bank[slot].push(r.case_score());
        }
        Ok(())
    })?;
    Ok(by_bank.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::aggregate::Aggregator;
    use assay_core::runlog::{AlwaysCaseResult, CaseLog};
    use assay_core::scoring::Breakdown;

    fn always(id: &str, score: u32) -> CaseRecord {
        CaseRecord::Always(AlwaysCaseResult {
            test_id: id.into(),
            name: String::new(),
            user_type: "PARENT".into(),
            loaded_entities: vec![],
            expected_always: vec![],
            missing: vec![],
            score,
            breakdown: Breakdown::default(),
            is_hard_fail: score == 0,
            duration_ms: None,
            verdict: None,
        })
    }

    /// A RunLog of `scores` that lists only the worst one, and its run log.
    fn streamed(dir: &Path, scores: &[u32]) -> (RunLog, PathBuf) {
        let mut agg = Aggregator::new(1, 0);
        let path = dir.join("cases.jsonl");
        let mut text = String::from(
            "{\"journal\":1,\"run_id\":\"r1\",\"timestamp\":\"t\",\"request\":\"\",\"setup\":\"\"}\n",
        );
        for (i, s) in scores.iter().enumerate() {
            let r = always(&format!("A{i}"), *s);
            text.push_str(&serde_json::to_string(&r).unwrap());
            text.push('\n');
            agg.push(i, r);
        }
        std::fs::write(&path, text).unwrap();
        let (banks, notable) = agg.finish();
        let mut log: RunLog = serde_json::from_value(serde_json::json!({
            "schema_version": 3, "assay_version": "0", "run_id": "r1", "project": "p",
            "timestamp": "t", "duration_ms": 0, "setup": {},
            "filters": {"banks": [], "test": null, "topic": null},
            "summary": {"combined_score": 0.0, "health_status": "CRITICAL", "total_tests": 0,
                "hard_fail_count": 0, "critical_failures": [], "error_count": 0,
                "component_scores": {}, "weights": {}},
            "warnings": []
        }))
        .unwrap();
        log.always = banks.always;
        log.notable_cases = Some(notable);
        log.cases = Some(CaseLog {
            file: "cases.jsonl".into(),
            count: scores.len(),
            sha256: None,
        });
        (log, path)
    }

    #[test]
    fn a_streamed_run_reads_every_case_from_its_run_log() {
        let dir = tempfile::tempdir().unwrap();
        let (log, path) = streamed(dir.path(), &[100, 50, 0]);
        assert!(!log.is_complete());
        assert_eq!(log.always.as_ref().unwrap().results.len(), 1);
        assert_eq!(cases_file(dir.path(), &log), Some(path.clone()));
        let scores = case_scores(&log, Some(&path)).unwrap();
        let got: Vec<(String, Option<u32>)> =
            scores.into_iter().map(|c| (c.test_id, c.score)).collect();
        assert_eq!(
            got,
            [
                ("A0".into(), Some(100)),
                ("A1".into(), Some(50)),
                ("A2".into(), Some(0))
            ]
        );
    }

    #[test]
    fn a_run_log_of_another_run_or_cut_short_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, path) = streamed(dir.path(), &[100, 50, 0]);
        log.cases.as_mut().unwrap().count = 4;
        let e = case_scores(&log, Some(&path)).unwrap_err().to_string();
        assert!(e.contains("holds 3 cases where its RunLog counts 4"), "{e}");
        log.run_id = "r2".into();
        let e = case_scores(&log, Some(&path)).unwrap_err().to_string();
        assert!(e.contains(":1: the run log of run r1"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let e = case_scores(&log, Some(&path)).unwrap_err().to_string();
        assert!(e.contains("is missing"), "{e}");
        std::fs::create_dir(&path).unwrap();
        let e = case_scores(&log, Some(&path)).unwrap_err().to_string();
        assert!(
            e.contains("is a folder where the run log of run r2 belongs"),
            "{e}"
        );
    }

    /// The run log's lines, changed by `edit`, written back.
    fn edit(path: &Path, edit: impl FnOnce(&mut Vec<String>)) {
        let mut lines: Vec<String> = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        edit(&mut lines);
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    #[test]
    fn run_logs_that_lie_are_named_by_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, path) = streamed(dir.path(), &[100, 50, 0, 70]);
        log.cases.as_mut().unwrap().sha256 = Some(digest(&path).unwrap());
        let original = std::fs::read_to_string(&path).unwrap();
        assert!(verify(&log, Some(&path)).is_ok());

        // A line replaced by a copy of another: the count holds, the duplicate is named.
        edit(&path, |l| l[4] = l[2].clone());
        let e = verify(&log, Some(&path)).unwrap_err().to_string();
        assert!(
            e.contains("cases.jsonl:5: the always case `A1` again (first on line 3)"),
            "{e}"
        );

        // A bank no run log holds, also when only another bank is asked for.
        std::fs::write(&path, &original).unwrap();
        edit(&path, |l| {
            l[3] = l[3].replace("\"bank\":\"always\"", "\"bank\":\"xstate\"");
        });
        let e = for_each_case(&log, Some(&path), Some(BankType::State), &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cases.jsonl:4: unknown bank `xstate`"), "{e}");

        // A score changed by hand: every line reads, the digest tells.
        std::fs::write(&path, &original).unwrap();
        edit(&path, |l| {
            l[1] = l[1].replace("\"score\":100", "\"score\":99");
        });
        let e = verify(&log, Some(&path)).unwrap_err().to_string();
        assert!(e.contains("changed since run r1 was saved"), "{e}");

        // A bad header, a truncated line.
        std::fs::write(&path, &original).unwrap();
        edit(&path, |l| l[0] = "{\"journal\":".into());
        let e = verify(&log, Some(&path)).unwrap_err().to_string();
        assert!(e.contains("cases.jsonl:1: not a run log header"), "{e}");
        std::fs::write(&path, &original).unwrap();
        edit(&path, |l| l[2].truncate(20));
        let e = verify(&log, Some(&path)).unwrap_err().to_string();
        assert!(e.contains("cases.jsonl:3: not a case"), "{e}");
    }
}
