//! Per-model limits: `concurrency` (most calls in flight) and `requests_per_minute`
//! (most calls started in any 60-second window), shared by every node and every
//! concurrent run of the process that uses the same model config — `ragloop eval`
//! running many questions at once stays within them.
//!
//! Two models share limits when they have the same name in the spec, provider,
//! model name, `base_url` and limit values ([`shared`]). A call holds its
//! concurrency slot until it ends, its retries (and their backoff) included, so a
//! server that answered 429 is not hit by the other calls meanwhile. A retry does
//! not count again against `requests_per_minute`.
use super::{LlmRequest, LlmResponse, Provider, ProviderError};
use crate::spec::types::ModelSpec;
use futures::future::BoxFuture;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// At most `limit` calls started in any `window` (a sliding window of start times).
#[derive(Debug)]
pub struct RateLimiter {
    limit: usize,
    window: Duration,
    starts: Mutex<VecDeque<Instant>>,
}

impl RateLimiter {
    /// `per_minute` calls per 60 s.
    pub fn per_minute(per_minute: u32) -> RateLimiter {
        RateLimiter::new(per_minute, Duration::from_secs(60))
    }

    /// `limit` calls (at least 1) per `window`.
    pub fn new(limit: u32, window: Duration) -> RateLimiter {
        RateLimiter {
            limit: limit.max(1) as usize,
            window,
            starts: Mutex::new(VecDeque::new()),
        }
    }

    /// Books the next start at or after `now` and returns it: `now` when fewer than
    /// `limit` calls started in the window before it, else the moment the oldest of
    /// the last `limit` starts leaves the window.
    pub fn reserve(&self, now: Instant) -> Instant {
        let Ok(mut starts) = self.starts.lock() else {
            return now;
        };
        while starts.len() > self.limit {
            starts.pop_front();
        }
        let at = if starts.len() < self.limit {
            now
        } else {
            let oldest = starts.pop_front().unwrap_or(now);
            (oldest + self.window).max(now)
        };
        // Starts are booked in order, so the deque stays sorted.
        let at = starts.back().map_or(at, |last| at.max(*last));
        starts.push_back(at);
        at
    }

    /// Waits until a call may start.
    pub async fn acquire(&self) {
        let now = Instant::now();
        let at = self.reserve(now);
        if at > now {
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        }
    }
}

/// The limits of one model config.
#[derive(Debug, Default)]
pub struct ModelLimits {
    /// Slots for calls in flight (`concurrency`).
    pub slots: Option<Arc<Semaphore>>,
    /// Starts per minute (`requests_per_minute`).
    pub rate: Option<RateLimiter>,
}

impl ModelLimits {
    /// The limits a model config asks for (`None` when it sets neither).
    pub fn of(model: &ModelSpec) -> Option<ModelLimits> {
        let slots = model
            .concurrency
            .filter(|c| *c >= 1)
            .map(|c| Arc::new(Semaphore::new(c as usize)));
        let rate = model
            .requests_per_minute
            .filter(|r| *r >= 1)
            .map(RateLimiter::per_minute);
        (slots.is_some() || rate.is_some()).then_some(ModelLimits { slots, rate })
    }
}

/// The process-wide limits of model `name` (see the module docs for when two
/// models share them); `None` when the config sets no limit.
pub fn shared(name: &str, model: &ModelSpec) -> Option<Arc<ModelLimits>> {
    static ALL: OnceLock<Mutex<HashMap<String, Arc<ModelLimits>>>> = OnceLock::new();
    model.concurrency.or(model.requests_per_minute)?;
    let key = format!(
        "{name}\u{0}{}\u{0}{}\u{0}{}\u{0}{:?}\u{0}{:?}",
        model.provider.as_str(),
        model.model.as_deref().unwrap_or(""),
        model.base_url.as_deref().unwrap_or(""),
        model.concurrency,
        model.requests_per_minute
    );
    let mut all = ALL.get_or_init(Mutex::default).lock().ok()?;
    if let Some(l) = all.get(&key) {
        return Some(Arc::clone(l));
    }
    let l = Arc::new(ModelLimits::of(model)?);
    all.insert(key, Arc::clone(&l));
    Some(l)
}

/// A provider whose calls wait for a concurrency slot and a rate-limit start.
pub struct Limited {
    inner: Arc<dyn Provider>,
    limits: Arc<ModelLimits>,
}

impl Limited {
    /// `inner` under `limits`.
    pub fn new(inner: Arc<dyn Provider>, limits: Arc<ModelLimits>) -> Limited {
        Limited { inner, limits }
    }
}

impl Provider for Limited {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn retries_itself(&self) -> bool {
        self.inner.retries_itself()
    }

    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        // Created now (call order, see `retry::Retrying`), polled once admitted.
        let fut = self.inner.call(req);
        Box::pin(async move {
            let t = Instant::now();
            let _slot = match &self.limits.slots {
                Some(s) => Some(s.acquire().await.map_err(|_| {
                    ProviderError::Permanent("the model's concurrency limiter is closed".into())
                })?),
                None => None,
            };
            if let Some(r) = &self.limits.rate {
                r.acquire().await;
            }
            let waited = t.elapsed().as_secs_f64() * 1000.0;
            fut.await.map(|mut r| {
                r.limit_wait_ms += waited;
                r
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_window() {
        let r = RateLimiter::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(r.reserve(t0), t0);
        assert_eq!(
            r.reserve(t0 + Duration::from_secs(1)),
            t0 + Duration::from_secs(1)
        );
        // Third start waits for the first to leave the window.
        assert_eq!(
            r.reserve(t0 + Duration::from_secs(2)),
            t0 + Duration::from_secs(60)
        );
        // Fourth waits for the second.
        assert_eq!(
            r.reserve(t0 + Duration::from_secs(3)),
            t0 + Duration::from_secs(61)
        );
        // Long after, no wait.
        let later = t0 + Duration::from_secs(500);
        assert_eq!(r.reserve(later), later);
    }

    struct Instant0;
    impl Provider for Instant0 {
        fn name(&self) -> &'static str {
            "test"
        }
        fn call<'a>(
            &'a self,
            _req: &'a LlmRequest,
        ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
            Box::pin(async { Ok(LlmResponse::default()) })
        }
    }

    #[test]
    fn the_rate_limit_wait_is_reported_apart() {
        let limits = Arc::new(ModelLimits {
            slots: None,
            rate: Some(RateLimiter::new(1, Duration::from_millis(200))),
        });
        let p = Limited::new(Arc::new(Instant0), limits);
        let m: ModelSpec =
            serde_json::from_value(serde_json::json!({"provider": "offline"})).unwrap();
        let req = LlmRequest {
            node: "n".into(),
            item: None,
            model_name: "m".into(),
            model: Arc::new(m),
            task: None,
            inputs: Default::default(),
            messages: Vec::new(),
            schema: None,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let first = p.call(&req).await.unwrap();
            assert!(first.limit_wait_ms < 100.0, "{}", first.limit_wait_ms);
            let second = p.call(&req).await.unwrap();
            assert!(second.limit_wait_ms >= 150.0, "{}", second.limit_wait_ms);
        });
    }

    #[test]
    fn no_limits_no_wrapper() {
        let m: ModelSpec =
            serde_json::from_value(serde_json::json!({"provider": "offline"})).unwrap();
        assert!(ModelLimits::of(&m).is_none());
        assert!(shared("x", &m).is_none());
    }
}
