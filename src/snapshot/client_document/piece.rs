//! `ClientPiece`: one toggle's client form, serialised and hashed once and shared by every
//! version and every filtered document that includes the toggle.

use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::domain::state::ConfigState;
use crate::domain::toggle::Toggle;
use crate::domain::views::ClientToggle;

/// On average one toggle in this many ends a group (see `ClientPiece::ends_group`).
const GROUP_SPREAD: u16 = 32;

/// One toggle in the client format, as bytes, with its digest.
#[derive(Debug)]
pub struct ClientPiece {
    /// The toggle's JSON object in the client format.
    pub json: Bytes,
    /// SHA-256 of `json`.
    pub digest: [u8; 32],
    /// Whether a compression group ends after this toggle. Chosen from the name alone, so
    /// groups stay where they are when other toggles come, go or change, and every replica
    /// groups (and so tags) the same content the same way.
    pub ends_group: bool,
}

impl ClientPiece {
    /// The client form of `toggle`.
    pub fn of(toggle: &Toggle) -> Self {
        // Serialising borrowed plain data into a Vec cannot fail.
        let json = serde_json::to_vec(&ClientToggle::new(toggle)).unwrap_or_default();
        let digest = Sha256::digest(&json).into();
        let name_hash = Sha256::digest(toggle.name.as_bytes());
        let spread = u16::from_le_bytes([name_hash[0], name_hash[1]]);
        Self {
            json: Bytes::from(json),
            digest,
            ends_group: spread % GROUP_SPREAD == 0,
        }
    }
}

/// The pieces of every active toggle of one configuration version, in name order, each with
/// the toggle it was made from (what filters look at).
#[derive(Default)]
pub struct PieceList {
    /// The configuration version the pieces were made from.
    pub version: u64,
    /// Id of the commit that made `version`.
    pub head: u64,
    pub entries: Vec<(Arc<Toggle>, Arc<ClientPiece>)>,
}

impl PieceList {
    /// The pieces of `state`, reusing `previous`'s for every toggle that is the same record
    /// (toggles are immutable behind `Arc`, so the same pointer is the same content): a
    /// version that changed one toggle serialises one toggle.
    pub fn update(previous: &PieceList, state: &ConfigState) -> PieceList {
        let old = &previous.entries;
        let mut next = 0;
        let entries = state
            .features
            .iter()
            .map(|(name, toggle)| {
                // Most toggles sit where they sat: check that slot first, then walk forward.
                if next < old.len() && !Arc::ptr_eq(&old[next].0, toggle) {
                    while next < old.len() && old[next].0.name.as_str() < name.as_str() {
                        next += 1;
                    }
                }
                match old.get(next) {
                    Some((was, piece)) if Arc::ptr_eq(was, toggle) => {
                        next += 1;
                        (toggle.clone(), piece.clone())
                    }
                    _ => (toggle.clone(), Arc::new(ClientPiece::of(toggle))),
                }
            })
            .collect();
        PieceList {
            version: state.version,
            head: state.head,
            entries,
        }
    }
}
