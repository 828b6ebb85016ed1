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
mod embedded_store;
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
mod segments;
mod state;
mod strategies;
mod tags;
mod toggles;
mod traces;
mod usage;
mod usage_replicas;
