//! Streaming updates to SDKs over server-sent events, in Unleash's protocol
//! (`GET /api/client/streaming`), and its polling form (`GET /api/client/delta`).
//!
//! Event ids are store versions: one sequence for the whole installation, identical on every
//! replica. A stream starts with `unleash-connected` (a hydration, or what the client missed
//! since its `Last-Event-ID`, read from the store's stream log, so any replica can resume it),
//! then gets `unleash-updated` for every version that changes what it shows. Streams are
//! grouped by what they show (`events::View`); the hub (`hub`) encodes each update once per
//! group. This module reads the snapshot and the stream log and never writes.

pub mod events;
pub mod frame;
pub mod hub;
pub mod open_files;
pub mod queue;

pub use events::View;
pub use hub::{Refusal, StreamHub, StreamLimits, Subscription};
pub use queue::EventStream;
