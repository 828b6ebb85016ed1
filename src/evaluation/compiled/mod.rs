//! Flagpole's own evaluator: each toggle of an environment compiled from its client form into
//! plain data (strategies, constraints, variants, dependencies) and evaluated without the
//! allocations, name lookups and closure trees of unleash-yggdrasil's per-call path, with
//! exactly its answers (the differential tests in `tests.rs` compare the two).
//!
//! A toggle whose shape is not compiled here (see `text` for what does not survive
//! yggdrasil's rule text unchanged, `strategies` and `variants` for the rest) is `None`: the
//! engine asks yggdrasil for it, so answers never depend on which path took them.

mod constraints;
mod context;
mod hashing;
mod strategies;
#[cfg(test)]
mod tests;
mod text;
mod variants;

use std::collections::HashMap;
use std::sync::Arc;

use unleash_types::client_features::{ClientFeature, ClientFeatures, Context, Segment};

use strategies::{CompiledStrategy, NotCompiled};
pub use variants::CompiledVariant;
use variants::{weighable, VariantSet};

/// A set of texts looked up per request (user ids, `IN` lists): a fast hasher, as its texts
/// come from the configuration, never from a caller (whose values are only looked up, which
/// cannot crowd a bucket), and foldhash seeds each set at random.
type TextSet = std::collections::HashSet<Box<str>, foldhash::fast::RandomState>;

/// Drops every variant list (a toggle's or a strategy's) that is not `weighable`, so that
/// yggdrasil, which panics on them, is never fed one: such a list answers no variant (a
/// strategy's then falls back to the toggle's, as an empty one does), as the compiled path.
pub fn drop_unweighable_variants(features: &mut ClientFeatures) {
    features
        .features
        .iter_mut()
        .for_each(drop_unweighable_variants_of);
}

/// `drop_unweighable_variants` for one toggle.
pub fn drop_unweighable_variants_of(feature: &mut ClientFeature) {
    if let Some(variants) = &feature.variants {
        if !variants.is_empty() && !weighable(variants.iter().map(|v| v.weight)) {
            feature.variants = None;
        }
    }
    for strategy in feature.strategies.iter_mut().flatten() {
        if let Some(variants) = &strategy.variants {
            if !variants.is_empty() && !weighable(variants.iter().map(|v| v.weight)) {
                strategy.variants = None;
            }
        }
    }
}

/// Toggle names and their places in an environment's list (shared by the builds that keep
/// the same names in the same order).
pub type NameIndex = Arc<HashMap<Box<str>, usize>>;

/// The segments a toggle's strategies may name, by id.
pub type SegmentsById<'a> = HashMap<i32, &'a Segment>;

/// What decides a toggle that is on in the environment.
#[derive(Debug)]
enum Strategies {
    /// yggdrasil cannot write its rule (a dangling segment, an unknown operator): never on,
    /// though its variants still answer a dependency's variant check.
    Unwritable,
    /// None: always on. Else the first that holds decides (and gives its variants).
    List(Vec<CompiledStrategy>),
}

/// A dependency on a parent toggle.
#[derive(Debug)]
struct Dependency {
    /// The parent's index; `None`: no such toggle (never satisfied).
    parent: Option<usize>,
    enabled: bool,
    variants: Option<Vec<String>>,
}

/// One compiled toggle.
#[derive(Debug)]
pub struct CompiledToggle {
    name: Box<str>,
    enabled: bool,
    strategies: Strategies,
    variants: VariantSet,
    dependencies: Vec<Dependency>,
}

/// A compiled answer: whether the toggle is on and, when it is, its variant (`None`: the
/// `disabled` variant).
#[derive(Debug, Clone, Copy)]
pub struct Verdict<'e> {
    pub enabled: bool,
    pub variant: Option<&'e CompiledVariant>,
}

const OFF: Verdict<'static> = Verdict {
    enabled: false,
    variant: None,
};

