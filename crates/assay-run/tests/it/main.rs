//! Integration tests of assay-run, one module per topic.

mod calibrate;
