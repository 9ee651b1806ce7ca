//! Limits remembered between runs ([`LimitMemory`]): what one run of a project learned about
//! its providers' rate limits (each bucket's size and refill rate, from the headers or from the
//! 429s, and which models share one), so that the next run paces from its first request
//! instead of learning the limit again by being refused: most providers count a refused
//! request against the quota too.
//!
//! A remembered bucket is a guess until the provider confirms it: the first answer with
//! rate-limit headers replaces it. A 429 while it paces drops one learned from headers (the
//! next headers say what the limit is) and slows one learned from 429s, like a learned pace.
//! One learned from 429s alone grows 2 % an answer while it holds callers back and nothing
//! refuses (the pace it came from runs under the provider's rate), and one that held a whole
//! run without a refusal is remembered a tenth faster, so that a raised limit is found again.
//! Entries older than [`MAX_AGE`] are forgotten.
//!
//! The file is read as untrusted ([`LimitMemory::current`]): every value is bounded (a bucket
//! holds from 1 to [`MAX_LIMIT`] units, refills more than nothing and at most [`MAX_RATE`] a
//! second, and refills whole within [`MAX_WINDOW`], so no remembered bucket can hold a call
//! longer than that; `learned_at` is no later than [`MAX_SKEW`] from now; a shared group names
//! the model itself among at most [`MAX_SHARED`] `vendor/model` names), and an entry out of
//! bounds is dropped with the reason, which the caller reports naming the file. A run never
//! fails because of the file; it learns the dropped limits again. What a run writes is held to
//! the same bounds (a bucket a provider describes as refilling over a day is learned again
//! each run rather than remembered).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{LimitKind, Pace, RateLimits, State, Ticket};

/// The memory's format version.
pub const LIMIT_MEMORY_VERSION: u32 = 1;

/// How long a learned limit is kept: a week.
pub const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// How far in the future a `learned_at` may be (clocks of machines sharing a project differ):
/// five minutes. Later is out of bounds (it would never age out).
pub const MAX_SKEW: u64 = 300;

/// The most a remembered bucket may hold (requests or tokens).
pub const MAX_LIMIT: f64 = 1e12;

/// The fastest a remembered bucket may refill, units a second.
pub const MAX_RATE: f64 = 1e9;

/// The longest a remembered bucket may take to refill whole, in seconds: ten minutes (the
/// default bound of one call). A slower one would hold calls past their bound.
pub const MAX_WINDOW: f64 = 600.0;

/// The most models a remembered shared limit may name.
pub const MAX_SHARED: usize = 64;

/// What runs learned about the providers' rate limits, by model (`vendor/model`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LimitMemory {
    /// [`LIMIT_MEMORY_VERSION`].
    pub version: u32,
    /// Each model's learned limit.
    pub models: BTreeMap<String, LearnedLimit>,
}

/// One model's limit as a run learned it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedLimit {
    /// When (Unix seconds).
    pub learned_at: u64,
    /// The provider's buckets by kind of limit.
    pub buckets: BTreeMap<LimitKind, LearnedBucket>,
    /// Learned from 429s and `retry-after` alone (the provider sent no rate-limit headers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_refusals: bool,
    /// The models that share this limit, this one included (declared, or found and pooled);
    /// empty when it is the model's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<String>,
}

/// A token bucket: it holds `limit` units and refills `per_second`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LearnedBucket {
    /// What it holds (requests, or tokens).
    pub limit: f64,
    /// What it refills a second.
    pub per_second: f64,
}

impl LearnedBucket {
    /// Why it is out of bounds (see the module docs), or `None` when it describes a usable
    /// bucket.
    pub(crate) fn out_of_bounds(&self) -> Option<String> {
        let (limit, rate) = (self.limit, self.per_second);
        if !(limit.is_finite() && (1.0..=MAX_LIMIT).contains(&limit)) {
            return Some(format!("holds {limit} (from 1 to {MAX_LIMIT:e})"));
        }
        if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) {
            return Some(format!(
                "refills {rate} a second (more than 0, at most {MAX_RATE:e})"
            ));
        }
        let window = limit / rate;
        if window > MAX_WINDOW {
            return Some(format!(
                "refills {rate} a second: {window:.0} s to refill its {limit}, more than {MAX_WINDOW:.0} s"
            ));
        }
        None
    }
}

