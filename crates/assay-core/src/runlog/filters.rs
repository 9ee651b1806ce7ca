//! What a run was asked to run ([`RunFilters`], [`ChangedSince`]) and the stale cases it found
//! ([`StaleCase`]: cases that name an entity edited since their reference point).

use serde::{Deserialize, Serialize};

use crate::bank::BankType;

mod bank_keys {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use crate::bank::BankType;

    pub fn serialize<S: Serializer>(banks: &[BankType], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(banks.iter().map(|b| b.key()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<BankType>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|k| {
                BankType::from_key(k).ok_or_else(|| D::Error::custom(format!("unknown bank `{k}`")))
            })
            .collect()
    }
}

/// What a run was asked to run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunFilters {
    /// The banks selected, as lower-case keys (`semantic`, `state`, …).
    #[serde(with = "bank_keys")]
    pub banks: Vec<BankType>,
    /// `--test`, when it selected one case id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The case ids `--test` (repeated) and `--tests-from` selected, when they are more than
    /// one (sorted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<String>,
    /// `--topic`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// `--changed-since`, when given: only the cases that name an entity changed since that
    /// run ran, so this run is partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_since: Option<ChangedSince>,
    /// `--include-drafts`, when given: how many pending drafts (`test_banks/drafts/`) the run's
    /// banks included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafts: Option<usize>,
    /// The banks holding cases that `--banks` left out (absent when `--banks` named every bank
    /// with cases, or was not given): a run of a subset of the banks is partial.
    #[serde(default, with = "bank_keys", skip_serializing_if = "Vec::is_empty")]
    pub banks_left_out: Vec<BankType>,
}

impl RunFilters {
    /// Whether the run ran only part of the suite (`--test`, `--topic`, `--changed-since`, a
    /// `--banks` subset): such a run is no full run to compare others with.
    pub fn is_partial(&self) -> bool {
        !self.partial().is_empty()
    }

    /// Each selection that made the run partial, as the flag that asked for it
    /// (`--test SEM-01`, `--changed-since latest (15 of 61 cases)`,
    /// `--banks state (left out: semantic, pattern)`); empty for a run of the whole suite.
    pub fn partial(&self) -> Vec<String> {
        let mut why = Vec::new();
        if let Some(test) = &self.test {
            why.push(format!("--test {test}"));
        }
        if !self.tests.is_empty() {
            why.push(format!("--test ({} case ids)", self.tests.len()));
        }
        if let Some(topic) = &self.topic {
            why.push(format!("--topic {topic}"));
        }
        if let Some(c) = &self.changed_since {
            why.push(format!(
                "--changed-since {} ({} of {} cases)",
                c.reference,
                c.ran,
                c.ran + c.skipped
            ));
        }
        if !self.banks_left_out.is_empty() {
            let keys =
                |banks: &[BankType]| banks.iter().map(|b| b.key()).collect::<Vec<_>>().join(",");
            why.push(format!(
                "--banks {} (left out: {})",
                keys(&self.banks),
                keys(&self.banks_left_out).replace(',', ", ")
            ));
        }
        why
    }

    /// The case ids the run was limited to (`--test`, `--tests-from`); empty for none.
    pub fn selected_tests(&self) -> Vec<&str> {
        self.test
            .iter()
            .chain(&self.tests)
            .map(String::as_str)
            .collect()
    }

    /// Records the case ids a run was limited to: one in `test`, more in `tests`.
    pub fn set_tests<'a>(&mut self, ids: impl IntoIterator<Item = &'a String>) {
        let mut ids: Vec<String> = ids.into_iter().cloned().collect();
        ids.sort();
        ids.dedup();
        if ids.len() == 1 {
            self.test = ids.pop();
            self.tests.clear();
        } else {
            self.test = None;
            self.tests = ids;
        }
    }

    /// Whether the run's banks included pending drafts (`--include-drafts` when there were
    /// some): cases nobody has reviewed, so no run to compare others with.
    pub fn has_drafts(&self) -> bool {
        self.drafts.is_some_and(|n| n > 0)
    }
}

