//! State import (API-FACTS §7.3): parsing JSON or YAML (`format.rs`), reading the document
//! (`document.rs`) and applying it to a configuration (`apply.rs`), validated whole before
//! anything is written.

mod apply;
mod document;
mod flow_depth;
mod format;

pub use apply::{
    apply_import, FeatureTagCounts, ImportOptions, ImportResult, ImportSummary, RecordCounts,
    ToggleChange, ToggleCounts,
};
pub use document::{read_document, FeatureTagRef, ImportDocument, ImportedToggle};
pub use format::{parse_document, DocumentFormat};
