//! End-to-end tests over real HTTP. Conformance suites run against both store backends.

mod common;

mod addons;
mod api_basics;
mod auth;
mod binary;
mod client_api;
mod client_spec;
mod constraint_sdks;
mod constraints;
mod context_fields;
mod convergence;
mod delivery;
mod dependencies;
mod embedded_store;
mod environments;
mod events;
mod forwarding;
mod openapi;
mod probes;
mod projects;
mod read_your_writes;
mod rebase;
mod redis_modes;
mod redis_replicas;
mod rust_sdk;
mod sdks;
mod state;
mod store_upgrade;
mod strategies;
mod strategy_variants;
mod tags;
mod toggles;
mod traces;
mod usage;
mod usage_replicas;
