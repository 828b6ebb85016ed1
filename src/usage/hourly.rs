//! One toggle's evaluations per hour, per application, over the last 1 to 48 hours: read from
//! the hourly counters the usage flush writes (kept 49 hours), for the toggle page's chart and
//! `GET /api/admin/client-metrics/features/:name/raw` (Unleash's shape).

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::Serialize;

use super::now_ms;
use crate::store::usage::{hour_of, hour_start_ms, minute_of, Counts, Hour, UsageStore};
use crate::store::StoreError;

/// The longest period the hourly views cover (Unleash's `hoursBack` maximum).
pub const MAX_HOURS: u64 = 48;
/// The period of the hourly views when none is asked for.
pub const DEFAULT_HOURS: u64 = 24;
/// Most applications the raw metrics list (as Unleash does), by name.
const MAX_APPLICATIONS: usize = 100;

/// yes/no counts of one hour, with the variant breakdown.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HourCounts {
    pub yes: u64,
    pub no: u64,
    pub variants: BTreeMap<String, u64>,
}

impl HourCounts {
    fn add(&mut self, counts: &Counts) {
        self.yes = self.yes.saturating_add(counts.yes);
        self.no = self.no.saturating_add(counts.no);
        for (variant, n) in &counts.variants {
            let total = self.variants.entry(variant.clone()).or_default();
            *total = total.saturating_add(*n);
        }
    }

    fn add_hour(&mut self, other: &HourCounts) {
        self.yes = self.yes.saturating_add(other.yes);
        self.no = self.no.saturating_add(other.no);
        for (variant, n) in &other.variants {
            let total = self.variants.entry(variant.clone()).or_default();
            *total = total.saturating_add(*n);
        }
    }
}

/// One toggle's counts per hour: `hours` oldest first (the current hour last), and per
/// application one entry per hour in the same order.
#[derive(Debug, Default)]
pub struct HourlyUsage {
    pub hours: Vec<Hour>,
    pub applications: BTreeMap<String, Vec<HourCounts>>,
}

impl HourlyUsage {
    /// Every application's counts summed, per hour.
    pub fn total(&self) -> Vec<HourCounts> {
        let mut total = vec![HourCounts::default(); self.hours.len()];
        for counts in self.applications.values() {
            for (sum, hour) in total.iter_mut().zip(counts) {
                sum.add_hour(hour);
            }
        }
        total
    }
}

/// The `n` hours ending with the one `now_ms` falls in, oldest first.
pub fn last_hours(now_ms: i64, n: u64) -> Vec<Hour> {
    let now = hour_of(minute_of(now_ms));
    let first = now.saturating_sub(n.clamp(1, MAX_HOURS) - 1);
    (first..=now).collect()
}

/// `rows` (hour → application → counts) laid out over `hours`; hours outside are left out.
fn lay_out(
    hours: Vec<Hour>,
    rows: &[(Hour, std::collections::HashMap<String, Counts>)],
) -> HourlyUsage {
    let mut applications: BTreeMap<String, Vec<HourCounts>> = BTreeMap::new();
    let first = hours.first().copied().unwrap_or(0);
    for (hour, apps) in rows {
        let Some(slot) = hour
            .checked_sub(first)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < hours.len())
        else {
            continue;
        };
        for (app, counts) in apps {
            applications
                .entry(app.clone())
                .or_insert_with(|| vec![HourCounts::default(); hours.len()])[slot]
                .add(counts);
        }
    }
    HourlyUsage {
        hours,
        applications,
    }
}

/// The toggle `name`'s counts per application over the last `n` hours (1 to 48, the current
/// hour included).
pub async fn hourly_usage(
    store: &UsageStore,
    name: &str,
    n: u64,
) -> Result<HourlyUsage, StoreError> {
    let hours = last_hours(now_ms(), n);
    let (first, last) = match (hours.first(), hours.last()) {
        (Some(first), Some(last)) => (*first, *last),
        _ => return Ok(HourlyUsage::default()),
    };
    let rows = store.hourly_counts(name, first, last).await?;
    Ok(lay_out(hours, &rows))
}

