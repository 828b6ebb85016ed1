//! Addon delivery: providers' bodies and templates. The delivery worker (a Redis stream with a
//! consumer group, or an outbox in redb) is not built yet.

pub mod template;
