//! Editing the knowledge base: create, update, deactivate and re-embed entities, in one place
//! for `assay kb` and the KB admin API.
//!
//! A [`KbEditor`] is a store plus, optionally, the project's `kb/` files ([`KbFiles`]). With
//! the files (the embedded SQLite store, where the files are the source of truth) every write
//! goes to the file that holds the entity first (atomically, keeping the file's format and
//! every other entity as it was, checked by reading the new text back before anything is
//! written), then to the store, so the next import finds nothing to do. Without them (a store
//! that is its own source of truth, such as a database), writes go to the store alone. The
//! validation rules and their messages are the same either way.
//!
//! An update or deactivation may carry the version it edits ([`KbEditor::update`]'s
//! `expected_version`); when the entity has moved on since, the edit fails with
//! [`EditError::Conflict`] and nothing is written, so two editors never silently overwrite each
//! other. Without files the store checks the version again inside its write transaction
//! ([`Edit::expected_version`]), so this holds across processes too (two servers on one
//! database, or the CLI beside a server). With files the check and the write are not one
//! transaction: a [`KbSession`] makes them one step, holding the project's knowledge-base lock
//! from before it reads the files until its edits are imported, so open editors through one.
//!
//! ```no_run
//! use assay_kbtools::kbedit::KbSession;
//! use assay_kb::store::{Edit, EntityUpdate};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let session = KbSession::open(std::path::Path::new("examples/coparent"))?;
//! let editor = session.editor();
//! let update: EntityUpdate = serde_json::from_str(r#"{"priority": 77}"#)?;
//! let outcome = editor.update("gray_rock", &update, Some(1), &Edit::now("alice"))?;
//! println!("{:?}", outcome.version());
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use assay_core::entity::{Entity, EntityType, LoadMode};
use assay_kb::datafile::{self, DataError, Format};
use assay_kb::store::{Edit, EntityUpdate, EntityVersion, KbStore, StoredEntity, changed_fields};
use assay_kb::{
    EntityFilter, InvalidEntity, KbError, KnowledgeBase, LoadedKb, VersionConflict, check_entity,
};
use assay_providers::Embedder;
use serde::Serialize;
use serde_json::Value;

use crate::HarnessError;
use assay_project::engine::{self, EmbedReport};
use assay_project::lock::KbLock;
use assay_project::project::Project;
pub use assay_project::provenance::entity_map;
use assay_project::results::{write_new, write_replace};
use assay_project::settings::ProjectSettings;

mod span;

/// The load modes, in schema order.
pub const LOAD_MODES: [LoadMode; 3] = [LoadMode::Always, LoadMode::State, LoadMode::Situation];

/// Why an edit was refused. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// No entity has this id.
    #[error("no entity `{0}`")]
    NotFound(String),
    /// The edit was made against a version that is no longer the current one.
    #[error(transparent)]
    Conflict(VersionConflict),
    /// An entity with this id exists already (ids are never reused).
    #[error("{message}")]
    AlreadyExists {
        /// The entity.
        entity_id: String,
        /// What exists, and where.
        message: String,
    },
    /// The entity the edit would produce breaks a rule every entity must meet.
    #[error("entity `{entity_id}`: {problem}")]
    Invalid {
        /// The entity.
        entity_id: String,
        /// What is wrong.
        problem: InvalidEntity,
    },
    /// The edit cannot be made in this state of the knowledge base (the entity is in no
    /// `kb/` file, its file name is taken, its id cannot name a file, …).
    #[error("{message}")]
    Refused {
        /// The field at fault, when one is (`entity_id`).
        field: Option<&'static str>,
        /// What is wrong.
        message: String,
    },
    /// The store, the files or a provider failed, or a project file is not valid.
    #[error(transparent)]
    Harness(#[from] HarnessError),
}

impl EditError {
    /// The field at fault, when the error is about one: `entity_id`, `title` or
    /// `state_conditions` for an invalid entity.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            EditError::Invalid { problem, .. } => Some(invalid_field(problem)),
            EditError::Refused { field, .. } => *field,
            _ => None,
        }
    }
}

impl From<KbError> for EditError {
    fn from(e: KbError) -> EditError {
        match e {
            KbError::NotFound(id) => EditError::NotFound(id),
            KbError::Conflict(conflict) => EditError::Conflict(conflict),
            KbError::InvalidEntity { entity_id, problem } => {
                EditError::Invalid { entity_id, problem }
            }
            e => EditError::Harness(e.into()),
        }
    }
}

