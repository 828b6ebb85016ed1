//! Counters of the frontend API's and OFREP's answers, by kind: counted per thread on the
//! request path (`HotCounter`) and added into the exported family at each scrape.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::metrics::HotCounter;

/// Labels of the evaluation answers counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabels {
    /// `frontend`, `ofrep_flag` or `ofrep_bulk`.
    api: &'static str,
    /// `200` (evaluated) or `304` (answered from the ETag, nothing evaluated).
    response: &'static str,
}

/// The answers of one interface.
pub struct AnswerCounts {
    pub evaluated: HotCounter,
    pub not_modified: HotCounter,
}

/// Evaluation answers by interface.
pub struct EvaluationMetrics {
    pub frontend: AnswerCounts,
    pub ofrep_flag: AnswerCounts,
    pub ofrep_bulk: AnswerCounts,
}

impl EvaluationMetrics {
    /// Registers the counters in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let family = Family::<AnswerLabels, Counter>::default();
        registry.register(
            "evaluation_responses",
            "Frontend API and OFREP answers by interface and kind (304: not evaluated)",
            family.clone(),
        );
        // One guard of the family at a time: `get_or_create` holds its lock until dropped.
        let counter = |api, response| {
            let counter = family
                .get_or_create(&AnswerLabels { api, response })
                .clone();
            HotCounter::new(counter)
        };
        let counts = |api| {
            let evaluated = counter(api, "200");
            let not_modified = counter(api, "304");
            AnswerCounts {
                evaluated,
                not_modified,
            }
        };
        Self {
            frontend: counts("frontend"),
            ofrep_flag: counts("ofrep_flag"),
            ofrep_bulk: counts("ofrep_bulk"),
        }
    }

    /// Brings the exported counters up to date (before a scrape).
    pub fn sync(&self) {
        for counts in [&self.frontend, &self.ofrep_flag, &self.ofrep_bulk] {
            counts.evaluated.sync();
            counts.not_modified.sync();
        }
    }
}
