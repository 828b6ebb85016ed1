//! State import (API-FACTS §7.3): parsing JSON or YAML (`format.rs`), reading the document
//! (`document.rs`) and applying it to a configuration (`apply.rs`), validated whole before
//! anything is written; and the client-shaped import of one environment (`client_shape.rs`).

mod apply;
mod client_shape;
mod document;
mod flow_depth;
mod format;

pub use apply::{
    apply_import, FeatureTagCounts, ImportOptions, ImportResult, ImportSummary, RecordCounts,
    ToggleChange, ToggleCounts,
};
pub use client_shape::{
    apply_client_document, read_client_document, read_client_document_in, ClientDocument,
    ClientImportCounts, ClientImportSummary,
};
pub use document::{read_document, FeatureTagRef, ImportDocument, ImportedToggle};
pub use format::{parse_document, DocumentFormat};
