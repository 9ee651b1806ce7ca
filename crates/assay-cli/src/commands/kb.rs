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
use assay_harness::HarnessError;
use assay_harness::engine;
use assay_harness::project::Project;
use assay_harness::results::{write_new, write_replace};
use assay_kb::datafile::{self, DataError, Format};
use assay_kb::store::{
    Edit, EntityUpdate, EntityVersion, ImportReport, KbStats, KbStore, StoredEntity, changed_fields,
};
use assay_kb::{EntityFilter, KbError, KnowledgeBase, check_entity};
use serde_json::{Map, Value, json};

use super::{env, log_warnings, out, runtime};
use crate::args::{KbCommand, KbListArgs};
use crate::exit::Exit;

/// The load modes, in schema order.
const LOAD_MODES: [LoadMode; 3] = [LoadMode::Always, LoadMode::State, LoadMode::Situation];

/// How many characters of a row id `history` shows.
const SHORT_ID: usize = 8;

/// A loaded project and its store, imported.
struct Kb {
    project: Project,
    store: engine::OpenStore,
}

pub fn run(dir: &Path, command: &KbCommand) -> anyhow::Result<Exit> {
    let dir = match command {
        KbCommand::Tune { dir: Some(d), .. } => d.as_path(),
        _ => dir,
    };
    let project = Project::load(dir)?;
    log_warnings(&project.warnings);
    if let KbCommand::Compare(args) = command {
        return super::kb_compare::run(&project, args);
    }
    let store = engine::open_store(&project.settings)?;
    // A database store is the source of truth: the files are imported only when asked.
    let report = if store.files_are_source() || matches!(command, KbCommand::Import) {
        engine::import_kb(&*store, &project)?
    } else {
        ImportReport::default()
    };
    let kb = Kb { project, store };
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
            // Done before dispatch: the import in `run`, the comparison in `kb_compare`.
            KbCommand::Import | KbCommand::Compare(_) => Ok(()),
            KbCommand::List(args) => self.list(args),
            KbCommand::Show { entity_id, json } => self.show(entity_id, *json),
            KbCommand::Create { file, by } => self.create(file, by),
            KbCommand::Update {
                entity_id,
                file,
                set,
                by,
            } => {
                let update = read_update(file.as_deref(), set)?;
                self.update(entity_id, &update, by, Change::Update)
            }
            KbCommand::Deactivate { entity_id, by } => {
                let update = EntityUpdate {
                    is_active: Some(false),
                    ..EntityUpdate::default()
                };
                self.update(entity_id, &update, by, Change::Deactivate)
            }
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
            KbCommand::Export { format, output } => self.export(format, output.as_deref()),
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

    fn create(&self, file: &Path, by: &str) -> Result<(), HarnessError> {
        let entity = read_one_entity(file)?;
        check_entity(&entity).map_err(|problem| {
            DataError::new(file, format!("entity `{}`: {problem}", entity.entity_id))
        })?;
        let id = entity.entity_id.as_str();
        if !self.store.files_are_source() {
            let stored = self.store.create(&entity, &Edit::now(by))?;
            out(&format!(
                "created `{id}`: version {} by {by}\n  in {}\n",
                stored.version, self.store.location
            ));
            return Ok(());
        }
        if let Some(source) = self.project.kb.sources.get(id) {
            return Err(HarnessError::Usage(format!(
                "entity `{id}` already exists (in {}); change it with `assay kb update`",
                source.display()
            )));
        }
        if self.store.contains(id)? {
            return Err(HarnessError::Usage(format!(
                "entity `{id}` already exists in the store (inactive: it was removed from the kb/ files); ids are never reused"
            )));
        }
        let kb_dir = &self.project.settings.kb_dir;
        let target = kb_dir.join(file_name_for(id)?);
        if target.exists() {
            return Err(HarnessError::Usage(format!(
                "{} already exists; nothing was written",
                target.display()
            )));
        }
        let text = to_yaml(&Value::Array(vec![Value::Object(entity_map(&entity))]))?;
        let reread: Vec<Entity> = datafile::parse(&target, &text, Format::Yaml, &mut |_| {})?;
        if reread != [entity.clone()] {
            return Err(HarnessError::Infrastructure(format!(
                "entity `{id}` does not read back as written; nothing was written"
            )));
        }
        std::fs::create_dir_all(kb_dir).map_err(|e| write_error(kb_dir, &e))?;
        write_new(&target, text.as_bytes()).map_err(|e| write_error(&target, &e))?;
        if let Some(sibling) = self.project.kb.files.first() {
            copy_permissions(sibling, &target);
        }
        let stored = self.store.create(&entity, &Edit::now(by))?;
        out(&format!(
            "created `{id}`: version {} by {by}\n  wrote {}\n",
            stored.version,
            target.display()
        ));
        Ok(())
    }

    fn update(
        &self,
        entity_id: &str,
        update: &EntityUpdate,
        by: &str,
        change: Change,
    ) -> Result<(), HarnessError> {
        let stored = self.stored(entity_id)?;
        if !self.store.files_are_source() {
            return self.update_database(&stored, update, by, change);
        }
        let Some(source) = self.project.kb.sources.get(entity_id) else {
            if change == Change::Deactivate && !stored.entity.is_active {
                out(&format!(
                    "no change: `{entity_id}` is already inactive (version {}; it is in no kb/ file)\n",
                    stored.version
                ));
                return Ok(());
            }
            return Err(HarnessError::Usage(format!(
                "entity `{entity_id}` is in no kb/ file (it was removed from the files and deactivated); add it back to a kb/ file to change it"
            )));
        };
        let old = self
            .project
            .kb
            .kb
            .get(entity_id)?
            .ok_or_else(|| KbError::NotFound(entity_id.to_owned()))?;
        let new = update.apply(&old);
        check_entity(&new).map_err(|problem| KbError::InvalidEntity {
            entity_id: entity_id.to_owned(),
            problem,
        })?;
        let changed = changed_fields(&old, &new);
        if changed.is_empty() {
            out(&change.unchanged(entity_id, stored.version));
            return Ok(());
        }
        let note = rewrite_source(source, entity_id, &old, &new)?;
        let stored = change.write(&*self.store, entity_id, update, &Edit::now(by))?;
        let mut text = format!(
            "{} `{entity_id}`: version {} by {by} (changed: {})\n  wrote {}\n",
            change.verb(),
            stored.version,
            changed.join(", "),
            source.display()
        );
        if let Some(note) = note {
            text.push_str(&format!("note: {note}\n"));
        }
        out(&text);
        Ok(())
    }

    /// [`Kb::update`] on a database store: the database alone changes.
    fn update_database(
        &self,
        stored: &StoredEntity,
        update: &EntityUpdate,
        by: &str,
        change: Change,
    ) -> Result<(), HarnessError> {
        let entity_id = stored.entity.entity_id.as_str();
        let changed = changed_fields(&stored.entity, &update.apply(&stored.entity));
        if changed.is_empty() {
            out(&change.unchanged(entity_id, stored.version));
            return Ok(());
        }
        let new = change.write(&*self.store, entity_id, update, &Edit::now(by))?;
        out(&format!(
            "{} `{entity_id}`: version {} by {by} (changed: {})\n  in {}\n",
            change.verb(),
            new.version,
            changed.join(", "),
            self.store.location
        ));
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
        if let Some(id) = entity_id {
            self.stored(id)?;
        }
        let choice = engine::choose_embedder(&self.project.settings, flag, &env)?;
        let embedder = engine::build_embedder(&choice)?;
        let rt = runtime().map_err(|e| HarnessError::Infrastructure(format!("{e:#}")))?;
        let report = rt.block_on(engine::refresh_embeddings(
            &*self.store,
            embedder.as_ref(),
            all,
            entity_id,
        ))?;
        let mut text = format!(
            "embedded {} with {} ({} already fresh)\n",
            plural(report.embedded.len(), "entity"),
            embedder.model(),
            report.fresh
        );
        for id in &report.embedded {
            text.push_str(&format!("  {id}\n"));
        }
        if engine::multi_view(&self.project.settings) && entity_id.is_none() {
            let views = rt.block_on(engine::refresh_view_embeddings(
                &*self.store,
                embedder.as_ref(),
                all,
            ))?;
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
        let outcome = rt.block_on(assay_harness::tune::tune(&self.project, flag, &env, folds))?;
        if write {
            assay_harness::tune::write_tuned(
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
            } else {
                text.push_str("\n(not written: --write saves the chosen values in assay.toml)\n");
            }
            out(&text);
        }
        Ok(())
    }

    fn stats(&self, flag: Option<&str>, as_json: bool) -> Result<(), HarnessError> {
        let choice = engine::choose_embedder(&self.project.settings, flag, &env)?;
        // Every embedder's `model()` is its spec's name; only the built-in one is free to build
        // (which checks its name), so others are not loaded just to be named.
        let model = if choice.is_builtin() {
            engine::build_embedder(&choice)?.model().to_owned()
        } else {
            choice.spec.to_string()
        };
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

    fn export(&self, format: &str, output: Option<&Path>) -> Result<(), HarnessError> {
        let format = match format.to_ascii_lowercase().as_str() {
            "yaml" | "yml" => Format::Yaml,
            "json" => Format::Json,
            other => {
                return Err(HarnessError::Usage(format!(
                    "--format: unknown format `{other}` (expected yaml or json)"
                )));
            }
        };
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

/// Which write an update is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Update,
    Deactivate,
}

impl Change {
    /// What is said when a change changes nothing (and writes no version).
    fn unchanged(self, entity_id: &str, version: u32) -> String {
        let why = match self {
            Change::Deactivate => "is already inactive",
            Change::Update => "is already as asked",
        };
        format!("no change: `{entity_id}` {why} (version {version}); no version was written\n")
    }

    fn verb(self) -> &'static str {
        match self {
            Change::Update => "updated",
            Change::Deactivate => "deactivated",
        }
    }

    /// Writes the new version to the store.
    fn write(
        self,
        store: &dyn KbStore,
        entity_id: &str,
        update: &EntityUpdate,
        edit: &Edit,
    ) -> Result<StoredEntity, KbError> {
        match self {
            Change::Update => store.update(entity_id, update, edit),
            Change::Deactivate => store.deactivate(entity_id, edit),
        }
    }
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
            text.push_str(&format!("  {label}: {}\n", ids.join(", ")));
        }
    }
    text
}

