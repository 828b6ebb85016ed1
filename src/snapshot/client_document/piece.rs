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

use crate::domain::config_state::ConfigState;
use crate::domain::toggle::Toggle;
use crate::domain::views::ClientToggle;

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
    /// The client form of `toggle`.
    pub fn of(toggle: &Toggle) -> Self {
        let digest = with_scratch(|json| {
            write_client_json(toggle, json);
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

/// Appends `toggle`'s JSON object in the client format to `out`.
pub fn write_client_json(toggle: &Toggle, out: &mut Vec<u8>) {
    // Serialising borrowed plain data into a Vec cannot fail.
    let _ = serde_json::to_writer(out, &ClientToggle::new(toggle));
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

/// The pieces of every active toggle of one configuration version, by name. Persistent maps:
/// the next version's list shares everything but the toggles that changed.
#[derive(Default, Clone)]
pub struct PieceList {
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
    /// Whether any piece differs from that version's (a change outside the client form,
    /// such as a description, leaves every piece as it was).
    pub pieces_changed: bool,
}

impl PieceList {
    /// The pieces of `state`, made from `previous` by serialising only the toggles that
    /// differ (the diff skips the parts of the maps the two versions share).
    pub fn update(previous: &PieceList, state: &ConfigState) -> PieceList {
        let mut entries = previous.entries.clone();
        let mut changed = Vec::new();
        let mut pieces_changed = false;
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
                    if ClientToggle::new(before) == ClientToggle::new(toggle) =>
                {
                    old.piece.clone()
                }
                _ => {
                    let new = ClientPiece::of(toggle);
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
        PieceList {
            version: state.version,
            head: state.head,
            features: state.features.clone(),
            entries,
            previous_version: previous.version,
            changed,
            pieces_changed,
        }
    }

    /// The entries in name order.
    pub fn pieces(&self) -> impl Iterator<Item = &PieceEntry> + '_ {
        self.entries.values()
    }
}