impl From<DataError> for EditError {
    fn from(e: DataError) -> EditError {
        EditError::Harness(e.into())
    }
}

impl From<EditError> for HarnessError {
    /// As `assay kb` reports it: a missing or invalid entity as a knowledge-base error, a
    /// refusal or conflict as a usage error (both exit 2).
    fn from(e: EditError) -> HarnessError {
        match e {
            EditError::NotFound(id) => KbError::NotFound(id).into(),
            EditError::Invalid { entity_id, problem } => {
                KbError::InvalidEntity { entity_id, problem }.into()
            }
            EditError::Harness(e) => e,
            e @ (EditError::Conflict(_)
            | EditError::AlreadyExists { .. }
            | EditError::Refused { .. }) => HarnessError::Usage(e.to_string()),
        }
    }
}

/// The field an entity rule is about.
pub fn invalid_field(problem: &InvalidEntity) -> &'static str {
    match problem {
        InvalidEntity::EmptyId | InvalidEntity::BadId { .. } => "entity_id",
        InvalidEntity::EmptyTitle => "title",
        InvalidEntity::Conditions(_) => "state_conditions",
    }
}

/// A project's `kb/` files, as loaded: where each entity is defined.
#[derive(Debug, Clone, Copy)]
pub struct KbFiles<'a> {
    dir: &'a Path,
    loaded: &'a LoadedKb,
}

impl<'a> KbFiles<'a> {
    /// The `kb/` folder `dir` and what was loaded from it.
    pub fn new(dir: &'a Path, loaded: &'a LoadedKb) -> KbFiles<'a> {
        KbFiles { dir, loaded }
    }

    /// The files of a loaded project.
    pub fn of(project: &'a Project) -> KbFiles<'a> {
        KbFiles::new(&project.settings.kb_dir, &project.kb)
    }

    /// The file that defines `entity_id`, if any.
    pub fn source(&self, entity_id: &str) -> Option<&'a Path> {
        self.loaded.sources.get(entity_id).map(PathBuf::as_path)
    }
}

/// Why an edit wrote nothing although it was valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoChange {
    /// The entity already is as the update asks.
    AlreadyAsAsked,
    /// A deactivation of an entity that is already inactive.
    AlreadyInactive,
    /// A deactivation of an entity that is inactive and in no `kb/` file.
    InactiveOutsideFiles,
}

/// What an edit did.
#[derive(Debug, Clone, PartialEq)]
pub enum EditOutcome {
    /// A new version was written.
    Written {
        /// The new current version.
        stored: StoredEntity,
        /// The fields it changed, in schema order (empty for a new entity).
        changed: Vec<&'static str>,
        /// The `kb/` file written, when the editor has the files.
        file: Option<PathBuf>,
        /// Something the user should know (comments lost when a YAML file was rewritten).
        note: Option<String>,
    },
    /// Nothing was written.
    Unchanged {
        /// The current version, as it stays.
        stored: StoredEntity,
        /// Why.
        why: NoChange,
    },
}

impl EditOutcome {
    /// The current version after the edit.
    pub fn stored(&self) -> &StoredEntity {
        match self {
            EditOutcome::Written { stored, .. } | EditOutcome::Unchanged { stored, .. } => stored,
        }
    }

    /// The current version number after the edit.
    pub fn version(&self) -> u32 {
        self.stored().version
    }
}

/// Which entities to re-embed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reembed<'a> {
    /// This active entity, fresh or not.
    One(&'a str),
    /// The active entities whose embedding is missing or stale.
    Stale,
    /// Every active entity.
    All,
}

/// What [`KbEditor::regenerate_embeddings`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Regenerated {
    /// The embedding model.
    pub model: String,
    /// Entities embedded now.
    pub embedded: Vec<String>,
    /// Entities whose embedding was already fresh (and left alone).
    pub fresh: usize,
    /// With `[retrieval] views = "multi"`: the entities whose views were embedded now, and how
    /// many were already fresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub views: Option<ViewsRegenerated>,
}

/// The view embeddings part of [`Regenerated`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViewsRegenerated {
    /// Entities whose views were embedded now.
    pub embedded: Vec<String>,
    /// Entities whose views were all fresh.
    pub fresh: usize,
}

