//! `ClientDocumentForms`: the client documents of every form a replica serves — `default`
//! with segments by reference (the 3.x API's, built from the start) and any other
//! environment or segment form, made when first asked for. Each form has its own builder
//! task; a writer waits for every form to hold its write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio_util::sync::CancellationToken;

use super::{BuildTotals, ClientDocuments, ClientResponse, DocumentForm};
use crate::domain::config_state::ConfigState;
use crate::domain::filter::FeatureFilter;
use crate::domain::text::Text;

/// At most this many forms besides the default one (environments × two segment forms); a
/// request for another is served by building its document on the spot.
const MAX_FORMS: usize = 256;

/// Reads the replica's current configuration (the snapshot's).
pub type CurrentState = Arc<dyn Fn() -> Arc<ConfigState> + Send + Sync>;

/// Forms by their environment, hashed with foldhash: they are looked up on every poll with
/// an environment token (by the name alone, no form is made), and at most `MAX_FORMS` exist.
type FormMap = HashMap<Text, EnvironmentForms, foldhash::fast::RandomState>;

/// The forms of one environment made so far: segments by reference, and inlined.
#[derive(Clone, Default)]
struct EnvironmentForms {
    by_reference: Option<Arc<ClientDocuments>>,
    inlined: Option<Arc<ClientDocuments>>,
}

impl EnvironmentForms {
    fn get(&self, inline_segments: bool) -> Option<&Arc<ClientDocuments>> {
        match inline_segments {
            true => self.inlined.as_ref(),
            false => self.by_reference.as_ref(),
        }
    }