/// What `assay run --changed-since RUN` selected: the cases that name an entity whose content
/// differs from that run's knowledge base (or that was added or removed since), and the
/// always cases of those entities' audiences.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedSince {
    /// The run compared with, as given (`latest`, `accepted`, a run id or a file).
    pub reference: String,
    /// That run's `run_id`.
    pub run_id: String,
    /// The changed entities, sorted (the first [`ChangedSince::LISTED`]).
    pub entities: Vec<String>,
    /// How many entities changed.
    pub entity_count: usize,
    /// The cases this run ran.
    pub ran: usize,
    /// The cases of the selected banks it skipped.
    pub skipped: usize,
}

impl ChangedSince {
    /// Changed entities a RunLog lists at most.
    pub const LISTED: usize = 1_000;
}

/// A case that names an entity edited since its reference point: the entity version its
/// provenance records, else the accepted run's knowledge base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleCase {
    /// Its bank.
    #[serde(with = "bank_key")]
    pub bank: BankType,
    /// Its id.
    pub test_id: String,
    /// The entities it names that changed.
    pub entities: Vec<StaleEntity>,
}

/// One changed entity of a [`StaleCase`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleEntity {
    /// The entity.
    pub entity_id: String,
    /// The version the reference point had, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_version: Option<u32>,
    /// Its version now; absent when the knowledge base no longer has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<u32>,
    /// The fields that differ between the two versions (empty when the reference version is
    /// not in the store's history: the content changed, which fields is unknown).
    #[serde(default)]
    pub fields: Vec<String>,
    /// Each changed field's value in the reference version and now, in the order of
    /// `fields`, each clipped to [`StaleChange::CLIPPED`] characters (absent in RunLogs written
    /// before assay recorded them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<StaleChange>,
    /// What the case is compared with.
    pub reference: StaleReference,
}

/// One changed field of a [`StaleEntity`]: its value then and now, as text (a string as it
/// is, anything else as compact JSON, `null` where the field was not set), clipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleChange {
    /// The field.
    pub field: String,
    /// Its value in the reference version.
    pub old: String,
    /// Its value now.
    pub new: String,
}

impl StaleChange {
    /// The characters a value keeps (a longer one is cut and ends in `…`).
    pub const CLIPPED: usize = 80;

    /// The change of `field` from `old` to `new` (JSON values), each written as text and
    /// clipped to [`StaleChange::CLIPPED`] characters.
    pub fn new(
        field: &str,
        old: Option<&serde_json::Value>,
        new: Option<&serde_json::Value>,
    ) -> Self {
        StaleChange {
            field: field.to_owned(),
            old: clip_value(old),
            new: clip_value(new),
        }
    }
}

/// A value as one line of text, clipped to [`StaleChange::CLIPPED`] characters.
fn clip_value(value: Option<&serde_json::Value>) -> String {
    let text = match value {
        None | Some(serde_json::Value::Null) => "null".to_owned(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > StaleChange::CLIPPED {
        let kept: String = line.chars().take(StaleChange::CLIPPED - 1).collect();
        format!("{}…", kept.trim_end())
    } else {
        line
    }
}

/// What a stale case's entity is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StaleReference {
    /// The entity version the case's provenance records.
    Provenance,
    /// The knowledge base of the accepted run (`assay runs accept`).
    Accepted,
}

impl StaleReference {
    /// The key as written.
    pub fn as_str(self) -> &'static str {
        match self {
            StaleReference::Provenance => "provenance",
            StaleReference::Accepted => "accepted",
        }
    }
}

mod bank_key {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::bank::BankType;

    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's `with` passes a reference
    pub fn serialize<S: Serializer>(bank: &BankType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(bank.key())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BankType, D::Error> {
        let k = String::deserialize(d)?;
        BankType::from_key(&k).ok_or_else(|| D::Error::custom(format!("unknown bank `{k}`")))
    }
}
