//! The read-only list of feature types (API-FACTS §4.1). A toggle's `type` is free text.

use serde::Serialize;

/// A feature type with its expected lifetime.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureType {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub lifetime_days: Option<u32>,
}

/// The built-in feature types, in their customary order.
pub const FEATURE_TYPES: [FeatureType; 5] = [
    FeatureType {
        id: "release",
        name: "Release",
        description:
            "Used to enable trunk-based development for teams practicing Continuous Delivery.",
        lifetime_days: Some(40),
    },
    FeatureType {
        id: "experiment",
        name: "Experiment",
        description: "Used to perform multivariate or A/B testing.",
        lifetime_days: Some(40),
    },
    FeatureType {
        id: "operational",
        name: "Operational",
        description: "Used to control operational aspects of the system behavior.",
        lifetime_days: Some(7),
    },
    FeatureType {
        id: "kill-switch",
        name: "Kill switch",
        description: "Used to to gracefully degrade system functionality.",
        lifetime_days: None,
    },
    FeatureType {
        id: "permission",
        name: "Permission",
        description:
            "Used to change the features or product experience that certain users receive.",
        lifetime_days: None,
    },
];
