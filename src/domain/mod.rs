//! Plain types and rules of the toggle domain. Imports neither axum nor redis.

pub mod addon;
pub mod api_token;
pub mod config_state;
pub mod constraint;
pub mod context_field;
pub mod delivery;
pub mod dependency;
pub mod environment;
pub mod error;
pub mod event;
pub mod event_diff;
pub mod exact_capacity;
pub mod export;
pub mod feature_strategy;
pub mod feature_type;
pub mod feature_view;
pub mod fields;
pub mod filter;
pub mod import;
pub mod known;
pub mod name;
pub mod project;
pub mod schema;
pub mod segment;
pub mod strategy;
pub mod tag;
pub mod template;
pub mod text;
pub mod toggle;
pub mod usage;
pub mod variant;
pub mod views;

pub use error::{DomainError, FieldError, ValidationErrors};