fn parse_type(text: &str) -> Result<EntityType, HarnessError> {
    EntityType::ALL
        .into_iter()
        .find(|t| t.as_str().eq_ignore_ascii_case(text.trim()))
        .ok_or_else(|| {
            let names: Vec<&str> = EntityType::ALL.iter().map(|t| t.as_str()).collect();
            HarnessError::Usage(format!(
                "--type: unknown entity type `{text}` (expected one of {})",
                names.join(", ")
            ))
        })
}

fn parse_load_mode(text: &str) -> Result<LoadMode, HarnessError> {
    LOAD_MODES
        .into_iter()
        .find(|m| m.as_str().eq_ignore_ascii_case(text.trim()))
        .ok_or_else(|| {
            let names: Vec<&str> = LOAD_MODES.iter().map(|m| m.as_str()).collect();
            HarnessError::Usage(format!(
                "--load-mode: unknown load mode `{text}` (expected one of {})",
                names.join(", ")
            ))
        })
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
    let format = Format::from_path(file).ok_or_else(|| {
        DataError::new(
            file,
            "unsupported file type (expected .json, .yaml or .yml)",
        )
    })?;
    let text = std::fs::read_to_string(file)
        .map_err(|e| DataError::new(file, format!("cannot read file: {e}")))?;
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

/// `<entity_id>.yaml`, when the id is safe as a file name.
fn file_name_for(entity_id: &str) -> Result<String, HarnessError> {
    let safe = !entity_id.starts_with('.')
        && entity_id
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if safe {
        Ok(format!("{entity_id}.yaml"))
    } else {
        Err(HarnessError::Usage(format!(
            "entity_id `{entity_id}` cannot name its file kb/<entity_id>.yaml: use letters, digits, `_`, `-` and `.`"
        )))
    }
}

/// An entity file, read.
struct Source {
    format: Format,
    text: String,
    /// The entities as written (to edit).
    items: Vec<Value>,
    /// The entities as parsed (to check the edit).
    entities: Vec<Entity>,
}

fn read_source(path: &Path) -> Result<Source, HarnessError> {
    let format = Format::from_path(path).ok_or_else(|| {
        DataError::new(
            path,
            "unsupported file type (expected .json, .yaml or .yml)",
        )
    })?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| DataError::new(path, format!("cannot read file: {e}")))?;
    let items: Vec<Value> = datafile::parse(path, &text, format, &mut |_| {})?;
    let entities: Vec<Entity> = datafile::parse(path, &text, format, &mut |_| {})?;
    Ok(Source {
        format,
        text,
        items,
        entities,
    })
}

