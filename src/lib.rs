//! Flagpole: a feature-toggle service.
#![forbid(unsafe_code)]

pub mod domain;
pub mod store;
