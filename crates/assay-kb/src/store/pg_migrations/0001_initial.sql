-- Version 1: the entity table of 003 §1 (with pgvector, §2), the per-view embeddings, and the
-- user-state table of 003 §5. Departures from the seed are listed in postgres.rs.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE kb_content_entities (
    -- Identity
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    entity_id TEXT NOT NULL CHECK (length(entity_id) > 0),
    entity_type TEXT NOT NULL
        CHECK (entity_type IN ('PERSONA', 'GUARDRAIL', 'HANDLER', 'KNOWLEDGE', 'SCRIPT', 'RULE')),
    subtype TEXT,
    title TEXT NOT NULL,

    -- Content
    concept_summary TEXT,
    recognition TEXT,
    keywords TEXT,
    guidance_do TEXT,
    guidance_dont TEXT,
    examples TEXT,
    red_flags TEXT,

    -- Configuration
    load_mode TEXT NOT NULL DEFAULT 'SITUATION'
        CHECK (load_mode IN ('ALWAYS', 'STATE', 'SITUATION')),
    priority INTEGER NOT NULL DEFAULT 50 CHECK (priority BETWEEN 0 AND 100),
    state_conditions JSON,
    audience_types TEXT[] NOT NULL DEFAULT ARRAY['PARENT'],

    -- Vector: any dimension (the model decides); HNSW indexes are per dimension.
    embedding vector,
    embedding_model TEXT,
    embedding_dim INTEGER,
    embedding_text_hash TEXT,

    -- Attribution
    source_author TEXT,
    source_title TEXT,
    source_year INTEGER,

    -- Admin
    is_active BOOLEAN NOT NULL DEFAULT TRUE,
    editable_by TEXT NOT NULL DEFAULT 'ADMIN' CHECK (editable_by IN ('ADMIN', 'TRAINER', 'HIDDEN')),
    retrieval_count BIGINT NOT NULL DEFAULT 0 CHECK (retrieval_count >= 0),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_by TEXT NOT NULL,

    -- Versioning
    version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
    previous_version_id UUID REFERENCES kb_content_entities(id),
    is_current BOOLEAN NOT NULL DEFAULT TRUE,
    changed_fields JSON,

    CHECK ((embedding IS NULL) = (embedding_model IS NULL)
        AND (embedding IS NULL) = (embedding_dim IS NULL)
        AND (embedding IS NULL) = (embedding_text_hash IS NULL)),
    CHECK (embedding IS NULL OR vector_dims(embedding) = embedding_dim),
    CHECK (is_current OR NOT is_active)
);

CREATE UNIQUE INDEX idx_kb_current_entity ON kb_content_entities(entity_id) WHERE is_current;
CREATE UNIQUE INDEX idx_kb_entity_version ON kb_content_entities(entity_id, version);
CREATE INDEX idx_kb_entity_type ON kb_content_entities(entity_type);
CREATE INDEX idx_kb_load_mode ON kb_content_entities(load_mode);
CREATE INDEX idx_kb_is_active ON kb_content_entities(is_active);
CREATE INDEX idx_kb_priority ON kb_content_entities(priority DESC);
CREATE INDEX idx_kb_audience ON kb_content_entities USING GIN(audience_types);

CREATE TABLE kb_view_embeddings (
    entity_id TEXT NOT NULL,
    view TEXT NOT NULL,
    model TEXT NOT NULL CHECK (length(model) > 0),
    text_hash TEXT NOT NULL,
    dim INTEGER NOT NULL CHECK (dim > 0),
    embedding vector NOT NULL,
    CHECK (vector_dims(embedding) = dim),
    PRIMARY KEY (model, entity_id, view)
);

CREATE TABLE user_state (
    user_id TEXT PRIMARY KEY,
    user_type TEXT NOT NULL DEFAULT 'PARENT',
    conversation_count INTEGER NOT NULL DEFAULT 0 CHECK (conversation_count >= 0),
    session_type TEXT,
    interaction_rating INTEGER CHECK (interaction_rating BETWEEN 1 AND 5),
    just_logged BOOLEAN NOT NULL DEFAULT FALSE,
    skills_practiced TEXT[] NOT NULL DEFAULT '{}',
    last_topics TEXT[] NOT NULL DEFAULT '{}',
    first_seen TIMESTAMPTZ,
    last_seen TIMESTAMPTZ,
    state_data JSON NOT NULL DEFAULT '{}',
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
