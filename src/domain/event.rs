//! Audit events: what happened, who did it, and the data of the change (API-FACTS §3).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::tag::TagRef;

/// The kinds of audit events this service records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    FeatureCreated,
    FeatureUpdated,
    FeatureArchived,
    FeatureRevived,
    FeatureStaleOn,
    FeatureStaleOff,
    FeatureTagged,
    FeatureUntagged,
    /// A parent set on a toggle (through `…/features/:child/dependencies`), as Unleash 7.
    FeatureDependencyAdded,
    /// One parent removed from a toggle.
    FeatureDependencyRemoved,
    /// Every parent removed from a toggle (also when it is archived).
    FeatureDependenciesRemoved,
    TagCreated,
    TagDeleted,
    TagTypeCreated,
    TagTypeUpdated,
    TagTypeDeleted,
    StrategyCreated,
    StrategyUpdated,
    StrategyDeleted,
    StrategyDeprecated,
    StrategyReactivated,
    ProjectCreated,
    ProjectUpdated,
    ProjectDeleted,
    ContextFieldCreated,
    ContextFieldUpdated,
    ContextFieldDeleted,
    FeatureImport,
    StrategyImport,
    ProjectImport,
    ContextFieldImport,
    TagTypeImport,
    TagImport,
    /// A segment written by an import.
    SegmentImport,
    /// One per import that changed something: its options and summary.
    StateImported,
    AddonConfigCreated,
    AddonConfigUpdated,
    AddonConfigDeleted,
    ApiTokenCreated,
    ApiTokenUpdated,
    ApiTokenDeleted,
    EnvironmentCreated,
    EnvironmentUpdated,
    EnvironmentDeleted,
    /// A toggle switched on in one environment (`data.environment` names it).
    FeatureEnvironmentEnabled,
    FeatureEnvironmentDisabled,
    FeatureStrategyAdd,
    FeatureStrategyUpdate,
    FeatureStrategyRemove,
    /// A toggle's variants replaced in one environment (`data.environment` names it).
    FeatureEnvironmentVariantsUpdated,
    StrategyOrderChanged,
    SegmentCreated,
    SegmentUpdated,
    SegmentDeleted,
}

impl EventKind {
    /// The kind as recorded (`feature-created`).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// An event about to be recorded; the store assigns its id.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewEvent {
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// Serialised already: an import's thousands of records are far smaller as text than as
    /// values.
    pub data: Box<RawValue>,
    /// The toggle's tags when the event happened; empty for other resources.
    pub tags: Vec<TagRef>,
    /// The toggle the event is about, if any (read from `data` when the event was made).
    #[serde(skip)]
    pub toggle: Option<String>,
}

/// A recorded event with its monotonic id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub data: Value,
    #[serde(default)]
    pub tags: Vec<TagRef>,
}

/// The toggle an event is about, if any: `data.name` or `data.featureName` of `feature-*`
/// events and of `strategy-order-changed` (Unleash's name for reordering a toggle's
/// strategies).
fn toggle_of<'a>(kind: &str, data: &'a Value) -> Option<&'a str> {
    if !kind.starts_with("feature-") && kind != "strategy-order-changed" {
        return None;
    }
    data.get("name")
        .or_else(|| data.get("featureName"))
        .and_then(Value::as_str)
}

impl Event {
    /// The toggle this event is about, if any.
    pub fn toggle_name(&self) -> Option<&str> {
        toggle_of(&self.kind, &self.data)
    }
}

impl NewEvent {
    /// An event of `kind` with `data`.
    pub fn new(
        kind: EventKind,
        created_by: String,
        created_at: DateTime<Utc>,
        data: &Value,
        tags: Vec<TagRef>,
    ) -> Self {
        let toggle = toggle_of(&kind.name(), data).map(str::to_string);
        Self {
            kind,
            created_by,
            created_at,
            // A value always serialises (its map keys are strings).
            data: serde_json::value::to_raw_value(data).unwrap_or_default(),
            tags,
            toggle,
        }
    }

    /// The toggle this event is about, if any (the key of the per-toggle event index).
    pub fn toggle_name(&self) -> Option<&str> {
        self.toggle.as_deref()
    }

    /// The event kind as recorded (`feature-created`).
    pub fn kind_name(&self) -> String {
        self.kind.name()
    }
}
