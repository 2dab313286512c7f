//! What a server that wraps long lines, or a log formatter that colours or escapes, inserts
//! into a text without meaning anything by it: line breaks, tabs and other control characters,
//! ANSI escape sequences, zero-width characters; each as it is or escaped. A secret is matched
//! across them.

use super::escapes::{escape_begun, Units};

/// The most inserted pieces one match of a secret skips (a CRLF is two, an ANSI escape one).
pub(super) const MOST: u8 = 8;
/// The most bytes of text one piece takes (an ANSI escape with its parameters, each byte
/// escaped).
pub(super) const WIDEST: usize = 64;

/// Whether a piece may start with the byte `b` (as it is, or the first byte of an escape).
#[inline]
pub(super) fn may_start(b: u8) -> bool {
    b < 0x20 || matches!(b, 0x7F | 0xC2 | 0xE2 | 0xEF | b'%' | b'\\' | b'&')
}

/// Whether the character `code` is inserted: a control character (C0, DEL, C1), a soft hyphen,
/// or a zero-width one (space, joiners, word joiner, byte order mark).
fn inserted(code: u32) -> bool {
    code < 0x20
        || (0x7F..=0x9F).contains(&code)
        || matches!(code, 0xAD | 0x200B..=0x200D | 0x2060 | 0xFEFF)
}

/// Where the pieces that start at some place of a text end (a few at most), and whether the
/// text ends inside one.
#[derive(Default)]
pub(super) struct Pieces {
    ends: [usize; 4],
    n: usize,
    /// The text ends inside a piece (a cut interrupted it).
    pub(super) begun: bool,
}

impl Pieces {
    fn push(&mut self, end: usize) {
        if self.n < self.ends.len() && !self.ends[..self.n].contains(&end) {
            self.ends[self.n] = end;
            self.n += 1;
        }
    }

    /// Where each piece ends.
    pub(super) fn ends(&self) -> &[usize] {
        &self.ends[..self.n]
    }

    /// The pieces of `t` that start at `j`.
    pub(super) fn at(t: &[u8], j: usize) -> Pieces {
        let mut out = Pieces::default();
        if j >= t.len() || !may_start(t[j]) {
            return out;
        }
        let mut chars = Chars::default();
        chars.read(t, j);
        out.begun |= chars.begun;
        for &(code, end) in chars.found() {
            if !inserted(code) {
                continue;
            }
            out.push(end);
            if code == 0x1B {
                match csi(t, j, end) {
                    Some(Ok(e)) => out.push(e),
                    Some(Err(())) => out.begun = true,
                    None => {}
                }
            }
        }
        out
    }
}

/// The end of the ANSI control sequence (`ESC [`, parameters, intermediates, a final byte) whose
/// escape character ends at `at`; `Err` when the text ends inside it, None when none follows.
fn csi(t: &[u8], start: usize, at: usize) -> Option<Result<usize, ()>> {
    let mut chars = Chars::default();
    chars.read(t, at);
    if chars.begun {
        return Some(Err(()));
    }
    let mut p = chars
        .found()
        .iter()
        .find(|&&(c, _)| c == u32::from(b'['))?
        .1;
    while p - start <= WIDEST {
        let mut chars = Chars::default();
        chars.read(t, p);
        if chars.begun {
            return Some(Err(()));
        }
        // Parameters and intermediates go on, a final byte ends it.
        let next = chars
            .found()
            .iter()
            .find(|&&(c, _)| (0x20..=0x7E).contains(&c))?;
        if (0x40..=0x7E).contains(&next.0) {
            return Some(Ok(next.1));
        }
        p = next.1;
    }
    None
}

/// The characters a text writes at some place (as it is, or decoded from an escape, a
/// character of several bytes read from as many escapes), each with where it ends.
#[derive(Default)]
struct Chars {
    found: [(u32, usize); 4],
    n: usize,
    /// The text ends inside a character or an escape.
    begun: bool,
}

impl Chars {
    fn found(&self) -> &[(u32, usize)] {
        &self.found[..self.n]
    }

    fn read(&mut self, t: &[u8], p: usize) {
        if p >= t.len() {
            self.begun = true;
            return;
        }
        self.begun |= escape_begun(&t[p..]);
        for u in Units::at(t, p).iter() {
            let bytes = &u.bytes[..usize::from(u.n)];
            let end = p + usize::from(u.len);
            let found = if bytes.len() > 1 {
                std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|s| s.chars().next())
                    .map(|c| (u32::from(c), end))
            } else {
                self.multibyte(t, bytes[0], end)
            };
            if let Some(f) = found {
                if self.n < self.found.len() {
                    self.found[self.n] = f;
                    self.n += 1;
                }
            }
        }
    }

    /// The character whose first UTF-8 byte is `lead`, its other bytes read from `at` on.
    fn multibyte(&mut self, t: &[u8], lead: u8, at: usize) -> Option<(u32, usize)> {
        let (more, bits) = match lead {
            0..=0x7F => return Some((u32::from(lead), at)),
            0xC2..=0xDF => (1, lead & 0x1F),
            0xE0..=0xEF => (2, lead & 0x0F),
            0xF0..=0xF4 => (3, lead & 0x07),
            _ => return None,
        };
        let mut code = u32::from(bits);
        let mut q = at;
        for _ in 0..more {
            if q >= t.len() || escape_begun(&t[q..]) {
                self.begun = true;
                return None;
            }
            let next = Units::at(t, q)
                .iter()
                .find(|u| u.n == 1 && u.bytes[0] & 0xC0 == 0x80)
                .map(|u| (u.bytes[0], usize::from(u.len)))?;
            code = code << 6 | u32::from(next.0 & 0x3F);
            q += next.1;
        }
        Some((code, q))
    }
}
