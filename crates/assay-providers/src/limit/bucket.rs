//! A provider's bucket as a limiter estimates it (see [`super`]).

use tokio::time::Instant;

use super::{LearnedBucket, LimitObservation, secs};
use std::time::Duration;

/// The refill time kept as a cushion (see [`Bucket::ready_at`]).
const CUSHION_DELAY: Duration = Duration::from_millis(5);

/// A provider's bucket as the limiter estimates it.
#[derive(Debug, Clone)]
pub(super) struct Bucket {
    pub(super) limit: f64,
    /// Seconds to refill from empty (smoothed), when the headers showed it.
    pub(super) window: Option<f64>,
    /// What is left at `at`.
    pub(super) level: f64,
    pub(super) at: Instant,
    /// When the provider said it would be full again (used when the rate is unknown).
    pub(super) reset_at: Option<Instant>,
    /// Units used by requests sent through this limiter, ever (for corrections).
    pub(super) spent: f64,
    /// The smoothed need of one request.
    pub(super) mean_need: f64,
    /// Remembered from an earlier run ([`LimitMemory`]) and not yet confirmed by the
    /// provider's headers: a 429 drops it.
    pub(super) remembered: bool,
}

impl Bucket {
    pub(super) fn new(limit: f64, now: Instant) -> Bucket {
        Bucket {
            limit,
            window: None,
            level: limit,
            at: now,
            reset_at: None,
            spent: 0.0,
            mean_need: 0.0,
            remembered: false,
        }
    }

    /// A bucket remembered from an earlier run, full at `now`.
    pub(super) fn remembered(learned: &LearnedBucket, now: Instant) -> Bucket {
        Bucket {
            window: Some(learned.limit / learned.per_second),
            remembered: true,
            ..Bucket::new(learned.limit, now)
        }
    }

    /// Units refilled per second, when known.
    pub(super) fn rate(&self) -> Option<f64> {
        self.window
            .filter(|w| *w > 0.0 && self.limit > 0.0)
            .map(|w| self.limit / w)
    }

    pub(super) fn available(&self, now: Instant) -> f64 {
        match self.rate() {
            Some(rate) => (self.level
                + rate * now.saturating_duration_since(self.at).as_secs_f64())
            .min(self.limit),
            None if self.reset_at.is_some_and(|t| now >= t) => self.limit,
            None => self.level,
        }
    }

    /// When `need` (at most the whole limit) will be available, with a cushion when the rate is
    /// known: the estimate of a request's size is rough (the provider counts its own way), and
    /// the provider admits a request a little after it was sent, so waiting for a sixth more
    /// than the request needs, plus 5 ms of refill, keeps a request from arriving just short.
    /// The cushion stays in the bucket: it costs one wait, not throughput.
    pub(super) fn ready_at(&self, now: Instant, need: f64) -> Instant {
        let cushion = self
            .rate()
            .map_or(0.0, |rate| need / 6.0 + rate * CUSHION_DELAY.as_secs_f64());
        let need = (need + cushion).min(self.limit);
        let have = self.available(now);
        if have >= need {
            return now;
        }
        match self.rate() {
            Some(rate) => now + secs((need - have) / rate),
            None => match self.reset_at {
                Some(t) if t > now => t,
                // Nothing says when it refills: do not hold requests on a guess.
                _ => now,
            },
        }
    }

    pub(super) fn take(&mut self, now: Instant, need: f64) {
        let available = self.available(now);
        if self.rate().is_none() && self.reset_at.is_some_and(|t| now >= t) {
            self.reset_at = None;
        }
        self.level = available - need;
        self.at = now;
        self.spent += need;
        self.mean_need = if self.mean_need == 0.0 {
            need
        } else {
            0.8 * self.mean_need + 0.2 * need
        };
    }

    /// Corrects the estimate with what a response said: `remaining` was left when the request
    /// sent at `started` was admitted, when this limiter had spent `spent_then`; since then the
    /// bucket refilled and this limiter spent more.
    pub(super) fn observe(
        &mut self,
        seen: &LimitObservation,
        now: Instant,
        started: Instant,
        spent_then: f64,
    ) {
        self.limit = seen.limit;
        self.remembered = false;
        if let Some(reset) = seen.reset
            && seen.remaining < seen.limit
            && !reset.is_zero()
        {
            let window = reset.as_secs_f64() * seen.limit / (seen.limit - seen.remaining);
            self.window = Some(match self.window {
                Some(old) => 0.7 * old + 0.3 * window,
                None => window,
            });
        }
        let refilled = self.rate().map_or(0.0, |rate| {
            rate * now.saturating_duration_since(started).as_secs_f64()
        });
        let since = (self.spent - spent_then).max(0.0);
        self.level = (seen.remaining + refilled - since).min(self.limit);
        self.at = now;
        self.reset_at = seen.reset.map(|r| now + r);
    }
}
