//! Flagpole: a feature-toggle service.
#![forbid(unsafe_code)]

pub mod domain;
pub mod service;
pub mod snapshot;
pub mod store;