/// The start of an hour as a time.
pub fn hour_time(hour: Hour) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(hour_start_ms(hour))
        .single()
        .unwrap_or_default()
}

/// One application's counts of one hour, as Unleash lists them.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawMetric {
    pub feature_name: String,
    pub app_name: String,
    /// Always `default`: usage is not counted per environment.
    pub environment: String,
    /// The start of the hour, with milliseconds as Unleash writes it (`…T10:00:00.000Z`).
    #[schema(format = DateTime)]
    pub timestamp: String,
    pub yes: u64,
    pub no: u64,
    pub variants: BTreeMap<String, u64>,
}

/// `GET /api/admin/client-metrics/features/:name/raw`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RawMetrics {
    /// Always 1.
    pub version: u32,
    /// Always `stable`.
    pub maturity: String,
    /// Every application (up to 100, by name) × every hour asked for, zeros included, by hour.
    pub data: Vec<RawMetric>,
}

/// The raw metrics document of `usage` (Unleash's shape: one entry per application and hour,
/// oldest hour first).
pub fn raw_metrics(name: &str, usage: &HourlyUsage) -> RawMetrics {
    let mut data = Vec::new();
    for (i, hour) in usage.hours.iter().enumerate() {
        for (app, counts) in usage.applications.iter().take(MAX_APPLICATIONS) {
            let Some(c) = counts.get(i) else { continue };
            data.push(RawMetric {
                feature_name: name.to_string(),
                app_name: app.clone(),
                environment: "default".to_string(),
                timestamp: hour_time(*hour).to_rfc3339_opts(SecondsFormat::Millis, true),
                yes: c.yes,
                no: c.no,
                variants: c.variants.clone(),
            });
        }
    }
    RawMetrics {
        version: 1,
        maturity: "stable".to_string(),
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_last_hours_end_with_the_current_one() {
        let ten = hour_start_ms(490_010);
        assert_eq!(last_hours(ten, 1), [490_010]);
        assert_eq!(last_hours(ten + 3_599_999, 3), [490_008, 490_009, 490_010]);
        assert_eq!(last_hours(ten, 500).len(), 48, "at most 48 hours");
        assert_eq!(last_hours(ten, 0).len(), 1, "at least one");
    }

    #[test]
    fn hours_are_laid_out_per_application_with_zeros_and_summed() {
        let counts = |yes, no| Counts {
            yes,
            no,
            ..Counts::default()
        };
        let rows = vec![
            (7, HashMap::from([("shop".to_string(), counts(1, 2))])),
            (
                9,
                HashMap::from([
                    ("shop".to_string(), counts(3, 0)),
                    ("billing".to_string(), counts(0, 4)),
                ]),
            ),
            // Outside the period: left out.
            (6, HashMap::from([("old".to_string(), counts(9, 9))])),
        ];
        let usage = lay_out(vec![7, 8, 9], &rows);
        assert_eq!(usage.applications.len(), 2);
        let shop: Vec<(u64, u64)> = usage.applications["shop"]
            .iter()
            .map(|c| (c.yes, c.no))
            .collect();
        assert_eq!(shop, [(1, 2), (0, 0), (3, 0)]);
        let total: Vec<(u64, u64)> = usage.total().iter().map(|c| (c.yes, c.no)).collect();
        assert_eq!(total, [(1, 2), (0, 0), (3, 4)]);
        let raw = raw_metrics("t", &usage);
        assert_eq!(raw.data.len(), 6, "every application in every hour");
        assert_eq!(raw.data[0].app_name, "billing");
        assert_eq!(raw.data[0].timestamp, "1970-01-01T07:00:00.000Z");
        assert_eq!((raw.data[5].yes, raw.data[5].no), (3, 0));
    }
}
