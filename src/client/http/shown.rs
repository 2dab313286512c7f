//! How a failed exchange is put in words: the service's detail, reqwest's causes, and the
//! URLs and bodies an error shows, cut and scrubbed of secrets.

use url::Url;

use crate::client::{redact, words};

/// `detail` of an error message: the service's words, or that the answer had none.
pub(super) fn detail_of(body: &[u8]) -> String {
    words::of_body(body).unwrap_or_else(|| "no details in the answer".to_owned())
}

/// What a failed request's error says happened: reqwest's own message is terse ("error
/// sending request for url (...)"), its causes say what. A connection that could not be made
/// reads "cannot reach URL: " and the causes; the layers' wrappers ("client error (Connect)",
/// "tcp connect error") are left out.
pub(super) fn describe(e: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        let wrapper = text == "tcp connect error"
            || (text.starts_with("client error (") && text.ends_with(')'));
        if !wrapper {
            causes.push(text);
        }
        source = s.source();
    }
    let head = match e.url() {
        Some(url) if e.is_connect() => format!("cannot reach {url}"),
        _ => e.to_string(),
    };
    std::iter::once(head)
        .chain(causes)
        .collect::<Vec<_>>()
        .join(": ")
}

/// What a failed request's causes say, without the request (for its log line, which names
/// it): "Connection refused (os error 111)" where [`describe`] says "cannot reach URL: ...".
pub(super) fn cause_of(e: &reqwest::Error) -> String {
    let full = describe(e);
    let head = match e.url() {
        Some(url) if e.is_connect() => format!("cannot reach {url}"),
        _ => e.to_string(),
    };
    match full
        .strip_prefix(&head)
        .and_then(|rest| rest.strip_prefix(": "))
    {
        Some(causes) => causes.to_owned(),
        None if e.is_connect() => "the connection failed".to_owned(),
        None if e.is_body() || e.is_decode() => "the answer's body could not be read".to_owned(),
        None => "the request failed".to_owned(),
    }
}

pub(super) fn shown(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{}", url.path(), q),
        None => url.path().to_string(),
    }
}

/// Bytes of an error body kept in the error (a webhook refusal that names the failures of 100
/// records is read from it whole).
const BODY_KEPT: usize = 256 * 1024;

pub(super) fn truncate(body: &[u8]) -> String {
    // Scrubbed before it is cut, so that a cut cannot leave part of a secret behind.
    redact::head_of(body, BODY_KEPT)
}

/// The first characters of an answer, for a message that says what came instead of the
/// expected one (control characters left out, secrets scrubbed).
pub fn body_start(body: &[u8]) -> String {
    let text = redact::head_of(body, 4096);
    let mut shown = text.chars().filter(|c| !c.is_control());
    let start: String = shown.by_ref().take(80).collect();
    let cut = shown.next().is_some();
    redact::mask_cut(&start, false, cut).into_owned()
}
