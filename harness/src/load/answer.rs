//! How one request ended ([`Answer`]), whichever way it was sent (`target.rs`
//! for a unary request, `stream.rs` for a stream), and a failure's reason in
//! words: no answer in time, an error body, a connection that failed.

use std::time::{Duration, Instant};

use super::front::FrontError;
use super::{MAX_REASON_BYTES, Outcome, StreamFacts};

/// How one request ended, and when its answer's last byte arrived (before
/// the answer was parsed or checked, so checking costs no latency).
#[derive(Debug, Clone)]
pub struct Answer {
    pub done: Instant,
    pub outcome: Outcome,
    /// The caller's `Server-Timing: downstream;dur=` in microseconds.
    pub downstream_us: Option<u64>,
    /// Whether `done` is the kernel's receive stamp of the last byte (the
    /// front client's answers) rather than the clock after the read.
    pub kernel_stamped: bool,
    /// Why it failed, as the failing side said it (`None` for a success).
    pub reason: Option<String>,
    /// What a stream delivered (streaming arms only).
    pub stream: Option<Box<StreamFacts>>,
}

impl Answer {
    /// A failure, stamped now.
    pub(super) fn clocked(outcome: Outcome, reason: String) -> Self {
        Answer {
            done: Instant::now(),
            outcome,
            downstream_us: None,
            kernel_stamped: false,
            reason: Some(reason),
            stream: None,
        }
    }
}

pub(super) fn no_answer_within(timeout: Duration) -> String {
    format!("no answer within {} (--timeout)", humantime::format_duration(timeout))
}

/// What an error answer's body says: the `error` of the JSON every tier
/// answers with, or the body's first bytes as text.
pub(super) fn error_body_reason(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: String,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => b.error,
        Err(_) if body.is_empty() => "(an empty body)".to_owned(),
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(MAX_REASON_BYTES)]).into_owned(),
    }
}

pub(super) fn classify(e: &FrontError) -> Outcome {
    match e {
        FrontError::Connect(..) => Outcome::Connect,
        FrontError::Http(_)
        | FrontError::Closed
        | FrontError::TooLarge
        | FrontError::Io(_)
        | FrontError::Protocol(_) => Outcome::BadResponse,
        FrontError::Full { .. } => Outcome::AnswersFull,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_answer_gives_its_reason() {
        assert_eq!(error_body_reason(br#"{"error":"downstream x answered Unknown"}"#), "downstream x answered Unknown");
        assert_eq!(error_body_reason(b"upstream broke"), "upstream broke");
        assert_eq!(error_body_reason(b""), "(an empty body)");
        let long = vec![b'x'; 2 * MAX_REASON_BYTES];
        assert_eq!(error_body_reason(&long).len(), MAX_REASON_BYTES);
    }

    #[test]
    fn an_answer_the_harness_cut_is_its_own_class() {
        let full = classify(&FrontError::Full { held: 10, max: 8 });
        assert_eq!((full, full.error_class().as_deref()), (Outcome::AnswersFull, Some("answers_full")));
        assert_eq!(classify(&FrontError::TooLarge), Outcome::BadResponse);
    }
}
