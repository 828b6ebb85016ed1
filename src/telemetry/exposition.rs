//! The two exposition formats of `/internal-backstage/prometheus`: OpenMetrics (what the
//! registry encodes, and what Prometheus asks for) and the Prometheus text format 0.0.4 (the
//! default, which other scrapers and the reference's users expect), converted from it.

/// Content type of the Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of OpenMetrics.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether an `Accept` header asks for OpenMetrics.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|item| {
            let mut parts = item.split(';');
            let media = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        })
    })
}

/// Converts OpenMetrics text into the Prometheus text format 0.0.4: counters are typed under
/// their `_total` sample name, info metrics become gauges named `_info`, `unknown` becomes
/// `untyped`, and `# UNIT`, `# EOF` and `_created` samples are dropped.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<(&str, &str)> = None;
    let mut created_suffix: Option<String> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            // Held until the TYPE line says which name the family goes by.
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "unknown" => (name.to_string(), "untyped"),
                other => (name.to_string(), other),
            };
            created_suffix = Some(format!("{}_created", name.trim_end_matches("_total")));
            if let Some((_, text)) = help.take() {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if let Some(created) = &created_suffix {
            if line.starts_with(created.as_str()) {
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_becomes_prometheus_text() {
        let openmetrics = "# HELP flagpole_reports Reports.\n# TYPE flagpole_reports counter\n\
            flagpole_reports_total{result=\"ok\"} 3\n\
            # HELP flagpole_build Build information.\n# TYPE flagpole_build info\n\
            flagpole_build_info{version=\"1\"} 1\n\
            # HELP flagpole_flush_duration_seconds Flush.\n# TYPE flagpole_flush_duration_seconds histogram\n\
            # UNIT flagpole_flush_duration_seconds seconds\n\
            flagpole_flush_duration_seconds_sum 0.5\nflagpole_flush_duration_seconds_count 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP flagpole_reports_total Reports.\n# TYPE flagpole_reports_total counter\n\
             flagpole_reports_total{result=\"ok\"} 3\n\
             # HELP flagpole_build_info Build information.\n# TYPE flagpole_build_info gauge\n\
             flagpole_build_info{version=\"1\"} 1\n\
             # HELP flagpole_flush_duration_seconds Flush.\n# TYPE flagpole_flush_duration_seconds histogram\n\
             flagpole_flush_duration_seconds_sum 0.5\nflagpole_flush_duration_seconds_count 1\n"
        );
    }

    #[test]
    fn accept_negotiation() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        )));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
        assert!(!wants_openmetrics(None));
    }
}
