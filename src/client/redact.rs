//! The secrets this process knows (API keys, client secrets, access tokens) and `scrub`, which
//! removes every one of them from a text before it is shown or logged, wherever the text came
//! from: servers and proxies echo requests in their error bodies, in whatever encoding they
//! speak. A text from the network is cut only by [`head`], which scrubs it before the cut.
//!
//! A secret is matched character by character, each character as it is or in any escape a
//! server may write it in (percent-encoded in either case, once or twice; `+` for a space;
//! JSON, Python and `%u` escapes; HTML entities), so that any mix of plain and escaped
//! characters matches, whichever characters an encoder leaves alone; and in base64 (standard
//! or URL-safe, padded or not), alone or inside a longer encoded text (`id:secret`, a JSON
//! body): the characters of its three alignments that depend on no neighbouring byte.

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

mod escapes;
mod inserted;

use escapes::{escape_begun, hex, split_pair, Unit, Units};

/// Shorter values are not scrubbed: replacing every occurrence of two or three characters would
/// garble messages, and no real key, secret or token is that short.
pub const MIN_LEN: usize = 4;
/// Access tokens remembered (oldest forgotten first); keys and client secrets are all kept.
const MAX_TOKENS: usize = 64;
/// What a secret becomes.
pub const MASK: &str = "***";
/// The fewest characters of a secret (as the text writes them) left at an end of a cut text
/// that are masked; fewer tell next to nothing, and masking them would garble messages. Base64
/// forms shorter than this are not matched either.
pub const MIN_RUN: usize = 8;
/// The most characters of a text that one byte of a secret takes (`&#x00007e;`).
const WIDEST: usize = 10;
/// Steps of one walk before it gives up (only a pathological text comes near).
const STEPS: usize = 1 << 16;
/// The root of the trie.
const ROOT: u32 = 0;

#[derive(Default)]
struct Secrets {
    /// Keys and client secrets.
    fixed: Vec<String>,
    /// Tokens, oldest first.
    tokens: Vec<String>,
    /// Every one of them compiled; None while there is none.
    matcher: Option<Arc<Matcher>>,
}

impl Secrets {
    fn compile(&mut self) {
        let all = self.fixed.iter().chain(&self.tokens).map(String::as_str);
        self.matcher = Some(Arc::new(Matcher::new(all)));
    }
}

static KNOWN: RwLock<Secrets> = RwLock::new(Secrets {
    fixed: Vec::new(),
    tokens: Vec::new(),
    matcher: None,
});

fn known() -> std::sync::RwLockWriteGuard<'static, Secrets> {
    KNOWN.write().unwrap_or_else(|e| e.into_inner())
}

/// The compiled secrets of the moment (None while none is known).
fn matcher() -> Option<Arc<Matcher>> {
    KNOWN
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .matcher
        .clone()
}

/// Remembers an API key or a client secret for the life of the process.
pub fn register(secret: &str) {
    if secret.len() < MIN_LEN {
        return;
    }
    let mut k = known();
    if !k.fixed.iter().any(|f| f == secret) {
        k.fixed.push(secret.to_owned());
        k.compile();
    }
}

/// Remembers the HTTP Basic form of a client id and secret (`base64(id:secret)`), which token
/// endpoints echo in `Authorization: Basic ...`.
pub fn register_basic(client_id: &str, secret: &str) {
    if secret.len() < MIN_LEN {
        return;
    }
    let pair = format!("{client_id}:{secret}");
    register(&base64(pair.as_bytes(), STANDARD, true));
}

/// Remembers an access token (the last few dozen are kept).
pub fn register_token(token: &str) {
    if token.len() < MIN_LEN {
        return;
    }
    let mut k = known();
    if k.tokens.iter().any(|t| t == token) {
        return;
    }
    if k.tokens.len() >= MAX_TOKENS {
        k.tokens.remove(0);
    }
    k.tokens.push(token.to_owned());
    k.compile();
}

