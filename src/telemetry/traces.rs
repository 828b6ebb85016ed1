//! OpenTelemetry traces: exported over OTLP/HTTP when the standard `OTEL_EXPORTER_OTLP_*`
//! variables name an endpoint (off otherwise), with W3C trace context taken from requests and
//! carried by addon delivery jobs.
//!
//! The spans are ordinary `tracing` spans (`tracing-opentelemetry` turns them into OTel
//! spans): `request` for every request outside the client API, `store.commit`, `store.load`,
//! `snapshot.refresh`, `usage.flush` and `delivery.attempt`.

use std::collections::HashMap;

use axum::http::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The variables that turn the exporter on (the OTLP exporter reads the rest itself:
/// headers, timeout, protocol, sampler).
const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];
const PROTOCOL_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];

/// Why traces could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TraceSetupError {
    /// A protocol this build does not speak.
    #[error(
        "{variable}={value}: only http/protobuf and http/json are built in (the OTLP/HTTP \
         port, usually 4318)"
    )]
    Protocol {
        /// The variable that asked for it.
        variable: &'static str,
        /// What it asked for.
        value: String,
    },
    /// The exporter refused its settings.
    #[error("the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

fn variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The tracer provider the environment asks for, or `None` when no endpoint is set.
pub fn provider_from_env() -> Result<Option<SdkTracerProvider>, TraceSetupError> {
    if !ENDPOINT_VARIABLES.iter().any(|v| variable(v).is_some())
        || variable("OTEL_TRACES_EXPORTER").is_some_and(|v| v == "none")
    {
        return Ok(None);
    }
    for name in PROTOCOL_VARIABLES {
        if let Some(value) = variable(name) {
            if !matches!(value.as_str(), "http/protobuf" | "http/json") {
                return Err(TraceSetupError::Protocol {
                    variable: name,
                    value,
                });
            }
            break;
        }
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let named = variable("OTEL_SERVICE_NAME").is_some()
        || variable("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|v| v.contains("service.name="));
    let resource = if named {
        Resource::builder().build()
    } else {
        Resource::builder().with_service_name("flagpole").build()
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    Ok(Some(provider))
}

/// Reads `traceparent`/`tracestate` from request headers.
struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Makes `span` a child of the trace the request's `traceparent` names, if any.
pub fn continue_trace(span: &tracing::Span, headers: &HeaderMap) {
    if !headers.contains_key("traceparent") {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    if parent.span().span_context().is_valid() {
        // Fails only when no OpenTelemetry layer is installed: then there is nothing to join.
        let _ = span.set_parent(parent);
    }
}

/// The W3C `traceparent` of the current span, when it is traced (for jobs that continue the
/// work elsewhere, such as addon deliveries).
pub fn current_traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

/// Links `span` to the trace `traceparent` names (the write a delivery comes from).
pub fn link_to(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(traceparent) = traceparent else {
        return;
    };
    let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    let context: Context = TraceContextPropagator::new().extract(&carrier);
    let linked = context.span().span_context().clone();
    if linked.is_valid() {
        span.add_link(linked);
    }
}