/// Edits a store and, when given, the `kb/` files that are its source of truth.
#[derive(Clone, Copy)]
pub struct KbEditor<'a> {
    store: &'a dyn KbStore,
    files: Option<KbFiles<'a>>,
}

impl std::fmt::Debug for KbEditor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KbEditor")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl<'a> KbEditor<'a> {
    /// An editor of `store`, writing through to `files` when given (they must be what the
    /// store was just imported from).
    pub fn new(store: &'a dyn KbStore, files: Option<KbFiles<'a>>) -> KbEditor<'a> {
        KbEditor { store, files }
    }

    /// The store.
    pub fn store(&self) -> &'a dyn KbStore {
        self.store
    }

    /// The current version of an entity, or [`EditError::NotFound`].
    pub fn stored(&self, entity_id: &str) -> Result<StoredEntity, EditError> {
        self.store
            .get_stored(entity_id)?
            .ok_or_else(|| EditError::NotFound(entity_id.to_owned()))
    }

    /// Every version of an entity, oldest first.
    pub fn history(&self, entity_id: &str) -> Result<Vec<EntityVersion>, EditError> {
        Ok(self.store.history(entity_id)?)
    }

    /// Adds a new entity as version 1 (with the files: in a new file
    /// `kb/<entity_id>.yaml`).
    pub fn create(&self, entity: &Entity, edit: &Edit) -> Result<EditOutcome, EditError> {
        check_entity(entity).map_err(|problem| EditError::Invalid {
            entity_id: entity.entity_id.clone(),
            problem,
        })?;
        let id = entity.entity_id.as_str();
        if let Some(source) = self.files.and_then(|f| f.source(id)) {
            return Err(EditError::AlreadyExists {
                entity_id: id.to_owned(),
                message: format!(
                    "entity `{id}` already exists (in {}); change it with an update (`assay kb update`)",
                    source.display()
                ),
            });
        }
        if self.store.contains(id)? {
            let message = if self.files.is_some() {
                format!(
                    "entity `{id}` already exists in the store (inactive: it was removed from the kb/ files); ids are never reused"
                )
            } else {
                format!("entity `{id}` already exists; ids are never reused")
            };
            return Err(EditError::AlreadyExists {
                entity_id: id.to_owned(),
                message,
            });
        }
        let file = match self.files {
            Some(files) => Some(write_new_entity(files, entity)?),
            None => None,
        };
        let stored = self.store.create(entity, edit)?;
        Ok(EditOutcome::Written {
            stored,
            changed: Vec::new(),
            file,
            note: None,
        })
    }

    /// Applies `update` to the entity; when anything changes, writes it as a new version.
    /// With `expected_version`, fails with [`EditError::Conflict`] unless that is the current
    /// version.
    pub fn update(
        &self,
        entity_id: &str,
        update: &EntityUpdate,
        expected_version: Option<u32>,
        edit: &Edit,
    ) -> Result<EditOutcome, EditError> {
        self.change(entity_id, update, expected_version, edit, Change::Update)
    }

    /// Soft-deletes an entity: a new version with `is_active = false` (none when it is
    /// already inactive). With `expected_version`, as [`KbEditor::update`].
    pub fn deactivate(
        &self,
        entity_id: &str,
        expected_version: Option<u32>,
        edit: &Edit,
    ) -> Result<EditOutcome, EditError> {
        let update = EntityUpdate {
            is_active: Some(false),
            ..EntityUpdate::default()
        };
        self.change(
            entity_id,
            &update,
            expected_version,
            edit,
            Change::Deactivate,
        )
    }

    fn change(
        &self,
        entity_id: &str,
        update: &EntityUpdate,
        expected_version: Option<u32>,
        edit: &Edit,
        change: Change,
    ) -> Result<EditOutcome, EditError> {
        let stored = self.stored(entity_id)?;
        // Without files the store checks the version again inside its write transaction, so an
        // edit made meanwhile by another process is refused there too. With files the file is
        // written first and the check below is the only one: callers serialise their edits.
        let edit = edit
            .clone()
            .expecting(expected_version.filter(|_| self.files.is_none()));
        if let Some(expected) = expected_version
            && expected != stored.version
        {
            return Err(EditError::Conflict(VersionConflict {
                entity_id: entity_id.to_owned(),
                expected,
                current: stored.version,
            }));
        }
        let (old, source) = match self.files {
            None => (stored.entity.clone(), None),
            Some(files) => {
                let Some(source) = files.source(entity_id) else {
                    if change == Change::Deactivate && !stored.entity.is_active {
                        return Ok(EditOutcome::Unchanged {
                            stored,
                            why: NoChange::InactiveOutsideFiles,
                        });
                    }
                    return Err(EditError::Refused {
                        field: None,
                        message: format!(
                            "entity `{entity_id}` is in no kb/ file (it was removed from the files and deactivated); add it back to a kb/ file to change it"
                        ),
                    });
                };
                let old = files
                    .loaded
                    .kb
                    .get(entity_id)?
                    .ok_or_else(|| EditError::NotFound(entity_id.to_owned()))?;
                (old, Some(source))
            }
        };
        let new = update.apply(&old);
        check_entity(&new).map_err(|problem| EditError::Invalid {
            entity_id: entity_id.to_owned(),
            problem,
        })?;
        let changed = changed_fields(&old, &new);
        if changed.is_empty() {
            let why = match change {
                Change::Deactivate => NoChange::AlreadyInactive,
                Change::Update => NoChange::AlreadyAsAsked,
            };
            return Ok(EditOutcome::Unchanged { stored, why });
        }
        let note = match source {
            Some(path) => rewrite_source(path, entity_id, &old, &new)?,
            None => None,
        };
        let stored = match change {
            Change::Update => self.store.update(entity_id, update, &edit)?,
            Change::Deactivate => self.store.deactivate(entity_id, &edit)?,
        };
        Ok(EditOutcome::Written {
            stored,
            changed,
            file: source.map(Path::to_owned),
            note,
        })
    }

    /// Re-embeds entities with `embedder` (`which`), and with `multi_view` (unless `which` is
    /// one entity) the views of the active SITUATION entities that need it (all of them for
    /// [`Reembed::All`]). Embeddings
    /// add no version. A provider failure is an infrastructure error.
    pub async fn regenerate_embeddings(
        &self,
        embedder: &dyn Embedder,
        which: Reembed<'_>,
        multi_view: bool,
    ) -> Result<Regenerated, EditError> {
        if let Reembed::One(id) = which {
            let stored = self.stored(id)?;
            if !stored.entity.is_active {
                return Err(EditError::Refused {
                    field: None,
                    message: format!(
                        "entity `{id}` is inactive: only active entities are embedded"
                    ),
                });
            }
        }
        let (force, only) = match which {
            Reembed::One(id) => (false, Some(id)),
            Reembed::Stale => (false, None),
            Reembed::All => (true, None),
        };
        let EmbedReport { embedded, fresh } =
            engine::refresh_embeddings(self.store, embedder, force, only).await?;
        // One entity's views are refreshed with the others' (the pipeline refreshes stale
        // views before it searches), as `assay kb embed ID` does.
        let views = if multi_view && !matches!(which, Reembed::One(_)) {
            let report = engine::refresh_view_embeddings(self.store, embedder, force).await?;
            Some(ViewsRegenerated {
                embedded: report.embedded,
                fresh: report.fresh,
            })
        } else {
            None
        };
        Ok(Regenerated {
            model: embedder.model().to_owned(),
            embedded,
            fresh,
            views,
        })
    }
}

