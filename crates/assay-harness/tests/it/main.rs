//! Integration tests of assay-harness, one module per topic.

mod calibrate;
