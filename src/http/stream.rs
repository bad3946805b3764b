//! Streamed answers: [`send_streamed`], the retry loop of [`super::send_checked`]
//! for a body read as it arrives, through a [`StreamDecoder`].
use super::{open, read_failed, too_large, CallPolicy, HttpError, HttpResponse};
use backon::{ExponentialBuilder, Retryable};

/// Turns a streamed 2xx body (Server-Sent Events) into the body a non-streamed call
/// would have had, handing text deltas to a listener on the way ([`crate::tokens`]).
/// One decoder per attempt.
pub trait StreamDecoder {
    /// The next bytes of the body (chunks may split lines and characters anywhere).
    ///
    /// # Errors
    /// What ends the attempt: an error event, a body that is not the stream asked for.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), HttpError>;
    /// The body ended: the complete equivalent JSON body.
    ///
    /// # Errors
    /// A stream that ended before its terminator (transient: body cut short).
    fn finish(&mut self) -> Result<String, HttpError>;
    /// Whether text was already delivered to a listener: a failure of the attempt is
    /// then not retried (tokens shown cannot be taken back).
    fn delivered(&self) -> bool;
}

/// [`super::send_checked`] for a streamed answer: every attempt gets a fresh decoder from
/// `decoder`, which reads the 2xx body as it arrives (bounded by the policy's body
/// limit, in the same per-attempt timeout), and `check` sees the equivalent complete
/// body the decoder built (status and content type of the real response). Non-2xx
/// answers, redirects and connection failures are classified as by [`super::send`]. A
/// failure after text was delivered ([`StreamDecoder::delivered`]) is made
/// permanent: it is not retried.
///
/// # Errors
/// As [`super::send_checked`].
pub async fn send_streamed<F, D, M, C, T>(
    build: F,
    policy: &CallPolicy,
    decoder: M,
    check: C,
) -> Result<T, HttpError>
where
    F: Fn() -> reqwest::RequestBuilder,
    D: StreamDecoder,
    M: Fn() -> D,
    C: Fn(HttpResponse) -> Result<T, HttpError>,
{
    let attempts = std::sync::atomic::AtomicU32::new(0);
    let backoff = ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .with_max_times(policy.retries as usize)
        .with_jitter();
    let result = (|| async {
        let n = attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut d = decoder();
        let read = stream_attempt(build(), policy, &mut d).await;
        let checked = read.and_then(|mut r| {
            r.attempts = n;
            if !policy.secrets.is_empty() {
                r.body = policy.redact(&r.body);
            }
            check(r)
        });
        match checked {
            Err(HttpError::Transient { message, .. }) if d.delivered() => {
                Err(HttpError::Permanent {
                    status: None,
                    message: format!(
                        "{message} (the stream broke off after part of the answer was delivered; not retried)"
                    ),
                })
            }
            other => other,
        }
    })
    .retry(backoff)
    .when(HttpError::is_transient)
    .adjust(|e: &HttpError, d| d.map(|d| e.retry_after().unwrap_or(d)))
    .notify(|e: &HttpError, d| {
        let done = attempts.load(std::sync::atomic::Ordering::Relaxed);
        crate::retries::report(
            done + 1,
            policy.retries.saturating_add(1),
            &e.to_string(),
            d,
        );
    })
    .await;
    let n = attempts.load(std::sync::atomic::Ordering::Relaxed);
    result.map_err(|e| e.with_attempts(n))
}

/// One streamed attempt: the response opened as by [`send`], its body fed to `d`.
async fn stream_attempt<D: StreamDecoder>(
    req: reqwest::RequestBuilder,
    policy: &CallPolicy,
    d: &mut D,
) -> Result<HttpResponse, HttpError> {
    let (mut resp, content_type) = open(req, policy).await?;
    let status = resp.status().as_u16();
    let mut read = 0usize;
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                read += c.len();
                if read > policy.max_body_bytes {
                    return Err(too_large(status, policy));
                }
                d.feed(&c)?;
            }
            Ok(None) => break,
            Err(e) => return Err(read_failed(status, &e, policy)),
        }
    }
    Ok(HttpResponse {
        status,
        body: d.finish()?,
        content_type,
        attempts: 1,
    })
}
