//! Fitting the bundle to the store it goes into. The import writes segments and addons by id,
//! so Unleash's ids could silently replace different Flagpole records: a segment keeps
//! Unleash's id when the store has none of that id or the stored one is this segment (same
//! name: segment names are unique), else it takes the stored same-named segment's id or a new
//! one, and strategies' references follow. An addon is the stored one of the same provider and
//! Unleash's creation time (what an earlier run moved in), else keeps Unleash's id when free,
//! else a new one. An addon whose secrets Unleash shows masked keeps what the operator
//! re-entered since an earlier run, and its enabled state, instead of being reset.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::addons::{Reenter, MASKED_URL};
use super::bundle::Notes;
use crate::domain::addon::MASK;

/// Segment ids, Unleash's to the bundle's (the same where kept).
pub type SegmentIds = BTreeMap<u64, u64>;

/// Renumbers the bundle's segments and addons where the store (`stored`, its state export
/// with addon secrets) holds different records under their ids, and brings back re-entered
/// addon secrets; what was renumbered goes to `notes`.
pub fn fit_to_store(bundle: &mut Value, stored: &Value, notes: &mut Notes) -> SegmentIds {
    let segment_ids = fit_segments(bundle, stored, notes);
    fit_addons(bundle, stored, notes);
    segment_ids
}

fn items<'a>(document: &'a Value, section: &str) -> impl Iterator<Item = &'a Value> {
    document[section].as_array().into_iter().flatten()
}

/// The smallest id above every id in `taken`.
fn next_free(taken: &BTreeSet<u64>) -> u64 {
    taken.last().map_or(1, |highest| highest + 1)
}

fn fit_segments(bundle: &mut Value, stored: &Value, notes: &mut Notes) -> SegmentIds {
    let stored_by_name: BTreeMap<&str, u64> = items(stored, "segments")
        .filter_map(|s| Some((s["name"].as_str()?, s["id"].as_u64()?)))
        .collect();
    let mut taken: BTreeSet<u64> = items(stored, "segments")
        .filter_map(|s| s["id"].as_u64())
        .chain(items(bundle, "segments").filter_map(|s| s["id"].as_u64()))
        .collect();
    let listed: Vec<(u64, String)> = items(bundle, "segments")
        .filter_map(|s| Some((s["id"].as_u64()?, s["name"].as_str()?.to_string())))
        .collect();
    let mut ids = SegmentIds::new();
    let mut assigned = BTreeSet::new();
    // The same segment as a stored one first: it keeps the stored id.
    for (unleash_id, name) in &listed {
        if let Some(&stored_id) = stored_by_name.get(name.as_str()) {
            ids.insert(*unleash_id, stored_id);
            assigned.insert(stored_id);
        }
    }
    let stored_ids: BTreeSet<u64> = stored_by_name.values().copied().collect();
    for (unleash_id, _) in &listed {
        if ids.contains_key(unleash_id) {
            continue;
        }
        let id = if stored_ids.contains(unleash_id) || assigned.contains(unleash_id) {
            let id = next_free(&taken);
            taken.insert(id);
            id
        } else {
            *unleash_id
        };
        ids.insert(*unleash_id, id);
        assigned.insert(id);
    }
    for (unleash_id, name) in &listed {
        let id = ids[unleash_id];
        if id != *unleash_id {
            notes.renumbered.push(format!(
                "segment \"{name}\": Unleash's id {unleash_id} is Flagpole's {id} (strategies refer to {id})"
            ));
        }
    }
    if ids.iter().any(|(from, to)| from != to) {
        remap_segments(bundle, &ids);
    }
    ids
}

/// Every segment id of the bundle — segments and strategies' references — through `ids`.
fn remap_segments(bundle: &mut Value, ids: &SegmentIds) {
    let through = |value: &mut Value| {
        if let Some(id) = value.as_u64().and_then(|id| ids.get(&id)) {
            *value = Value::from(*id);
        }
    };
    if let Some(segments) = bundle["segments"].as_array_mut() {
        for segment in segments {
            through(&mut segment["id"]);
        }
    }
    if let Some(configurations) = bundle["featureEnvironments"].as_array_mut() {
        for configuration in configurations {
            let Some(strategies) = configuration["strategies"].as_array_mut() else {
                continue;
            };
            for strategy in strategies {
                if let Some(references) = strategy["segments"].as_array_mut() {
                    references.iter_mut().for_each(through);
                }
            }
        }
    }
}

