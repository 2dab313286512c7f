//! The secrets this process knows (API keys, client secrets, access tokens) and `scrub`, which
//! removes every one of them from a text before it is shown or logged, wherever the text came
//! from: servers and proxies echo requests in their error bodies.

use std::borrow::Cow;
use std::sync::RwLock;

/// Shorter values are not scrubbed: replacing every occurrence of two or three characters would
/// garble messages, and no real key, secret or token is that short.
pub const MIN_LEN: usize = 4;
/// Access tokens remembered (oldest forgotten first); keys and client secrets are all kept.
const MAX_TOKENS: usize = 64;
/// What a secret becomes.
pub const MASK: &str = "***";

#[derive(Default)]
struct Secrets {
    /// Keys and client secrets, and the forms servers echo them in.
    fixed: Vec<String>,
    /// Tokens, oldest first, and their forms.
    tokens: Vec<Vec<String>>,
}

static KNOWN: RwLock<Secrets> = RwLock::new(Secrets {
    fixed: Vec::new(),
    tokens: Vec::new(),
});

/// The forms a secret takes in an echoed request: as sent, JSON-escaped, percent-encoded.
fn forms(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_owned()];
    if let Ok(json) = serde_json::to_string(secret) {
        let escaped = &json[1..json.len() - 1];
        if escaped != secret {
            out.push(escaped.to_owned());
        }
        // Some encoders also escape `/`.
        let slashes = escaped.replace('/', "\\/");
        if slashes != escaped {
            out.push(slashes);
        }
    }
    let percent: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    if percent != secret {
        out.push(percent);
    }
    out
}

fn known() -> std::sync::RwLockWriteGuard<'static, Secrets> {
    KNOWN.write().unwrap_or_else(|e| e.into_inner())
}

/// Remembers an API key or a client secret for the life of the process.
pub fn register(secret: &str) {
    if secret.len() < MIN_LEN {
        return;
    }
    let mut k = known();
    for f in forms(secret) {
        if !k.fixed.contains(&f) {
            k.fixed.push(f);
        }
    }
}

/// Remembers the HTTP Basic form of a client id and secret (`base64(id:secret)`), which token
/// endpoints echo in `Authorization: Basic ...`.
pub fn register_basic(client_id: &str, secret: &str) {
    if secret.len() < MIN_LEN {
        return;
    }
    let pair = format!("{client_id}:{secret}");
    let encoded = base64(pair.as_bytes());
    register(&encoded);
    register(encoded.trim_end_matches('='));
}

/// Standard base64 with padding (RFC 4648), for [`register_basic`].
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Remembers an access token (the last few dozen are kept).
pub fn register_token(token: &str) {
    if token.len() < MIN_LEN {
        return;
    }
    let mut k = known();
    if k.tokens.iter().any(|t| t[0] == token) {
        return;
    }
    if k.tokens.len() >= MAX_TOKENS {
        k.tokens.remove(0);
    }
    k.tokens.push(forms(token));
}

/// `text` with every known secret, and any credentials of 8 or more characters that follow
/// `Bearer `, replaced by `***`.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let k = KNOWN.read().unwrap_or_else(|e| e.into_inner());
    let mut out = Cow::Borrowed(text);
    // Longest first, so that a secret that contains another is replaced whole.
    let mut needles: Vec<&str> = k
        .fixed
        .iter()
        .chain(k.tokens.iter().flatten())
        .map(String::as_str)
        .collect();
    needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for needle in needles {
        if out.contains(needle) {
            out = Cow::Owned(out.replace(needle, MASK));
        }
    }
    match bearer_scrubbed(&out) {
        Some(s) => Cow::Owned(s),
        None => out,
    }
}

/// The credentials of `Authorization: Bearer X` (any case) masked, whatever X is; None when
/// there is none.
fn bearer_scrubbed(text: &str) -> Option<String> {
    const WORD: &[u8] = b"bearer";
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while i + WORD.len() < bytes.len() {
        if !bytes[i..i + WORD.len()].eq_ignore_ascii_case(WORD)
            || (i > 0 && bytes[i - 1].is_ascii_alphanumeric())
        {
            i += 1;
            continue;
        }
        let mut j = i + WORD.len();
        let spaces = j;
        while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
            j += 1;
        }
        let start = j;
        while j < bytes.len() && is_token_byte(bytes[j]) {
            j += 1;
        }
        // Shorter words after "bearer" are prose ("a bearer of news"), not credentials.
        if j == spaces || j - start < 8 {
            i = j.max(i + 1);
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str(MASK);
        copied = j;
        i = j;
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// The characters of an RFC 6750 bearer token (`b64token`), and `%` for encoded ones.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'%')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_alphabet_with_padding() {
        assert_eq!(
            base64(b"Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        register_basic("emu-client-1", "emu-secret-basic-form");
        let echoed = format!(
            "Authorization: Basic {}",
            base64(b"emu-client-1:emu-secret-basic-form")
        );
        assert!(!scrub(&echoed).contains(&base64(b"emu-client-1:emu-secret-basic-form")));
    }

    #[test]
    fn secrets_and_their_echoed_forms_are_masked() {
        register("redact-test-key/with\"quote&amp");
        register_token("redact.test.token");
        let text =
            "key redact-test-key/with\"quote&amp, json \"redact-test-key\\/with\\\"quote&amp\", \
                    query redact-test-key%2Fwith%22quote%26amp, token redact.test.token";
        let out = scrub(text);
        assert!(!out.contains("redact-test-key"), "{out}");
        assert!(!out.contains("redact.test.token"), "{out}");
        assert_eq!(out.matches(MASK).count(), 4, "{out}");
    }

    #[test]
    fn bearer_credentials_are_masked_whatever_they_are() {
        let out =
            scrub("headers: {\"authorization\": \"Bearer abc.DEF-123_x\"}, BEARER  zz9%2Fzz9z");
        assert_eq!(
            out,
            "headers: {\"authorization\": \"Bearer ***\"}, BEARER  ***"
        );
        assert_eq!(scrub("a bearer of news"), "a bearer of news");
        assert_eq!(scrub("nothing here"), "nothing here");
        assert_eq!(scrub("Bearer"), "Bearer");
    }

    #[test]
    fn short_values_are_not_scrubbed() {
        register("ab");
        assert_eq!(scrub("abcab"), "abcab");
    }
}
