//! Addon delivery. Built so far: the requests an event becomes (`request.rs`). Not yet: the
//! worker that takes jobs from the store and sends them (issue 9).

pub mod request;
