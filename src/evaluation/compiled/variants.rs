//! Variants compiled: a toggle's (with overrides) or a strategy's, chosen as the client
//! specification says (an override first, then the hash of `"groupId:stickiness"` with seed
//! 86028157 modulo the total weight, plus one; random without a stickiness value), each with its
//! frontend JSON written once.

use rand::Rng;
use unleash_types::client_features::{Context, Payload, StrategyVariant, Variant};

use super::context::Field;
use super::hashing::{normalized_hash, VARIANT_SEED};
use crate::evaluation::frontend::{FrontendPayload, FrontendVariant};

/// One variant that can be chosen.
#[derive(Debug)]
pub struct CompiledVariant {
    pub name: Box<str>,
    pub payload: Option<Payload>,
    weight: u32,
    /// `(field, values)`: the variant is chosen when the field holds one of the values.
    overrides: Vec<(Field, Vec<String>)>,
    /// The variant as the frontend API writes it for a toggle that is on.
    pub frontend_json: Box<[u8]>,
}

/// How the seed of a choice is read.
#[derive(Debug)]
enum Seed {
    /// `default` or none: `userId`, else `sessionId`, else random.
    Default,
    Field(Field),
}

/// A list of variants and how one is chosen.
#[derive(Debug)]
pub struct VariantSet {
    variants: Vec<CompiledVariant>,
    total_weight: u32,
    seed: Seed,
    group_id: Box<str>,
    has_overrides: bool,
}

/// The frontend API's form of a chosen variant, serialised as the typed answer is.
fn frontend_json(name: &str, payload: Option<&Payload>) -> Box<[u8]> {
    let variant = FrontendVariant {
        name: name.to_string(),
        enabled: true,
        payload: payload.map(|p| FrontendPayload {
            kind: p.payload_type.clone(),
            value: p.value.clone(),
        }),
        feature_enabled: true,
        feature_enabled_camel: true,
    };
    // Serialising plain data cannot fail.
    serde_json::to_vec(&variant)
        .unwrap_or_default()
        .into_boxed_slice()
}

/// Whether a list's weights can be chosen among: none negative, and a total above zero that
/// fits a `u32`. yggdrasil panics on the others (`% 0`, an empty random range, an overflowing
/// sum), so such a list answers no variant, as the Node SDK does for `totalWeight <= 0`.
pub fn weighable(weights: impl IntoIterator<Item = i32>) -> bool {
    let total = weights.into_iter().try_fold(0u32, |sum, weight| {
        u32::try_from(weight).ok().and_then(|w| sum.checked_add(w))
    });
    total.is_some_and(|total| total > 0)
}

impl VariantSet {
    /// A toggle's variants (its own name is the group id); none when they are not `weighable`.
    pub fn of_toggle(toggle_name: &str, variants: &[Variant]) -> Self {
        let stickiness = variants.first().and_then(|v| v.stickiness.as_deref());
        if !weighable(variants.iter().map(|v| v.weight)) {
            return Self::new(Vec::new(), stickiness, toggle_name);
        }
        let compiled = variants
            .iter()
            .map(|v| {
                let overrides = v
                    .overrides
                    .iter()
                    .flatten()
                    .map(|o| (Field::in_override(&o.context_name), o.values.clone()))
                    .collect();
                compiled(&v.name, v.weight, v.payload.as_ref(), overrides)
            })
            .collect();
        Self::new(compiled, stickiness, toggle_name)
    }

    /// A strategy's variants: its `stickiness` parameter (or `default`) and its `groupId`
    /// (or the toggle's name) apply to all of them; none when they are not `weighable`.
    pub fn of_strategy(
        variants: &[StrategyVariant],
        stickiness: Option<&str>,
        group_id: &str,
    ) -> Self {
        let compiled = if weighable(variants.iter().map(|v| v.weight)) {
            variants
                .iter()
                .map(|v| compiled(&v.name, v.weight, v.payload.as_ref(), Vec::new()))
                .collect()
        } else {
            Vec::new()
        };
        Self::new(compiled, Some(stickiness.unwrap_or("default")), group_id)
    }

    /// `variants` must be `weighable` (or empty).
    fn new(variants: Vec<CompiledVariant>, stickiness: Option<&str>, group: &str) -> Self {
        // Weighable: the sum fits.
        let total_weight = variants.iter().map(|v| v.weight).sum();
        let seed = match stickiness {
            None | Some("default") => Seed::Default,
            Some(name) => Seed::Field(Field::for_variant_seed(name)),
        };
        let has_overrides = variants.iter().any(|v| !v.overrides.is_empty());
        Self {
            variants,
            total_weight,
            seed,
            group_id: group.into(),
            has_overrides,
        }
    }

    /// Whether there is none to choose from.
    pub fn is_empty(&self) -> bool {
        self.variants.is_empty()
    }

    /// The variant for `context` (`None` when there are none).
    pub fn choose(&self, context: &Context) -> Option<&CompiledVariant> {
        if self.variants.is_empty() {
            return None;
        }
        if self.has_overrides {
            if let Some(found) = self.overridden(context) {
                return Some(found);
            }
        }
        let seed = match &self.seed {
            Seed::Default => context.user_id.as_deref().or(context.session_id.as_deref()),
            Seed::Field(field) => field.read_given(context),
        };
        let target = match seed {
            Some(seed) => normalized_hash(&self.group_id, seed, self.total_weight, VARIANT_SEED),
            None => rand::rng().random_range(1..=self.total_weight),
        };
        let mut sum = 0;
        self.variants.iter().find(|v| {
            sum += v.weight;
            sum >= target
        })
    }

    /// The first variant (in order) one of whose overrides the context meets.
    fn overridden(&self, context: &Context) -> Option<&CompiledVariant> {
        self.variants.iter().find(|v| {
            v.overrides.iter().any(|(field, values)| {
                field
                    .read_given(context)
                    .is_some_and(|value| values.iter().any(|v| v == value))
            })
        })
    }
}

/// One variant of a `weighable` list (its weight is not negative).
fn compiled(
    name: &str,
    weight: i32,
    payload: Option<&Payload>,
    overrides: Vec<(Field, Vec<String>)>,
) -> CompiledVariant {
    CompiledVariant {
        name: name.into(),
        payload: payload.cloned(),
        weight: weight.unsigned_abs(),
        overrides,
        frontend_json: frontend_json(name, payload),
    }
}