fn fit_addons(bundle: &mut Value, stored: &Value, notes: &mut Notes) {
    let stored_addons: Vec<&Value> = items(stored, "addons").collect();
    let mut taken: BTreeSet<u64> = stored_addons
        .iter()
        .filter_map(|a| a["id"].as_u64())
        .chain(items(bundle, "addons").filter_map(|a| a["id"].as_u64()))
        .collect();
    let mut claimed = BTreeSet::new();
    let Some(addons) = bundle["addons"].as_array_mut() else {
        return;
    };
    // Matches first (a rerun), so that a renumbered addon finds its earlier id before any
    // other takes it.
    let mut matches = Vec::new();
    for addon in addons.iter() {
        let unleash_id = addon["id"].as_u64().unwrap_or(0);
        let unclaimed = |a: &&&Value| {
            a["provider"] == addon["provider"]
                && a["id"].as_u64().is_some_and(|id| !claimed.contains(&id))
        };
        let created_at = instant(&addon["createdAt"]);
        // Moved in by a run that kept Unleash's creation time; else (an earlier version of
        // this command kept no creation time, and always Unleash's id) the same id and
        // description.
        let found = stored_addons
            .iter()
            .filter(unclaimed)
            .find(|a| created_at.is_some() && instant(&a["createdAt"]) == created_at)
            .or_else(|| {
                stored_addons.iter().filter(unclaimed).find(|a| {
                    a["id"].as_u64() == Some(unleash_id)
                        && a["description"].as_str().unwrap_or_default()
                            == addon["description"].as_str().unwrap_or_default()
                })
            })
            .copied();
        if let Some(id) = found.and_then(|a| a["id"].as_u64()) {
            claimed.insert(id);
        }
        matches.push(found);
    }
    let stored_ids: BTreeSet<u64> = stored_addons
        .iter()
        .filter_map(|a| a["id"].as_u64())
        .collect();
    for (addon, found) in addons.iter_mut().zip(matches) {
        let unleash_id = addon["id"].as_u64().unwrap_or(0);
        let id = match found.and_then(|a| a["id"].as_u64()) {
            Some(id) => id,
            None if !stored_ids.contains(&unleash_id) && !claimed.contains(&unleash_id) => {
                unleash_id
            }
            None => {
                let id = next_free(&taken);
                taken.insert(id);
                id
            }
        };
        claimed.insert(id);
        addon["id"] = Value::from(id);
        if id != unleash_id {
            notes.renumbered.push(format!(
                "addon {unleash_id} ({}): Flagpole's addon {id}",
                addon["provider"].as_str().unwrap_or_default()
            ));
        }
        let reentered = notes.reenter.iter_mut().find(|r| r.id == unleash_id);
        if let Some(reenter) = reentered {
            reenter.id = id;
            if let Some(stored) = found {
                bring_back_secrets(addon, stored, reenter);
            }
        }
    }
    notes.reenter.retain(|r| !r.parameters.is_empty());
}

