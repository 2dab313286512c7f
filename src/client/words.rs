//! The service's own words in an error answer, whatever its shape: JSON under `message`,
//! `error_description`, `detail`, `errors` or `error` (strings, objects or lists of them),
//! plain text, an HTML page, or nothing. API.md shows no error body, so every plausible one
//! is read. What comes out is scrubbed of the process's secrets and shortened for a message.

use serde_json::Value;

use super::redact;

/// Characters of the service's words kept in a message.
pub const LONGEST: usize = 300;

/// Keys whose value says what went wrong, most specific first.
const TEXT_KEYS: [&str; 11] = [
    "message",
    "error_description",
    "detail",
    "details",
    "errors",
    "error",
    "title",
    "msg",
    "reason",
    "description",
    "status",
];

/// The words of an error body, or None when it says nothing (empty, or JSON with no text).
///
/// ```
/// use surveillance::client::words::of_body;
/// assert_eq!(of_body(br#"{"detail": "Not found"}"#).as_deref(), Some("Not found"));
/// assert_eq!(of_body(br#"{"errors": [{"message": "bad"}, {"message": "worse"}]}"#).as_deref(), Some("bad; worse"));
/// assert_eq!(of_body(b"<html><title>502 Bad Gateway</title></html>").as_deref(), Some("502 Bad Gateway"));
/// assert_eq!(of_body(b""), None);
/// ```
pub fn of_body(body: &[u8]) -> Option<String> {
    // Scrubbed before it is cut, so that the cut leaves no part of a secret behind.
    let text = redact::head_of(body, 64 * 1024);
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return None;
    }
    let words = match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => of_json(&v, 0)?,
        Err(_) if looks_like_html(trimmed) => of_html(trimmed),
        Err(_) => trimmed.to_owned(),
    };
    let words = shorten(&redact::scrub(&words));
    (!words.is_empty()).then_some(words)
}

/// Whether a body is an HTML page (a proxy's, a portal's, a server's default error page).
pub fn looks_like_html(body: &str) -> bool {
    let start: String = body
        .trim_start()
        .chars()
        .take(64)
        .collect::<String>()
        .to_ascii_lowercase();
    start.starts_with("<!doctype")
        || start.starts_with("<html")
        || start.starts_with("<head")
        || start.starts_with("<body")
        || start.starts_with("<?xml")
        || start.starts_with("<h1")
        || start.starts_with("<title")
        || start.starts_with("<p>")
}

