//! assay-core's integration tests: one binary, one module per topic.

mod stats_reference;
