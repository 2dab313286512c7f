//! The JSON text of publishing's values, one writer for both paths that make it: the dict path
//! (`src/python/conversions/to_json/`, Python records) and the columns path (`columns/`, Arrow
//! and Parquet), so that a record's bytes are the same whichever way it came. Strings are written
//! as `json.dumps(s, ensure_ascii=False)` writes them, floats as Python's `repr` (shortest round
//! trip, `1e+16`). `bench/json_escape.rs` measures the string writer against serde_json's.

/// Writes `s` as a JSON string as `json.dumps(s, ensure_ascii=False)` does: `"` and `\`, and
/// control characters (short escapes where JSON has them, else `\u00xx`), the rest as it is.
/// A scan with no early exit (so that it vectorises) tells whether anything needs an escape;
/// most strings need none and are copied in one piece, the others are written by serde_json.
/// `bench/json_escape.rs`: 1.9 GB/s on a record's fields and 8.8 GB/s on longer texts, 1.5×
/// and 4.2× serde_json alone, which beat a hand-written escaper testing eight bytes at a time.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let escapes = bytes.iter().fold(false, |any, &b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if escapes {
        let _ = serde_json::to_writer(&mut *out, s);
    } else {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
    }
}

/// Writes a finite float as Python's `repr` does (shortest round trip, as `ryu`, with Python's
/// exponent form: `1e+16`, `1.5e-05`), so that the text is `json.dumps`'s.
///
/// A whole number of hundredths under 10^13 (prices, quantities: most floats of a sale) is
/// written from its integer: `k / 100` is the double nearest that decimal, and no decimal of
/// fewer digits is as near (below 2^53 / 200, hundredths apart are distinct doubles), so this
/// is the shortest round trip that `ryu` would find, in Python's fixed form. It takes about a
/// fifth of `ryu`'s time.
pub fn write_float(out: &mut Vec<u8>, v: f64) {
    if v != 0.0 && v.abs() < 1e13 {
        // The nearest integer to v × 100 (in range for i64; truncated, then rounded by hand,
        // as `f64::round` is a call to the C library's `round` on x86-64).
        let r = v * 100.0;
        let t = r as i64;
        let k = match (r - t as f64).abs() >= 0.5 {
            true if r < 0.0 => t - 1,
            true => t + 1,
            false => t,
        };
        if k as f64 / 100.0 == v {
            write_hundredths(out, k);
            return;
        }
    }
    write_float_ryu(out, v);
}

/// `k` hundredths as Python's `repr` writes a float (`3.5`, `-2.25`, `1.0`).
fn write_hundredths(out: &mut Vec<u8>, k: i64) {
    let (whole, cents) = ((k / 100).unsigned_abs(), (k % 100).unsigned_abs());
    if k < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(itoa::Buffer::new().format(whole).as_bytes());
    out.push(b'.');
    match (cents / 10, cents % 10) {
        (tens, 0) => out.push(b'0' + tens as u8),
        (tens, ones) => out.extend_from_slice(&[b'0' + tens as u8, b'0' + ones as u8]),
    }
}

/// `write_float` of any finite float, from `ryu`'s shortest round trip.
fn write_float_ryu(out: &mut Vec<u8>, v: f64) {
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(v).as_bytes();
    if let Some(e) = s.iter().position(|&b| b == b'e') {
        out.extend_from_slice(&s[..=e]);
        let (sign, digits) = match s.get(e + 1) {
            Some(b'-') => (b'-', &s[e + 2..]),
            _ => (b'+', &s[e + 1..]),
        };
        out.push(sign);
        if digits.len() == 1 {
            out.push(b'0');
        }
        out.extend_from_slice(digits);
        return;
    }
    let (negative, body) = match s.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    // ryu writes 1e-5 <= |v| < 1e-4 as `0.0000ddd`; Python switches to an exponent there.
    if let Some(digits) = body.strip_prefix(b"0.0000") {
        if let Some((first, rest)) = digits.split_first() {
            if negative {
                out.push(b'-');
            }
            out.push(*first);
            if !rest.is_empty() {
                out.push(b'.');
                out.extend_from_slice(rest);
            }
            out.extend_from_slice(b"e-05");
            return;
        }
    }
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = Vec::new();
        write_str(&mut out, s);
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn strings_are_escaped_as_json_dumps_does() {
        assert_eq!(escaped(""), r#""""#);
        assert_eq!(
            escaped("plain text, long enough"),
            r#""plain text, long enough""#
        );
        assert_eq!(escaped("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(escaped("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(escaped("\u{0}\u{1f}\u{7f}"), "\"\\u0000\\u001f\u{7f}\"");
        assert_eq!(
            escaped("caf\u{e9} \u{1f600} x"),
            "\"caf\u{e9} \u{1f600} x\""
        );
        // An escape in every position of a word.
        for i in 0..20 {
            let mut s = "x".repeat(20);
            s.replace_range(i..=i, "\"");
            let want = format!("\"{}\"", s.replace('"', "\\\""));
            assert_eq!(escaped(&s), want);
        }
    }

    /// The escaper of the JSON spec, byte by byte.
    fn reference(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn strings_of_every_mix_are_escaped_as_the_reference_does() {
        let alphabet = [
            "a", "\"", "\\", "\n", "\u{0}", "\u{1f}", " ", "\u{7f}", "é", "😀",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..40 {
            for _ in 0..200 {
                let mut s = String::new();
                for _ in 0..len {
                    state = crate::rng::mix(state);
                    s.push_str(alphabet[(state % alphabet.len() as u64) as usize]);
                }
                assert_eq!(escaped(&s), reference(&s), "{s:?}");
            }
        }
    }

    /// What `write` writes of `v`.
    fn written(write: fn(&mut Vec<u8>, f64), v: f64) -> String {
        let mut out = Vec::new();
        write(&mut out, v);
        String::from_utf8(out).expect("UTF-8")
    }

    fn float_text(v: f64) -> String {
        written(write_float, v)
    }

    #[test]
    fn floats_are_written_as_python_repr_writes_them() {
        for (v, want) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (3.5, "3.5"),
            (-2.25, "-2.25"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e17, "1.5e+17"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-0.000_012_34, "-1.234e-05"),
            (1e-7, "1e-07"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (1_794_891_600_000.0, "1794891600000.0"),
        ] {
            assert_eq!(float_text(v), want, "{v:e}");
            assert_eq!(float_text(v).parse::<f64>().ok(), Some(v));
        }
    }

    /// The hundredths written from their integer are `ryu`'s text: every cent up to ±2,000.00,
    /// cents at every scale up to the bound and past it, and doubles of any bits.
    #[test]
    fn hundredths_are_written_as_ryu_writes_them() {
        let mut values: Vec<f64> = (-200_000..=200_000).map(|k| k as f64 / 100.0).collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200_000 {
            state = crate::rng::mix(state);
            let cents = (state % 10_000_000_000_000_000) as f64;
            let scale = 10f64.powi((state >> 60) as i32 - 4);
            values.push(cents / 100.0);
            values.push((cents / 100.0 * scale).round() / 100.0);
            values.push(f64::from_bits(state));
            values.push(-((state % 1_000_000) as f64) / 1000.0);
        }
        values.extend([
            0.01,
            0.1,
            9_999_999_999_999.99,
            1e13,
            1e13 + 0.5,
            4.5e13,
            1e15 / 3.0,
        ]);
        for v in values.into_iter().filter(|v| v.is_finite()) {
            assert_eq!(float_text(v), written(write_float_ryu, v), "{v:e}");
        }
    }
}