/// `text` with every known secret, in any form, and any credentials of 8 or more characters
/// that follow `Bearer `, replaced by `***`.
pub fn scrub(text: &str) -> Cow<'_, str> {
    scrub_with(matcher().as_deref(), text)
}

fn scrub_with<'a>(m: Option<&Matcher>, text: &'a str) -> Cow<'a, str> {
    let out = match m {
        Some(m) => m.scrub(text),
        None => Cow::Borrowed(text),
    };
    match bearer_scrubbed(&out) {
        Some(s) => Cow::Owned(s),
        None => out,
    }
}

/// `text` scrubbed, then cut to its first `max` bytes at most (at a character boundary), with
/// any run of [`MIN_RUN`] or more characters of a secret that the cut leaves at its end masked
/// too. Only the first `max` bytes are read, and as many after them as a secret can span.
pub fn head(text: &str, max: usize) -> String {
    let m = matcher();
    head_with(m.as_deref(), text, max)
}

/// [`head`] of a body, read as UTF-8 (invalid bytes replaced).
pub fn head_of(body: &[u8], max: usize) -> String {
    let m = matcher();
    let read = max.saturating_add(reach(m.as_deref()));
    let text = String::from_utf8_lossy(&body[..body.len().min(read)]);
    head_with(m.as_deref(), &text, max)
}

/// How far past a cut a secret that starts before it can reach.
fn reach(m: Option<&Matcher>) -> usize {
    // Bearer credentials are masked whatever their length: some room for them too.
    m.map_or(0, Matcher::reach).max(1024)
}

fn head_with(m: Option<&Matcher>, text: &str, max: usize) -> String {
    let window = &text[..floor(text, max.saturating_add(reach(m)))];
    let scrubbed = scrub_with(m, window);
    if window.len() == text.len() && scrubbed.len() <= max {
        return scrubbed.into_owned();
    }
    let cut = &scrubbed[..floor(&scrubbed, max)];
    match m {
        Some(m) => m.mask_cut(cut, false, true).into_owned(),
        None => cut.to_owned(),
    }
}

/// A short text from the network that a message quotes (a header's value: a redirect's
/// `Location`) as [`crate::text::shown`] shows it, on one line and cut to a readable length,
/// scrubbed before the cut as a body is (see [`head`]): every known secret in any form, and a
/// run of one that the cut leaves at its end.
pub fn shown(text: &str) -> String {
    let m = matcher();
    shown_with(m.as_deref(), text, crate::text::MAX_CHARS)
}

fn shown_with(m: Option<&Matcher>, text: &str, chars: usize) -> String {
    let scrubbed = scrub_with(m, text);
    let line = crate::text::shown_within(&scrubbed, chars);
    match (line.strip_suffix(crate::text::CUT), m) {
        (Some(cut), Some(m)) if scrubbed.chars().nth(chars).is_some() => {
            format!("{}{}", m.mask_cut(cut, false, true), crate::text::CUT)
        }
        _ => line,
    }
}

/// `text`, a part of a longer text cut at its start (`start`) or at its end (`end`), with any
/// run of [`MIN_RUN`] or more characters of a secret that a cut leaves at those ends masked
/// (the text is not otherwise scrubbed).
pub fn mask_cut(text: &str, start: bool, end: bool) -> Cow<'_, str> {
    match matcher() {
        Some(m) => m.mask_cut(text, start, end),
        None => Cow::Borrowed(text),
    }
}

