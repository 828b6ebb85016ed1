//! Segments (Unleash 4.10+, open source since 5.5): named, reusable sets of constraints that
//! strategies refer to by id (MODERN-MODEL §1).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::constraint::Constraint;
use super::exact_capacity;

/// A stored segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    pub id: u32,
    /// Unique among segments.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The project whose strategies may use it; `None`: every project's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, deserialize_with = "exact_capacity::vec")]
    pub constraints: Vec<Constraint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
}
