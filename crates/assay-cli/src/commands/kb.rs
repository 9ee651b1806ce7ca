//! `assay kb …`: the knowledge-base store (`.assay/kb.db`), kept in step with the project's
//! `kb/` files.
//!
//! With the embedded store the files are the source of truth. Every command loads (validates)
//! the project and imports the files first, which changes nothing when they have not changed.
//! `create`, `update` and `deactivate` write through: they change the file that holds the entity
//! (atomically, leaving every other entity as it was), then the store, so the next import finds
//! nothing to do.
//!
//! With a database store (`store = "postgres://…"`) the database is the source of truth: only
//! `assay kb import` reads the `kb/` files, `export` writes them, and `create`, `update` and
//! `deactivate` change the database alone.

use std::path::{Path, PathBuf};

use assay_core::entity::{Entity, EntityType, LoadMode};
use assay_kb::datafile::{self, DataError, Format};
use assay_kb::store::{Edit, EntityUpdate, EntityVersion, ImportReport, KbStats, StoredEntity};
use assay_kb::{EntityFilter, KbError};
use assay_kbtools::kbedit::{
    self, EditError, EditOutcome, KbEditor, KbFiles, KbSession, NoChange, Reembed, entity_map,
    to_yaml, write_error,
};
use assay_project::HarnessError;
use assay_project::engine;
use assay_project::lock::KbLock;
use assay_project::project::Project;
use assay_project::results::write_replace;
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::kb_check_index::KbCheckIndexArgs;
use super::kb_compare::KbCompareArgs;
use super::{env, log_warnings, out, runtime};
use crate::exit::Exit;

