//! The client's one error type. Messages are lowercase, name the offending value in backticks,
//! and never contain a secret, an API key or a token. A message about settings or arguments
//! keeps their names apart ([`Wording`]), for each surface to say in its own words.

pub use crate::wording::Wording;

/// Anything that can go wrong in the client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A setting is missing or invalid.
    #[error("{0}")]
    Config(Wording),
    /// An argument of a call is invalid (nothing was sent).
    #[error("{0}")]
    Argument(Wording),
    /// Credentials refused: token creation failed, or 401/403 on a data call after a renewal.
    #[error("{message}")]
    Auth {
        /// What was refused and why.
        message: String,
        /// HTTP status, when there was an answer.
        status: Option<u16>,
    },
    /// The service answered with an error status (after the retries it deserved).
    #[error("{message}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Response body, truncated.
        body: String,
        /// Request URL (no secrets: those travel in headers).
        url: String,
        /// Human summary.
        message: String,
    },
    /// No usable answer: connection refused or closed, TLS failure.
    #[error("{0}")]
    Transport(String),
    /// The client was closed (`close()`): nothing more is sent.
    #[error("the client is closed")]
    Closed,
    /// The request took longer than the configured timeout.
    #[error("{0}")]
    Timeout(String),
    /// The answer could not be understood.
    #[error("cannot decode the answer of `{url}`: {detail}")]
    Decode {
        /// Request URL.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A local file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// A record does not fit its typed schema (a value of the wrong type).
    #[error("unexpected data from the service: {0}")]
    Data(String),
    /// A list reached the offset ceiling and cannot be split.
    #[error("`{path}` holds 10,000 records or more, which the service cannot page past (offset ceiling); narrow the query")]
    Ceiling {
        /// The list's path.
        path: String,
    },
    /// The daily request quota is used up (counted by the ledger of every client of the
    /// machine), or the service asked for a wait longer than `max_wait`: nothing was sent.
    #[error("{message}")]
    Quota {
        /// What happened and when the quota comes back.
        message: Wording,
        /// Requests counted today with this key.
        used: u64,
        /// Requests a day, when known.
        limit: Option<u64>,
        /// When requests are taken again (the service's clock, epoch ms).
        resets_at_ms: i64,
    },
    /// Records cannot be published as they are given (columns that do not fit the webhook's
    /// models): nothing was sent.
    #[error("{message}")]
    Validation {
        /// What is wrong, with the first problems.
        message: String,
        /// Every problem found.
        problems: Vec<crate::webhook::Problem>,
    },
    /// More events share one millisecond than the service can page.
    #[error("more than 10,000 events start at `{timestamp}`: the range cannot be split below one millisecond")]
    DenseWindow {
        /// The crowded millisecond, ISO 8601.
        timestamp: String,
    },
}

/// Result with the client's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The same error with every secret this process knows removed from its texts (servers
    /// and proxies echo requests, headers included, in their error bodies).
    #[must_use]
    pub fn scrubbed(self) -> Error {
        let s = |t: String| match super::redact::scrub(&t) {
            std::borrow::Cow::Borrowed(_) => t,
            std::borrow::Cow::Owned(o) => o,
        };
        match self {
            Error::Config(m) => Error::Config(m.map_text(s)),
            Error::Argument(m) => Error::Argument(m.map_text(s)),
            Error::Auth { message, status } => Error::Auth {
                message: s(message),
                status,
            },
            Error::Status {
                status,
                body,
                url,
                message,
            } => Error::Status {
                status,
                body: s(body),
                url: s(url),
                message: s(message),
            },
            Error::Transport(m) => Error::Transport(s(m)),
            Error::Timeout(m) => Error::Timeout(s(m)),
            Error::Closed => Error::Closed,
            Error::Decode { url, detail } => Error::Decode {
                url: s(url),
                detail: s(detail),
            },
            Error::Io(m) => Error::Io(s(m)),
            Error::Data(m) => Error::Data(s(m)),
            Error::Ceiling { path } => Error::Ceiling { path: s(path) },
            Error::DenseWindow { timestamp } => Error::DenseWindow { timestamp },
            Error::Validation { message, problems } => Error::Validation {
                message: s(message),
                problems,
            },
            Error::Quota {
                message,
                used,
                limit,
                resets_at_ms,
            } => Error::Quota {
                message: message.map_text(s),
                used,
                limit,
                resets_at_ms,
            },
        }
    }

    /// A [`Error::Config`] of `words` (text, or [`Wording`] naming settings).
    pub fn config(words: impl Into<Wording>) -> Error {
        Error::Config(words.into())
    }

    /// An [`Error::Argument`] of `words` (text, or [`Wording`] naming arguments).
    pub fn argument(words: impl Into<Wording>) -> Error {
        Error::Argument(words.into())
    }

    /// True for errors worth another attempt (the request may succeed if sent again).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Transport(_) | Error::Timeout(_) => true,
            Error::Status { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504),
            _ => false,
        }
    }
}