    fn slot_mut(&mut self, inline_segments: bool) -> &mut Option<Arc<ClientDocuments>> {
        match inline_segments {
            true => &mut self.inlined,
            false => &mut self.by_reference,
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Arc<ClientDocuments>> {
        self.by_reference.iter().chain(self.inlined.iter())
    }
}

/// Every form of `forms`.
fn each(forms: &FormMap) -> impl Iterator<Item = &Arc<ClientDocuments>> {
    forms.values().flat_map(EnvironmentForms::iter)
}

/// The client documents of every form of this replica.
pub struct ClientDocumentForms {
    default: Arc<ClientDocuments>,
    /// The other forms asked for so far (copied on insert: reads take no lock).
    others: ArcSwap<FormMap>,
    /// What a new form's builder needs, once the builders run.
    builders: Mutex<Option<(CurrentState, CancellationToken)>>,
}

impl Default for ClientDocumentForms {
    fn default() -> Self {
        Self {
            default: Arc::new(ClientDocuments::default()),
            others: ArcSwap::from_pointee(FormMap::default()),
            builders: Mutex::new(None),
        }
    }
}

impl ClientDocumentForms {
    /// The documents of the default form.
    pub fn default_form(&self) -> &ClientDocuments {
        &self.default
    }

    /// The newest unfiltered document of the default form (the hot path: no reference count).
    pub fn unfiltered(&self) -> arc_swap::Guard<Option<Arc<ClientResponse>>> {
        self.default.unfiltered()
    }

    /// Answers from the newest unfiltered document of `environment`'s form with segments by
    /// reference, when that form was asked for before, is built, and the registry held
    /// `environment` when it was built (an unknown name is served `UNKNOWN_ENVIRONMENT`'s
    /// form): the hot path of environment tokens (one map lookup by the name, no state read,
    /// no lock, no reference count). `answer` gets the document and what a poll of it is
    /// recorded under.
    pub fn answer_unfiltered_of<R>(
        &self,
        environment: &str,
        answer: impl FnOnce(&ClientResponse, &str) -> R,
    ) -> Option<R> {
        if environment == self.default.form().environment {
            return self.default.answer_unfiltered(answer);
        }
        self.others
            .load()
            .get(environment)?
            .by_reference
            .as_ref()?
            .answer_unfiltered(answer)
    }

    /// The newest document of the default form for `filter` (see `ClientDocuments::response`).
    pub async fn response(&self, filter: &FeatureFilter) -> Option<Arc<ClientResponse>> {
        self.default.response(filter).await
    }

    /// The documents of `form`, made (and their builder started) when first asked for; `None`
    /// when `MAX_FORMS` forms exist already.
    pub fn documents(&self, form: &DocumentForm) -> Option<Arc<ClientDocuments>> {
        if *form == *self.default.form() {
            return Some(self.default.clone());
        }
        let find = |others: &FormMap| {
            others
                .get(&form.environment)
                .and_then(|forms| forms.get(form.inline_segments))
                .cloned()
        };
        if let Some(documents) = find(&self.others.load()) {
            return Some(documents);
        }
        let builders = self.lock_builders();
        // Another request may have made it while this one waited for the lock.
        if let Some(documents) = find(&self.others.load()) {
            return Some(documents);
        }
        if each(&self.others.load()).count() >= MAX_FORMS {
            return None;
        }
        let documents = Arc::new(ClientDocuments::new(form.clone()));
        let mut others = FormMap::clone(&self.others.load());
        *others
            .entry(form.environment.clone())
            .or_default()
            .slot_mut(form.inline_segments) = Some(documents.clone());
        self.others.store(Arc::new(others));
        if let Some((current, stop)) = builders.as_ref() {
            spawn_builder(documents.clone(), current.clone(), stop.clone());
        }
        documents.configuration_moved();
        Some(documents)
    }

    /// Every form's documents.
    fn all(&self) -> Vec<Arc<ClientDocuments>> {
        std::iter::once(self.default.clone())
            .chain(each(&self.others.load()).cloned())
            .collect()
    }

    /// Tells every form's builder the configuration moved.
    pub fn configuration_moved(&self) {
        self.default.configuration_moved();
        for documents in each(&self.others.load()) {
            documents.configuration_moved();
        }
    }

    /// Waits until every form's documents are built from `version` or a newer one no newer
    /// than `newest()` (see `ClientDocuments::reach`).
    pub async fn reach(&self, version: u64, newest: &(dyn Fn() -> u64 + Send + Sync)) {
        for documents in self.all() {
            documents.reach(version, newest).await;
        }
    }

    /// The configuration version of the default form's newest build.
    pub fn built_version(&self) -> u64 {
        self.default.built_version()
    }

    /// The oldest version any form was last brought up to.
    pub fn settled_version(&self) -> u64 {
        self.all()
            .iter()
            .map(|documents| documents.settled_version())
            .min()
            .unwrap_or(0)
    }

    /// Builds so far and their total time, over every form.
    pub fn build_totals(&self) -> BuildTotals {
        self.all()
            .iter()
            .map(|documents| documents.build_totals())
            .fold(BuildTotals::default(), |sum, t| BuildTotals {
                builds: sum.builds + t.builds,
                seconds: sum.seconds + t.seconds,
            })
    }

    /// Runs the default form's builder until `stop`, and starts the builder of every other
    /// form as it is made.
    pub async fn run_builders(&self, current: CurrentState, stop: CancellationToken) {
        {
            let mut builders = self.lock_builders();
            for documents in each(&self.others.load()) {
                spawn_builder(documents.clone(), current.clone(), stop.clone());
            }
            *builders = Some((current.clone(), stop.clone()));
        }
        self.default
            .clone()
            .run_builder(move || current(), stop)
            .await;
        // `current` holds the snapshot, which holds these forms: let go of it once stopped,
        // or the snapshot (and its store) would never be dropped.
        *self.lock_builders() = None;
    }

    fn lock_builders(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<(CurrentState, CancellationToken)>> {
        match self.builders.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

fn spawn_builder(documents: Arc<ClientDocuments>, current: CurrentState, stop: CancellationToken) {
    tokio::spawn(async move { documents.run_builder(move || current(), stop).await });
}
