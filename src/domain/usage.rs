//! What SDKs report: registrations and usage-metrics buckets (API-FACTS §1), parsed leniently
//! (unknown keys ignored, nulls accepted, numeric strings converted) and validated strictly
//! (every problem named by its path; nothing absurd accepted).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use chrono::{DateTime, TimeZone, Utc};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use super::error::ValidationErrors;
use super::DomainError;

/// Longest accepted app name, instance id, SDK version, toggle or variant name.
pub const REPORT_NAME_MAX: usize = 255;
/// Most toggles one metrics report may carry.
pub const MAX_TOGGLES_PER_REPORT: usize = 10_000;
/// Most variants one toggle entry may carry.
pub const MAX_VARIANTS_PER_TOGGLE: usize = 100;
/// Most strategies one registration may list.
pub const MAX_STRATEGIES: usize = 100;
/// Largest count one report may give for one toggle (a million evaluations a second for
/// eleven days); anything larger is a broken client.
pub const MAX_COUNT: u64 = 1_000_000_000_000;

/// The app and instance named by the request headers (`UNLEASH-*` or `SERVICE-*`), used when
/// the body does not name them.
#[derive(Debug, Clone, Default)]
pub struct ClientHeaders {
    pub app_name: Option<String>,
    pub instance_id: Option<String>,
}

/// A validated `POST /api/client/register`.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub app_name: String,
    pub instance_id: String,
    pub sdk_version: Option<String>,
    pub strategies: Vec<String>,
    pub started: Option<DateTime<Utc>>,
    pub interval: Option<u64>,
}

/// A validated `POST /api/client/metrics`; names are borrowed from the body where they can be
/// (ingestion allocates only for what the replica has not counted yet).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsReport<'a> {
    pub app_name: Cow<'a, str>,
    pub instance_id: Cow<'a, str>,
    pub start: DateTime<Utc>,
    pub stop: DateTime<Utc>,
    pub toggles: Vec<(Cow<'a, str>, ToggleCounts<'a>)>,
}

/// One toggle's evaluations in a report. `yes`/`no` count every evaluation once; `variants`
/// only breaks the same evaluations down by variant (never added on top).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToggleCounts<'a> {
    pub yes: u64,
    pub no: u64,
    pub variants: Vec<(Cow<'a, str>, u64)>,
}

/// A JSON string, borrowed from the body unless it has escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor(PhantomData))
    }
}

/// A JSON object read as a list of entries in document order (no map to build).
struct Entries<'a, V>(Vec<(Cow<'a, str>, V)>);

impl<'de: 'a, 'a, V: Deserialize<'de>> Deserialize<'de> for Entries<'a, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<'a, V>(PhantomData<(&'a (), V)>);
        impl<'de: 'a, 'a, V: Deserialize<'de>> Visitor<'de> for EntriesVisitor<'a, V> {
            type Value = Entries<'a, V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
                while let Some((key, value)) = map.next_entry::<Text<'a>, V>()? {
                    entries.push((key.0, value));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor(PhantomData))
    }
}

/// A non-negative whole number as SDKs send it: a number, a numeric string, `""` or `null`
/// (both 0).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Count(u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl Visitor<'_> for CountVisitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a non-negative whole number up to {MAX_COUNT}")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Count, E> {
                if v > MAX_COUNT {
                    return Err(E::custom(format!(
                        "{v} is larger than the accepted maximum {MAX_COUNT}"
                    )));
                }
                Ok(Count(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Count, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("{v} is negative"))),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Count, E> {
                if v.fract() != 0.0 || !v.is_finite() {
                    return Err(E::custom(format!("{v} is not a whole number")));
                }
                if v < 0.0 {
                    return Err(E::custom(format!("{v} is negative")));
                }
                if v > MAX_COUNT as f64 {
                    return Err(E::custom(format!(
                        "{v} is larger than the accepted maximum {MAX_COUNT}"
                    )));
                }
                Ok(Count(v as u64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Count, E> {
                let v = v.trim();
                if v.is_empty() {
                    return Ok(Count(0));
                }
                match v.parse::<i64>() {
                    Ok(n) => self.visit_i64(n),
                    Err(_) => Err(E::custom(format!("\"{v}\" is not a whole number"))),
                }
            }
            fn visit_unit<E: de::Error>(self) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_none<E: de::Error>(self) -> Result<Count, E> {
                Ok(Count(0))
            }
        }
        deserializer.deserialize_any(CountVisitor)
    }
}