/// The compiled toggles of one environment, in the order of the input's features.
#[derive(Debug, Default)]
pub struct CompiledToggles {
    /// Shared with the builds before and after that compiled the toggle the same way.
    toggles: Vec<Option<Arc<CompiledToggle>>>,
    by_name: NameIndex,
}

impl CompiledToggles {
    /// Compiles every toggle of `features` it can (`None` for the others).
    #[cfg(test)]
    pub fn build(features: &ClientFeatures) -> Self {
        let segments: SegmentsById = features
            .segments
            .iter()
            .flatten()
            .map(|s| (s.id, s))
            .collect();
        let by_name: NameIndex = Arc::new(
            features
                .features
                .iter()
                .enumerate()
                .map(|(i, f)| (f.name.as_str().into(), i))
                .collect(),
        );
        let toggles = features
            .features
            .iter()
            .map(|feature| Self::compile_toggle(feature, &segments, &by_name))
            .collect();
        Self::assemble(toggles, by_name)
    }

    /// Compiles one toggle; `by_name` places the toggles it may depend on. `None`: left to
    /// yggdrasil.
    pub fn compile_toggle(
        feature: &ClientFeature,
        segments: &SegmentsById<'_>,
        by_name: &HashMap<Box<str>, usize>,
    ) -> Option<Arc<CompiledToggle>> {
        CompiledToggle::compile(feature, segments, by_name).map(Arc::new)
    }

    /// The environment's compiled toggles, each in its place of `by_name`, as compiled alone
    /// (`None`: left to yggdrasil).
    pub fn assemble(mut toggles: Vec<Option<Arc<CompiledToggle>>>, by_name: NameIndex) -> Self {
        // A parent must be compiled for its child to be: a parent left to yggdrasil leaves its
        // children, and theirs, to it too (followed child by child, once each).
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); toggles.len()];
        for (child, toggle) in toggles.iter().enumerate() {
            for parent in toggle
                .iter()
                .flat_map(|t| t.dependencies.iter().filter_map(|d| d.parent))
            {
                children[parent].push(child);
            }
        }
        let mut left: Vec<usize> = (0..toggles.len())
            .filter(|&i| toggles[i].is_none())
            .collect();
        while let Some(parent) = left.pop() {
            for &child in &children[parent] {
                if toggles[child].take().is_some() {
                    left.push(child);
                }
            }
        }
        Self { toggles, by_name }
    }

    /// The index of the toggle `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Whether the toggle `name` exists and is compiled.
    #[cfg(test)]
    pub fn is_compiled(&self, name: &str) -> bool {
        self.index_of(name).is_some_and(|i| self.is_compiled_at(i))
    }

    /// Whether the toggle at `index` is compiled.
    pub fn is_compiled_at(&self, index: usize) -> bool {
        self.toggles.get(index).is_some_and(Option::is_some)
    }

    /// The toggles' places by name.
    pub fn names(&self) -> &NameIndex {
        &self.by_name
    }

    /// How many toggles are compiled and how many are left to yggdrasil.
    pub fn counts(&self) -> (usize, usize) {
        let compiled = self.toggles.iter().filter(|t| t.is_some()).count();
        (compiled, self.toggles.len() - compiled)
    }

    /// The toggle at `index` for `context`; `None` when it is not compiled.
    pub fn evaluate(&self, index: usize, context: &Context) -> Option<Verdict<'_>> {
        let toggle = self.toggles.get(index)?.as_deref()?;
        // Off in the environment: nothing else is looked at.
        if !toggle.enabled || !self.dependencies_met(toggle, context) {
            return Some(OFF);
        }
        let variants = match &toggle.strategies {
            Strategies::Unwritable => return Some(OFF),
            Strategies::List(list) if list.is_empty() => &toggle.variants,
            Strategies::List(list) => match list.iter().find(|s| s.holds(context, &toggle.name)) {
                Some(strategy) => strategy
                    .variants
                    .as_ref()
                    .filter(|v| !v.is_empty())
                    .unwrap_or(&toggle.variants),
                None => return Some(OFF),
            },
        };
        Some(Verdict {
            enabled: true,
            variant: variants.choose(context),
        })
    }

    /// Whether the toggle at `index` is on for `context`; `None` when it is not compiled.
    #[cfg(test)]
    pub fn is_enabled(&self, index: usize, context: &Context) -> Option<bool> {
        let toggle = self.toggles.get(index)?.as_deref()?;
        Some(
            toggle.enabled
                && self.dependencies_met(toggle, context)
                && toggle.strategies_hold(context, &toggle.name),
        )
    }

    /// Whether every dependency of `child` is met, as yggdrasil checks them: the parent
    /// exists and has no dependencies itself, its variant (chosen whether or not it is on) is
    /// one of those named, and it is on or off as asked. The parent is evaluated as part of
    /// the child (a rollout without a group id hashes with the child's name).
    fn dependencies_met(&self, child: &CompiledToggle, context: &Context) -> bool {
        child.dependencies.iter().all(|dependency| {
            let Some(parent) = dependency
                .parent
                .and_then(|p| self.toggles.get(p))
                .and_then(Option::as_deref)
            else {
                return false;
            };
            if !parent.dependencies.is_empty() {
                return false;
            }
            let parent_enabled = parent.enabled && parent.strategies_hold(context, &child.name);
            let parent_variant = parent.variant_by_strategies(context, &child.name);
            if let (Some(expected), Some(actual)) = (&dependency.variants, parent_variant) {
                if !expected.is_empty() && !expected.iter().any(|v| **v == *actual.name) {
                    return false;
                }
            }
            parent_enabled == dependency.enabled
        })
    }
}

