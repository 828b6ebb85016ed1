//! `ClientPiece`: what a document needs to know of one toggle's client form without holding
//! its bytes — their digest and where groups end — made once and shared by every version and
//! every filtered document that includes the toggle. The bytes themselves live only in the
//! groups (`assemble`): a rebuilt group copies its unchanged toggles' bytes from the previous
//! document and serialises the changed ones.

use std::cell::RefCell;
use std::sync::Arc;

use imbl::ordmap::DiffItem;
use imbl::OrdMap;
use sha2::{Digest, Sha256};

use super::form::{uses_segments, DocumentForm, FormContext};
use crate::domain::config_state::ConfigState;
use crate::domain::toggle::Toggle;

/// On average one toggle in this many ends a group (see `ClientPiece::ends_group`).
const GROUP_SPREAD: u16 = 32;

/// The digest of one toggle's client form, and whether a group ends after it.
#[derive(Debug)]
pub struct ClientPiece {
    /// SHA-256 of the toggle's JSON object in the client format.
    pub digest: [u8; 32],
    /// Whether a compression group ends after this toggle. Chosen from the name alone, so
    /// groups stay where they are when other toggles come, go or change, and every replica
    /// groups (and so tags) the same content the same way.
    pub ends_group: bool,
}

impl ClientPiece {
    /// The client form of `toggle` in `form`.
    pub fn of(toggle: &Toggle, form: &FormContext) -> Self {
        let digest = with_scratch(|json| {
            form.write_client_json(toggle, json);
            Sha256::digest(json).into()
        });
        let name_hash = Sha256::digest(toggle.name.as_bytes());
        let spread = u16::from_le_bytes([name_hash[0], name_hash[1]]);
        Self {
            digest,
            ends_group: spread % GROUP_SPREAD == 0,
        }
    }
}

/// A scratch buffer grown past this (by a group of unusually large toggles) is let go.
pub(super) const SCRATCH_KEPT_MAX: usize = 1 << 20;

thread_local! {
    /// The buffer toggles are serialised into before they are hashed or copied.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work` on this thread's cleared scratch buffer (a fresh one if it is in use). Pieces
/// and groups are serialised into a reused buffer, and groups kept as exact-size copies:
/// growing a buffer per group and shrinking it after left a trail of freed blocks that kept
/// the heap about 1.5 MiB larger at 10,000 toggles.
pub(super) fn with_scratch<T>(work: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            scratch.clear();
            let result = work(&mut scratch);
            if scratch.capacity() > SCRATCH_KEPT_MAX {
                *scratch = Vec::new();
            }
            result
        }
        Err(_) => work(&mut Vec::new()),
    })
}

/// An active toggle with its piece.
#[derive(Debug, Clone)]
pub struct PieceEntry {
    /// The toggle (what filters look at).
    pub toggle: Arc<Toggle>,
    pub piece: Arc<ClientPiece>,
}

/// A toggle before and after a change (`None`: absent).
pub type ToggleChange = (Option<Arc<Toggle>>, Option<Arc<Toggle>>);

/// The pieces of every active toggle of one configuration version in one form, by name.
/// Persistent maps: the next version's list shares everything but the toggles that changed.
#[derive(Default, Clone)]
pub struct PieceList {
    /// The form the pieces are in, at this version.
    pub form: Arc<FormContext>,
    /// The configuration version the pieces were made from.
    pub version: u64,
    /// Id of the commit that made `version`.
    pub head: u64,
    /// The toggles the pieces were made from, to find what the next version changed.
    features: OrdMap<String, Arc<Toggle>>,
    pub entries: OrdMap<String, PieceEntry>,
    /// The version these pieces were updated from.
    pub previous_version: u64,
    /// The toggles that differ from that version's.
    pub changed: Vec<ToggleChange>,
    /// Whether any piece, or the suffix, differs from that version's (a change outside the
    /// client form, such as a description, leaves every piece as it was).
    pub pieces_changed: bool,
}

