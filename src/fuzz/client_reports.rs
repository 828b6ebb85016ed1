//! What SDKs report (`domain::usage`): metrics bodies through `MetricsReport::parse` and
//! registrations through `Registration::parse`, with the identity headers.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::gen::timestamp;
use super::mutate::{apply, apply_bytes, byte_edits, mutations};
use super::{config, odd_text};
use crate::domain::usage::{
    ClientHeaders, MetricsReport, Registration, ToggleCounts, MAX_COUNT, MAX_TOGGLES_PER_REPORT,
    MAX_VARIANTS_PER_TOGGLE, REPORT_NAME_MAX,
};
use crate::domain::DomainError;

/// A name an SDK may report: not blank, no control characters, at most 255 characters.
fn report_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9._-]{1,20}",
        2 => "[^\\p{C}]{1,30}".prop_filter("not blank", |s| !s.trim().is_empty()),
        1 => "[a-z]".prop_map(|c| c.repeat(REPORT_NAME_MAX)),
    ]
}

/// A count, and the ways SDKs write it: a number, a numeric string (padded), a whole float,
/// or `null`/`""` for 0.
fn count() -> impl Strategy<Value = (u64, Value)> {
    prop_oneof![
        (0..=MAX_COUNT).prop_map(|n| (n, json!(n))),
        (0..=MAX_COUNT).prop_map(|n| (n, json!(format!(" {n} ")))),
        (0..=MAX_COUNT).prop_map(|n| (n, json!(n as f64))),
        Just((0, Value::Null)),
        Just((0, json!(""))),
    ]
}

/// A point in time, as RFC 3339 at some offset or as epoch milliseconds.
fn instant() -> impl Strategy<Value = (DateTime<Utc>, Value)> {
    (timestamp(), -(14 * 60)..=(14 * 60), any::<bool>()).prop_map(|(t, offset, millis)| {
        if millis {
            let ms = t.timestamp_millis();
            (DateTime::from_timestamp_millis(ms).unwrap(), json!(ms))
        } else {
            let offset = chrono::FixedOffset::east_opt(offset * 60).unwrap();
            (t, json!(t.with_timezone(&offset).to_rfc3339()))
        }
    })
}

type Toggles = Vec<(
    String,
    (u64, Value),
    (u64, Value),
    Vec<(String, (u64, Value))>,
)>;

fn toggles() -> impl Strategy<Value = Toggles> {
    let variants = prop::collection::vec((report_name(), count()), 0..3);
    prop::collection::vec((report_name(), count(), count(), variants), 0..6).prop_map(|mut list| {
        // A JSON object has one entry per name.
        let mut seen = std::collections::HashSet::new();
        list.retain(|t| seen.insert(t.0.clone()));
        for t in &mut list {
            let mut seen = std::collections::HashSet::new();
            t.3.retain(|v| seen.insert(v.0.clone()));
        }
        list
    })
}

/// A valid metrics body and the report it is.
fn metrics() -> impl Strategy<Value = (Value, MetricsReport<'static>)> {
    (
        report_name(),
        report_name(),
        instant(),
        instant(),
        toggles(),
    )
        .prop_map(|(app, instance, start, stop, toggles)| {
            let mut body_toggles = Map::new();
            let mut counted = Vec::new();
            for (name, yes, no, variants) in toggles {
                let mut body_variants = Map::new();
                for (variant, count) in &variants {
                    body_variants.insert(variant.clone(), count.1.clone());
                }
                body_toggles.insert(
                    name.clone(),
                    json!({"yes": yes.1, "no": no.1, "variants": body_variants}),
                );
                counted.push((
                    Cow::Owned(name),
                    ToggleCounts {
                        yes: yes.0,
                        no: no.0,
                        variants: variants
                            .into_iter()
                            .map(|(v, c)| (Cow::Owned(v), c.0))
                            .collect(),
                    },
                ));
            }
            let body = json!({"appName": app, "instanceId": instance,
                "bucket": {"start": start.1, "stop": stop.1, "toggles": body_toggles}});
            let report = MetricsReport {
                app_name: Cow::Owned(app),
                instance_id: Cow::Owned(instance),
                start: start.0,
                stop: stop.0,
                toggles: counted,
            };
            (body, report)
        })
}