/// Why a remembered entry is out of bounds, or `None`.
fn entry_out_of_bounds(model: &str, learned: &LearnedLimit, now: u64) -> Option<String> {
    if learned.learned_at > now.saturating_add(MAX_SKEW) {
        return Some(format!(
            "learned_at {} is {} s in the future",
            learned.learned_at,
            learned.learned_at - now
        ));
    }
    if learned.buckets.is_empty() {
        return Some("no bucket".into());
    }
    for (kind, bucket) in &learned.buckets {
        if let Some(why) = bucket.out_of_bounds() {
            return Some(format!("its {} bucket {why}", kind.unit()));
        }
    }
    let shared = &learned.shared_with;
    if !shared.is_empty() {
        if shared.len() > MAX_SHARED {
            return Some(format!(
                "shared_with names {} models (at most {MAX_SHARED})",
                shared.len()
            ));
        }
        if !shared.iter().any(|m| m == model) {
            return Some("shared_with does not name the model itself".into());
        }
        if let Some(bad) = shared.iter().find(|m| {
            let m = m.trim();
            m.is_empty() || !m.contains('/') || m.len() > 200
        }) {
            return Some(format!("shared_with names `{bad}`, not a vendor/model"));
        }
    }
    None
}

impl LimitMemory {
    /// The entries learned within [`MAX_AGE`] of `now` (Unix seconds) whose every value is in
    /// bounds (see the module docs), in this version's format, with why each other entry was
    /// dropped (`model: reason`; an entry that aged out is dropped without one). A file of
    /// another format is dropped whole, with the reason.
    pub fn current(self, now: u64) -> (LimitMemory, Vec<String>) {
        if self.version != LIMIT_MEMORY_VERSION {
            return (
                LimitMemory::empty(),
                vec![format!(
                    "version {} (this assay reads version {LIMIT_MEMORY_VERSION})",
                    self.version
                )],
            );
        }
        let mut dropped = Vec::new();
        let models = self
            .models
            .into_iter()
            .filter(|(_, l)| now.saturating_sub(l.learned_at) <= MAX_AGE.as_secs())
            .filter(|(model, l)| match entry_out_of_bounds(model, l, now) {
                Some(why) => {
                    dropped.push(format!("`{model}`: {why}"));
                    false
                }
                None => true,
            })
            .collect();
        (
            LimitMemory {
                version: LIMIT_MEMORY_VERSION,
                models,
            },
            dropped,
        )
    }

    /// Nothing learned.
    pub fn empty() -> LimitMemory {
        LimitMemory {
            version: LIMIT_MEMORY_VERSION,
            models: BTreeMap::new(),
        }
    }