/// `assay kb …`
#[derive(Debug, Subcommand)]
pub enum KbCommand {
    /// Import the kb/ files into the store (unchanged entities get no new version).
    Import,
    /// List current entities.
    List(KbListArgs),
    /// Show one entity with its version and embedding status.
    Show {
        /// The entity.
        entity_id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create an entity from a YAML or JSON file holding one entity (the fields of a
    /// knowledge-base entity: see docs/reference/kb.md).
    Create {
        /// The file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// Who makes the change.
        #[arg(long, default_value = "cli")]
        by: String,
    },
    /// Update an entity: a new version; the old one is kept.
    Update {
        /// The entity.
        entity_id: String,
        /// A YAML or JSON file with the fields to change: title, concept_summary, recognition,
        /// keywords, guidance_do, guidance_dont, examples, red_flags, load_mode, priority,
        /// state_conditions, audience_types, is_active (`null` clears an optional one).
        #[arg(long, value_name = "FILE", required_unless_present = "set")]
        file: Option<PathBuf>,
        /// A field to change, as FIELD=VALUE (VALUE is read as JSON when it parses, else text).
        #[arg(long = "set", value_name = "FIELD=VALUE")]
        set: Vec<String>,
        /// Who makes the change.
        #[arg(long, default_value = "cli")]
        by: String,
        /// Refuse the change (exit 2, nothing written) unless VERSION is still the entity's
        /// current version: the edit was made against it and must not overwrite a newer one.
        #[arg(long, value_name = "VERSION")]
        expect_version: Option<u32>,
    },
    /// Deactivate an entity (a soft delete: a new, inactive version).
    Deactivate {
        /// The entity.
        entity_id: String,
        /// Who makes the change.
        #[arg(long, default_value = "cli")]
        by: String,
        /// Refuse unless VERSION is still the entity's current version.
        #[arg(long, value_name = "VERSION")]
        expect_version: Option<u32>,
    },
    /// Every version of an entity, with what changed.
    History {
        /// The entity.
        entity_id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Embed entities whose embedding is missing or stale (all with --all, or one).
    Embed {
        /// Only this entity.
        entity_id: Option<String>,
        /// Re-embed every active entity.
        #[arg(long, conflicts_with = "entity_id")]
        all: bool,
        /// Embedder (`vendor/model`).
        #[arg(long, value_name = "VENDOR/MODEL")]
        embedder: Option<String>,
    },
    /// Choose the similarity threshold, the number of candidates and the hybrid lexical weight
    /// for an embedder on the semantic bank, with k-fold cross-validation.
    Tune {
        /// The project directory (instead of --project).
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Embedder (`vendor/model`).
        #[arg(long, value_name = "VENDOR/MODEL")]
        embedder: Option<String>,
        /// Number of folds.
        #[arg(long, default_value_t = 5)]
        folds: usize,
        /// Write the chosen values into assay.toml under the embedder's name.
        #[arg(long)]
        write: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Counts by type and load mode, embedding coverage, retrieval counts.
    Stats {
        /// Embedder whose coverage to report (`vendor/model`).
        #[arg(long, value_name = "VENDOR/MODEL")]
        embedder: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write the current entities as a YAML or JSON list.
    Export {
        /// json or yaml (default: the --output file's extension, else yaml).
        #[arg(long)]
        format: Option<String>,
        /// Write here instead of stdout; its extension (.yaml, .yml or .json) decides the
        /// format, and a --format that says otherwise is refused.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Dual-read check: retrieve the same messages from two stores and report where the
    /// selected entities or their order differ (exit 1 when they differ).
    Compare(KbCompareArgs),
    /// Measure the store's vector index (PostgreSQL's HNSW): the recall@k of its nearest
    /// entities against the exact search, per message and on average, and the time of each;
    /// exit 1 when the mean recall is below --min-recall.
    CheckIndex(KbCheckIndexArgs),
}

/// `assay kb list`
#[derive(Debug, Args)]
pub struct KbListArgs {
    /// Only this entity type (PERSONA, GUARDRAIL, HANDLER, KNOWLEDGE, SCRIPT, RULE).
    #[arg(long = "type", value_name = "TYPE")]
    pub entity_type: Option<String>,
    /// Only this load mode (ALWAYS, STATE, SITUATION).
    #[arg(long, value_name = "MODE")]
    pub load_mode: Option<String>,
    /// Only entities for this audience.
    #[arg(long, value_name = "AUDIENCE")]
    pub audience: Option<String>,
    /// Include inactive entities.
    #[arg(long, conflicts_with = "inactive")]
    pub all: bool,
    /// Only inactive entities.
    #[arg(long)]
    pub inactive: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// How many characters of a row id `history` shows.
const SHORT_ID: usize = 8;

/// A loaded project and its store, imported.
struct Kb {
    project: Project,
    store: engine::OpenStore,
    /// Held for the whole command by the commands that change entities, so their version
    /// checks, file rewrites and import are one step for every other process.
    _lock: Option<KbLock>,
}

pub fn run(dir: &Path, command: &KbCommand) -> anyhow::Result<Exit> {
    let dir = match command {
        KbCommand::Tune { dir: Some(d), .. } => d.as_path(),
        _ => dir,
    };
    // An export's format is settled before the store is opened or the files imported.
    if let KbCommand::Export { format, output } = command {
        export_format(format.as_deref(), output.as_deref())?;
    }
    if let KbCommand::Compare(args) = command {
        let project = Project::load(dir)?;
        log_warnings(&project.warnings);
        return super::kb_compare::run(&project, args);
    }
    if let KbCommand::CheckIndex(args) = command {
        let project = Project::load(dir)?;
        log_warnings(&project.warnings);
        return super::kb_check_index::run(&project, args);
    }
    let writes = matches!(
        command,
        KbCommand::Import
            | KbCommand::Create { .. }
            | KbCommand::Update { .. }
            | KbCommand::Deactivate { .. }
    );
    let (kb, report) = if writes {
        // The knowledge-base lock is taken before the files are read and kept to the end.
        let (project, store, imported, lock) = KbSession::open(dir)?.into_parts();
        log_warnings(&project.warnings);
        // A database store is the source of truth: the files are imported only when asked.
        let report = match imported {
            Some(report) => report,
            None if matches!(command, KbCommand::Import) => engine::import_kb(&*store, &project)?,
            None => ImportReport::default(),
        };
        let kb = Kb {
            project,
            store,
            _lock: Some(lock),
        };
        (kb, report)
    } else {
        let project = Project::load(dir)?;
        log_warnings(&project.warnings);
        let store = engine::open_store(&project.settings)?;
        let report = engine::sync_kb(&store, &project)?.unwrap_or_default();
        let kb = Kb {
            project,
            store,
            _lock: None,
        };
        (kb, report)
    };
    match command {
        KbCommand::Import => out(&render_import(&report)),
        command => {
            if report_changes(&report) > 0 {
                tracing::info!(
                    "imported the kb/ files first: {}",
                    render_import(&report).trim_end()
                );
            }
            kb.dispatch(command)?;
        }
    }
    Ok(Exit::Success)
}

impl Kb {
    fn dispatch(&self, command: &KbCommand) -> Result<(), HarnessError> {
        match command {
            // Done before dispatch: the import in `run`, the comparison in `kb_compare`, the
            // index check in `kb_check_index`.
            KbCommand::Import | KbCommand::Compare(_) | KbCommand::CheckIndex(_) => Ok(()),
            KbCommand::List(args) => self.list(args),
            KbCommand::Show { entity_id, json } => self.show(entity_id, *json),
            KbCommand::Create { file, by } => self.create(file, by),
            KbCommand::Update {
                entity_id,
                file,
                set,
                by,
                expect_version,
            } => {
                let update = read_update(file.as_deref(), set)?;
                self.update(entity_id, Some(&update), by, *expect_version)
            }
            KbCommand::Deactivate {
                entity_id,
                by,
                expect_version,
            } => self.update(entity_id, None, by, *expect_version),
            KbCommand::History { entity_id, json } => self.history(entity_id, *json),
            KbCommand::Embed {
                entity_id,
                all,
                embedder,
            } => self.embed(entity_id.as_deref(), *all, embedder.as_deref()),
            KbCommand::Stats { embedder, json } => self.stats(embedder.as_deref(), *json),
            KbCommand::Tune {
                embedder,
                folds,
                write,
                json,
                ..
            } => self.tune(embedder.as_deref(), *folds, *write, *json),
            KbCommand::Export { format, output } => self.export(
                export_format(format.as_deref(), output.as_deref())?,
                output.as_deref(),
            ),
        }
    }

    /// The stored entity, or "no entity `ID`" (exit 2).
    fn stored(&self, entity_id: &str) -> Result<StoredEntity, HarnessError> {
        self.store
            .get_stored(entity_id)?
            .ok_or_else(|| KbError::NotFound(entity_id.to_owned()).into())
    }

    fn list(&self, args: &KbListArgs) -> Result<(), HarnessError> {
        let filter = EntityFilter {
            entity_type: args.entity_type.as_deref().map(parse_type).transpose()?,
            load_mode: args.load_mode.as_deref().map(parse_load_mode).transpose()?,
            active: match (args.all, args.inactive) {
                (true, _) => None,
                (false, true) => Some(false),
                (false, false) => Some(true),
            },
            audience: args.audience.clone(),
        };
        let mut rows = Vec::new();
        for entity in self.store.list(&filter)? {
            let version = self.stored(&entity.entity_id)?.version;
            rows.push((entity, version));
        }
        if args.json {
            let items: Vec<Value> = rows
                .iter()
                .map(|(e, version)| {
                    let mut map = entity_map(e);
                    map.insert("version".into(), json!(version));
                    Value::Object(map)
                })
                .collect();
            out(&pretty(&Value::Array(items)));
            return Ok(());
        }
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|(e, version)| {
                vec![
                    e.entity_id.clone(),
                    e.entity_type.to_string(),
                    e.load_mode.to_string(),
                    e.priority.get().to_string(),
                    e.audience_types.join(","),
                    version.to_string(),
                    yes_no(e.is_active).to_owned(),
                ]
            })
            .collect();
        let mut text = render_table(
            &[
                "entity_id",
                "type",
                "load_mode",
                "priority",
                "audiences",
                "version",
                "active",
            ],
            &table,
        );
        let which = match filter.active {
            None => "",
            Some(true) => " active",
            Some(false) => " inactive",
        };
        text.push_str(&format!(
            "\n{}{which} {}\n",
            rows.len(),
            noun(rows.len(), "entity")
        ));
        out(&text);
        Ok(())
    }

    fn show(&self, entity_id: &str, as_json: bool) -> Result<(), HarnessError> {
        let stored = self.stored(entity_id)?;
        let embedding = match &stored.embedding_model {
            Some(model) => {
                let status = self
                    .store
                    .embedding_status(&EntityFilter::default(), model)?
                    .into_iter()
                    .find(|(id, _)| id == entity_id)
                    .map(|(_, s)| s);
                Some((model.clone(), status))
            }
            None => None,
        };
        let source = self.project.kb.sources.get(entity_id);
        if as_json {
            let mut map = Map::new();
            map.insert("id".into(), json!(stored.id));
            map.extend(entity_map(&stored.entity));
            map.insert("version".into(), json!(stored.version));
            map.insert(
                "previous_version_id".into(),
                json!(stored.previous_version_id),
            );
            map.insert("created_at".into(), json!(stored.created_at.to_rfc3339()));
            map.insert("updated_at".into(), json!(stored.updated_at.to_rfc3339()));
            map.insert("created_by".into(), json!(stored.created_by));
            map.insert("retrieval_count".into(), json!(stored.retrieval_count));
            map.insert(
                "embedding".into(),
                match &embedding {
                    Some((model, status)) => json!({"model": model, "staleness": status}),
                    None => Value::Null,
                },
            );
            map.insert("source_file".into(), json!(source));
            out(&pretty(&Value::Object(map)));
            return Ok(());
        }
        let mut text = String::new();
        for (field, value) in entity_map(&stored.entity) {
            match value {
                Value::String(s) if s.contains('\n') => {
                    text.push_str(&format!("{field}:\n"));
                    for line in s.trim_end().lines() {
                        text.push_str(&format!("    {line}\n"));
                    }
                }
                other => text.push_str(&format!("{field:<20} {}\n", plain(&other))),
            }
        }
        let previous = stored
            .previous_version_id
            .as_deref()
            .map_or_else(String::new, |p| format!(", previous {}", short(p)));
        text.push_str(&format!(
            "\n{:<20} {} (row {}{previous})\n",
            "version",
            stored.version,
            short(&stored.id)
        ));
        text.push_str(&format!(
            "{:<20} {} by {}\n",
            "created",
            time(&stored.created_at.to_rfc3339()),
            stored.created_by
        ));
        text.push_str(&format!(
            "{:<20} {}\n",
            "updated",
            time(&stored.updated_at.to_rfc3339())
        ));
        text.push_str(&format!(
            "{:<20} {}\n",
            "retrieval_count", stored.retrieval_count
        ));
        let embedding = match embedding {
            Some((model, Some(status))) if status.is_fresh() => format!("{model} (fresh)"),
            Some((model, Some(status))) => format!("{model} (stale: {})", plain(&json!(status))),
            Some((model, None)) => format!("{model} (not used: the entity is inactive)"),
            None => "none".to_owned(),
        };
        text.push_str(&format!("{:<20} {embedding}\n", "embedding"));
        let source = source.map_or_else(
            || "none (removed from the kb/ files)".to_owned(),
            |p| p.display().to_string(),
        );
        text.push_str(&format!("{:<20} {source}\n", "source_file"));
        out(&text);
        Ok(())
    }

    fn editor(&self) -> KbEditor<'_> {
        // With a database store the database is the source of truth: no file is written.
        let files = self
            .store
            .files_are_source()
            .then(|| KbFiles::of(&self.project));
        KbEditor::new(&*self.store, files)
    }

    fn create(&self, file: &Path, by: &str) -> Result<(), HarnessError> {
        let entity = read_one_entity(file)?;
        let outcome = self
            .editor()
            .create(&entity, &Edit::now(by))
            .map_err(|e| match e {
                // As a file's error: the file holds the entity.
                EditError::Invalid { entity_id, problem } => {
                    DataError::new(file, format!("entity `{entity_id}`: {problem}")).into()
                }
                e => HarnessError::from(e),
            })?;
        let written = match &outcome {
            EditOutcome::Written {
                file: Some(path), ..
            } => format!("wrote {}", path.display()),
            _ => format!("in {}", self.store.location),
        };
        out(&format!(
            "created `{}`: version {} by {by}\n  {written}\n",
            entity.entity_id,
            outcome.version(),
        ));
        Ok(())
    }

    fn update(
        &self,
        entity_id: &str,
        update: Option<&EntityUpdate>,
        by: &str,
        expected: Option<u32>,
    ) -> Result<(), HarnessError> {
        let editor = self.editor();
        let edit = Edit::now(by);
        let outcome = match update {
            Some(update) => editor.update(entity_id, update, expected, &edit)?,
            None => editor.deactivate(entity_id, expected, &edit)?,
        };
        let verb = if update.is_some() {
            "updated"
        } else {
            "deactivated"
        };
        match outcome {
            EditOutcome::Unchanged { stored, why } => {
                let v = stored.version;
                out(&match why {
                    NoChange::InactiveOutsideFiles => format!(
                        "no change: `{entity_id}` is already inactive (version {v}; it is in no kb/ file)\n"
                    ),
                    NoChange::AlreadyInactive => format!(
                        "no change: `{entity_id}` is already inactive (version {v}); no version was written\n"
                    ),
                    NoChange::AlreadyAsAsked => format!(
                        "no change: `{entity_id}` is already as asked (version {v}); no version was written\n"
                    ),
                });
            }
            EditOutcome::Written {
                stored,
                changed,
                file,
                note,
            } => {
                let mut text = format!(
                    "{verb} `{entity_id}`: version {} by {by} (changed: {})\n",
                    stored.version,
                    changed.join(", "),
                );
                match file {
                    Some(file) => text.push_str(&format!("  wrote {}\n", file.display())),
                    None => text.push_str(&format!("  in {}\n", self.store.location)),
                }
                if let Some(note) = note {
                    text.push_str(&format!("note: {note}\n"));
                }
                out(&text);
            }
        }
        Ok(())
    }

    fn history(&self, entity_id: &str, as_json: bool) -> Result<(), HarnessError> {
        let versions = self.store.history(entity_id)?;
        if as_json {
            let items: Vec<Value> = versions.iter().map(version_json).collect();
            out(&pretty(&Value::Array(items)));
            return Ok(());
        }
        let rows: Vec<Vec<String>> = versions
            .iter()
            .map(|v| {
                let changed = if v.version == 1 {
                    "(created)".to_owned()
                } else if v.changed_fields.is_empty() {
                    "—".to_owned()
                } else {
                    v.changed_fields.join(", ")
                };
                vec![
                    format!("{}{}", v.version, if v.is_current { "*" } else { "" }),
                    short(&v.id).to_owned(),
                    time(&v.created_at.to_rfc3339()),
                    v.created_by.clone(),
                    yes_no(v.entity.is_active).to_owned(),
                    changed,
                ]
            })
            .collect();
        let mut text = format!("{entity_id}: {}\n\n", plural(versions.len(), "version"));
        text.push_str(&render_table(
            &["version", "row", "created_at", "by", "active", "changed"],
            &rows,
        ));
        text.push_str("\n* current version\n");
        out(&text);
        Ok(())
    }

    fn embed(
        &self,
        entity_id: Option<&str>,
        all: bool,
        flag: Option<&str>,
    ) -> Result<(), HarnessError> {
        let choice = engine::choose_embedder(&self.project.settings, flag, &env)?;
        let embedder = engine::build_embedder(&choice)?;
        let which = match (entity_id, all) {
            (Some(id), _) => Reembed::One(id),
            (None, true) => Reembed::All,
            (None, false) => Reembed::Stale,
        };
        let rt = runtime().map_err(|e| HarnessError::Infrastructure(format!("{e:#}")))?;
        let report = rt.block_on(self.editor().regenerate_embeddings(
            embedder.as_ref(),
            which,
            engine::multi_view(&self.project.settings),
        ))?;
        let mut text = format!(
            "embedded {} with {} ({} already fresh)\n",
            plural(report.embedded.len(), "entity"),
            report.model,
            report.fresh
        );
        for id in &report.embedded {
            text.push_str(&format!("  {id}\n"));
        }
        if let Some(views) = report.views {
            text.push_str(&format!(
                "views: embedded those of {} ({} already fresh)\n",
                plural(views.embedded.len(), "entity"),
                views.fresh
            ));
        }
        out(&text);
        Ok(())
    }

    fn tune(
        &self,
        flag: Option<&str>,
        folds: usize,
        write: bool,
        as_json: bool,
    ) -> Result<(), HarnessError> {
        let rt = runtime().map_err(|e| HarnessError::Infrastructure(format!("{e:#}")))?;
        let outcome = rt.block_on(assay_kbtools::tune::tune(&self.project, flag, &env, folds))?;
        let write = write && outcome.accepted();
        if write {
            assay_kbtools::tune::write_tuned(
                &self.project.settings.root,
                &outcome.embedder,
                &outcome.tuned(),
            )?;
        }
        if as_json {
            let (before, after) = outcome.held_out();
            let mut doc = json!(outcome);
            doc["held_out_before"] = json!(before);
            doc["held_out_after"] = json!(after);
            doc["written"] = json!(write);
            doc["accepted"] = json!(outcome.accepted());
            doc["verdict"] = json!(outcome.verdict().err().unwrap_or_else(|| "accepted".into()));
            out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&doc)
                    .map_err(|e| HarnessError::Infrastructure(e.to_string()))?
            ));
        } else {
            let mut text = outcome.render();
            if write {
                text.push_str(&format!(
                    "\nwritten to assay.toml as [retrieval.tuned.\"{}\"]\n",
                    outcome.embedder
                ));
            } else if outcome.accepted() {
                text.push_str("\n(not written: --write saves the chosen values in assay.toml)\n");
            } else {
                text.push_str("\n(nothing to write: assay.toml is left as it is)\n");
            }
            out(&text);
        }
        Ok(())
    }

    fn stats(&self, flag: Option<&str>, as_json: bool) -> Result<(), HarnessError> {
        let model = kbedit::embedding_model(&self.project.settings, flag, &env)?;
        let stats = self.store.stats(&model)?;
        if as_json {
            out(&pretty(
                &serde_json::to_value(&stats).map_err(|e| json_error(&e))?,
            ));
        } else {
            out(&render_stats(&stats));
        }
        Ok(())
    }

    fn export(&self, format: Format, output: Option<&Path>) -> Result<(), HarnessError> {
        let entities = self.store.export()?;
        let list = serde_json::to_value(&entities).map_err(|e| json_error(&e))?;
        let text = match format {
            Format::Json => pretty(&list),
            Format::Yaml => to_yaml(&list)?,
        };
        let Some(output) = output else {
            out(&text);
            return Ok(());
        };
        let output = if output.parent().is_some_and(|p| p.as_os_str().is_empty()) {
            Path::new(".").join(output)
        } else {
            output.to_owned()
        };
        if inside(&output, &self.project.settings.kb_dir) && Format::from_path(&output).is_some() {
            return Err(HarnessError::Usage(format!(
                "{}: an export inside the kb/ folder would define every entity twice; write it elsewhere",
                output.display()
            )));
        }
        write_replace(&output, text.as_bytes()).map_err(|e| write_error(&output, &e))?;
        out(&format!(
            "wrote {} to {}\n",
            plural(entities.len(), "entity"),
            output.display()
        ));
        Ok(())
    }
}

/// The format of `assay kb export`: the `--output` file's extension decides (`.yaml`, `.yml`,
/// `.json`; another is refused), and a `--format` that names the other one is refused; without
/// a file, `--format`, else YAML.
fn export_format(format: Option<&str>, output: Option<&Path>) -> Result<Format, HarnessError> {
    use super::output::Format as Named;
    let asked = match format.map(str::to_ascii_lowercase).as_deref() {
        None => None,
        Some("yaml" | "yml") => Some(Format::Yaml),
        Some("json") => Some(Format::Json),
        Some(other) => {
            return Err(HarnessError::Usage(format!(
                "--format: unknown format `{other}` (expected yaml or json)"
            )));
        }
    };
    let Some(path) = output else {
        return Ok(asked.unwrap_or(Format::Yaml));
    };
    let named = match super::output::format("--output", path, &[Named::Yaml, Named::Json])? {
        Named::Json => Format::Json,
        _ => Format::Yaml,
    };
    if let Some(asked) = asked.filter(|a| *a != named) {
        return Err(HarnessError::Usage(format!(
            "--format {} and --output {}: the file's extension names the other format; leave --format out, or name the file so",
            if asked == Format::Json {
                "json"
            } else {
                "yaml"
            },
            path.display()
        )));
    }
    Ok(named)
}

fn report_changes(r: &ImportReport) -> usize {
    r.created.len() + r.updated.len() + r.deactivated.len()
}

fn render_import(r: &ImportReport) -> String {
    let mut text = format!(
        "imported: {} created, {} updated, {} unchanged, {} deactivated\n",
        r.created.len(),
        r.updated.len(),
        r.unchanged.len(),
        r.deactivated.len()
    );
    for (label, ids) in [
        ("created", &r.created),
        ("updated", &r.updated),
        ("deactivated", &r.deactivated),
    ] {
        if !ids.is_empty() {
            // A few ids, not thousands: the rest are in `assay kb list` and `assay kb history`.
            let shown = ids
                .iter()
                .take(IMPORT_IDS_SHOWN)
                .cloned()
                .collect::<Vec<_>>();
            let more = ids.len().saturating_sub(IMPORT_IDS_SHOWN);
            let tail = if more > 0 {
                format!(", … {more} more (`assay kb list` has them all)")
            } else {
                String::new()
            };
            text.push_str(&format!("  {label}: {}{tail}\n", shown.join(", ")));
        }
    }
    text
}

/// How many ids of each kind an import names.
const IMPORT_IDS_SHOWN: usize = 8;

fn parse_type(text: &str) -> Result<EntityType, HarnessError> {
    kbedit::parse_entity_type(text).map_err(|e| HarnessError::Usage(format!("--type: {e}")))
}

fn parse_load_mode(text: &str) -> Result<LoadMode, HarnessError> {
    kbedit::parse_load_mode(text).map_err(|e| HarnessError::Usage(format!("--load-mode: {e}")))
}

/// Splits `FIELD=VALUE`; VALUE is JSON when it parses, else text. Returns the field, the value
/// and the raw text.
pub(super) fn assignment(pair: &str) -> Result<(String, Value, String), HarnessError> {
    let Some((field, raw)) = pair.split_once('=') else {
        return Err(HarnessError::Usage(format!(
            "`{pair}`: expected FIELD=VALUE"
        )));
    };
    let field = field.trim();
    if field.is_empty() {
        return Err(HarnessError::Usage(format!(
            "`{pair}`: the field name is empty (expected FIELD=VALUE)"
        )));
    }
    let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
    Ok((field.to_owned(), value, raw.to_owned()))
}

/// The update `--file` and `--set` ask for (`--set` wins over the file, field by field).
fn read_update(file: Option<&Path>, set: &[String]) -> Result<EntityUpdate, HarnessError> {
    let mut fields = match file {
        Some(path) => {
            let update: EntityUpdate = datafile::read(path, &mut |w| tracing::warn!("{w}"))?;
            match serde_json::to_value(&update) {
                Ok(Value::Object(map)) => map,
                _ => Map::new(),
            }
        }
        None => Map::new(),
    };
    let mut seen = Vec::new();
    for pair in set {
        let (field, value, raw) = assignment(pair)?;
        if seen.contains(&field) {
            return Err(HarnessError::Usage(format!(
                "--set: field `{field}` is given twice"
            )));
        }
        // A value that is valid JSON of the wrong type (`title=2024`) is taken as text.
        let one = |v: &Value| {
            let mut map = Map::new();
            map.insert(field.clone(), v.clone());
            serde_json::from_value::<EntityUpdate>(Value::Object(map))
        };
        let value = match one(&value) {
            Ok(_) => value,
            // `null` clears an optional field; a required one says it cannot be cleared.
            Err(first) if value.is_null() => {
                return Err(HarnessError::Usage(format!("--set `{pair}`: {first}")));
            }
            Err(first) => {
                let text = Value::String(raw);
                if one(&text).is_ok() {
                    text
                } else {
                    return Err(HarnessError::Usage(format!("--set `{pair}`: {first}")));
                }
            }
        };
        fields.insert(field.clone(), value);
        seen.push(field);
    }
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| HarnessError::Usage(format!("--set: {e}")))
}

/// Reads a file holding one entity: a YAML mapping or JSON object (a one-element list is
/// accepted too, as `assay kb export` writes).
fn read_one_entity(file: &Path) -> Result<Entity, HarnessError> {
    let (format, text) = datafile::read_text(file)?;
    let mut warn = |w: String| tracing::warn!("{w}");
    let shape: Value = datafile::parse(file, &text, format, &mut |_| {})?;
    match shape {
        Value::Object(_) => Ok(datafile::parse(file, &text, format, &mut warn)?),
        Value::Array(items) if items.len() == 1 => {
            let list: Vec<Entity> = datafile::parse(file, &text, format, &mut warn)?;
            list.into_iter()
                .next()
                .ok_or_else(|| DataError::new(file, "expected one entity").into())
        }
        Value::Array(items) => Err(DataError::new(
            file,
            format!(
                "expected one entity (a YAML mapping or a JSON object), found a list of {}",
                items.len()
            ),
        )
        .into()),
        _ => Err(DataError::new(
            file,
            "expected one entity (a YAML mapping or a JSON object)",
        )
        .into()),
    }
}

/// Whether `path` would land inside `dir` (both resolved as far as they exist).
fn inside(path: &Path, dir: &Path) -> bool {
    let resolve = |p: &Path| -> Option<PathBuf> {
        let parent = p.parent()?;
        let parent = std::fs::canonicalize(parent).ok()?;
        Some(parent.join(p.file_name()?))
    };
    match (resolve(path), std::fs::canonicalize(dir)) {
        (Some(path), Ok(dir)) => path.starts_with(dir),
        _ => false,
    }
}

fn json_error(e: &serde_json::Error) -> HarnessError {
    HarnessError::Infrastructure(format!("cannot write JSON: {e}"))
}

/// JSON with two-space indentation and a final newline.
fn pretty(value: &Value) -> String {
    kbedit::pretty_json(value)
}

fn version_json(v: &EntityVersion) -> Value {
    json!({
        "version": v.version,
        "id": v.id,
        "previous_version_id": v.previous_version_id,
        "is_current": v.is_current,
        "is_active": v.entity.is_active,
        "created_at": v.created_at.to_rfc3339(),
        "updated_at": v.updated_at.to_rfc3339(),
        "created_by": v.created_by,
        "changed_fields": v.changed_fields,
        "entity": v.entity,
    })
}

fn render_stats(s: &KbStats) -> String {
    let counts = |pairs: Vec<(String, usize)>| -> String {
        if pairs.is_empty() {
            return "none".to_owned();
        }
        pairs
            .into_iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = format!(
        "entities        {} ({} active, {} inactive), {}\n",
        s.entities,
        s.active,
        s.inactive,
        plural(s.versions, "version")
    );
    text.push_str(&format!(
        "by type         {}\n",
        counts(s.by_type.iter().map(|(t, n)| (t.to_string(), *n)).collect())
    ));
    text.push_str(&format!(
        "by load mode    {}\n",
        counts(
            s.by_load_mode
                .iter()
                .map(|(m, n)| (m.to_string(), *n))
                .collect()
        )
    ));
    let e = &s.embeddings;
    text.push_str(&format!(
        "embeddings      {} fresh, {} stale, {} missing ({})\n",
        e.fresh, e.stale, e.missing, e.model
    ));
    text.push_str(&format!("retrievals      {} in all\n", s.total_retrievals));
    if !s.top_retrieved.is_empty() {
        text.push_str("top retrieved\n");
        let width = s
            .top_retrieved
            .iter()
            .map(|(id, _)| id.len())
            .max()
            .unwrap_or(0);
        for (id, n) in &s.top_retrieved {
            text.push_str(&format!("  {id:<width$}  {n}\n"));
        }
    }
    text
}

/// A left-aligned table with two spaces between columns.
fn render_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut text = String::new();
        for (i, (cell, width)) in cells.into_iter().zip(&widths).enumerate() {
            if i == last {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}  "));
            }
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut text = line(headers.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

/// A value as text: strings bare, lists of strings comma-separated, anything else as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// An RFC 3339 time to the second, for tables.
fn time(rfc3339: &str) -> String {
    match rfc3339.split_once('.') {
        Some((head, _)) => format!("{head}Z"),
        None => rfc3339.replace("+00:00", "Z"),
    }
}

fn short(id: &str) -> &str {
    id.get(..SHORT_ID).unwrap_or(id)
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// `1 entity`, `2 entities`.
pub(super) fn plural(n: usize, singular: &str) -> String {
    format!("{n} {}", noun(n, singular))
}

fn noun(n: usize, singular: &str) -> String {
    if n == 1 {
        singular.to_owned()
    } else if let Some(stem) = singular.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{singular}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_read_json_or_text() {
        let (field, value, _) = assignment("priority=77").unwrap();
        assert_eq!((field.as_str(), value), ("priority", json!(77)));
        assert_eq!(assignment("title=Gray rock").unwrap().1, json!("Gray rock"));
        assert!(assignment("priority").is_err());
        assert!(assignment("=3").is_err());
    }

    #[test]
    fn set_takes_wrongly_typed_json_as_text() {
        let update = read_update(None, &["title=2024".into(), "priority=77".into()]).unwrap();
        assert_eq!(update.title.as_deref(), Some("2024"));
        assert_eq!(
            update.priority.map(assay_core::entity::Priority::get),
            Some(77)
        );
        let err = read_update(None, &["priorty=77".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `priorty`"), "{err}");
        let err = read_update(None, &["priority=101".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("priority 101 is out of range"), "{err}");
    }

    #[test]
    fn plurals_and_times() {
        assert_eq!(plural(1, "entity"), "1 entity");
        assert_eq!(plural(2, "entity"), "2 entities");
        assert_eq!(plural(0, "version"), "0 versions");
        assert_eq!(
            time("2026-11-02T09:00:00.123456+00:00"),
            "2026-11-02T09:00:00Z"
        );
    }
}