/// A valid registration body and the registration it is.
fn registration() -> impl Strategy<Value = (Value, Registration)> {
    (
        report_name(),
        report_name(),
        prop::option::of("[^\\p{C}]{0,40}"),
        prop::collection::vec(report_name(), 0..5),
        prop::option::of(instant()),
        prop::option::of(count()),
    )
        .prop_map(|(app, instance, sdk, strategies, started, interval)| {
            let body = json!({"appName": app, "instanceId": instance, "sdkVersion": sdk,
                "strategies": strategies, "started": started.as_ref().map(|s| s.1.clone()),
                "interval": interval.as_ref().map(|c| c.1.clone())});
            let registration = Registration {
                app_name: app,
                instance_id: instance,
                sdk_version: sdk,
                strategies,
                started: started.map(|s| s.0),
                // `null` is no interval, not 0.
                interval: interval.and_then(|c| (!c.1.is_null()).then_some(c.0)),
            };
            (body, registration)
        })
}

fn headers() -> impl Strategy<Value = ClientHeaders> {
    (prop::option::of(odd_text()), prop::option::of(odd_text())).prop_map(
        |(app_name, instance_id)| ClientHeaders {
            app_name,
            instance_id,
        },
    )
}

/// Whether a name passed as the rules say.
fn name_ok(name: &str) -> bool {
    !name.trim().is_empty()
        && name.chars().count() <= REPORT_NAME_MAX
        && !name.chars().any(char::is_control)
}

/// A refusal lists its problems.
fn assert_refusal(e: DomainError) -> Result<(), TestCaseError> {
    match e {
        DomainError::Invalid(problems) => prop_assert!(!problems.0.is_empty()),
        other => return Err(TestCaseError::fail(format!("not invalid: {other:?}"))),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    /// A valid metrics body, however its counts and times are written, is the report it says.
    #[test]
    fn a_metrics_body_reads_as_written((body, report) in metrics()) {
        let bytes = serde_json::to_vec(&body).expect("serialisable");
        let parsed = MetricsReport::parse(&bytes, &ClientHeaders::default())
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(parsed, report);
    }

    /// A mutated metrics body is a report within every limit, or a refusal with problems.
    #[test]
    fn a_mutated_metrics_body_is_bounded_or_refused(
        (body, _) in metrics(),
        edits in mutations(),
        bytes_edits in byte_edits(),
        headers in headers(),
    ) {
        let bytes = apply_bytes(
            serde_json::to_vec(&apply(body, &edits)).expect("serialisable"),
            &bytes_edits,
        );
        let report = match MetricsReport::parse(&bytes, &headers) {
            Ok(report) => report,
            Err(e) => return assert_refusal(e),
        };
        prop_assert!(name_ok(&report.app_name) && name_ok(&report.instance_id));
        prop_assert!(report.toggles.len() <= MAX_TOGGLES_PER_REPORT);
        for (name, counts) in &report.toggles {
            prop_assert!(name_ok(name), "{:?}", name);
            prop_assert!(counts.yes <= MAX_COUNT && counts.no <= MAX_COUNT);
            prop_assert!(counts.variants.len() <= MAX_VARIANTS_PER_TOGGLE);
            for (variant, n) in &counts.variants {
                prop_assert!(name_ok(variant) && *n <= MAX_COUNT, "{:?}", variant);
            }
        }
        let _ = report.evaluations();
    }

    /// A valid registration body is the registration it says.
    #[test]
    fn a_registration_body_reads_as_written((body, registration) in registration()) {
        let bytes = serde_json::to_vec(&body).expect("serialisable");
        let parsed = Registration::parse(&bytes, &ClientHeaders::default())
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(parsed, registration);
    }

    /// A mutated registration is within every limit, or a refusal with problems.
    #[test]
    fn a_mutated_registration_is_bounded_or_refused(
        (body, _) in registration(),
        edits in mutations(),
        bytes_edits in byte_edits(),
        headers in headers(),
    ) {
        let bytes = apply_bytes(
            serde_json::to_vec(&apply(body, &edits)).expect("serialisable"),
            &bytes_edits,
        );
        let registration = match Registration::parse(&bytes, &headers) {
            Ok(registration) => registration,
            Err(e) => return assert_refusal(e),
        };
        prop_assert!(name_ok(&registration.app_name) && name_ok(&registration.instance_id));
        prop_assert!(registration.strategies.iter().all(|s| name_ok(s)));
        prop_assert!(registration.interval.is_none_or(|i| i <= MAX_COUNT));
    }
}