impl CompiledToggle {
    fn compile(
        feature: &ClientFeature,
        segments: &SegmentsById<'_>,
        by_name: &HashMap<Box<str>, usize>,
    ) -> Option<Self> {
        let mut list = Vec::new();
        let mut unwritable = false;
        let mut unsupported = false;
        for strategy in feature.strategies.iter().flatten() {
            match CompiledStrategy::compile(strategy, segments, &feature.name) {
                Ok(compiled) => list.push(compiled),
                Err(NotCompiled::ToggleOff) => unwritable = true,
                Err(NotCompiled::Unsupported) => unsupported = true,
            }
        }
        let strategies = match (unwritable, unsupported) {
            (true, _) => Strategies::Unwritable,
            (false, true) => return None,
            (false, false) => Strategies::List(list),
        };
        let variants = VariantSet::of_toggle(
            &feature.name,
            feature.variants.as_deref().unwrap_or_default(),
        );
        let dependencies = feature
            .dependencies
            .iter()
            .flatten()
            .map(|d| Dependency {
                parent: by_name.get(d.feature.as_str()).copied(),
                enabled: d.enabled.unwrap_or(true),
                variants: d.variants.clone(),
            })
            .collect();
        Some(Self {
            name: feature.name.as_str().into(),
            enabled: feature.enabled,
            strategies,
            variants,
            dependencies,
        })
    }

    /// Whether the toggle's strategies let it on (none: on), for `toggle_name`'s evaluation.
    fn strategies_hold(&self, context: &Context, toggle_name: &str) -> bool {
        match &self.strategies {
            Strategies::Unwritable => false,
            Strategies::List(list) => {
                list.is_empty() || list.iter().any(|s| s.holds(context, toggle_name))
            }
        }
    }

    /// The variant yggdrasil's dependency check sees: that of the first strategy that holds
    /// (if it has variants), else the toggle's — whether or not the toggle is on.
    fn variant_by_strategies(
        &self,
        context: &Context,
        toggle_name: &str,
    ) -> Option<&CompiledVariant> {
        let matched = match &self.strategies {
            Strategies::Unwritable => None,
            Strategies::List(list) => list.iter().find(|s| s.holds(context, toggle_name)),
        };
        match matched
            .and_then(|s| s.variants.as_ref())
            .filter(|v| !v.is_empty())
        {
            Some(variants) => variants.choose(context),
            None => self.variants.choose(context),
        }
    }
}