/// A timestamp within the years RFC 3339 can write (0000–9999): what is kept is served again
/// as RFC 3339, and a later year would come out as `+255479-…`, which no client reads.
fn in_years<E: de::Error>(t: Timestamp, sent: impl fmt::Display) -> Result<Timestamp, E> {
    use chrono::Datelike;
    if (0..=9999).contains(&t.0.year()) {
        Ok(t)
    } else {
        Err(E::custom(format!(
            "{sent} is out of range (years 0 to 9999)"
        )))
    }
}

/// A point in time as SDKs send it: RFC 3339 (up to nanoseconds, any offset) or epoch
/// milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Timestamp(DateTime<Utc>);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TimestampVisitor;
        impl Visitor<'_> for TimestampVisitor {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp or epoch milliseconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
                DateTime::parse_from_rfc3339(v.trim())
                    .map(|t| Timestamp(t.with_timezone(&Utc)))
                    .map_err(|e| E::custom(format!("\"{v}\" is not an RFC 3339 timestamp: {e}")))
                    .and_then(|t| in_years(t, v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Timestamp, E> {
                i64::try_from(v)
                    .ok()
                    .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
                    .map(Timestamp)
                    .ok_or_else(|| E::custom(format!("{v} is out of range")))
                    .and_then(|t| in_years(t, v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Timestamp, E> {
                Utc.timestamp_millis_opt(v)
                    .single()
                    .map(Timestamp)
                    .ok_or_else(|| E::custom(format!("{v} is out of range")))
                    .and_then(|t| in_years(t, v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Timestamp, E> {
                if v.is_finite() {
                    self.visit_i64(v as i64)
                } else {
                    Err(E::custom("not a finite number"))
                }
            }
        }
        deserializer.deserialize_any(TimestampVisitor)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RegistrationBody {
    app_name: Option<String>,
    instance_id: Option<String>,
    sdk_version: Option<String>,
    strategies: Option<Vec<serde_json::Value>>,
    started: Option<Timestamp>,
    interval: Option<Count>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetricsBody<'a> {
    #[serde(borrow)]
    app_name: Option<Text<'a>>,
    #[serde(borrow)]
    instance_id: Option<Text<'a>>,
    #[serde(borrow)]
    bucket: Option<BucketBody<'a>>,
}

#[derive(Deserialize)]
struct BucketBody<'a> {
    start: Option<Timestamp>,
    stop: Option<Timestamp>,
    #[serde(borrow)]
    toggles: Option<Entries<'a, Option<ToggleBody<'a>>>>,
}

#[derive(Deserialize)]
struct ToggleBody<'a> {
    #[serde(default)]
    yes: Count,
    #[serde(default)]
    no: Count,
    #[serde(borrow)]
    variants: Option<Entries<'a, Count>>,
}

/// Parses JSON into `T`, naming the path of the first type problem. The happy path parses
/// without tracking paths; only a failure is parsed again to name where it is.
fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, DomainError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ValidationErrors::single("", "A JSON body is required"));
    }
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ValidationErrors::single("", format!("The body is not valid JSON: {inner}"))
        } else {
            let shown = if path.is_empty() { "body" } else { &path };
            ValidationErrors::single(path.clone(), format!("\"{shown}\": {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|e| ValidationErrors::single("", format!("The body is not valid JSON: {e}")))?;
    Ok(value)
}

/// What is wrong with a reported name, if anything: empty, too long, control characters.
fn name_problem(value: &str) -> Option<String> {
    // The common case in one pass: short printable ASCII, not only spaces.
    if value.len() <= REPORT_NAME_MAX
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.bytes().any(|b| b != b' ')
    {
        return None;
    }
    if value.trim().is_empty() {
        Some("is not allowed to be empty".into())
    } else if value.chars().count() > REPORT_NAME_MAX {
        Some(format!("must be at most {REPORT_NAME_MAX} characters long"))
    } else if value.chars().any(char::is_control) {
        Some("must not contain control characters".into())
    } else {
        None
    }
}

/// Checks a reported name; the path is built only when there is a problem.
fn check_name(value: &str, path: impl FnOnce() -> String, errors: &mut ValidationErrors) {
    if let Some(problem) = name_problem(value) {
        let path = path();
        errors.push(path.clone(), format!("\"{path}\" {problem}"));
    }
}

/// Most problems one report lists (a report of 10,000 bad names needs no 10,000 messages).
const MAX_PROBLEMS: usize = 20;

/// The body's value, else the header's; required.
fn identity<'a>(
    body: Option<Cow<'a, str>>,
    header: Option<&String>,
    path: &str,
    errors: &mut ValidationErrors,
) -> Cow<'a, str> {
    match body.or_else(|| header.map(|h| Cow::Owned(h.clone()))) {
        Some(value) => {
            check_name(&value, || path.to_string(), errors);
            value
        }
        None => {
            errors.push(path, format!("\"{path}\" is required"));
            Cow::Borrowed("")
        }
    }
}

impl Registration {
    /// Parses and validates a registration body.
    pub fn parse(bytes: &[u8], headers: &ClientHeaders) -> Result<Self, DomainError> {
        let body: RegistrationBody = parse(bytes)?;
        let mut errors = ValidationErrors::default();
        let app_name = identity(
            body.app_name.map(Cow::Owned),
            headers.app_name.as_ref(),
            "appName",
            &mut errors,
        )
        .into_owned();
        let instance_id = identity(
            body.instance_id.map(Cow::Owned),
            headers.instance_id.as_ref(),
            "instanceId",
            &mut errors,
        )
        .into_owned();
        if let Some(version) = &body.sdk_version {
            if version.chars().count() > REPORT_NAME_MAX || version.chars().any(char::is_control) {
                errors.push(
                    "sdkVersion",
                    format!(
                        "\"sdkVersion\" must be at most {REPORT_NAME_MAX} printable characters"
                    ),
                );
            }
        }
        // As the reference does, non-string items are dropped rather than refused.
        let strategies: Vec<String> = body
            .strategies
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| match s {
                serde_json::Value::String(s) => Some(s),
                _ => None,
            })
            .collect();
        if strategies.len() > MAX_STRATEGIES {
            errors.push(
                "strategies",
                format!("\"strategies\" must list at most {MAX_STRATEGIES} names"),
            );
        }
        for (i, name) in strategies.iter().enumerate() {
            check_name(name, || format!("strategies[{i}]"), &mut errors);
        }
        errors.into_result(Self {
            app_name,
            instance_id,
            sdk_version: body.sdk_version,
            strategies,
            started: body.started.map(|t| t.0),
            interval: body.interval.map(|c| c.0),
        })
    }
}

impl<'a> MetricsReport<'a> {
    /// Parses and validates a metrics body.
    pub fn parse(bytes: &'a [u8], headers: &ClientHeaders) -> Result<Self, DomainError> {
        let body: MetricsBody<'a> = parse(bytes)?;
        let mut errors = ValidationErrors::default();
        let app_name = identity(
            body.app_name.map(|t| t.0),
            headers.app_name.as_ref(),
            "appName",
            &mut errors,
        );
        let instance_id = identity(
            body.instance_id.map(|t| t.0),
            headers.instance_id.as_ref(),
            "instanceId",
            &mut errors,
        );
        let Some(bucket) = body.bucket else {
            errors.push("bucket", "\"bucket\" is required");
            return Err(DomainError::Invalid(errors));
        };
        let start = bucket.start.map(|t| t.0);
        let stop = bucket.stop.map(|t| t.0);
        if start.is_none() {
            errors.push("bucket.start", "\"bucket.start\" is required");
        }
        if stop.is_none() {
            errors.push("bucket.stop", "\"bucket.stop\" is required");
        }
        // The reference server fails on a bucket without toggles (API-FACTS §1): bad input.
        let Some(entries) = bucket.toggles.map(|e| e.0) else {
            errors.push("bucket.toggles", "\"bucket.toggles\" is required");
            return Err(DomainError::Invalid(errors));
        };
        if entries.len() > MAX_TOGGLES_PER_REPORT {
            errors.push(
                "bucket.toggles",
                format!(
                    "\"bucket.toggles\" has {} toggles; at most {MAX_TOGGLES_PER_REPORT} are accepted per report",
                    entries.len()
                ),
            );
            return Err(DomainError::Invalid(errors));
        }
        let mut toggles = Vec::with_capacity(entries.len());
        for (name, entry) in entries {
            if errors.0.len() >= MAX_PROBLEMS {
                break;
            }
            let path = || format!("bucket.toggles.{name}");
            check_name(&name, path, &mut errors);
            let entry = entry.unwrap_or(ToggleBody {
                yes: Count(0),
                no: Count(0),
                variants: None,
            });
            let variants = entry.variants.map(|e| e.0).unwrap_or_default();
            if variants.len() > MAX_VARIANTS_PER_TOGGLE {
                let path = path();
                errors.push(
                    format!("{path}.variants"),
                    format!(
                        "\"{path}.variants\" may name at most {MAX_VARIANTS_PER_TOGGLE} variants"
                    ),
                );
                continue;
            }
            let mut counted = Vec::with_capacity(variants.len());
            for (variant, count) in variants {
                check_name(
                    &variant,
                    || format!("{}.variants.{variant}", path()),
                    &mut errors,
                );
                counted.push((variant, count.0));
            }
            toggles.push((
                name,
                ToggleCounts {
                    yes: entry.yes.0,
                    no: entry.no.0,
                    variants: counted,
                },
            ));
        }
        match (start, stop) {
            (Some(start), Some(stop)) => errors.into_result(Self {
                app_name,
                instance_id,
                start,
                stop,
                toggles,
            }),
            _ => Err(DomainError::Invalid(errors)),
        }
    }

    /// All evaluations the report counts (yes + no over every toggle).
    pub fn evaluations(&self) -> u64 {
        self.toggles.iter().map(|(_, c)| c.yes + c.no).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(result: Result<impl fmt::Debug, DomainError>) -> Vec<String> {
        match result {
            Err(DomainError::Invalid(errors)) => errors.0.into_iter().map(|e| e.path).collect(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn sdk_shaped_metrics_are_accepted() {
        let body = br#"{"appName":"a","instanceId":"i","connectionId":"c","yggdrasilVersion":null,
            "bucket":{"start":"2026-11-22T10:00:00.123456789Z","stop":"2026-11-22T10:00:10.5+01:00",
            "toggles":{"t":{"no":"2","yes":3,"variants":{"blue":1,"disabled":2}},"u":{"yes":"","no":null},"w":null}}}"#;
        let report = MetricsReport::parse(body, &ClientHeaders::default()).expect("valid");
        let mut toggles = report.toggles.clone();
        toggles.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(toggles[0].1.yes, 3);
        assert_eq!(toggles[0].1.no, 2);
        assert_eq!(toggles[1].1, ToggleCounts::default());
        assert_eq!(report.evaluations(), 5);
    }

    #[test]
    fn timestamps_stay_within_the_years_rfc_3339_writes() {
        let ok: Timestamp = serde_json::from_str("253402300799999").expect("9999-12-31");
        assert_eq!(ok.0.to_rfc3339(), "9999-12-31T23:59:59.999+00:00");
        for late in [
            "253402300800000",
            "8000000000000000",
            "\"+10000-01-01T00:00:00Z\"",
        ] {
            assert!(serde_json::from_str::<Timestamp>(late).is_err(), "{late}");
        }
    }

    #[test]
    fn bad_counts_are_named_by_path() {
        let headers = ClientHeaders::default();
        for (body, path) in [
            (
                r#"{"appName":"a","instanceId":"i","bucket":{"start":"2026-11-22T10:00:00Z","stop":"2026-11-22T10:00:00Z","toggles":{"t":{"yes":-1}}}}"#,
                "bucket.toggles.t.yes",
            ),
            (
                r#"{"appName":"a","instanceId":"i","bucket":{"start":"2026-11-22T10:00:00Z","stop":"2026-11-22T10:00:00Z","toggles":{"t":{"no":1.5}}}}"#,
                "bucket.toggles.t.no",
            ),
            (
                r#"{"appName":"a","instanceId":"i","bucket":{"start":"2026-11-22T10:00:00Z","stop":"2026-11-22T10:00:00Z","toggles":[]}}"#,
                "bucket.toggles",
            ),
            (
                r#"{"appName":"a","instanceId":"i","bucket":{"start":"yesterday","stop":"2026-11-22T10:00:00Z","toggles":{}}}"#,
                "bucket.start",
            ),
            (r#"{"appName":"a","instanceId":"i"}"#, "bucket"),
            (
                r#"{"instanceId":"i","bucket":{"start":"2026-11-22T10:00:00Z","stop":"2026-11-22T10:00:00Z","toggles":{}}}"#,
                "appName",
            ),
            (
                r#"{"appName":"a","instanceId":"i","bucket":{"start":"2026-11-22T10:00:00Z","stop":"2026-11-22T10:00:00Z"}}"#,
                "bucket.toggles",
            ),
            (
                r#"{"appName":"a","instanceId":"i","bucket":{"start":"2026-11-22T10:00:00Z","stop":"2026-11-22T10:00:00Z","toggles":null}}"#,
                "bucket.toggles",
            ),
        ] {
            assert_eq!(
                paths(MetricsReport::parse(body.as_bytes(), &headers)),
                [path],
                "{body}"
            );
        }
    }

    #[test]
    fn headers_fill_in_missing_identity() {
        let headers = ClientHeaders {
            app_name: Some("from-header".into()),
            instance_id: Some("i-9".into()),
        };
        let reg = Registration::parse(
            br#"{"strategies":["default",3],"interval":15000}"#,
            &headers,
        )
        .expect("valid");
        assert_eq!(reg.app_name, "from-header");
        assert_eq!(reg.strategies, ["default"]);
        assert_eq!(reg.interval, Some(15000));
    }
}
