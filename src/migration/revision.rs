//! Whether Unleash held still while it was read: its revision, taken before the first read and
//! after the last. The revision is the newest event of its event log that changes something
//! this command moves, and the `ETag` of its client document.
//!
//! The newest such event is found by paging back through the log from its newest end until a
//! page holds one: reading the route set logs a `features-exported` per environment, so with
//! a hundred environments or more the newest hundred events (all that `GET /api/admin/events`
//! lists) can be exports only, and a change made before them would not be seen.

use serde_json::{json, Value};

use super::reader::Version;
use super::unleash_api::{MigrationError, UnleashApi};

/// Events that change nothing this command moves: reading itself (a features-batch export is
/// logged), SDKs registering, favourites and user preferences.
const EVENTS_NOT_MOVED: [&str; 7] = [
    "features-exported",
    "application-created",
    "feature-favorited",
    "feature-unfavorited",
    "project-favorited",
    "project-unfavorited",
    "user-preference-updated",
];

/// Events per page: 6.x–7.x's `GET /api/admin/search/events` lists up to 1,000, 4.x–5.x's
/// `POST /api/admin/events/search` up to 100 (its schema's maximum).
const SEARCH_PAGE: usize = 1000;
const LEGACY_SEARCH_PAGE: usize = 100;

/// The revision of Unleash's configuration: the newest event of its log that is not one of
/// `EVENTS_NOT_MOVED` (every admin write is one, stored with the write: tokens, addons, tags
/// and context fields too) and the `ETag` of its client document (it changes with every write
/// that reaches SDKs).
pub async fn revision(api: &UnleashApi, version: Version) -> Result<String, MigrationError> {
    let newest = newest_moved_event(api, version)
        .await?
        .map_or("none".to_string(), |id| id.to_string());
    let (body, etag) = api
        .get_with("/api/client/features", &[("Unleash-Client-Spec", "5.2.0")])
        .await?;
    let etag = etag
        .or_else(|| body["meta"]["revisionId"].as_u64().map(|r| r.to_string()))
        .unwrap_or_default();
    Ok(format!("event {newest}, client document {etag}"))
}

/// The id of the newest event not in `EVENTS_NOT_MOVED`, paging back from the newest: through
/// the event search of 6.x–7.x, else that of 4.x–5.x (each version tries its own first), else
/// (a version with neither) among the last 100 events `GET /api/admin/events` lists.
async fn newest_moved_event(
    api: &UnleashApi,
    version: Version,
) -> Result<Option<u64>, MigrationError> {
    let searches = if version.0 >= 6 {
        [Search::Query, Search::Legacy]
    } else {
        [Search::Legacy, Search::Query]
    };
    for search in searches {
        if let Some(newest) = search.newest_moved(api).await? {
            return Ok(newest);
        }
    }
    let listed = api.get("/api/admin/events").await?;
    Ok(newest_moved(&events(&listed)))
}

/// An event search that pages back through the log, newest first.
#[derive(Debug, Clone, Copy)]
enum Search {
    /// `GET /api/admin/search/events?offset=…&limit=…` (6.x–7.x).
    Query,
    /// `POST /api/admin/events/search {offset, limit}` (4.x–5.x).
    Legacy,
}

impl Search {
    fn page_size(self) -> usize {
        match self {
            Self::Query => SEARCH_PAGE,
            Self::Legacy => LEGACY_SEARCH_PAGE,
        }
    }

    /// The page at `offset`; none when Unleash lacks this search.
    async fn page(self, api: &UnleashApi, offset: usize) -> Result<Option<Value>, MigrationError> {
        let limit = self.page_size();
        match self {
            Self::Query => {
                let route = format!("/api/admin/search/events?offset={offset}&limit={limit}");
                api.find(&route, None).await
            }
            Self::Legacy => {
                let body = json!({"offset": offset, "limit": limit});
                api.find("/api/admin/events/search", Some(&body)).await
            }
        }
    }

    /// The newest moved event (none when the log has none); none at all when Unleash lacks
    /// this search.
    async fn newest_moved(self, api: &UnleashApi) -> Result<Option<Option<u64>>, MigrationError> {
        page_back(|offset| self.page(api, offset)).await
    }
}

/// How far back the paging goes before giving up: 100 pages (100,000 events on 6.x–7.x,
/// 10,000 on 4.x–5.x) holding nothing but reads, registrations and favourites.
const MAX_PAGES: usize = 100;

