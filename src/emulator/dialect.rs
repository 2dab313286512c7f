//! Dialects: the answers API.md leaves "not shown" (the webhook's answer, error bodies,
//! `Retry-After`, the token's body, expired tokens), each spoken in one of several plausible
//! forms named after what it mimics. The defaults are the emulator's own first guesses.

use serde_json::{json, Map, Value};

/// Declares a setting: an enum whose first variant is the default, with the names it is set by.
macro_rules! setting {
    (
        $(#[$meta:meta])* $name:ident {
            $(#[$first_meta:meta])* $first:ident = $first_text:literal,
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub enum $name {
            $(#[$first_meta])*
            #[default]
            $first,
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// The names of the values, the default first.
            pub const NAMES: &'static [&'static str] = &[$first_text, $($text),+];

            /// The value named `name`, if there is one.
            pub fn parse(name: &str) -> Option<Self> {
                match name {
                    $first_text => Some($name::$first),
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The name of this value.
            pub fn name(self) -> &'static str {
                match self {
                    $name::$first => $first_text,
                    $($name::$variant => $text,)+
                }
            }
        }
    };
}

setting! {
    /// The webhook's answer to a body whose records are all valid.
    WebhookAnswer {
        /// 200 `{"accepted": n}`.
        AcceptedCount = "accepted_count",
        /// 200 `{"status": "accepted", <the first record's key fields>, "upserted": false}`
        /// (`"transactionId"` of a retail record).
        StatusObject = "status_object",
        /// 200 `{}`.
        EmptyObject = "empty_object",
        /// 200 `{"status": "ok"}`.
        StatusOk = "status_ok",
        /// 200 `{"success": true}`.
        SuccessFlag = "success_flag",
        /// 200 `{"received": n}`.
        ReceivedCount = "received_count",
        /// 204 and no body.
        NoContent = "no_content",
        /// 200, `Content-Type: application/json` and an empty body.
        Empty200 = "empty_200",
        /// 202 `{"status": "queued"}`.
        Queued = "queued",
        /// 200 `text/plain` `OK`.
        PlainOk = "plain_ok",
        /// A captive portal or login proxy in front of the service: every webhook request is
        /// answered 200 with an HTML login page, and nothing is stored.
        ProxyHtml = "proxy_html",
    }
}

setting! {
    /// The webhook's 400 answer to a body holding invalid records.
    WebhookErrors {
        /// `{"error", "message", "errors": [{"index", "path", "message"}], "accepted"}`; the
        /// valid records are stored.
        Indexed = "indexed",
        /// `{"error": "validation_failed", "failed": [{<key fields>, "reason"}]}`, the record's
        /// upsert key (a record without one: `{"index", "reason"}`); the valid records are
        /// stored.
        ByTransactionId = "by_transaction_id",
        /// `{"error": "validation_error", "failures": [{"record", "field", "reason"}]}`; the
        /// valid records are stored.
        FailuresList = "failures_list",
        /// `{"message": "one or more records failed validation"}`, naming no record; the valid
        /// records are stored.
        MessageOnly = "message_only",
        /// As `Indexed`, but nothing of the body is stored and `accepted` is 0.
        AllOrNothing = "all_or_nothing",
    }
}

setting! {
    /// The shape of every error answer but the webhook's validation answer.
    ErrorBody {
        /// `{"error": code, "message": text}`.
        ErrorMessage = "error_message",
        /// `{"detail": text}`.
        Detail = "detail",
        /// `{"errors": [{"code": code, "message": text}]}`.
        ErrorsList = "errors_list",
        /// `{"error": code, "error_description": text}`.
        Oauth = "oauth",
        /// `text/plain`: the text.
        PlainText = "plain_text",
        /// `text/html`: a page whose title and heading are the status and its reason, and whose
        /// paragraph is the text.
        Html = "html",
        /// No body.
        Empty = "empty",
    }
}

setting! {
    /// The form of `Retry-After`.
    RetryAfter {
        /// Seconds.
        Seconds = "seconds",
        /// An HTTP date (IMF-fixdate) on the emulator's clock.
        HttpDate = "http_date",
        /// No `Retry-After` header at all.
        Absent = "absent",
    }
}

setting! {
    /// The token endpoint's success body.
    TokenAnswer {
        /// `{"access_token", "expires_in": <integer>, "token_type": "Bearer"}`.
        Standard = "standard",
        /// No `expires_in`.
        NoExpiresIn = "no_expires_in",
        /// `expires_in` as a string (`"14399"`).
        StringExpiresIn = "string_expires_in",
        /// `expires_in: 0`; the token still lives its real lifetime.
        ZeroExpiresIn = "zero_expires_in",
        /// No `token_type`.
        NoTokenType = "no_token_type",
    }
}

setting! {
    /// The answer to an expired, revoked or unknown bearer token (a missing one stays 401).
    ExpiredToken {
        /// 401, the error body saying why.
        Status401 = "401",
        /// 403, the error body saying why (`the access token has expired`...).
        Message403 = "403_message",
        /// 403, `WWW-Authenticate: Bearer error="invalid_token"`, the error body's text
        /// `forbidden`.
        WwwAuthenticate403 = "403_www_authenticate",
    }
}

/// How the emulator speaks where API.md says "not shown"; the default is how it always spoke.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dialect {
    /// The webhook's success answer.
    pub webhook_answer: WebhookAnswer,
    /// The webhook's answer to invalid records.
    pub webhook_errors: WebhookErrors,
    /// The shape of the other error answers.
    pub error_body: ErrorBody,
    /// The form of `Retry-After`.
    pub retry_after: RetryAfter,
    /// The token endpoint's success body.
    pub token_answer: TokenAnswer,
    /// The answer to an expired, revoked or unknown token.
    pub expired_token: ExpiredToken,
    /// Data requests a token serves before it is refused as expired (None: no such limit).
    pub token_requests: Option<u64>,
}

impl Dialect {
    /// Each setting chosen by name, with the names of its values (the default first);
    /// `token_requests`, a number, is not among them.
    pub const CHOICES: [(&'static str, &'static [&'static str]); 6] = [
        ("webhook_answer", WebhookAnswer::NAMES),
        ("webhook_errors", WebhookErrors::NAMES),
        ("error_body", ErrorBody::NAMES),
        ("retry_after", RetryAfter::NAMES),
        ("token_answer", TokenAnswer::NAMES),
        ("expired_token", ExpiredToken::NAMES),
    ];
}

/// A body an answer carries: its `Content-Type` (None: no body) and text.
pub type Rendered = (Option<&'static str>, String);

const JSON: Option<&str> = Some("application/json");

/// What the captive portal of [`WebhookAnswer::ProxyHtml`] answers.
pub const LOGIN_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\
<body><h1>Sign in to continue</h1><p>You must sign in before using this network.</p>\
<form method=\"post\" action=\"/login\"><input name=\"username\">\
<input name=\"password\" type=\"password\"><button type=\"submit\">Sign in</button></form>\
</body></html>\n";

impl WebhookAnswer {
    /// Status and body of the answer to `accepted` valid records, the first one's upsert key
    /// `first` (its fields and values).
    pub fn render(self, accepted: usize, first: &[(&str, String)]) -> (u16, Rendered) {
        let json = |status, v: Value| (status, (JSON, v.to_string()));
        match self {
            WebhookAnswer::AcceptedCount => json(200, json!({"accepted": accepted})),
            WebhookAnswer::StatusObject => {
                let mut answer = Map::new();
                answer.insert("status".into(), json!("accepted"));
                for (field, value) in first {
                    answer.insert((*field).into(), json!(value));
                }
                answer.insert("upserted".into(), json!(false));
                json(200, Value::Object(answer))
            }
            WebhookAnswer::EmptyObject => json(200, json!({})),
            WebhookAnswer::StatusOk => json(200, json!({"status": "ok"})),
            WebhookAnswer::SuccessFlag => json(200, json!({"success": true})),
            WebhookAnswer::ReceivedCount => json(200, json!({"received": accepted})),
            WebhookAnswer::NoContent => (204, (None, String::new())),
            WebhookAnswer::Empty200 => (200, (JSON, String::new())),
            WebhookAnswer::Queued => json(202, json!({"status": "queued"})),
            WebhookAnswer::PlainOk => (200, (Some("text/plain; charset=utf-8"), "OK".into())),
            WebhookAnswer::ProxyHtml => (
                200,
                (Some("text/html; charset=utf-8"), LOGIN_PAGE.to_string()),
            ),
        }
    }
}

/// One problem of one invalid webhook record.
#[derive(Debug, Clone)]
pub struct RecordProblem {
    /// The record's place in the body (0 for a single object).
    pub index: usize,
    /// The record's upsert key, its fields and their values, when it has one.
    pub key: Option<Vec<(&'static str, String)>>,
    /// The field at fault (empty for the record as a whole).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl WebhookErrors {
    /// Whether the valid records of a body that holds invalid ones are stored.
    pub fn stores_valid(self) -> bool {
        self != WebhookErrors::AllOrNothing
    }

    /// The 400 body naming `failures` (not empty), `accepted` records having been stored.
    pub fn body(self, failures: &[RecordProblem], accepted: usize) -> Value {
        match self {
            WebhookErrors::Indexed | WebhookErrors::AllOrNothing => {
                let summary: Vec<String> = failures
                    .iter()
                    .take(5)
                    .map(|f| format!("record {}: {}: {}", f.index, f.path, f.message))
                    .collect();
                let errors: Vec<Value> = failures
                    .iter()
                    .map(|f| json!({"index": f.index, "path": f.path, "message": f.message}))
                    .collect();
                json!({
                    "error": "validation_failed",
                    "message": summary.join("; "),
                    "errors": errors,
                    "accepted": accepted,
                })
            }
            WebhookErrors::ByTransactionId => {
                let failed: Vec<Value> = failures
                    .iter()
                    .map(|f| {
                        let mut entry = Map::new();
                        match &f.key {
                            Some(key) => {
                                for (field, value) in key {
                                    entry.insert((*field).into(), json!(value));
                                }
                            }
                            None => {
                                entry.insert("index".into(), json!(f.index));
                            }
                        }
                        let reason = match f.path.as_str() {
                            "" => f.message.clone(),
                            path => format!("{path}: {}", f.message),
                        };
                        entry.insert("reason".into(), json!(reason));
                        Value::Object(entry)
                    })
                    .collect();
                json!({"error": "validation_failed", "failed": failed})
            }
            WebhookErrors::FailuresList => {
                let failures: Vec<Value> = failures
                    .iter()
                    .map(|f| json!({"record": f.index, "field": f.path, "reason": f.message}))
                    .collect();
                json!({"error": "validation_error", "failures": failures})
            }
            WebhookErrors::MessageOnly => {
                json!({"message": "one or more records failed validation"})
            }
        }
    }
}

/// `text` with the characters HTML gives a meaning escaped.
fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

impl ErrorBody {
    /// The body of an error answer with `status` (code and reason, e.g. `404 Not Found`),
    /// error `code` and `text`.
    pub fn render(self, status: &str, code: &str, text: &str) -> Rendered {
        let json = |v: Value| (JSON, v.to_string());
        match self {
            ErrorBody::ErrorMessage => json(json!({"error": code, "message": text})),
            ErrorBody::Detail => json(json!({"detail": text})),
            ErrorBody::ErrorsList => json(json!({"errors": [{"code": code, "message": text}]})),
            ErrorBody::Oauth => json(json!({"error": code, "error_description": text})),
            ErrorBody::PlainText => (Some("text/plain; charset=utf-8"), text.to_string()),
            ErrorBody::Html => {
                let (status, text) = (html_escape(status), html_escape(text));
                (
                    Some("text/html; charset=utf-8"),
                    format!(
                        "<!DOCTYPE html>\n<html><head><title>{status}</title></head>\
                         <body><h1>{status}</h1><p>{text}</p></body></html>\n"
                    ),
                )
            }
            ErrorBody::Empty => (None, String::new()),
        }
    }
}

impl TokenAnswer {
    /// The token endpoint's body for `token`, which lives `lifetime` seconds.
    pub fn body(self, token: &str, lifetime: u64) -> Value {
        let mut body =
            json!({"access_token": token, "expires_in": lifetime, "token_type": "Bearer"});
        match self {
            TokenAnswer::Standard => {}
            TokenAnswer::NoExpiresIn => {
                body.as_object_mut().map(|m| m.remove("expires_in"));
            }
            TokenAnswer::StringExpiresIn => body["expires_in"] = json!(lifetime.to_string()),
            TokenAnswer::ZeroExpiresIn => body["expires_in"] = json!(0),
            TokenAnswer::NoTokenType => {
                body.as_object_mut().map(|m| m.remove("token_type"));
            }
        }
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_the_first_is_the_default() {
        for (setting, names) in Dialect::CHOICES {
            assert!(!names.is_empty(), "{setting}");
        }
        for name in WebhookAnswer::NAMES {
            assert_eq!(WebhookAnswer::parse(name).map(|v| v.name()), Some(*name));
        }
        for name in ExpiredToken::NAMES {
            assert_eq!(ExpiredToken::parse(name).map(|v| v.name()), Some(*name));
        }
        assert_eq!(WebhookAnswer::default(), WebhookAnswer::AcceptedCount);
        assert_eq!(ExpiredToken::default(), ExpiredToken::Status401);
        assert_eq!(Dialect::default().token_requests, None);
        assert_eq!(RetryAfter::parse("never"), None);
    }

    #[test]
    fn html_error_page_escapes_its_text() {
        let (kind, body) = ErrorBody::Html.render("404 Not Found", "not_found", "no `<a>` & co");
        assert_eq!(kind, Some("text/html; charset=utf-8"));
        assert!(body.contains("<title>404 Not Found</title>"), "{body}");
        assert!(body.contains("<h1>404 Not Found</h1>"), "{body}");
        assert!(body.contains("<p>no `&lt;a&gt;` &amp; co</p>"), "{body}");
    }
}
