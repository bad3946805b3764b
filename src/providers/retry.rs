//! Retries and per-attempt timeouts for providers that do not make them themselves
//! (`offline`, `scripted`, providers handed in by a library user): the same rule as
//! the network providers' [`crate::http::send`], so every model follows its
//! `retries` and `timeout_secs` the same way.
use super::{LlmRequest, LlmResponse, Provider, ProviderError};
use backon::{BackoffBuilder, ExponentialBuilder};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// Wraps a provider: each attempt is bounded by `timeout` (a late attempt fails as a
/// transient "timed out" error), and transient failures are retried `retries`
/// times with jittered exponential backoff (0.1 s doubling, at most 8 s).
/// Permanent failures and invalid output are returned at once.
pub struct Retrying {
    inner: Arc<dyn Provider>,
    retries: u32,
    timeout: Option<Duration>,
}

impl Retrying {
    /// `inner` with `retries` retries and an optional per-attempt `timeout`.
    pub fn new(inner: Arc<dyn Provider>, retries: u32, timeout: Option<Duration>) -> Retrying {
        Retrying {
            inner,
            retries,
            timeout,
        }
    }

    async fn attempt(
        &self,
        fut: BoxFuture<'_, Result<LlmResponse, ProviderError>>,
    ) -> Result<LlmResponse, ProviderError> {
        match self.timeout {
            Some(t) => match tokio::time::timeout(t, fut).await {
                Ok(r) => r,
                Err(_) => Err(ProviderError::Transient(format!(
                    "no answer within {} s (timeout)",
                    t.as_secs_f64()
                ))),
            },
            None => fut.await,
        }
    }
}

impl Provider for Retrying {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn retries_itself(&self) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        // The first attempt is created now: providers that pick their answer when
        // called (scripted) keep their call order.
        let first = self.inner.call(req);
        Box::pin(async move {
            let first = self.attempt(first).await;
            if self.retries == 0 || !matches!(first, Err(ProviderError::Transient(_))) {
                return first;
            }
            let backoff = ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(8))
                .with_max_times(self.retries as usize)
                .with_jitter();
            let mut delays = backoff.build();
            let mut last = first;
            let mut attempts = 1u32;
            while let Err(ProviderError::Transient(cause)) = &last {
                let Some(d) = delays.next() else { break };
                // Reported as it is about to happen (see `crate::retries`).
                crate::retries::report(attempts + 1, self.retries.saturating_add(1), cause, d);
                tokio::time::sleep(d).await;
                attempts += 1;
                last = self.attempt(self.inner.call(req)).await;
            }
            match last {
                Err(ProviderError::Transient(m)) if attempts > 1 => Err(ProviderError::Transient(
                    format!("{m} (gave up after {attempts} attempts)"),
                )),
                other => other,
            }
        })
    }
}