impl PieceList {
    /// The pieces of `state` in `form`, made from `previous` (the same form's) by serialising
    /// only the toggles that differ (the diff skips the parts of the maps the two versions
    /// share) — and, in the inline form when segments changed, the toggles that use some.
    pub fn update(previous: &PieceList, state: &ConfigState, form: &DocumentForm) -> PieceList {
        let previous_form = (previous.form.form == *form).then_some(&*previous.form);
        // A list of another form (the default list) shares nothing: start from none.
        let empty = PieceList::default();
        let previous = if previous_form.is_some() || previous.version == 0 {
            previous
        } else {
            &empty
        };
        let references_changed =
            previous
                .features
                .diff(&state.features)
                .any(|change| match change {
                    DiffItem::Add(_, t) | DiffItem::Remove(_, t) => uses_segments(t, None),
                    DiffItem::Update {
                        old: (_, a),
                        new: (_, b),
                    } => uses_segments(a, None) || uses_segments(b, None),
                });
        let context = Arc::new(FormContext::of(
            form.clone(),
            state,
            previous_form,
            references_changed,
        ));
        let segments_changed = form.inline_segments
            && !previous_form.is_some_and(|p| p.segments.ptr_eq(&state.segments));
        let before_form = previous_form.unwrap_or(&context);
        let mut entries = previous.entries.clone();
        let mut changed = Vec::new();
        let mut pieces_changed = false;
        if segments_changed && previous.version != 0 {
            // Inlined constraints of every toggle using a segment may differ: make those again.
            for (name, entry) in previous.entries.iter() {
                let Some(toggle) = state.features.get(name) else {
                    continue;
                };
                if !Arc::ptr_eq(toggle, &entry.toggle)
                    || !uses_segments(toggle, Some(&form.environment))
                {
                    continue;
                }
                let piece = ClientPiece::of(toggle, &context);
                if piece.digest != entry.piece.digest {
                    pieces_changed = true;
                    changed.push((Some(toggle.clone()), Some(toggle.clone())));
                    entries.insert(
                        name.clone(),
                        PieceEntry {
                            toggle: toggle.clone(),
                            piece: Arc::new(piece),
                        },
                    );
                }
            }
        }
        for change in previous.features.diff(&state.features) {
            let (name, toggle, before) = match change {
                DiffItem::Add(name, toggle) => (name, toggle, None),
                DiffItem::Update {
                    old: (_, before),
                    new: (name, toggle),
                } => (name, toggle, Some(before)),
                DiffItem::Remove(name, toggle) => {
                    pieces_changed = true;
                    changed.push((Some(toggle.clone()), None));
                    entries.remove(name);
                    continue;
                }
            };
            let old = entries.get(name).cloned();
            let piece = match (&old, before) {
                // A change outside the client form (a description, say) keeps the piece
                // without serialising and hashing the toggle again.
                (Some(old), Some(before))
                    if !segments_changed
                        && before_form.client_toggle(before) == context.client_toggle(toggle) =>
                {
                    old.piece.clone()
                }
                _ => {
                    let new = ClientPiece::of(toggle, &context);
                    match &old {
                        Some(old) if old.piece.digest == new.digest => old.piece.clone(),
                        _ => {
                            pieces_changed = true;
                            Arc::new(new)
                        }
                    }
                }
            };
            changed.push((old.map(|e| e.toggle), Some(toggle.clone())));
            entries.insert(
                name.clone(),
                PieceEntry {
                    toggle: toggle.clone(),
                    piece,
                },
            );
        }
        // A segment's new constraints change only the suffix (its top-level `segments`).
        let suffix_changed = previous_form.is_none_or(|p| p.suffix.digest != context.suffix.digest);
        PieceList {
            form: context,
            version: state.version,
            head: state.head,
            features: state.features.clone(),
            entries,
            previous_version: previous.version,
            changed,
            pieces_changed: pieces_changed || suffix_changed,
        }
    }

    /// The entries in name order.
    pub fn pieces(&self) -> impl Iterator<Item = &PieceEntry> + '_ {
        self.entries.values()
    }
}