/// Rewrites the entity `old` in `path` as `new`, in place, changing only the fields that
/// differ; every other entity stays as it was (checked by reading the new text back before
/// anything is written). Returns a note for the user when comments were lost.
fn rewrite_source(
    path: &Path,
    entity_id: &str,
    old: &Entity,
    new: &Entity,
) -> Result<Option<String>, HarnessError> {
    let Source {
        format,
        text,
        mut items,
        entities,
    } = read_source(path)?;
    let index = entities
        .iter()
        .position(|e| e.entity_id == entity_id)
        .ok_or_else(|| {
            DataError::new(
                path,
                format!("entity `{entity_id}` is no longer in this file (was it edited just now?)"),
            )
        })?;
    if entities[index] != *old {
        return Err(DataError::new(
            path,
            format!(
                "entity `{entity_id}` changed in this file while assay ran; nothing was written"
            ),
        )
        .into());
    }
    let new_fields = entity_map(new);
    let Some(item) = items.get_mut(index).and_then(Value::as_object_mut) else {
        return Err(DataError::new(path, format!("[{index}]: expected a mapping")).into());
    };
    for field in changed_fields(old, new) {
        match new_fields.get(field) {
            Some(value) => {
                item.insert(field.to_owned(), value.clone());
            }
            None => {
                item.shift_remove(field);
            }
        }
    }
    let items = Value::Array(items);
    let (rewritten, note) = match format {
        Format::Json => (pretty(&items), None),
        Format::Yaml => {
            let (header, rest) = split_header(&text);
            let note = has_comments(rest).then(|| {
                format!(
                    "{} was re-serialised: comments inside it were not kept{}",
                    path.display(),
                    if header.is_empty() {
                        ""
                    } else {
                        " (its opening comment block was)"
                    }
                )
            });
            (format!("{header}{}", to_yaml(&items)?), note)
        }
    };
    let reread: Vec<Entity> = datafile::parse(path, &rewritten, format, &mut |_| {})?;
    let expected: Vec<&Entity> = entities
        .iter()
        .enumerate()
        .map(|(i, e)| if i == index { new } else { e })
        .collect();
    if reread.iter().collect::<Vec<_>>() != expected {
        return Err(HarnessError::Infrastructure(format!(
            "{}: rewriting entity `{entity_id}` would not read back as intended; nothing was written",
            path.display()
        )));
    }
    replace_file(path, &rewritten)?;
    Ok(note)
}

