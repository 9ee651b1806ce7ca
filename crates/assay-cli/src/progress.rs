//! A progress bar on stderr for long runs; hidden when stdout is not a terminal or for --json.

use assay_core::bank::BankType;
use assay_harness::run::RunObserver;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shows a bar per bank.
pub struct Bar {
    enabled: bool,
    bar: Option<ProgressBar>,
}

impl Bar {
    /// A bar that draws only when `enabled`.
    pub fn new(enabled: bool) -> Bar {
        Bar { enabled, bar: None }
    }
}

impl RunObserver for Bar {
    fn bank_started(&mut self, bank: BankType, cases: usize) {
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::with_draw_target(Some(cases as u64), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{prefix:>9} [{bar:30}] {pos}/{len} {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(bank.key());
        self.bar = Some(bar);
    }

    fn case_finished(&mut self, _bank: BankType, test_id: &str, _score: Option<u32>) {
        if let Some(bar) = &self.bar {
            bar.set_message(test_id.to_owned());
            bar.inc(1);
        }
    }

    fn bank_finished(&mut self, _bank: BankType) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
