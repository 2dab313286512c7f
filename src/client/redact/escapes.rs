//! How a text may write one character or byte of a secret: as it is, percent-encoded (once or
//! twice, `%u`), JSON or Python escaped, as an HTML entity; and the escapes a cut interrupted.

use super::WIDEST;

/// One character or byte of a secret as a text may write it at some place: its bytes, and the
/// length of the text that writes it.
#[derive(Clone, Copy, Default)]
pub(super) struct Unit {
    /// The bytes it stands for (UTF-8 of a character, or one byte).
    pub(super) bytes: [u8; 4],
    /// How many of `bytes` count.
    pub(super) n: u8,
    /// The length of the text that writes it.
    pub(super) len: u8,
}

impl Unit {
    fn byte(b: u8, len: usize) -> Unit {
        Unit {
            bytes: [b, 0, 0, 0],
            n: 1,
            len: len as u8,
        }
    }

    fn char(code: u32, len: usize) -> Option<Unit> {
        let c = char::from_u32(code)?;
        let mut bytes = [0u8; 4];
        let n = c.encode_utf8(&mut bytes).len() as u8;
        Some(Unit {
            bytes,
            n,
            len: len as u8,
        })
    }
}

/// The ways the text at `j` may write a character or a byte: as it is, and decoded from the
/// escape that starts there.
#[derive(Default)]
pub(super) struct Units {
    all: [Unit; 4],
    n: usize,
}

impl Units {
    fn push(&mut self, u: Option<Unit>) {
        if let Some(u) = u {
            if self.n < self.all.len() {
                self.all[self.n] = u;
                self.n += 1;
            }
        }
    }

    pub(super) fn at(t: &[u8], j: usize) -> Units {
        let mut out = Units::default();
        out.push(Some(Unit::byte(t[j], 1)));
        match t[j] {
            b'+' => out.push(Some(Unit::byte(b' ', 1))),
            b'%' => {
                // Twice encoded (`%252F`), and `%2B`: a `+` that stood for a space.
                let twice = t.get(j + 1..j + 3) == Some(b"25");
                let (at, len) = if twice { (j + 3, 5) } else { (j + 1, 3) };
                if twice {
                    out.push(hex(t, j + 1, 2).map(|v| Unit::byte(v as u8, 3)));
                }
                if let Some(v) = hex(t, at, 2) {
                    out.push(Some(Unit::byte(v as u8, len)));
                    if v == u32::from(b'+') {
                        out.push(Some(Unit::byte(b' ', len)));
                    }
                }
                if matches!(t.get(j + 1), Some(b'u' | b'U')) {
                    out.push(hex(t, j + 2, 4).and_then(|v| Unit::char(v, 6)));
                }
            }
            b'\\' => out.push(backslash(t, j)),
            b'&' => out.push(entity(t, j)),
            _ => {}
        }
        out
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Unit> {
        self.all[..self.n].iter()
    }
}

/// The value of the `digits` hexadecimal digits (either case) at `at`.
pub(super) fn hex(t: &[u8], at: usize, digits: usize) -> Option<u32> {
    t.get(at..at + digits)?
        .iter()
        .try_fold(0u32, |v, &c| Some(v * 16 + char::from(c).to_digit(16)?))
}

/// A JSON or Python escape at `j` (`\/`, `\"`, `\n`, `\u00e9`, a surrogate pair, `\x41` ...).
pub(super) fn backslash(t: &[u8], j: usize) -> Option<Unit> {
    let byte = |b: u8| Some(Unit::byte(b, 2));
    match *t.get(j + 1)? {
        c @ (b'/' | b'"' | b'\\' | b'\'') => byte(c),
        b'b' => byte(8),
        b'f' => byte(12),
        b'n' => byte(b'\n'),
        b'r' => byte(b'\r'),
        b't' => byte(b'\t'),
        b'x' => hex(t, j + 2, 2).map(|v| Unit::byte(v as u8, 4)),
        b'U' => hex(t, j + 2, 8).and_then(|v| Unit::char(v, 10)),
        b'u' => {
            let high = hex(t, j + 2, 4)?;
            if !(0xD800..0xDC00).contains(&high) {
                return Unit::char(high, 6);
            }
            if t.get(j + 6..j + 8) != Some(b"\\u") {
                return None;
            }
            let low = hex(t, j + 8, 4).filter(|v| (0xDC00..0xE000).contains(v))?;
            Unit::char(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00), 12)
        }
        _ => None,
    }
}

/// An HTML entity at `j` (`&amp;`, `&quot;`, `&#43;`, `&#x2B;` ...).
pub(super) fn entity(t: &[u8], j: usize) -> Option<Unit> {
    let rest = t.get(j + 1..t.len().min(j + WIDEST))?;
    let semi = rest.iter().position(|&c| c == b';')?;
    let name = &rest[..semi];
    let code = match name {
        b"amp" => u32::from(b'&'),
        b"lt" => u32::from(b'<'),
        b"gt" => u32::from(b'>'),
        b"quot" => u32::from(b'"'),
        b"apos" => u32::from(b'\''),
        [b'#', b'x' | b'X', digits @ ..] if !digits.is_empty() => hex(digits, 0, digits.len())?,
        [b'#', digits @ ..] if !digits.is_empty() => {
            std::str::from_utf8(digits).ok()?.parse().ok()?
        }
        _ => return None,
    };
    Unit::char(code, semi + 2)
}

/// Whether `rest`, the end of a text, is the start of an escape that a cut interrupted.
pub(super) fn escape_begun(rest: &[u8]) -> bool {
    let hexes = |s: &[u8], most: usize| s.len() <= most && s.iter().all(u8::is_ascii_hexdigit);
    match rest {
        [b'%', tail @ ..] => match tail {
            [b'u' | b'U', h @ ..] => hexes(h, 3),
            [b'2', b'5', h @ ..] => hexes(h, 1),
            h => hexes(h, 1),
        },
        [b'\\', tail @ ..] => match tail {
            [] => true,
            [b'u', h @ ..] => hexes(h, 3) || split_pair(rest).is_some(),
            [b'x', h @ ..] => hexes(h, 1),
            [b'U', h @ ..] => hexes(h, 7),
            _ => false,
        },
        [b'&', tail @ ..] => match tail {
            [b'#', b'x' | b'X', h @ ..] => hexes(h, 6),
            [b'#', d @ ..] => d.len() <= 7 && d.iter().all(u8::is_ascii_digit),
            name => [&b"amp"[..], b"lt", b"gt", b"quot", b"apos"]
                .iter()
                .any(|n| n.starts_with(name)),
        },
        _ => false,
    }
}

/// The first two bytes (the UTF-8 of the high surrogate's bits) of a character whose surrogate
/// pair `rest`, the end of a text, begins (`\uD83D\uDE`): a cut split it.
pub(super) fn split_pair(rest: &[u8]) -> Option<Unit> {
    if rest.get(..2) != Some(b"\\u") || rest.len() >= 12 {
        return None;
    }
    let high = hex(rest, 2, 4).filter(|v| (0xD800..0xDC00).contains(v))?;
    let low = rest.get(6..)?;
    let begun = b"\\u".iter().zip(low).all(|(a, b)| a == b)
        && low.iter().skip(2).all(u8::is_ascii_hexdigit);
    if !begun {
        return None;
    }
    let code = 0x10000 + ((high - 0xD800) << 10);
    Some(Unit {
        bytes: [
            0xF0 | (code >> 18) as u8,
            0x80 | ((code >> 12) & 0x3F) as u8,
            0,
            0,
        ],
        n: 2,
        len: rest.len() as u8,
    })
}