/// The leading comment block of a YAML file (comment and blank lines, ending in a newline) and
/// the rest.
fn split_header(text: &str) -> (&str, &str) {
    let mut end = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            end += line.len();
        } else {
            break;
        }
    }
    let (header, rest) = text.split_at(end);
    if header.ends_with('\n') || header.is_empty() {
        (header, rest)
    } else {
        ("", text)
    }
}

/// Whether YAML text seems to hold comments (a false alarm only costs a note).
fn has_comments(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with('#') || l.contains(" #"))
}

/// Replaces a file atomically (a temporary file renamed over it), following a symbolic link and
/// keeping the file's permissions.
fn replace_file(path: &Path, text: &str) -> Result<(), HarnessError> {
    let target = std::fs::canonicalize(path).map_err(|e| write_error(path, &e))?;
    let permissions = std::fs::metadata(&target).map(|m| m.permissions()).ok();
    write_replace(&target, text.as_bytes()).map_err(|e| write_error(path, &e))?;
    if let Some(permissions) = permissions
        && let Err(e) = std::fs::set_permissions(&target, permissions)
    {
        tracing::warn!("{}: could not keep its permissions: {e}", path.display());
    }
    Ok(())
}

fn copy_permissions(from: &Path, to: &Path) {
    if let Ok(meta) = std::fs::metadata(from)
        && let Err(e) = std::fs::set_permissions(to, meta.permissions())
    {
        tracing::warn!("{}: could not set its permissions: {e}", to.display());
    }
}

fn write_error(path: &Path, e: &std::io::Error) -> HarnessError {
    HarnessError::Infrastructure(format!("{}: cannot write: {e}", path.display()))
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

/// YAML, with a blank line between the items of a top-level list (as kb/ files are written by
/// hand).
fn to_yaml(value: &Value) -> Result<String, HarnessError> {
    let text = serde_norway::to_string(value)
        .map_err(|e| HarnessError::Infrastructure(format!("cannot write YAML: {e}")))?;
    if !value.is_array() {
        return Ok(text);
    }
    let mut spaced = String::with_capacity(text.len() + text.len() / 32);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if i > 0 && line.starts_with("- ") {
            spaced.push('\n');
        }
        spaced.push_str(line);
    }
    Ok(spaced)
}

/// JSON with two-space indentation and a final newline.
fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("\"{e}\""));
    text.push('\n');
    text
}

/// An entity's fields as a JSON object, in schema order.
fn entity_map(entity: &Entity) -> Map<String, Value> {
    match serde_json::to_value(entity) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
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

fn plural(n: usize, singular: &str) -> String {
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
    fn headers_are_leading_comments() {
        let (header, rest) = split_header("# a\n\n# b\n- x: 1\n# c\n");
        assert_eq!(header, "# a\n\n# b\n");
        assert!(has_comments(rest));
        assert_eq!(split_header("- x: 1\n").0, "");
        assert_eq!(split_header("# only").0, "");
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
