//! Addon delivery: the requests an event becomes (`request`), sending them (`send`), when to
//! try again (`backoff`), and the worker that takes jobs from the store's queue (`worker`).

pub mod backoff;
pub mod request;
pub mod send;
pub mod worker;

pub use worker::{DeliverySettings, DeliveryWorker};
