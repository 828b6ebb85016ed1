//! State import (API-FACTS §7.3): parsing JSON or YAML (`format.rs`), reading the document
//! (`document.rs`) and applying it to a configuration (`apply.rs`), validated whole before
//! anything is written; the sections a version-2 document adds for a whole instance
//! (`instance.rs`: environments and per-environment configuration, segments, archived names,
//! API tokens, addons — one module each); and the client-shaped import of one environment
//! (`client_shape.rs`).

mod addons;
mod apply;
mod archived;
mod client_shape;
mod document;
mod environments;
mod flow_depth;
mod format;
mod instance;
mod segments;
mod tokens;

pub use addons::ADDON_IDS;
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
pub use instance::InstanceSummary;
