//! Coverage of a project's tests (`assay generate coverage`): how many cases of each bank name
//! each entity, and what no case tests: SITUATION entities without a semantic case that
//! expects them, STATE handlers without a state case that names them, pattern rules without a
//! pattern case that expects one of their entities, ALWAYS entities without an always case
//! that expects them. Only active entities count as uncovered.
//!
//! Accepted drafts are ordinary bank cases and count; pending drafts count only when asked
//! (`include_drafts`).

use std::collections::{BTreeMap, HashSet};

use assay_core::bank::BankType;
use assay_core::entity::LoadMode;
use serde::Serialize;

use assay_project::drafts;
use assay_project::project::Project;

/// The cases naming one entity, by bank.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EntityCoverage {
    /// The entity.
    pub entity_id: String,
    /// Its load mode (`SITUATION`, `STATE`, `ALWAYS`).
    pub load_mode: String,
    /// Whether it is active.
    pub is_active: bool,
    /// Semantic cases naming it.
    pub semantic: usize,
    /// State cases naming it.
    pub state: usize,
    /// Pattern cases naming it.
    pub pattern: usize,
    /// Always cases naming it.
    pub always: usize,
}

impl EntityCoverage {
    /// All the cases naming it.
    pub fn total(&self) -> usize {
        self.semantic + self.state + self.pattern + self.always
    }
}

/// A pattern rule no pattern case expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UncoveredRule {
    /// `crisis_patterns[i]` or `keyword_boosts[i]`.
    pub rule: String,
    /// The regex, or the keywords joined by `, `.
    pub text: String,
    /// The entities it brings in.
    pub entities: Vec<String>,
}

/// What the project's cases test.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Whether pending drafts were counted.
    pub include_drafts: bool,
    /// Every entity, by id.
    pub entities: Vec<EntityCoverage>,
    /// Active SITUATION entities no semantic case expects.
    pub situations_without_semantic: Vec<String>,
    /// Active STATE handlers (with conditions) no state case names.
    pub handlers_without_state: Vec<String>,
    /// Pattern rules no pattern case expects an entity of.
    pub rules_without_pattern: Vec<UncoveredRule>,
    /// Active ALWAYS entities no always case expects.
    pub always_without_case: Vec<String>,
}

/// Counts per entity, and the entities each bank's cases expect.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<String, [usize; 4]>,
    expected: [HashSet<String>; 4],
}

impl Tally {
    fn add<'a>(
        &mut self,
        bank: BankType,
        expects: impl IntoIterator<Item = &'a String>,
        excludes: impl IntoIterator<Item = &'a String>,
    ) {
        // Answer cases name no entity they expect: coverage is of the retrieval banks.
        let Some(slot) = bank_slot(bank) else {
            return;
        };
        let mut named: HashSet<&String> = HashSet::new();
        for id in expects {
            self.expected[slot].insert(id.clone());
            named.insert(id);
        }
        named.extend(excludes);
        for id in named {
            self.counts.entry(id.clone()).or_default()[slot] += 1;
        }
    }
}

fn bank_slot(bank: BankType) -> Option<usize> {
    match bank {
        BankType::Semantic => Some(0),
        BankType::State => Some(1),
        BankType::Pattern => Some(2),
        BankType::Always => Some(3),
        BankType::Answer => None,
    }
}

/// The coverage of `project`'s banks (and its pending drafts, with `include_drafts`).
pub fn coverage(project: &Project, include_drafts: bool) -> Result<Coverage, crate::HarnessError> {
    use assay_core::bank::Case as _;
    let mut t = Tally::default();
    let b = &project.banks;
    for c in &b.semantic {
        t.add(BankType::Semantic, c.case.expects(), c.case.excludes());
    }
    for c in &b.state {
        // A state case that expects a handler not to trigger tests it as much as one that
        // expects it to.
        let names = c.case.expects().into_iter().chain(c.case.excludes());
        t.add(BankType::State, names, []);
    }
    for c in &b.pattern {
        t.add(BankType::Pattern, c.case.expects(), c.case.excludes());
    }
    for c in &b.always {
        t.add(BankType::Always, &c.case.expected_always, []);
    }
    if include_drafts {
        let all = drafts::load_drafts(&project.settings.banks_dir)?;
        for c in drafts::pending(&all.semantic) {
            t.add(BankType::Semantic, c.case.expects(), c.case.excludes());
        }
        for c in drafts::pending(&all.state) {
            let names = c.case.expects().into_iter().chain(c.case.excludes());
            t.add(BankType::State, names, []);
        }
        for c in drafts::pending(&all.pattern) {
            t.add(BankType::Pattern, c.case.expects(), c.case.excludes());
        }
    }

    let mut entities: Vec<EntityCoverage> = project
        .kb
        .kb
        .entities()
        .iter()
        .map(|e| {
            let [semantic, state, pattern, always] =
                t.counts.get(&e.entity_id).copied().unwrap_or_default();
            EntityCoverage {
                entity_id: e.entity_id.clone(),
                load_mode: e.load_mode.as_str().to_owned(),
                is_active: e.is_active,
                semantic,
                state,
                pattern,
                always,
            }
        })
        .collect();
    entities.sort_by(|a, b| a.entity_id.cmp(&b.entity_id));

    let uncovered =
        |mode: LoadMode, slot: usize, extra: &dyn Fn(&assay_core::entity::Entity) -> bool| {
            let mut ids: Vec<String> = project
                .kb
                .kb
                .entities()
                .iter()
                .filter(|e| e.is_active && e.load_mode == mode && extra(e))
                .filter(|e| !t.expected[slot].contains(&e.entity_id))
                .map(|e| e.entity_id.clone())
                .collect();
            ids.sort();
            ids
        };
    let situations_without_semantic = uncovered(LoadMode::Situation, 0, &|_| true);
    let handlers_without_state = uncovered(LoadMode::State, 1, &|e| {
        e.state_conditions.as_ref().is_some_and(|c| !c.is_empty())
    });
    let always_without_case = uncovered(LoadMode::Always, 3, &|_| true);

    let mut rules_without_pattern = Vec::new();
    if let Some(rules) = &project.rules {
        let pattern = &t.expected[2];
        for (i, r) in rules.crisis_patterns.iter().enumerate() {
            if !r.entities.iter().any(|e| pattern.contains(e)) {
                rules_without_pattern.push(UncoveredRule {
                    rule: format!("crisis_patterns[{i}]"),
                    text: r.pattern.clone(),
                    entities: r.entities.clone(),
                });
            }
        }
        for (i, r) in rules.keyword_boosts.iter().enumerate() {
            if !pattern.contains(&r.entity) {
                rules_without_pattern.push(UncoveredRule {
                    rule: format!("keyword_boosts[{i}]"),
                    text: r.keywords.join(", "),
                    entities: vec![r.entity.clone()],
                });
            }
        }
    }
    Ok(Coverage {
        include_drafts,
        entities,
        situations_without_semantic,
        handlers_without_state,
        rules_without_pattern,
        always_without_case,
    })
}
