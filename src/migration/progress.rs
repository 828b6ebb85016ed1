//! Counts per kind while Unleash is read, as one line on a terminal (`indicatif`), left there
//! when reading ends; nothing when stderr is not a terminal (a CI log gets the summary only).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// The progress line, or nothing.
pub struct Progress {
    bar: Option<ProgressBar>,
    counts: Mutex<BTreeMap<&'static str, usize>>,
}

impl Progress {
    /// A spinner on stderr when it is a terminal and `quiet` is not set.
    pub fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} reading Unleash: {msg}") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            bar,
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    /// Sets the count of `kind` read so far.
    pub fn count(&self, kind: &'static str, n: usize) {
        let Some(bar) = &self.bar else { return };
        let Ok(mut counts) = self.counts.lock() else {
            return;
        };
        counts.insert(kind, n);
        let line: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
        bar.set_message(line.join(" · "));
    }

    /// Stops the spinner, leaving the last counts on the line (what was read, even when
    /// reading failed midway).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            if let Ok(style) = ProgressStyle::with_template("read from Unleash: {msg}") {
                bar.set_style(style);
            }
            bar.finish();
        }
    }
}