    /// Groups of models remembered to share one limit (each sorted, two or more models).
    pub(crate) fn shared_groups(&self) -> Vec<Vec<String>> {
        let mut groups: Vec<Vec<String>> = self
            .models
            .values()
            .filter(|l| l.shared_with.len() > 1)
            .map(|l| {
                let mut g = l.shared_with.clone();
                g.sort();
                g.dedup();
                g
            })
            .collect();
        groups.sort();
        groups.dedup();
        groups
    }
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl RateLimits {
    /// Starts from what earlier runs learned ([`LimitMemory`], already filtered with
    /// [`LimitMemory::current`]): each model's limiter is made with its remembered buckets, and
    /// models remembered to share one limit share one limiter from the start (named
    /// `shared:auto (…)`, as when found), unless pooling is off or a declared group names one
    /// of them.
    pub fn with_memory(mut self, memory: LimitMemory) -> RateLimits {
        if self.pooling {
            for group in memory.shared_groups() {
                if group.iter().any(|m| self.shared.contains_key(m)) {
                    continue;
                }
                let label = format!("shared:auto ({})", group.join(", "));
                for model in group {
                    self.shared.insert(model, label.clone());
                }
            }
        }
        self.memory = memory;
        self
    }

    /// What this run learned about the limits, over what it was given ([`Self::with_memory`]):
    /// the memory for the next run. Models this run did not learn about keep their entries.
    pub fn learned(&self) -> LimitMemory {
        let mut memory = self.memory.clone();
        let now = unix_now();
        for limiter in self.all() {
            let Some(mut learned) = limiter.lock().learned(now) else {
                continue;
            };
            if limiter.members.len() > 1 {
                learned.shared_with.clone_from(&limiter.members);
            }
            // Held to the bounds the next run reads with: a bucket that refills over a day,
            // say, is learned again rather than remembered.
            learned.buckets.retain(|_, b| b.out_of_bounds().is_none());
            for model in &limiter.members {
                if entry_out_of_bounds(model, &learned, now).is_some() {
                    continue;
                }
                memory.models.insert(model.clone(), learned.clone());
            }
        }
        memory
    }
}

impl State {
    /// What this limiter learned about the provider's limit, for the next run: the buckets
    /// the headers described; else, when 429s taught it a pace, a request bucket refilling at
    /// that pace and as large as the burst the provider allowed before its first 429 (what
    /// the early requests' answers show beyond the pace, a tenth off); else the buckets it
    /// was given from memory and never refused under (from 429s alone: a tenth larger, so a
    /// raised limit is found again). `None` when it learned nothing.
    pub(super) fn learned(&self, learned_at: u64) -> Option<LearnedLimit> {
        let observed: BTreeMap<LimitKind, LearnedBucket> = self
            .buckets
            .iter()
            .filter_map(|(&kind, b)| {
                b.rate().map(|per_second| {
                    let grow = if b.remembered
                        && self.remembered_from_refusals
                        && !self.refused_under_memory
                    {
                        1.1
                    } else {
                        1.0
                    };
                    (
                        kind,
                        LearnedBucket {
                            limit: b.limit,
                            per_second: per_second * grow,
                        },
                    )
                })
            })
            .collect();
        let from_refusals =
            self.remembered_from_refusals && self.buckets.values().all(|b| b.remembered);
        if !observed.is_empty() {
            return Some(LearnedLimit {
                learned_at,
                buckets: observed,
                from_refusals,
                shared_with: Vec::new(),
            });
        }
        let pace = self.pace?;
        let (first, throttled) = (self.first_sent?, self.first_throttle?);
        let before = throttled.saturating_duration_since(first).as_secs_f64();
        let burst = (0.9 * (f64::from(self.admitted_early) - pace.rate * before)).max(1.0);
        // The rate the provider admitted while it limited, when there is enough to tell; the
        // pace oscillates around it (additive increase, multiplicative decrease), so the
        // larger of the two, a twentieth off, and clean runs raise it again.
        let achieved = self.last_admitted.and_then(|last| {
            let span = last.saturating_duration_since(throttled).as_secs_f64();
            (span >= 0.5 && self.admitted_after >= 8).then(|| f64::from(self.admitted_after) / span)
        });
        let pace = Pace {
            rate: 0.95 * pace.rate.max(achieved.unwrap_or(0.0)),
            ..pace
        };
        Some(LearnedLimit {
            learned_at,
            buckets: [(
                LimitKind::Requests,
                LearnedBucket {
                    limit: burst,
                    per_second: pace.rate,
                },
            )]
            .into_iter()
            .collect(),
            from_refusals: true,
            shared_with: Vec::new(),
        })
    }