/// The text of a JSON value: a string, the first text key of an object, the texts of a list.
pub fn of_json(v: &Value, depth: usize) -> Option<String> {
    if depth > 4 {
        return None;
    }
    match v {
        Value::String(s) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
        Value::Object(map) => TEXT_KEYS.iter().find_map(|k| {
            let inner = map.get(*k)?;
            // `"status": 400` or `"error": true` say nothing.
            of_json(inner, depth + 1).map(|t| match (k, map.get("loc").or(map.get("path"))) {
                (_, Some(Value::String(p))) if !p.is_empty() => format!("{p}: {t}"),
                (_, Some(Value::Array(parts))) if !parts.is_empty() => {
                    let path: Vec<String> = parts
                        .iter()
                        .map(|p| match p {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    format!("{}: {t}", path.join("."))
                }
                _ => t,
            })
        }),
        Value::Array(items) => {
            let texts: Vec<String> = items
                .iter()
                .filter_map(|i| of_json(i, depth + 1))
                .take(5)
                .collect();
            (!texts.is_empty()).then(|| {
                let more = items.len().saturating_sub(texts.len());
                let mut t = texts.join("; ");
                if more > 0 && texts.len() == 5 {
                    t.push_str(&format!("; and {more} more"));
                }
                t
            })
        }
        _ => None,
    }
}

/// The title and first heading of an HTML page, else its text without tags.
fn of_html(page: &str) -> String {
    let lower = page.to_ascii_lowercase();
    let element = |tag: &str| -> Option<String> {
        let open = lower.find(&format!("<{tag}"))?;
        let start = open + lower[open..].find('>')? + 1;
        let end = start + lower[start..].find(&format!("</{tag}"))?;
        let t = strip_tags(&page[start..end]);
        (!t.is_empty()).then_some(t)
    };
    let mut parts: Vec<String> = Vec::new();
    for tag in ["title", "h1", "p"] {
        if let Some(t) = element(tag) {
            if !parts.contains(&t) {
                parts.push(t);
            }
        }
    }
    if parts.is_empty() {
        strip_tags(page)
    } else {
        parts.join(": ")
    }
}

fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    collapse(&out)
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whitespace folded, control characters left out, cut at [`LONGEST`] characters.
fn shorten(text: &str) -> String {
    let folded = collapse(&text.replace(|c: char| c.is_control(), " "));
    if folded.chars().count() <= LONGEST {
        return folded;
    }
    let cut: String = folded.chars().take(LONGEST).collect();
    let mut cut = redact::mask_cut(&cut, false, true).into_owned();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plausible_error_body_gives_its_words() {
        for (body, words) in [
            (&br#"{"error": "bad_request", "message": "offset too large"}"#[..], "offset too large"),
            (br#"{"error": "invalid_client", "error_description": "bad secret"}"#, "bad secret"),
            (br#"{"detail": "Not Found"}"#, "Not Found"),
            (br#"{"detail": [{"loc": ["body", "x"], "msg": "field required"}]}"#, "body.x: field required"),
            (br#"{"errors": [{"code": "E1", "message": "one"}, {"message": "two"}]}"#, "one; two"),
            (br#"{"errors": ["plain"]}"#, "plain"),
            (br#"{"error": {"code": 7, "message": "nested"}}"#, "nested"),
            (br#"{"error": "validation_error", "failures": []}"#, "validation_error"),
            (br#""just a string""#, "just a string"),
            (b"Service Unavailable\n", "Service Unavailable"),
            (b"<!DOCTYPE html><html><head><title>403 Forbidden</title></head><body><h1>Forbidden</h1></body></html>", "403 Forbidden: Forbidden"),
        ] {
            assert_eq!(of_body(body).as_deref(), Some(words), "{}", String::from_utf8_lossy(body));
        }
        for nothing in [
            &b""[..],
            b"  \n",
            b"{}",
            b"[]",
            br#"{"status": 400}"#,
            b"null",
        ] {
            assert_eq!(of_body(nothing), None);
        }
    }

    #[test]
    fn words_are_shortened_and_folded() {
        let long = format!("{{\"message\": \"{}\"}}", "word ".repeat(200));
        let w = of_body(long.as_bytes()).expect("words");
        assert!(w.chars().count() <= LONGEST + 1 && w.ends_with('…'), "{w}");
        assert_eq!(of_body(b"a\r\n\tb").as_deref(), Some("a b"));
    }

    #[test]
    fn a_secret_across_the_64_kib_cut_leaves_no_part_in_the_words() {
        let key = "AK6+key/with~\"words\" cut=%41";
        redact::register(key);
        // Whitespace folds, so what the cut leaves of the key comes first in the words.
        for at in [1, 9, 15, 30] {
            let body = format!(
                "{{\"message\": \"{}{key} is not valid\"}}",
                " ".repeat(64 * 1024 - 13 - at)
            );
            let words = of_body(body.as_bytes()).expect("words");
            for run in key.as_bytes().windows(redact::MIN_RUN) {
                let run = std::str::from_utf8(run).expect("ascii");
                assert!(!words.contains(run), "{at}: {words}");
            }
        }
    }

    #[test]
    fn url_encoded_and_base64_echoes_leave_no_part_in_the_words() {
        redact::register("AK6+key/with~\"words\" b64=%41");
        let body = r#"{"message": "invalid key AK6%2bkey/with~%22words%22%20b64%3d%2541 (QUs2K2tleS93aXRofiJ3b3JkcyIgYjY0PSU0MQ==)"}"#;
        assert_eq!(
            of_body(body.as_bytes()).as_deref(),
            Some("invalid key *** (***Q==)")
        );
    }
}
