//! Errors of the dashboard client, classified so the controller can decide: a schema error will not
//! fix itself (surface it, don't hammer Ray), while timeouts, refused connections and 5xx are retried
//! with backoff.

use std::time::Duration;

/// How much of an error body is kept: Ray's 500 bodies are whole Python tracebacks.
pub const MAX_BODY_IN_ERROR: usize = 512;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DashboardError {
    /// The Serve config could not be turned into a request body (bad YAML, wrong shape, bad capacity).
    #[error("invalid Serve config: {0}")]
    InvalidConfig(String),
    /// The endpoint cannot be used to build a request (bad URL, token not valid in a header).
    #[error("invalid Ray dashboard endpoint: {0}")]
    InvalidEndpoint(String),
    /// Ray's schema validation rejected the config (HTTP 400); `message` is Ray's text.
    #[error("Ray rejected the Serve config (HTTP 400): {message}")]
    Rejected { message: String },
    /// Token auth failed (401 missing token, 403 wrong token).
    #[error("Ray dashboard refused authentication (HTTP {status}): {body}")]
    Unauthorized { status: u16, body: String },
    /// Any other 4xx.
    #[error("Ray dashboard answered HTTP {status}: {body}")]
    Client { status: u16, body: String },
    /// 5xx: `body` is shortened, Ray sends full tracebacks.
    #[error("Ray dashboard server error (HTTP {status}): {body}")]
    Server { status: u16, body: String },
    /// No answer within the request timeout.
    #[error("Ray dashboard {url} did not answer within {after:?}")]
    Timeout { url: String, after: Duration },
    /// Connection refused, no route, DNS failure or connect timeout: the head is not up (yet).
    #[error("Ray dashboard {url} is unreachable: {reason}")]
    Unreachable { url: String, reason: String },
    /// The connection broke after it was made.
    #[error("transport error talking to Ray dashboard {url}: {reason}")]
    Transport { url: String, reason: String },
    /// 2xx with a body that is not the expected JSON.
    #[error("could not decode Ray dashboard response: {reason}; body starts: {body}")]
    Decode { reason: String, body: String },
}

impl DashboardError {
    /// Low-cardinality label for metrics and events.
    pub fn category(&self) -> &'static str {
        match self {
            Self::InvalidConfig(_) => "invalid_config",
            Self::InvalidEndpoint(_) => "invalid_endpoint",
            Self::Rejected { .. } => "rejected",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Client { .. } => "client_error",
            Self::Server { .. } => "server_error",
            Self::Timeout { .. } => "timeout",
            Self::Unreachable { .. } => "unreachable",
            Self::Transport { .. } => "transport",
            Self::Decode { .. } => "decode",
        }
    }

    /// Whether retrying the same request later can succeed without a user changing anything.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Server { .. } | Self::Timeout { .. } | Self::Unreachable { .. } | Self::Transport { .. }
        )
    }

    /// Maps a non-2xx answer to the right variant.
    pub fn from_status(status: u16, body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        match status {
            400 => Self::Rejected {
                message: text.trim().to_owned(),
            },
            401 | 403 => Self::Unauthorized {
                status,
                body: shorten(&text),
            },
            500..=599 => Self::Server {
                status,
                body: shorten(&text),
            },
            _ => Self::Client {
                status,
                body: shorten(&text),
            },
        }
    }
}

/// Keeps the start and the end of a long body: the end of a traceback names the error.
pub fn shorten(text: &str) -> String {
    let text = text.trim();
    if text.len() <= MAX_BODY_IN_ERROR {
        return text.to_owned();
    }
    let half = MAX_BODY_IN_ERROR / 2;
    let head_end = floor_char_boundary(text, half);
    let tail_start = floor_char_boundary(text, text.len() - half);
    format!("{} … {}", &text[..head_end], &text[tail_start..])
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classification() {
        let cases: &[(u16, &str, &str, bool)] = &[
            (400, "1 validation error for ServeDeploySchema", "rejected", false),
            (
                401,
                "Unauthorized: Missing authentication token",
                "unauthorized",
                false,
            ),
            (403, "Forbidden", "unauthorized", false),
            (404, "Not Found", "client_error", false),
            (500, "Traceback ... JSONDecodeError", "server_error", true),
            (503, "", "server_error", true),
        ];
        for (status, body, category, transient) in cases {
            let e = DashboardError::from_status(*status, body.as_bytes());
            assert_eq!(e.category(), *category, "status {status}");
            assert_eq!(e.is_transient(), *transient, "status {status}");
        }
    }

    #[test]
    fn rejected_keeps_rays_message() {
        let e = DashboardError::from_status(400, b"1 validation error\napplications.0.import_path\n");
        assert_eq!(
            e,
            DashboardError::Rejected {
                message: "1 validation error\napplications.0.import_path".into()
            }
        );
    }

    #[test]
    fn long_bodies_keep_both_ends() {
        let body = format!("Traceback{}ValueError: boom", "x".repeat(5000));
        let s = shorten(&body);
        assert!(s.len() < MAX_BODY_IN_ERROR + 10);
        assert!(s.starts_with("Traceback"));
        assert!(s.ends_with("ValueError: boom"));
        // Multi-byte characters around the cut must not panic.
        let s = shorten(&"é".repeat(2000));
        assert!(s.contains('…'));
    }
}