/// A project opened to change its knowledge base: the knowledge-base lock
/// ([`KbLock`]) is held from before the project is read until the session is dropped, so the
/// files it loaded, the version checks of its edits, the files it rewrites and the store it
/// imports into are one step that no other process (another server, `assay kb update`) can
/// interleave with. Every writer of entities (`assay kb`, the admin API, the web UI) edits
/// through one.
pub struct KbSession {
    /// The project, read after the lock was taken.
    pub project: Project,
    /// Its store, brought up to date with the files (where they are the source of truth).
    pub store: engine::OpenStore,
    /// What that import did (`None` for a store that is its own source of truth).
    pub imported: Option<assay_kb::store::ImportReport>,
    lock: KbLock,
}

impl std::fmt::Debug for KbSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KbSession")
            .field("root", &self.project.settings.root)
            .field("store", &self.store.location)
            .finish_non_exhaustive()
    }
}

impl KbSession {
    /// Takes the knowledge-base lock of the project at `root` (waiting for another writer up
    /// to [`assay_project::lock::KB_LOCK_WAIT`]), then loads the project, opens its store and imports
    /// the files where they are the source of truth.
    pub fn open(root: &Path) -> Result<KbSession, HarnessError> {
        let lock = KbLock::acquire(root)?;
        let project = Project::load(root)?;
        let store = engine::open_store(&project.settings)?;
        let imported = engine::sync_kb_held(&store, &project, &lock)?;
        Ok(KbSession {
            project,
            store,
            imported,
            lock,
        })
    }