    /// A 429 while a limit remembered from an earlier run paced the requests: it is not the
    /// provider's now. Learned from headers, it is dropped (the next answer's headers say what
    /// is); learned from 429s, its request bucket is emptied and slowed like a learned pace
    /// (15 % per congestion event, and no faster than the `retry-after` says), and the other
    /// buckets dropped.
    pub(super) fn refused_under_memory(
        &mut self,
        model: &str,
        retry_after: Option<Duration>,
        ticket: &Ticket,
        now: Instant,
    ) {
        let fresh = self.last_decrease.is_none_or(|seq| ticket.seq > seq);
        self.refused_under_memory = true;
        if !self.remembered_from_refusals {
            self.buckets.retain(|_, b| !b.remembered);
            tracing::info!(
                model,
                "rate limit: refused under the limit remembered from an earlier run; learning it again"
            );
            return;
        }
        self.buckets
            .retain(|&kind, b| !b.remembered || kind == LimitKind::Requests);
        if let Some(bucket) = self.buckets.get_mut(&LimitKind::Requests)
            && let Some(rate) = bucket.rate()
        {
            let mut slower = if fresh { 0.85 * rate } else { rate };
            if let Some(hint) = retry_after.filter(|h| !h.is_zero() && *h < Duration::from_secs(1))
            {
                slower = slower.min(0.9 / hint.as_secs_f64());
            }
            bucket.window = Some(bucket.limit / slower.max(0.05));
            bucket.level = 0.0;
            bucket.at = now;
            tracing::debug!(
                model,
                requests_per_second = slower,
                "rate limit: refused under the remembered limit; slowing it"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(at: u64, limit: f64) -> LearnedLimit {
        LearnedLimit {
            learned_at: at,
            buckets: [(
                LimitKind::Requests,
                LearnedBucket {
                    limit,
                    per_second: 10.0,
                },
            )]
            .into_iter()
            .collect(),
            from_refusals: false,
            shared_with: Vec::new(),
        }
    }

    #[test]
    fn old_insane_and_other_versions_are_forgotten() {
        let now = 1_000_000_000;
        let memory = LimitMemory {
            version: LIMIT_MEMORY_VERSION,
            models: [
                ("openai/fresh".to_owned(), learned(now - 3600, 20.0)),
                ("openai/old".to_owned(), learned(now - 8 * 24 * 3600, 20.0)),
                ("openai/nan".to_owned(), learned(now, f64::NAN)),
                ("openai/zero".to_owned(), learned(now, 0.0)),
            ]
            .into_iter()
            .collect(),
        };
        let (kept, dropped) = memory.clone().current(now);
        assert_eq!(kept.models.keys().collect::<Vec<_>>(), ["openai/fresh"]);
        // The damaged entries are named; the one that aged out is not news.
        assert_eq!(dropped.len(), 2, "{dropped:?}");
        assert!(dropped[0].starts_with("`openai/nan`: its requests bucket holds NaN"));
        assert!(dropped[1].starts_with("`openai/zero`: its requests bucket holds 0"));
        let other = LimitMemory {
            version: 99,
            ..memory
        };
        let (kept, dropped) = other.current(now);
        assert!(kept.models.is_empty());
        assert_eq!(dropped, ["version 99 (this assay reads version 1)"]);
    }

    fn bucket(limit: f64, per_second: f64) -> LearnedLimit {
        let mut l = learned(1_000, limit);
        l.buckets.get_mut(&LimitKind::Requests).unwrap().per_second = per_second;
        l
    }

    /// Issue 42: every value read is bounded; an entry out of bounds is dropped with its reason,
    /// the others kept.
    #[test]
    fn every_value_read_is_bounded() {
        let now = 1_000;
        let check = |model: &str, l: LearnedLimit| -> Option<String> {
            let memory = LimitMemory {
                version: LIMIT_MEMORY_VERSION,
                models: [(model.to_owned(), l)].into_iter().collect(),
            };
            let (kept, dropped) = memory.current(now);
            assert_eq!(kept.models.is_empty(), !dropped.is_empty());
            dropped.into_iter().next()
        };
        // In bounds: a per-minute bucket, a one-request pace, the edges.
        assert_eq!(check("openai/a", bucket(500.0, 500.0 / 60.0)), None);
        assert_eq!(check("openai/a", bucket(1.0, 0.5)), None);
        assert_eq!(check("openai/a", bucket(600.0 * MAX_RATE, MAX_RATE)), None);
        assert_eq!(check("openai/a", bucket(60.0, 0.1)), None, "600 s whole");
        let mut skewed = bucket(20.0, 10.0);
        skewed.learned_at = now + MAX_SKEW;
        assert_eq!(check("openai/a", skewed), None, "within the clock skew");

        // A rate of one a million seconds held every call past its bound.
        let why = check("openai/a", bucket(20.0, 1e-6)).unwrap();
        assert!(why.contains("more than 600 s"), "{why}");
        for (l, expect) in [
            (bucket(20.0, 0.0), "refills 0 a second"),
            (bucket(20.0, -1.0), "refills -1 a second"),
            (bucket(20.0, f64::INFINITY), "refills inf a second"),
            (bucket(20.0, 2e9), "at most 1e9"),
            (bucket(2e12, 1e9), "holds 2000000000000"),
            (bucket(0.5, 1.0), "holds 0.5"),
            (bucket(61.0, 0.1), "610 s to refill"),
        ] {
            let why = check("openai/a", l).unwrap();
            assert!(why.contains(expect), "{why} lacks {expect}");
        }
        // A learned_at in the far future would never age out.
        let mut future = bucket(20.0, 10.0);
        future.learned_at = now + MAX_SKEW + 1;
        let why = check("openai/a", future).unwrap();
        assert!(why.contains("301 s in the future"), "{why}");
        let mut none = bucket(20.0, 10.0);
        none.buckets.clear();
        assert!(check("openai/a", none).unwrap().contains("no bucket"));
        // Shared groups must name the model, as vendor/model names, and not too many.
        let shared = |names: Vec<String>| {
            let mut l = bucket(20.0, 10.0);
            l.shared_with = names;
            check("openai/a", l)
        };
        assert_eq!(shared(vec!["openai/a".into(), "openai/b".into()]), None);
        assert!(
            shared(vec!["openai/b".into(), "openai/c".into()])
                .unwrap()
                .contains("does not name the model itself")
        );
        assert!(
            shared(vec!["openai/a".into(), "nonsense".into()])
                .unwrap()
                .contains("`nonsense`, not a vendor/model")
        );
        let many: Vec<String> = (0..=MAX_SHARED).map(|i| format!("openai/m{i}")).collect();
        let mut many_with_a = many.clone();
        many_with_a[0] = "openai/a".into();
        assert!(shared(many_with_a).unwrap().contains("at most 64"));
    }

    #[test]
    fn one_bad_entry_drops_only_itself() {
        let now = 1_000;
        let memory = LimitMemory {
            version: LIMIT_MEMORY_VERSION,
            models: [
                ("openai/good".to_owned(), bucket(20.0, 10.0)),
                ("openai/slow".to_owned(), bucket(20.0, 1e-6)),
            ]
            .into_iter()
            .collect(),
        };
        let (kept, dropped) = memory.current(now);
        assert_eq!(kept.models.keys().collect::<Vec<_>>(), ["openai/good"]);
        assert_eq!(dropped.len(), 1);
        assert!(dropped[0].starts_with("`openai/slow`: its requests bucket refills 0.000001"));
    }

    #[test]
    fn reads_what_it_writes_and_lists_shared_groups_once() {
        let mut a = learned(5, 60.0);
        a.shared_with = vec!["openai/b".into(), "openai/a".into()];
        let mut b = a.clone();
        b.shared_with = vec!["openai/a".into(), "openai/b".into()];
        let memory = LimitMemory {
            version: LIMIT_MEMORY_VERSION,
            models: [("openai/a".to_owned(), a), ("openai/b".to_owned(), b)]
                .into_iter()
                .collect(),
        };
        let text = serde_json::to_string(&memory).unwrap();
        assert!(
            text.contains(r#""requests":{"limit":60.0,"per_second":10.0}"#),
            "{text}"
        );
        let back: LimitMemory = serde_json::from_str(&text).unwrap();
        assert_eq!(back, memory);
        assert_eq!(
            memory.shared_groups(),
            [vec!["openai/a".to_owned(), "openai/b".to_owned()]]
        );
    }
}
