//! The delta events of Unleash's streaming protocol (`{"events":[…]}`), written straight into
//! a buffer: `hydration` (every toggle of a view, with every segment), `feature-updated`,
//! `feature-removed`, `segment-updated`, `segment-removed`. Each event's `eventId` is the store
//! version that made it, identical on every replica.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::domain::config_state::ConfigState;
use crate::domain::filter::FeatureFilter;
use crate::domain::segment::Segment;
use crate::domain::toggle::Toggle;
use crate::domain::views::{ClientSegment, ClientToggle, SegmentForm};
use crate::store::stream_log::{StreamLogEntry, Touched, TOUCHED_NAMES_MAX};

/// What one stream shows: an environment and the toggles a filter (with the token's projects
/// folded in) selects. Streams with equal views receive the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct View {
    /// The environment as requested (its token's, `?environment=` or `default`).
    pub environment: String,
    pub filter: FeatureFilter,
}

/// The environment whose configuration a view shows in `state`: the requested one, or, when
/// the registry does not hold it, a name no toggle is configured in (every toggle off), as
/// the polling API serves it.
fn shown_environment<'a>(view: &'a View, state: &ConfigState) -> &'a str {
    match state.environments.contains_key(&view.environment) {
        true => &view.environment,
        false => "",
    }
}

/// `toggle`'s client JSON in `environment`, segments by reference.
pub fn feature_json(toggle: &Toggle, environment: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    // Serialising borrowed plain data into a Vec cannot fail.
    let _ = serde_json::to_writer(
        &mut out,
        &ClientToggle::in_environment(toggle, environment, SegmentForm::ByReference),
    );
    out
}

/// A `{"events":[…]}` document being written.
pub struct EventList {
    buf: Vec<u8>,
    count: usize,
}

impl Default for EventList {
    fn default() -> Self {
        Self {
            buf: br#"{"events":["#.to_vec(),
            count: 0,
        }
    }
}