    /// The editor: through the `kb/` files when they are the source of truth, else the store
    /// alone.
    pub fn editor(&self) -> KbEditor<'_> {
        let files = self
            .store
            .files_are_source()
            .then(|| KbFiles::of(&self.project));
        KbEditor::new(&*self.store, files)
    }

    /// The lock this session holds (for [`engine::sync_kb_held`] after the session rewrote
    /// files itself).
    pub fn lock(&self) -> &KbLock {
        &self.lock
    }

    /// The project, the store, the import's report and the lock, for a caller that keeps the
    /// lock while it uses them.
    pub fn into_parts(
        self,
    ) -> (
        Project,
        engine::OpenStore,
        Option<assay_kb::store::ImportReport>,
        KbLock,
    ) {
        (self.project, self.store, self.imported, self.lock)
    }
}

/// Which write an edit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Update,
    Deactivate,
}

/// The name of the embedding model the project uses (`flag` > `ASSAY_EMBEDDER` >
/// `assay.toml` > the built-in one), without loading a model: what store statistics report
/// embedding coverage for.
pub fn embedding_model(
    settings: &ProjectSettings,
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, HarnessError> {
    let choice = engine::choose_embedder(settings, flag, env)?;
    // Every embedder's `model()` is its spec's name; only the built-in one is free to build
    // (which checks its name), so others are not loaded just to be named.
    Ok(if choice.is_builtin() {
        engine::build_embedder(&choice)?.model().to_owned()
    } else {
        choice.spec.to_string()
    })
}

/// Parses an entity type, in any case (`knowledge`, `KNOWLEDGE`).
pub fn parse_entity_type(text: &str) -> Result<EntityType, String> {
    EntityType::ALL
        .into_iter()
        .find(|t| t.as_str().eq_ignore_ascii_case(text.trim()))
        .ok_or_else(|| {
            let names: Vec<&str> = EntityType::ALL.iter().map(|t| t.as_str()).collect();
            format!(
                "unknown entity type `{text}` (expected one of {})",
                names.join(", ")
            )
        })
}

/// Parses a load mode, in any case.
pub fn parse_load_mode(text: &str) -> Result<LoadMode, String> {
    LOAD_MODES
        .into_iter()
        .find(|m| m.as_str().eq_ignore_ascii_case(text.trim()))
        .ok_or_else(|| {
            let names: Vec<&str> = LOAD_MODES.iter().map(|m| m.as_str()).collect();
            format!(
                "unknown load mode `{text}` (expected one of {})",
                names.join(", ")
            )
        })
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The items of this page.
    pub items: Vec<T>,
    /// The page number, from 1.
    pub page: usize,
    /// Items per page.
    pub page_size: usize,
    /// Items on all pages.
    pub total: usize,
}

impl<T> Page<T> {
    /// How many pages there are (0 when there is nothing to list).
    pub fn pages(&self) -> usize {
        self.total.div_ceil(self.page_size.max(1))
    }
}

/// The current versions of the entities passing `filter` (in [`KnowledgeBase::list`] order:
/// priority, highest first, then id), page `page` (from 1) of `page_size`. A page beyond the
/// last is empty.
pub fn list_page(
    store: &dyn KbStore,
    filter: &EntityFilter,
    page: usize,
    page_size: usize,
) -> Result<Page<StoredEntity>, EditError> {
    let all = store.list(filter)?;
    let total = all.len();
    let start = page.saturating_sub(1).saturating_mul(page_size);
    let mut items = Vec::new();
    for entity in all.iter().skip(start).take(page_size) {
        let stored = store
            .get_stored(&entity.entity_id)?
            .ok_or_else(|| EditError::NotFound(entity.entity_id.clone()))?;
        items.push(stored);
    }
    Ok(Page {
        items,
        page,
        page_size,
        total,
    })
}

/// Writes `entity` to a new file `kb/<entity_id>.yaml` (never replacing one), after checking
/// that the text reads back as the entity. Returns the file.
fn write_new_entity(files: KbFiles<'_>, entity: &Entity) -> Result<PathBuf, EditError> {
    let id = entity.entity_id.as_str();
    let target = files.dir.join(file_name_for(id)?);
    if target.exists() {
        return Err(EditError::Refused {
            field: Some("entity_id"),
            message: format!("{} already exists; nothing was written", target.display()),
        });
    }
    let text = to_yaml(&Value::Array(vec![Value::Object(entity_map(entity))]))?;
    let reread: Vec<Entity> = datafile::parse(&target, &text, Format::Yaml, &mut |_| {})?;
    if reread != [entity.clone()] {
        return Err(HarnessError::Infrastructure(format!(
            "entity `{id}` does not read back as written; nothing was written"
        ))
        .into());
    }
    std::fs::create_dir_all(files.dir).map_err(|e| write_error(files.dir, &e))?;
    write_new(&target, text.as_bytes()).map_err(|e| write_error(&target, &e))?;
    if let Some(sibling) = files.loaded.files.first() {
        copy_permissions(sibling, &target);
    }
    Ok(target)
}

/// `<entity_id>.yaml`, when the id is safe as a file name.
fn file_name_for(entity_id: &str) -> Result<String, EditError> {
    let safe = !entity_id.starts_with('.')
        && entity_id
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if safe {
        Ok(format!("{entity_id}.yaml"))
    } else {
        Err(EditError::Refused {
            field: Some("entity_id"),
            message: format!(
                "entity_id `{entity_id}` cannot name its file kb/<entity_id>.yaml: use letters, digits, `_`, `-` and `.`"
            ),
        })
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

fn read_source(path: &Path) -> Result<Source, EditError> {
    let (format, text) = datafile::read_text(path)?;
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
/// differ: only the entity's own lines are written again, every other byte of the file stays
/// as it was (checked by reading the new text back before anything is written). Returns a note
/// for the user when comments were lost.
fn rewrite_source(
    path: &Path,
    entity_id: &str,
    old: &Entity,
    new: &Entity,
) -> Result<Option<String>, EditError> {
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
    // The entity's own text replaced, every other byte kept; else (a layout that cannot be
    // edited in place) the whole file written again.
    if let Some(edited) = rewrite_in_place(path, &text, format, &items, index, &entities, new)? {
        replace_file(path, &edited.0)?;
        return Ok(edited.1);
    }
    tracing::info!(
        "{}: entity `{entity_id}` could not be edited in place (a layout other than a JSON array or a YAML block list); the file is written again",
        path.display()
    );
    let items = Value::Array(items);
    let (rewritten, note) = match format {
        Format::Json => (pretty_json(&items), None),
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
        ))
        .into());
    }
    replace_file(path, &rewritten)?;
    Ok(note)
}

/// `text` with only item `index`'s own text replaced by `items[index]` (see [`span`]), checked
/// to read back as `entities` with `new` in that place; with a note when comments inside the
/// item were lost. `None` when the file's layout cannot be edited in place or the result would
/// not read back as intended (the caller then writes the whole file).
fn rewrite_in_place(
    path: &Path,
    text: &str,
    format: Format,
    items: &[Value],
    index: usize,
    entities: &[Entity],
    new: &Entity,
) -> Result<Option<(String, Option<String>)>, EditError> {
    let Some(spans) = span::item_spans(text, format) else {
        return Ok(None);
    };
    if spans.len() != items.len() {
        return Ok(None);
    }
    let at = &spans[index];
    let item = span::render_item(text, at, &items[index], format)?;
    let edited = format!("{}{item}{}", &text[..at.start], &text[at.end..]);
    let Ok(reread) = datafile::parse::<Vec<Entity>>(path, &edited, format, &mut |_| {}) else {
        return Ok(None);
    };
    let intended = reread.len() == entities.len()
        && reread
            .iter()
            .zip(entities)
            .enumerate()
            .all(|(i, (r, e))| if i == index { r == new } else { r == e });
    if !intended {
        return Ok(None);
    }
    let note = (format == Format::Yaml && has_comments(&text[at.clone()])).then(|| {
        format!(
            "{}: comments inside entity `{}` were not kept (the rest of the file is as it was)",
            path.display(),
            new.entity_id
        )
    });
    Ok(Some((edited, note)))
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

/// "PATH: cannot write: …", an infrastructure error.
pub fn write_error(path: &Path, e: &std::io::Error) -> HarnessError {
    HarnessError::Infrastructure(format!("{}: cannot write: {e}", path.display()))
}

/// YAML, with a blank line between the items of a top-level list (as kb/ files are written by
/// hand).
pub fn to_yaml(value: &Value) -> Result<String, HarnessError> {
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

/// JSON with two-space indentation and a final newline (as kb/ JSON files are rewritten).
pub fn pretty_json(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("\"{e}\""));
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_kb::store::SqliteStore;

    fn entity(id: &str) -> Entity {
        serde_json::from_value(serde_json::json!({
            "entity_id": id, "entity_type": "KNOWLEDGE", "title": "T", "keywords": "a, b",
        }))
        .unwrap()
    }

    fn update(json: &str) -> EntityUpdate {
        serde_json::from_str(json).unwrap()
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
    fn store_only_edits_version_and_conflict() {
        let store = SqliteStore::in_memory().unwrap();
        let editor = KbEditor::new(&store, None);
        let edit = Edit::now("t");
        let created = editor.create(&entity("k"), &edit).unwrap();
        assert_eq!(created.version(), 1);
        let err = editor.create(&entity("k"), &edit).unwrap_err();
        assert!(matches!(err, EditError::AlreadyExists { .. }), "{err}");

        let out = editor
            .update("k", &update(r#"{"priority": 70}"#), Some(1), &edit)
            .unwrap();
        let EditOutcome::Written { changed, file, .. } = &out else {
            panic!("{out:?}")
        };
        assert_eq!(changed, &["priority"]);
        assert_eq!(*file, None);
        assert_eq!(out.version(), 2);

        // Made from version 1, which is no longer current: nothing is written.
        let err = editor
            .update("k", &update(r#"{"priority": 10}"#), Some(1), &edit)
            .unwrap_err();
        assert!(
            matches!(
                err,
                EditError::Conflict(VersionConflict {
                    expected: 1,
                    current: 2,
                    ..
                })
            ),
            "{err}"
        );
        assert_eq!(editor.stored("k").unwrap().entity.priority.get(), 70);
        let same = editor
            .update("k", &update(r#"{"priority": 70}"#), Some(2), &edit)
            .unwrap();
        assert!(matches!(
            same,
            EditOutcome::Unchanged {
                why: NoChange::AlreadyAsAsked,
                ..
            }
        ));

        let err = editor
            .update("k", &update(r#"{"title": " "}"#), None, &edit)
            .unwrap_err();
        assert_eq!(err.field(), Some("title"));
        assert_eq!(err.to_string(), "entity `k`: title is empty");
        assert!(matches!(
            editor.deactivate("nope", None, &edit).unwrap_err(),
            EditError::NotFound(_)
        ));
        let gone = editor.deactivate("k", Some(2), &edit).unwrap();
        assert_eq!(gone.version(), 3);
        assert!(!gone.stored().entity.is_active);
        assert_eq!(editor.history("k").unwrap().len(), 3);
    }

    #[test]
    fn pages_slice_the_listing() {
        let store = SqliteStore::in_memory().unwrap();
        let editor = KbEditor::new(&store, None);
        for i in 0..5 {
            editor
                .create(&entity(&format!("e{i}")), &Edit::now("t"))
                .unwrap();
        }
        let filter = EntityFilter::default();
        let page = list_page(&store, &filter, 2, 2).unwrap();
        assert_eq!(page.total, 5);
        assert_eq!(page.pages(), 3);
        let ids: Vec<&str> = page
            .items
            .iter()
            .map(|s| s.entity.entity_id.as_str())
            .collect();
        assert_eq!(ids, ["e2", "e3"]);
        assert!(list_page(&store, &filter, 4, 2).unwrap().items.is_empty());
    }

    #[test]
    fn types_and_modes_parse_in_any_case() {
        assert_eq!(
            parse_entity_type("knowledge").unwrap(),
            EntityType::Knowledge
        );
        assert!(parse_entity_type("FACT").unwrap_err().contains("`FACT`"));
        assert_eq!(parse_load_mode(" state ").unwrap(), LoadMode::State);
        assert!(
            parse_load_mode("x")
                .unwrap_err()
                .contains("expected one of")
        );
    }
}
