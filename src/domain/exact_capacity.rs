//! Deserialisers for the lists of stored records that keep no spare capacity. serde fills a
//! `Vec` by pushing, so a list of one or two entries holds room for four; the snapshot keeps
//! every toggle for the life of a version, and at 10,000 toggles that spare room was about
//! 6 MB of the heap. Used with `#[serde(deserialize_with = "…")]`.

use litemap::LiteMap;
use serde::{Deserialize, Deserializer};

/// A `Vec` whose capacity is its length.
pub fn vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut list = Vec::<T>::deserialize(deserializer)?;
    list.shrink_to_fit();
    Ok(list)
}

/// An optional `Vec` whose capacity is its length.
pub fn option_vec<'de, D, T>(deserializer: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut list = Option::<Vec<T>>::deserialize(deserializer)?;
    if let Some(list) = &mut list {
        list.shrink_to_fit();
    }
    Ok(list)
}

/// A `LiteMap` whose store's capacity is its length.
pub fn lite_map<'de, D, K, V>(deserializer: D) -> Result<LiteMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Ord + Deserialize<'de>,
    V: Deserialize<'de>,
{
    let mut entries = LiteMap::<K, V>::deserialize(deserializer)?.into_tuple_vec();
    entries.shrink_to_fit();
    // Still sorted and unique: they come from a LiteMap.
    Ok(LiteMap::from_sorted_store_unchecked(entries))
}

/// An optional `LiteMap` whose store's capacity is its length.
pub fn option_lite_map<'de, D, K, V>(deserializer: D) -> Result<Option<LiteMap<K, V>>, D::Error>
where
    D: Deserializer<'de>,
    K: Ord + Deserialize<'de>,
    V: Deserialize<'de>,
{
    Ok(
        Option::<LiteMap<K, V>>::deserialize(deserializer)?.map(|map| {
            let mut entries = map.into_tuple_vec();
            entries.shrink_to_fit();
            LiteMap::from_sorted_store_unchecked(entries)
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Lists {
        #[serde(deserialize_with = "vec")]
        plain: Vec<u32>,
        #[serde(default, deserialize_with = "option_vec")]
        optional: Option<Vec<u32>>,
        #[serde(deserialize_with = "lite_map")]
        map: LiteMap<String, String>,
    }

    #[test]
    fn lists_keep_their_entries_without_spare_room() {
        let lists: Lists = serde_json::from_str(
            r#"{"plain":[3,1],"optional":[7],"map":{"b":"2","a":"1","c":"3"}}"#,
        )
        .expect("valid");
        assert_eq!(lists.plain, [3, 1]);
        assert_eq!(lists.plain.capacity(), 2);
        let optional = lists.optional.expect("present");
        assert_eq!((optional.as_slice(), optional.capacity()), (&[7][..], 1));
        let entries = lists.map.into_tuple_vec();
        assert_eq!(entries.capacity(), 3);
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"], "still sorted");
    }

    #[test]
    fn an_absent_optional_list_stays_absent() {
        let lists: Lists = serde_json::from_str(r#"{"plain":[],"map":{}}"#).expect("valid");
        assert!(lists.optional.is_none());
        assert_eq!(lists.plain.capacity(), 0);
    }
}
