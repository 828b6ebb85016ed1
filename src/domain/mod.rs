//! Plain types and rules of the toggle domain. Imports neither axum nor redis.

pub mod error;
pub mod event;
pub mod event_diff;
pub mod feature_type;
pub mod filter;
pub mod name;
pub mod state;
pub mod strategy;
pub mod tag;
pub mod toggle;
pub mod usage;
pub mod views;

pub use error::{DomainError, FieldError, ValidationErrors};