/// The largest character boundary of `text` at or below `at`.
fn floor(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// The smallest character boundary of `text` at or above `at`.
fn ceil(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// The alphabets of base64: standard (RFC 4648 section 4) and URL-safe (section 5).
const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 of `bytes` in `alphabet`, padded with `=` or not.
fn base64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
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
                out.push(char::from(alphabet[((n >> shift) & 63) as usize]));
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// The characters of the base64 of a text that holds `bytes` at `align` bytes past a multiple
/// of three that depend on `bytes` alone (the same in any text around them); None when they
/// are fewer than [`MIN_RUN`].
fn base64_core(bytes: &[u8], alphabet: &[u8; 64], align: usize) -> Option<Vec<u8>> {
    let mut shifted = vec![0u8; align];
    shifted.extend_from_slice(bytes);
    let encoded = base64(&shifted, alphabet, false).into_bytes();
    // A character holds bits [6i, 6i + 6); the secret's are [8 align, 8 (align + len)).
    let first = (8 * align).div_ceil(6);
    let end = (8 * (align + bytes.len())) / 6;
    (end >= first + MIN_RUN).then(|| encoded[first..end].to_vec())
}

/// What a server may echo of `secret`, byte for byte (escapes are matched as they come): the
/// secret, and the base64 of it and of its form encoding (HTTP Basic encodes the pair so).
fn patterns(secret: &str) -> Vec<Vec<u8>> {
    let mut out = vec![secret.as_bytes().to_vec()];
    let form: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let mut sources = vec![secret.as_bytes()];
    if form != secret {
        sources.push(form.as_bytes());
    }
    for source in sources {
        for alphabet in [STANDARD, URL_SAFE] {
            for align in 0..3 {
                out.extend(base64_core(source, alphabet, align));
            }
        }
    }
    out
}

/// Every known secret in every pattern, in a trie of bytes walked over the characters of a
/// text (each as it is or decoded from an escape).
struct Matcher {
    /// A node's children, by byte; node 0 is the root.
    children: Vec<Vec<(u8, u32)>>,
    /// Whether a pattern ends at a node.
    ends: Vec<bool>,
    /// The root's children, by byte (0: none).
    root: Box<[u32; 256]>,
    /// The nodes but the root with a child on each byte: where a text cut at its start may
    /// resume a secret.
    inner: Vec<Vec<u32>>,
    /// Bytes of the longest pattern.
    longest: usize,
    /// Bit `256 a + b`: some pattern starts with the bytes `a b` (most places of a text start
    /// none, and are passed over on this alone).
    pairs: Vec<u64>,
}

/// The readings a walk has still to follow: a node, where in the text, and how many inserted
/// pieces it skipped.
type Stack = Vec<(u32, usize, u8)>;

/// What one walk found: the end of the longest pattern matched, and whether a match was still
/// under way where the text ends.
struct Walk {
    full: Option<usize>,
    open: bool,
}

impl Matcher {
    fn new<'a>(secrets: impl Iterator<Item = &'a str>) -> Matcher {
        let mut m = Matcher {
            children: vec![Vec::new()],
            ends: vec![false],
            root: Box::new([0; 256]),
            inner: vec![Vec::new(); 256],
            longest: 0,
            pairs: vec![0; 65536 / 64],
        };
        for secret in secrets.filter(|s| s.len() >= MIN_LEN) {
            for p in patterns(secret) {
                m.insert(&p);
            }
        }
        for (node, children) in m.children.iter().enumerate().skip(1) {
            for &(b, _) in children {
                m.inner[usize::from(b)].push(node as u32);
            }
        }
        m
    }

    fn insert(&mut self, pattern: &[u8]) {
        self.longest = self.longest.max(pattern.len());
        if let [a, b, ..] = pattern {
            let pair = usize::from(*a) << 8 | usize::from(*b);
            self.pairs[pair / 64] |= 1 << (pair % 64);
        }
        let mut node = ROOT;
        for &b in pattern {
            node = match self.child(node, b) {
                Some(c) => c,
                None => {
                    let c = self.children.len() as u32;
                    self.children.push(Vec::new());
                    self.ends.push(false);
                    self.children[node as usize].push((b, c));
                    if node == ROOT {
                        self.root[usize::from(b)] = c;
                    }
                    c
                }
            };
        }
        self.ends[node as usize] = true;
    }

    fn child(&self, node: u32, b: u8) -> Option<u32> {
        if node == ROOT {
            return Some(self.root[usize::from(b)]).filter(|&c| c != ROOT);
        }
        self.children[node as usize]
            .iter()
            .find(|&&(k, _)| k == b)
            .map(|&(_, c)| c)
    }

    /// The node after `unit`'s bytes from `node`.
    fn step(&self, node: u32, unit: &Unit) -> Option<u32> {
        unit.bytes[..usize::from(unit.n)]
            .iter()
            .try_fold(node, |n, &b| self.child(n, b))
    }

    /// Whether no pattern can start at `i`: its two bytes are no escape and start none, and
    /// the second starts nothing a text may insert into a secret.
    fn passed_over(&self, t: &[u8], i: usize) -> bool {
        let escape = |b: u8| matches!(b, b'%' | b'\\' | b'&' | b'+');
        match (t[i], t.get(i + 1)) {
            (a, Some(&b)) if !escape(a) && !escape(b) && !inserted::may_start(b) => {
                let pair = usize::from(a) << 8 | usize::from(b);
                self.pairs[pair / 64] & (1 << (pair % 64)) == 0
            }
            _ => false,
        }
    }

    /// How many bytes of text a match can span.
    fn reach(&self) -> usize {
        self.longest * WIDEST + WIDEST + usize::from(inserted::MOST) * inserted::WIDEST
    }

    /// Every way of reading `t` from `i` on from `node` on; inside a secret, past the pieces
    /// a text may insert into it (at most [`inserted::MOST`]).
    fn walk(&self, t: &[u8], i: usize, node: u32, stack: &mut Stack) -> Walk {
        let mut found = Walk {
            full: None,
            open: false,
        };
        stack.clear();
        stack.push((node, i, 0));
        let mut steps = 0;
        while let Some((n, j, skipped)) = stack.pop() {
            steps += 1;
            if steps > STEPS {
                break;
            }
            if self.ends[n as usize] {
                found.full = found.full.max(Some(j));
            }
            if j >= t.len() {
                found.open |= n != ROOT;
                continue;
            }
            if t.len() - j < WIDEST + 2 {
                let rest = &t[j..];
                // An escape begun there: of a secret's next character, or at its start, one
                // of MIN_RUN characters or more whose character is lost (`&#128512`).
                found.open |= (escape_begun(rest) && (n != ROOT || rest.len() >= MIN_RUN))
                    || split_pair(rest).is_some_and(|u| self.step(n, &u).is_some());
            }
            if n != ROOT && skipped < inserted::MOST && inserted::may_start(t[j]) {
                let pieces = inserted::Pieces::at(t, j);
                found.open |= pieces.begun;
                stack.extend(pieces.ends().iter().map(|&e| (n, e, skipped + 1)));
            }
            for u in Units::at(t, j).iter() {
                if let Some(next) = self.step(n, u) {
                    stack.push((next, j + usize::from(u.len), skipped));
                }
            }
        }
        found
    }

    /// `text` with every match of a pattern masked (overlapping ones as one).
    fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let t = text.as_bytes();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut stack = Vec::new();
        for i in 0..t.len() {
            if !text.is_char_boundary(i) || self.passed_over(t, i) {
                continue;
            }
            if let Some(end) = self.walk(t, i, ROOT, &mut stack).full {
                let end = ceil(text, end);
                match spans.last_mut() {
                    Some(last) if i < last.1 => last.1 = last.1.max(end),
                    _ => spans.push((i, end)),
                }
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for (start, end) in spans {
            out.push_str(&text[copied..start]);
            out.push_str(MASK);
            copied = end;
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// Where the run of a secret that reaches the end of `t` begins, when it is [`MIN_RUN`]
    /// bytes long or more.
    fn open_end(&self, text: &str, stack: &mut Stack) -> Option<usize> {
        let t = text.as_bytes();
        let last = t.len().checked_sub(MIN_RUN)?;
        let first = t.len().saturating_sub(self.reach());
        (first..=last)
            .filter(|&i| text.is_char_boundary(i))
            .find(|&i| self.walk(t, i, ROOT, stack).open)
    }

    /// Where the run of a secret that `t` starts with (past the rest of an escape the cut
    /// interrupted) ends, when it is [`MIN_RUN`] bytes long or more; with `open_end`, a run
    /// that also reaches the end of `t` counts.
    fn open_start(&self, text: &str, open_end: bool, stack: &mut Stack) -> Option<usize> {
        let t = text.as_bytes();
        // Where the first whole character may begin: past the rest of an escape (`2F`,
        // `#x2F;`, an ANSI escape's `[31m`), of a surrogate pair (`\uDE00`), and past the
        // pieces a text inserts (a line break).
        let mut starts: Vec<usize> = Vec::new();
        let (mut p, mut passed) = (0, 0);
        let most = WIDEST + 2 + usize::from(inserted::MOST) * inserted::WIDEST;
        while p < t.len().min(most) && passed < WIDEST + 2 {
            starts.push(p);
            if t.get(p..p + 2) == Some(b"\\u")
                && hex(t, p + 2, 4).is_some_and(|v| (0xDC00..0xE000).contains(&v))
            {
                starts.push(p + 6);
            }
            if let Some(&end) = inserted::Pieces::at(t, p).ends().iter().max() {
                p = end;
                continue;
            }
            if !(t[p].is_ascii_alphanumeric() || matches!(t[p], b'#' | b';' | b'%' | b'[')) {
                break;
            }
            p += 1;
            passed += 1;
        }
        // A piece inserted right after such a start (`\uDE00` then a line break).
        let mut i = 0;
        while i < starts.len() && starts.len() < 4 * WIDEST {
            for &end in inserted::Pieces::at(t, starts[i]).ends() {
                if !starts.contains(&end) {
                    starts.push(end);
                }
            }
            i += 1;
        }
        // Walks to try: from each node with a child on a first byte there...
        let mut from: Vec<(u32, usize)> = Vec::new();
        for p in starts {
            if p >= t.len() || !text.is_char_boundary(p) {
                continue;
            }
            for u in Units::at(t, p).iter() {
                from.extend(self.inner[usize::from(u.bytes[0])].iter().map(|&n| (n, p)));
            }
        }
        // ... and past an escape that lost its first characters to the cut (`#x1F600;`).
        for opener in [
            &b"&"[..],
            b"&#",
            b"&#x",
            b"\\",
            b"\\u",
            b"\\x",
            b"\\U",
            b"%",
            b"%u",
        ] {
            let mut whole = opener.to_vec();
            whole.extend_from_slice(&t[..t.len().min(2 * WIDEST + 2)]);
            for u in Units::at(&whole, 0).iter() {
                let Some(len) = usize::from(u.len)
                    .checked_sub(opener.len())
                    .filter(|&l| l > 0)
                else {
                    continue;
                };
                for &n in &self.inner[usize::from(u.bytes[0])] {
                    from.extend(self.step(n, u).map(|next| (next, len)));
                }
            }
        }
        from.sort_unstable();
        from.dedup();
        let mut best: Option<usize> = None;
        for (node, p) in from {
            let w = self.walk(t, p, node, stack);
            let end = w.full.max((open_end && w.open).then_some(t.len()));
            if end.is_some_and(|e| e >= MIN_RUN) {
                best = best.max(end);
            }
        }
        best.map(|e| ceil(text, e))
    }

    /// See [`mask_cut`].
    fn mask_cut<'a>(&self, text: &'a str, start: bool, end: bool) -> Cow<'a, str> {
        let mut stack = Vec::new();
        let head = if start {
            self.open_start(text, end, &mut stack)
        } else {
            None
        };
        let tail = if end {
            self.open_end(text, &mut stack)
        } else {
            None
        };
        match (head, tail) {
            (None, None) => Cow::Borrowed(text),
            (Some(h), Some(t)) if t <= h => Cow::Borrowed(MASK),
            _ => {
                let from = head.unwrap_or(0);
                let to = tail.unwrap_or(text.len());
                let mut out = String::with_capacity(to - from + 2 * MASK.len());
                if head.is_some() {
                    out.push_str(MASK);
                }
                out.push_str(&text[from..to]);
                if tail.is_some() {
                    out.push_str(MASK);
                }
                Cow::Owned(out)
            }
        }
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
mod tests;
