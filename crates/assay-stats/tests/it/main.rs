//! assay-stats' integration tests: one binary, one module per topic.

mod stats_reference;
