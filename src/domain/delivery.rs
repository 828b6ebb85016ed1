//! Addon deliveries as data: the job one event becomes for one addon, and the record of how
//! its delivery went (what `GET /api/admin/addons/:id/deliveries` shows).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::addon::AddonConfig;

/// The id of the delivery of event `event` to addon `addon`: `<event>.<addon>`. The same on
/// every attempt (it is the `X-Flagpole-Delivery` idempotency key).
pub fn delivery_id(event: u64, addon: u64) -> String {
    format!("{event}.{addon}")
}

/// Whether `addon` wants events of `kind`.
pub fn subscribes(addon: &AddonConfig, kind: &str) -> bool {
    addon.enabled && addon.events.iter().any(|e| e == kind)
}

/// One event to deliver to one addon, as queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryJob {
    /// See [`delivery_id`].
    pub delivery: String,
    pub event: u64,
    pub addon: u64,
    /// The event kind.
    #[serde(rename = "type")]
    pub kind: String,
    /// The configuration version of the commit that queued it: a replica judges the addon
    /// against a snapshot at least this new.
    pub version: u64,
    /// Attempts made so far.
    pub attempts: u32,
    /// Requests of this delivery already accepted (a Slack delivery posts one per channel;
    /// a retry sends only the rest).
    pub sent: u32,
    /// When the event was committed, epoch milliseconds (delivery latency counts from here).
    pub queued: i64,
    /// The W3C `traceparent` of the write that queued it: the delivery's span links to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Waiting for its first attempt.
    Queued,
    /// Failed; waiting for its next attempt (`nextAttemptAt`).
    Retrying,
    /// Accepted by the receiver (2xx).
    Delivered,
    /// Failed for good (attempts exhausted, or a refusal a retry cannot fix): a dead letter
    /// until redelivered.
    Dead,
    /// Not sent: the addon was deleted or disabled, or the event is gone.
    Dropped,
}

/// How one delivery went, as the deliveries listing shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRecord {
    pub id: String,
    pub event_id: u64,
    pub addon_id: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: DeliveryStatus,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The receiver's last HTTP status, if it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status_code: Option<u16>,
    /// From the commit of the event to the receiver's 2xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl DeliveryRecord {
    /// The record of a job just queued.
    pub fn queued(job: &DeliveryJob, now: DateTime<Utc>) -> Self {
        Self {
            id: job.delivery.clone(),
            event_id: job.event,
            addon_id: job.addon,
            kind: job.kind.clone(),
            status: DeliveryStatus::Queued,
            attempts: job.attempts,
            last_error: None,
            last_status_code: None,
            latency_ms: None,
            next_attempt_at: None,
            created_at: DateTime::from_timestamp_millis(job.queued).unwrap_or(now),
            updated_at: now,
        }
    }
}