/// Pages back through an event search (`fetch` answers the page at an offset, none when
/// Unleash lacks the search) to the newest moved event: none when the log holds none. Refuses
/// rather than guess when a page reaches no further back than the one before (an Unleash
/// ignoring the offset) or `MAX_PAGES` go by without one: without its revision, a change
/// during the read could not be seen.
async fn page_back<F, Fut>(mut fetch: F) -> Result<Option<Option<u64>>, MigrationError>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Value>, MigrationError>>,
{
    let mut offset = 0;
    let mut oldest = u64::MAX;
    for _ in 0..MAX_PAGES {
        let Some(page) = fetch(offset).await? else {
            return Ok(None);
        };
        let events = events(&page);
        // The end of the log. A short page is not: an Unleash may hold pages to less than
        // was asked.
        if events.is_empty() {
            return Ok(Some(None));
        }
        if let Some(id) = newest_moved(&events) {
            return Ok(Some(Some(id)));
        }
        let further = events
            .iter()
            .filter_map(|e| e["id"].as_u64())
            .min()
            .filter(|id| *id < oldest);
        let Some(id) = further else {
            return Err(MigrationError::Unsupported(format!(
                "Unleash's event search answered no older events at offset {offset}: its \
                 revision cannot be read, so a change during the read could not be seen"
            )));
        };
        oldest = id;
        offset += events.len();
    }
    Err(MigrationError::Unsupported(format!(
        "Unleash's newest {offset} events are all reads, registrations or favourites: its last \
         change is too far back to tell whether it changes during the read"
    )))
}

/// The events of a listing or search answer.
fn events(answer: &Value) -> Vec<Value> {
    answer["events"].as_array().cloned().unwrap_or_default()
}

/// The newest id among `events` that are not in `EVENTS_NOT_MOVED`.
fn newest_moved(events: &[Value]) -> Option<u64> {
    events
        .iter()
        .filter(|e| !EVENTS_NOT_MOVED.contains(&e["type"].as_str().unwrap_or_default()))
        .filter_map(|e| e["id"].as_u64())
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_moved_event_skips_what_reading_logs() {
        let events = [
            json!({"id": 9, "type": "features-exported"}),
            json!({"id": 8, "type": "application-created"}),
            json!({"id": 7, "type": "api-token-created"}),
            json!({"id": 6, "type": "feature-created"}),
        ];
        assert_eq!(newest_moved(&events), Some(7));
        assert_eq!(newest_moved(&events[..2]), None);
    }

    /// A log of `moved` (by id) among `total` events, newest first, served `size` a page
    /// (`stuck`: every offset answers the first page).
    async fn paged(
        total: u64,
        moved: &[u64],
        size: usize,
        stuck: bool,
    ) -> (Result<Option<Option<u64>>, MigrationError>, usize) {
        let log: Vec<Value> = (1..=total)
            .rev()
            .map(|id| {
                let kind = if moved.contains(&id) {
                    "feature-updated"
                } else {
                    "features-exported"
                };
                json!({"id": id, "type": kind})
            })
            .collect();
        let fetched = std::cell::Cell::new(0);
        let answer = page_back(|offset| {
            fetched.set(fetched.get() + 1);
            let from = if stuck { 0 } else { offset.min(log.len()) };
            let page = log[from..(from + size).min(log.len())].to_vec();
            async move { Ok(Some(json!({ "events": page }))) }
        })
        .await;
        (answer, fetched.get())
    }

    #[tokio::test]
    async fn paging_goes_back_past_pages_of_reads_to_the_newest_change() {
        // The change behind 250 exports, pages of 100: found on the third page.
        let (found, pages) = paged(300, &[50, 40], 100, false).await;
        assert_eq!(found.ok(), Some(Some(Some(50))));
        assert_eq!(pages, 3);
        // Only reads: the end of the log (an empty page) says none.
        let (found, pages) = paged(250, &[], 100, false).await;
        assert_eq!(found.ok(), Some(Some(None)));
        assert_eq!(pages, 4);
        // An empty log.
        let (found, _) = paged(0, &[], 100, false).await;
        assert_eq!(found.ok(), Some(Some(None)));
    }

    #[tokio::test]
    async fn paging_refuses_what_it_cannot_tell() {
        // An Unleash that ignores the offset: the second page reaches no further back.
        let (found, pages) = paged(300, &[], 100, true).await;
        assert!(
            matches!(found, Err(MigrationError::Unsupported(_))),
            "{found:?}"
        );
        assert_eq!(pages, 2);
        // More reads than the paging goes back through.
        let (found, pages) = paged(MAX_PAGES as u64 * 10 + 5, &[1], 10, false).await;
        assert!(
            matches!(found, Err(MigrationError::Unsupported(_))),
            "{found:?}"
        );
        assert_eq!(pages, MAX_PAGES);
    }

    #[tokio::test]
    async fn a_search_unleash_lacks_is_none() {
        let answer = page_back(|_| async { Ok(None) }).await;
        assert!(matches!(answer, Ok(None)));
    }
}