/// A timestamp, to compare (Unleash writes milliseconds, Flagpole as many digits as needed).
fn instant(value: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    value
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// The parameters Unleash showed masked, as the operator re-entered them in the stored addon
/// (`reenter` keeps those still to re-enter); enabled as stored once none is left.
fn bring_back_secrets(addon: &mut Value, stored: &Value, reenter: &mut Reenter) {
    reenter.parameters.retain(|key| {
        let value = stored["parameters"][key.as_str()]
            .as_str()
            .unwrap_or_default();
        let reentered = !value.is_empty() && !value.contains(MASK) && value != MASKED_URL;
        if reentered {
            addon["parameters"][key.as_str()] = Value::from(value);
        }
        !reentered
    });
    if reenter.parameters.is_empty() {
        let enabled = reenter.enabled_in_unleash && stored["enabled"].as_bool() == Some(true);
        addon["enabled"] = Value::from(enabled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bundle() -> Value {
        json!({
            "segments": [{"id": 1, "name": "beta"}, {"id": 2, "name": "gamma"}],
            "featureEnvironments": [{"strategies": [{"segments": [1, 2]}]}],
            "addons": [{"id": 1, "provider": "webhook", "description": "audit", "enabled": false,
                        "parameters": {"url": MASKED_URL}, "createdAt": UNLEASH_CREATED}],
        })
    }

    /// When Unleash made the addon.
    const UNLEASH_CREATED: &str = "2026-11-28T22:02:02.725Z";

    fn masked() -> Notes {
        Notes {
            reenter: vec![Reenter {
                id: 1,
                provider: "webhook".into(),
                description: "audit".into(),
                parameters: vec!["url".into(), "customHeaders".into()],
                enabled_in_unleash: true,
            }],
            ..Notes::default()
        }
    }

    #[test]
    fn unleash_ids_stay_in_an_empty_store() {
        let mut document = bundle();
        let mut notes = masked();
        let ids = fit_to_store(&mut document, &json!({}), &mut notes);
        assert_eq!(ids, SegmentIds::from([(1, 1), (2, 2)]));
        assert_eq!(document, bundle());
        assert!(notes.renumbered.is_empty());
        assert_eq!(notes.reenter.len(), 1);
    }

    #[test]
    fn different_records_under_the_same_ids_are_kept_and_references_follow() {
        let stored = json!({
            "segments": [{"id": 1, "name": "flagpole-own"}, {"id": 7, "name": "gamma"}],
            "addons": [{"id": 1, "provider": "webhook", "description": "ours", "enabled": true,
                        "parameters": {"url": "https://ours.example/"}},
                       {"id": 2, "provider": "webhook", "description": "audit", "enabled": true,
                        "parameters": {"url": "https://ours.example/"},
                        "createdAt": "2026-11-29T08:00:00Z"}],
        });
        let mut document = bundle();
        let mut notes = masked();
        let ids = fit_to_store(&mut document, &stored, &mut notes);
        // gamma is the stored 7; beta's 1 is taken: the next above every id.
        assert_eq!(ids, SegmentIds::from([(1, 8), (2, 7)]));
        assert_eq!(
            document["segments"],
            json!([{"id": 8, "name": "beta"}, {"id": 7, "name": "gamma"}])
        );
        assert_eq!(
            document["featureEnvironments"][0]["strategies"][0]["segments"],
            json!([8, 7])
        );
        // Neither stored webhook is Unleash's (another description, another creation time).
        assert_eq!(document["addons"][0]["id"], 3);
        assert_eq!(document["addons"][0]["enabled"], false);
        assert_eq!(notes.reenter[0].id, 3);
        assert_eq!(notes.renumbered.len(), 3, "{:?}", notes.renumbered);
    }

    #[test]
    fn a_rerun_keeps_reentered_secrets_and_the_enabled_state() {
        let stored = json!({
            "addons": [{"id": 1, "provider": "webhook", "description": "ours", "enabled": true,
                        "parameters": {"url": "https://ours.example/"}},
                       {"id": 2, "provider": "webhook", "description": "audit", "enabled": true,
                        "parameters": {"url": "https://hooks.example/", "customHeaders": "{}"},
                        "createdAt": "2026-11-28T22:02:02.725000Z"}],
        });
        let mut document = bundle();
        let mut notes = masked();
        fit_to_store(&mut document, &stored, &mut notes);
        assert_eq!(
            document["addons"][0],
            json!({"id": 2, "provider": "webhook", "description": "audit", "enabled": true,
                   "parameters": {"url": "https://hooks.example/", "customHeaders": "{}"},
                   "createdAt": UNLEASH_CREATED})
        );
        assert!(notes.reenter.is_empty());
        assert_eq!(notes.renumbered, ["addon 1 (webhook): Flagpole's addon 2"]);
    }

    #[test]
    fn an_addon_not_yet_reentered_stays_disabled() {
        let stored = json!({
            "addons": [{"id": 1, "provider": "webhook", "description": "audit", "enabled": false,
                        "parameters": {"url": MASKED_URL}}],
        });
        let mut document = bundle();
        let mut notes = masked();
        fit_to_store(&mut document, &stored, &mut notes);
        assert_eq!(document["addons"][0]["enabled"], false);
        assert_eq!(notes.reenter[0].parameters, ["url", "customHeaders"]);
    }
}