impl EventList {
    /// How many events it holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Starts an event object of `kind` and id `event_id`; the caller writes its other fields
    /// (each with a leading comma) and the closing brace.
    fn open(&mut self, kind: &str, event_id: u64) -> &mut Vec<u8> {
        if self.count > 0 {
            self.buf.push(b',');
        }
        self.count += 1;
        self.buf.extend_from_slice(br#"{"type":""#);
        self.buf.extend_from_slice(kind.as_bytes());
        self.buf.extend_from_slice(br#"","eventId":"#);
        self.buf.extend_from_slice(event_id.to_string().as_bytes());
        &mut self.buf
    }

    /// A `hydration`: every toggle of `view` in `state` and every segment.
    pub fn hydration(&mut self, event_id: u64, state: &ConfigState, view: &View) {
        let environment = shown_environment(view, state);
        let out = self.open("hydration", event_id);
        out.extend_from_slice(br#","features":["#);
        let mut first = true;
        for toggle in state.features.values().filter(|t| view.filter.matches(t)) {
            if !first {
                out.push(b',');
            }
            first = false;
            // Serialising borrowed plain data into a Vec cannot fail.
            let _ = serde_json::to_writer(
                &mut *out,
                &ClientToggle::in_environment(toggle, environment, SegmentForm::ByReference),
            );
        }
        out.extend_from_slice(br#"],"segments":"#);
        let segments: Vec<ClientSegment> = state
            .segments
            .values()
            .map(|s| ClientSegment::new(s))
            .collect();
        let _ = serde_json::to_writer(&mut *out, &segments);
        out.push(b'}');
    }

    /// A `feature-updated` carrying the toggle's client JSON.
    pub fn feature_updated(&mut self, event_id: u64, feature: &[u8]) {
        let out = self.open("feature-updated", event_id);
        out.extend_from_slice(br#","feature":"#);
        out.extend_from_slice(feature);
        out.push(b'}');
    }

    /// A `feature-removed`.
    pub fn feature_removed(&mut self, event_id: u64, name: &str, project: &str) {
        let out = self.open("feature-removed", event_id);
        out.extend_from_slice(br#","featureName":"#);
        let _ = serde_json::to_writer(&mut *out, name);
        out.extend_from_slice(br#","project":"#);
        let _ = serde_json::to_writer(&mut *out, project);
        out.push(b'}');
    }

    /// A `segment-updated`.
    pub fn segment_updated(&mut self, event_id: u64, segment: &Segment) {
        let out = self.open("segment-updated", event_id);
        out.extend_from_slice(br#","segment":"#);
        let _ = serde_json::to_writer(&mut *out, &ClientSegment::new(segment));
        out.push(b'}');
    }

    /// A `segment-removed` (segment ids are numbers; a stored key that is not one is sent as
    /// a string).
    pub fn segment_removed(&mut self, event_id: u64, id: &str) {
        let out = self.open("segment-removed", event_id);
        out.extend_from_slice(br#","segmentId":"#);
        match id.parse::<u32>() {
            Ok(number) => out.extend_from_slice(number.to_string().as_bytes()),
            Err(_) => {
                let _ = serde_json::to_writer(&mut *out, id);
            }
        }
        out.push(b'}');
    }

    /// The finished document.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(b"]}");
        self.buf
    }
}

/// A hydration of `view` at `state`'s version, as a whole document.
pub fn hydration_document(state: &ConfigState, view: &View) -> Vec<u8> {
    let mut list = EventList::default();
    list.hydration(state.version, state, view);
    list.finish()
}

/// The project named in a `feature-removed` for `name`: where the toggle is now (archived, or
/// moved out of the view), else `default`.
fn project_of<'a>(state: &'a ConfigState, name: &str) -> &'a str {
    state
        .features
        .get(name)
        .or_else(|| state.archive.get(name))
        .map_or("default", |t| t.project.as_str())
}

/// What to send a stream of `view` that holds the configuration up to version `after` and is
/// to catch up with `state`, given the stream log of the versions in between: the events
/// (the current form of every toggle and segment touched since, each with the id of the
/// version that last touched it), or `None` when only a hydration will do (the view's
/// environment was created or deleted meanwhile, or a version touched too much to list).
pub fn replay(state: &ConfigState, view: &View, entries: &[StreamLogEntry]) -> Option<Vec<u8>> {
    let mut features: HashMap<&str, u64> = HashMap::new();
    let mut segments: HashMap<&str, u64> = HashMap::new();
    for entry in entries {
        let touched = &entry.touched;
        if touched.everything || touched.environments.contains(&view.environment) {
            return None;
        }
        for name in &touched.features {
            features.insert(name, entry.version);
        }
        for id in &touched.segments {
            segments.insert(id, entry.version);
        }
    }
    let environment = shown_environment(view, state);
    let mut list = EventList::default();
    let mut segments: Vec<(u64, &str)> = segments.into_iter().map(|(k, v)| (v, k)).collect();
    segments.sort_unstable();
    let mut removed_segments = Vec::new();
    for (version, id) in segments {
        match state.segments.get(id) {
            Some(segment) => list.segment_updated(version, segment),
            None => removed_segments.push((version, id)),
        }
    }
    let mut features: Vec<(u64, &str)> = features.into_iter().map(|(k, v)| (v, k)).collect();
    features.sort_unstable();
    for (version, name) in features {
        match state.features.get(name).filter(|t| view.filter.matches(t)) {
            Some(toggle) => list.feature_updated(version, &feature_json(toggle, environment)),
            None => list.feature_removed(version, name, project_of(state, name)),
        }
    }
    for (version, id) in removed_segments {
        list.segment_removed(version, id);
    }
    Some(list.finish())
}

/// A changed toggle's client JSON before and after a change (`None`: absent).
type Rendered = (Option<Bytes>, Option<Bytes>);

/// What changed between two configurations, with each changed toggle's client JSON per
/// environment computed once (however many views show that environment).
pub struct Update {
    pub before: Arc<ConfigState>,
    pub after: Arc<ConfigState>,
    features: Vec<String>,
    segments: Vec<String>,
    environments: Vec<String>,
    /// Per shown environment, per changed toggle: its JSON before and after.
    rendered: HashMap<String, Vec<Rendered>>,
}

impl Update {
    /// The changes from `before` to `after` (maps are compared by structure: what both share
    /// is skipped).
    pub fn between(before: Arc<ConfigState>, after: Arc<ConfigState>) -> Self {
        let features = before
            .features
            .diff(&after.features)
            .map(|item| diff_key(&item).clone())
            .collect();
        let segments = before
            .segments
            .diff(&after.segments)
            .map(|item| diff_key(&item).clone())
            .collect();
        let environments = before
            .environments
            .diff(&after.environments)
            .filter(|item| !matches!(item, imbl::ordmap::DiffItem::Update { .. }))
            .map(|item| diff_key(&item).clone())
            .collect();
        Self {
            before,
            after,
            features,
            segments,
            environments,
            rendered: HashMap::new(),
        }
    }

    /// What the update touched, as a stream-log entry would say it.
    pub fn touched(&self) -> Touched {
        let everything = self.features.len() > TOUCHED_NAMES_MAX;
        Touched {
            features: if everything {
                Vec::new()
            } else {
                self.features.clone()
            },
            segments: self.segments.clone(),
            environments: self.environments.clone(),
            everything,
        }
    }

    /// Whether nothing a stream shows changed.
    pub fn is_empty(&self) -> bool {
        self.features.is_empty() && self.segments.is_empty() && self.environments.is_empty()
    }

    /// The events for streams of `view`: `None` when they need a hydration (their environment
    /// was created or deleted); an empty list when nothing they show changed.
    pub fn events_for(&mut self, view: &View) -> Option<EventList> {
        if self.environments.contains(&view.environment) {
            return None;
        }
        let version = self.after.version;
        let mut list = EventList::default();
        let mut removed_segments = Vec::new();
        for id in &self.segments {
            match self.after.segments.get(id) {
                Some(segment) => list.segment_updated(version, segment),
                None => removed_segments.push(id),
            }
        }
        let environment = shown_environment(view, &self.after).to_string();
        let rendered = self.rendered.entry(environment.clone()).or_insert_with(|| {
            self.features
                .iter()
                .map(|name| {
                    let render = |state: &ConfigState| {
                        state
                            .features
                            .get(name)
                            .map(|t| Bytes::from(feature_json(t, &environment)))
                    };
                    (render(&self.before), render(&self.after))
                })
                .collect()
        });
        for (name, (old_json, new_json)) in self.features.iter().zip(rendered.iter()) {
            let shown = |state: &ConfigState| {
                state
                    .features
                    .get(name)
                    .is_some_and(|t| view.filter.matches(t))
            };
            let (was, is) = (shown(&self.before), shown(&self.after));
            match (was, is, new_json) {
                (_, true, Some(json)) if !was || old_json.as_ref() != Some(json) => {
                    list.feature_updated(version, json)
                }
                (true, false, _) => {
                    list.feature_removed(version, name, project_of(&self.after, name))
                }
                _ => {}
            }
        }
        for id in removed_segments {
            list.segment_removed(version, id);
        }
        Some(list)
    }
}

fn diff_key<'a, K, V>(item: &imbl::ordmap::DiffItem<'a, 'a, K, V>) -> &'a K {
    match item {
        imbl::ordmap::DiffItem::Add(k, _) | imbl::ordmap::DiffItem::Remove(k, _) => k,
        imbl::ordmap::DiffItem::Update { new, .. } => new.0,
    }
}
