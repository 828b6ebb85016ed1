//! Addon delivery: the requests an event becomes (`request`), sending them (`send`), when to
//! try again (`backoff`), how much work a replica takes on (`lanes`), and the worker that takes jobs from the store's queue (`worker`).

pub mod backoff;
pub mod lanes;
pub mod request;
pub mod send;
pub mod worker;

pub use worker::{DeliveryWorker, WorkerSettings};
