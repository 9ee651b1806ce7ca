//! A progress bar on stderr for long runs; hidden when stdout is not a terminal or for --json.
//! While a provider's rate limit holds calls back, the bar says so ([`LimitWatch`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use assay_core::bank::BankType;
use assay_providers::RateLimits;
use assay_run::run::RunObserver;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shows a bar per bank.
pub struct Bar {
    enabled: bool,
    current: Option<ProgressBar>,
    limits: Option<Arc<RateLimits>>,
    /// The bar's message without the rate-limit note (the last case finished).
    message: Arc<Mutex<String>>,
    watch: Option<LimitWatch>,
}

impl Bar {
    /// A bar that draws only when `enabled`.
    pub fn new(enabled: bool) -> Bar {
        Bar {
            enabled,
            current: None,
            limits: None,
            message: Arc::default(),
            watch: None,
        }
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
        if let Some(limits) = &self.limits {
            self.watch = Some(LimitWatch::start(
                bar.clone(),
                Arc::clone(limits),
                Arc::clone(&self.message),
            ));
        }
        self.current = Some(bar);
    }

    fn case_finished(&mut self, _bank: BankType, test_id: &str, _score: Option<u32>) {
        if let Some(bar) = &self.current {
            test_id.clone_into(&mut self.message.lock().unwrap_or_else(PoisonError::into_inner));
            bar.set_message(test_id.to_owned());
            bar.inc(1);
        }
    }

    fn bank_finished(&mut self, _bank: BankType) {
        self.watch = None;
        if let Some(bar) = self.current.take() {
            bar.finish_and_clear();
        }
    }

    fn rate_limits(&mut self, limits: Arc<RateLimits>) {
        self.limits = Some(limits);
    }
}

/// While it lives, a thread checks the rate limiters four times a second and, when one holds
/// callers back, appends what it says to the bar's message (`held back by the rate limit of
/// openai/gpt-4o (concurrency 4/16, 12 waiting)`); the note goes when the limit lets go.
pub struct LimitWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LimitWatch {
    /// Watches `limits` for `bar`, whose message is otherwise `message`.
    pub fn start(
        bar: ProgressBar,
        limits: Arc<RateLimits>,
        message: Arc<Mutex<String>>,
    ) -> LimitWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("assay-limit-watch".into())
            .spawn(move || {
                let mut shown = false;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    let base = message
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    match limits.held_back() {
                        Some(status) => {
                            bar.set_message(if base.is_empty() {
                                status.to_string()
                            } else {
                                format!("{base} — {status}")
                            });
                            shown = true;
                        }
                        None if shown => {
                            bar.set_message(base);
                            shown = false;
                        }
                        None => {}
                    }
                }
            })
            .ok();
        LimitWatch { stop, thread }
    }
}

impl Drop for LimitWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
