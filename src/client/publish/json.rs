//! The JSON text of publishing's values, one writer for both paths that make it: the dict path
//! (`src/python/conversions/to_json.rs`, Python records) and the columns path (`columns/`, Arrow
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
pub fn write_float(out: &mut Vec<u8>, v: f64) {
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

    fn float_text(v: f64) -> String {
        let mut out = Vec::new();
        write_float(&mut out, v);
        String::from_utf8(out).expect("UTF-8")
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
}
