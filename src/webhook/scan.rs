//! The fast check of a record given as JSON text (a JSON Lines line, a Rust caller's text): one
//! pass over the bytes that makes sure the text is JSON, finds its upsert key and, when asked,
//! reaches the [fast check](super::fast)'s verdict, without building a tree.
//!
//! The scanner is deliberately narrow: whatever it is not sure of (escaped keys, a key twice,
//! deep nesting, something that may not be JSON) it leaves to the careful path, `serde_json`
//! and the detailed validator, by answering `None`. Its verdicts agree with them on everything
//! it does answer (the property tests check it).

use std::borrow::Cow;

use super::fast::{Object, Scalar};
use super::models::model_named;
use super::models::Kind;

/// What [`scan`] found in a record's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    /// The record conforms to its model (always false when not asked to check).
    pub conforms: bool,
    /// Its upsert key, hashed as [`super::models::Model::key_hash`] does;
    /// 0 when it has none.
    pub key: u64,
}

/// Containers nested deeper are left to the careful path (serde_json stops at 128).
const MAX_DEPTH: u32 = 100;
/// Top-level fields scanned at most; a record with more goes the careful way.
const MAX_FIELDS: usize = 32;

/// Scans one record: None when the text may not be JSON, or holds something the scanner leaves
/// to the careful path; otherwise whether it conforms (when `check`) and its key.
#[must_use]
pub fn scan(text: &str, check: bool) -> Option<Scanned> {
    scan_keyed(text, check, false).map(|(scanned, _)| scanned)
}

/// As [`scan`], with the record's upsert key as text too (as
/// [`super::models::Model::key_text`] joins it; None when it has none): what a store of records
/// keyed by it takes, without a tree.
#[must_use]
pub fn scan_with_key(text: &str, check: bool) -> Option<(Scanned, Option<String>)> {
    scan_keyed(text, check, true)
}

fn scan_keyed(text: &str, check: bool, key_text: bool) -> Option<(Scanned, Option<String>)> {
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
    };
    s.ws();
    if s.peek() != Some(b'{') {
        // JSON that is not an object has no key and no model.
        s.value(0)?;
        s.ws();
        let scanned = Scanned {
            conforms: false,
            key: 0,
        };
        return (s.i == s.b.len()).then_some((scanned, None));
    }
    let mut fields: [ScannedField<'_>; MAX_FIELDS] = [ScannedField::EMPTY; MAX_FIELDS];
    let mut n = 0;
    s.object(1, |e| {
        if n == MAX_FIELDS || fields[..n].iter().any(|f| f.key == e.key) {
            return None;
        }
        fields[n] = e;
        n += 1;
        Some(())
    })?;
    s.ws();
    if s.i != s.b.len() {
        return None;
    }
    let fields = &fields[..n];
    let text_of = |name: &str| -> Option<Cow<'_, str>> {
        let e = fields.iter().find(|e| e.key == name.as_bytes())?;
        match e.value {
            ScannedValue::Str { escaped } => unescape(e.raw, escaped),
            _ => None,
        }
    };
    let data_type = text_of("dataType");
    let model = data_type.as_deref().and_then(model_named);
    let key = model.map_or(0, |m| m.key_hash(text_of));
    let text = match model {
        Some(m) if key_text && key != 0 => m.key_text(text_of),
        _ => None,
    };
    let conforms = check && {
        match data_type.as_deref().and_then(Object::record) {
            None => false,
            Some(mut record) => {
                for e in fields {
                    let Some(f) = record.field(e.key) else {
                        break;
                    };
                    match (record.kind(f), e.value) {
                        (Kind::Items(_), ScannedValue::Array) => {
                            let Some(items) = record.items(f) else { break };
                            match check_items(e.raw, &items) {
                                Some(true) => {}
                                Some(false) => record.fail(),
                                None => return None,
                            }
                        }
                        (_, value) => {
                            let v = scalar(e.raw, value)?;
                            record.value(f, v.as_scalar());
                        }
                    }
                }
                record.complete()
            }
        }
    };
    Some((Scanned { conforms, key }, text))
}

/// Checks the elements of an `items` array (already known to be JSON): Some(false) when one
/// does not conform, None when the scanner leaves it to the careful path.
fn check_items(bytes: &[u8], items: &super::fast::Items) -> Option<bool> {
    Scanner { b: bytes, i: 0 }.items(items)
}

/// Checks a record's `items` given as JSON text of their own (a column of JSON): Some(true)
/// when the text is one JSON array whose elements all conform, Some(false) when an element does
/// not (the text may then not be JSON: the careful path, which judges the record, finds out),
/// None when the scanner leaves it to the careful path.
#[must_use]
pub fn items_text(text: &str, items: &super::fast::Items) -> Option<bool> {
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
    };
    s.ws();
    if !s.items(items)? {
        return Some(false);
    }
    s.ws();
    (s.i == s.b.len()).then_some(true)
}

/// Whether `text` is exactly one JSON value that the scanner is sure of (false: it may not be
/// JSON, for the careful path to judge).
#[must_use]
pub fn is_json(text: &str) -> bool {
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
    };
    s.ws();
    if s.value(1).is_none() {
        return false;
    }
    s.ws();
    s.i == s.b.len()
}

/// A scalar's value for the checks (a string's contents owned when it had escapes).
enum Owned<'a> {
    Scalar(Scalar<'a>),
    Text(Cow<'a, str>),
}

impl Owned<'_> {
    fn as_scalar(&self) -> Scalar<'_> {
        match self {
            Owned::Scalar(s) => *s,
            Owned::Text(t) => Scalar::Str(t),
        }
    }
}

/// What the checks need of a value scanned as `value` from `bytes`.
fn scalar(bytes: &[u8], value: ScannedValue) -> Option<Owned<'_>> {
    Some(match value {
        ScannedValue::Null => Owned::Scalar(Scalar::Null),
        ScannedValue::Bool => Owned::Scalar(Scalar::Bool),
        ScannedValue::Object | ScannedValue::Array => Owned::Scalar(Scalar::Container),
        ScannedValue::Str { escaped } => Owned::Text(unescape(bytes, escaped)?),
        ScannedValue::Number { integer } => Owned::Scalar(number(bytes, integer)?),
    })
}

/// A JSON number as serde_json reads it: integers from 0 to u64::MAX as such, negative ones
/// down to i64::MIN as such (but `-0`, a float), the rest as floats.
fn number(bytes: &[u8], integer: bool) -> Option<Scalar<'static>> {
    let text = std::str::from_utf8(bytes).ok()?;
    if integer {
        if let Some(digits) = text.strip_prefix('-') {
            return Some(match digits.parse::<u64>() {
                Ok(0) => Scalar::Float(-0.0),
                Ok(v) if v <= 1 << 63 => Scalar::NegInt,
                _ => float(text)?,
            });
        }
        return match text.parse::<u64>() {
            Ok(v) => Some(Scalar::UInt(v)),
            // Read as a float, which must be finite.
            Err(_) => float(text).map(|_| Scalar::BigInt),
        };
    }
    float(text)
}

fn float(text: &str) -> Option<Scalar<'static>> {
    let f: f64 = text.parse().ok()?;
    // serde_json refuses a number too large for a float.
    f.is_finite().then_some(Scalar::Float(f))
}

/// A string's contents: borrowed when it has no escape, else as serde_json reads it (None when
/// it refuses the escapes, e.g. a lone surrogate).
fn unescape(quoted: &[u8], escaped: bool) -> Option<Cow<'_, str>> {
    if !escaped {
        return std::str::from_utf8(&quoted[1..quoted.len() - 1])
            .ok()
            .map(Cow::Borrowed);
    }
    serde_json::from_slice::<String>(quoted)
        .ok()
        .map(Cow::Owned)
}

/// A key of an object, and its value: what it is, and its bytes.
#[derive(Clone, Copy)]
struct ScannedField<'a> {
    key: &'a [u8],
    value: ScannedValue,
    raw: &'a [u8],
}

impl ScannedField<'_> {
    const EMPTY: ScannedField<'static> = ScannedField {
        key: b"",
        value: ScannedValue::Null,
        raw: b"",
    };
}

/// The type of a scanned value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScannedValue {
    Null,
    Bool,
    Number { integer: bool },
    Str { escaped: bool },
    Array,
    Object,
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// An object at nesting `depth`, handing each of its entries to `each` (whose None stops
    /// the scan, as a syntax error does).
    fn object(
        &mut self,
        depth: u32,
        mut each: impl FnMut(ScannedField<'a>) -> Option<()>,
    ) -> Option<()> {
        self.expect(b'{')?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            let key = self.plain_key()?;
            self.ws();
            self.expect(b':')?;
            self.ws();
            let start = self.i;
            let value = self.value(depth)?;
            let b: &'a [u8] = self.b;
            each(ScannedField {
                key,
                value,
                raw: &b[start..self.i],
            })?;
            self.ws();
            match self.next()? {
                b',' => continue,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// An `items` array, each element checked as an item: Some(false) when one does not
    /// conform (the scan stops there), None when it is left to the careful path.
    fn items(&mut self, items: &super::fast::Items) -> Option<bool> {
        self.expect(b'[')?;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Some(true);
        }
        loop {
            self.ws();
            if self.peek() != Some(b'{') {
                return Some(false);
            }
            let mut item = items.item();
            self.object(2, |e| {
                if let Some(f) = item.field(e.key) {
                    let v = scalar(e.raw, e.value)?;
                    item.value(f, v.as_scalar());
                }
                Some(())
            })?;
            if !item.complete() {
                return Some(false);
            }
            self.ws();
            match self.next()? {
                b',' => continue,
                b']' => return Some(true),
                _ => return None,
            }
        }
    }

    /// A key without escapes (a key with one goes the careful way), without its quotes.
    fn plain_key(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        match self.string()? {
            false => Some(&self.b[start + 1..self.i - 1]),
            true => None,
        }
    }

    /// A string; true when it has escapes. Control characters are refused, as JSON does.
    fn string(&mut self) -> Option<bool> {
        self.expect(b'"')?;
        let mut escaped = false;
        loop {
            let rest = &self.b[self.i..];
            let at = rest
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
            self.i += at;
            match self.next()? {
                b'"' => return Some(escaped),
                b'\\' => {
                    escaped = true;
                    match self.next()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
                            let unit = u16::from_str_radix(hex, 16).ok()?;
                            // Surrogates (pairs, or lone ones serde_json refuses): careful path.
                            if !hex.bytes().all(|c| c.is_ascii_hexdigit())
                                || (0xD800..=0xDFFF).contains(&unit)
                            {
                                return None;
                            }
                            self.i += 4;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    /// A number, by JSON's grammar; whether it has no fraction and no exponent.
    fn number(&mut self) -> Option<bool> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return None;
            }
            integer = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
            integer = false;
        }
        Some(integer)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// Any JSON value at nesting `depth`.
    fn value(&mut self, depth: u32) -> Option<ScannedValue> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|escaped| ScannedValue::Str { escaped }),
            b'{' => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Some(ScannedValue::Object);
                }
                loop {
                    self.ws();
                    self.string()?;
                    self.ws();
                    self.expect(b':')?;
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => continue,
                        b'}' => return Some(ScannedValue::Object),
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Some(ScannedValue::Array);
                }
                loop {
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => continue,
                        b']' => return Some(ScannedValue::Array),
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true").map(|()| ScannedValue::Bool),
            b'f' => self.literal(b"false").map(|()| ScannedValue::Bool),
            b'n' => self.literal(b"null").map(|()| ScannedValue::Null),
            _ => self
                .number()
                .map(|integer| ScannedValue::Number { integer }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::{has_errors, key_hash, upsert_key, validate};

    fn agree(text: &str) {
        let parsed = serde_json::from_str::<serde_json::Value>(text);
        match scan(text, true) {
            None => {}
            Some(s) => {
                let v =
                    parsed.unwrap_or_else(|e| panic!("scanned as JSON but is not: {e}: {text}"));
                assert_eq!(s.conforms, !has_errors(&validate(&v)), "{text}");
                let key = key_hash(&v);
                assert_eq!(s.key, key, "{text}");
                let unchecked = scan(text, false).expect("scans without the check too");
                assert_eq!((unchecked.conforms, unchecked.key), (false, key));
                let keyed = scan_with_key(text, true).expect("scans with its key too");
                assert_eq!(keyed, (s, upsert_key(&v)), "{text}");
            }
        }
    }

    const OTHER: &str = r#"{"dataType":"other","schemaVersion":"1","startTime":1794891600000,"locationId":"s","dataSourceId":"d","eventUniqueId":"e","eventType":"door"}"#;
    const RETAIL: &str = r#"{"dataType": "retail", "schemaVersion": "1", "startTime": 1794891600000, "endTime": "2026-11-17T05:03:00.000Z", "locationId": "store-17", "dataSourceId": "pos-2", "transactionId": "4711", "status": "sale", "items": [{"time": 1794891601000, "quantity": 1, "description": "coffee", "unitPrice": 2.5, "type": "SALE"}, {"time": "2026-11-17T00:01:00-0500", "quantity": 1, "description": "mil\u006b", "unitPrice": -0.4, "type": "MODIFIER"}]}"#;

    #[test]
    fn conforming_records_conform() {
        for text in [OTHER, RETAIL] {
            let s = scan(text, true).expect("scanned");
            assert!(s.conforms, "{text}");
            assert_ne!(s.key, 0);
            agree(text);
        }
    }

    #[test]
    fn verdicts_and_keys_agree_with_the_careful_path() {
        let cases = [
            OTHER.replace("\"eventType\":\"door\"", "\"eventType\":3"),
            OTHER.replace("\"locationId\":\"s\"", "\"storeId\":\"s\""),
            OTHER.replace("\"locationId\":\"s\"", "\"locationId\":\"\""),
            OTHER.replace("1794891600000", "-5"),
            OTHER.replace("1794891600000", "-0"),
            OTHER.replace("1794891600000", "1.7e12"),
            OTHER.replace("1794891600000", "1.5"),
            OTHER.replace("1794891600000", "99999999999999999999999"),
            OTHER.replace("1794891600000", "\"2026-11-17T05:00:00\""),
            OTHER.replace("1794891600000", "null"),
            OTHER.replace("\"schemaVersion\":\"1\"", "\"schemaVersion\":1"),
            OTHER.replace(",\"eventType\":\"door\"", ""),
            OTHER.replace("}", ",\"items\":[{\"type\":\"x\",\"quantity\":1}]}"),
            OTHER.replace("}", ",\"items\":[{\"unitPrice\":1}]}"),
            OTHER.replace("}", ",\"items\":[1]}"),
            OTHER.replace("}", ",\"items\":{}}"),
            OTHER.replace("}", ",\"endTime\":null}"),
            OTHER.replace("}", ",\"eventDetails\":{\"a\":[1,2,{\"b\":null}]}}"),
            RETAIL.replace("\"status\": \"sale\"", "\"status\": \"SALE\""),
            RETAIL.replace("\"quantity\": 1,", ""),
            RETAIL.replace("2.5", "\"2.5\""),
            RETAIL.replace("\"retail\"", "\"restaurant\""),
            RETAIL.replace("\"retail\"", "\"retial\""),
            RETAIL.replace(
                "\"transactionId\": \"4711\"",
                "\"transactionId\": \"47\\u0031\"",
            ),
            "[1, 2]".to_owned(),
            "\"x\"".to_owned(),
            "{}".to_owned(),
            " { \"dataType\" : \"other\" } ".to_owned(),
        ];
        for text in &cases {
            agree(text);
        }
    }

    #[test]
    fn what_is_not_json_is_never_scanned_as_json() {
        for text in [
            "",
            "{",
            "{\"a\":1,}",
            "{\"a\":01}",
            "{\"a\":1.}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\u{1}\"}",
            "{\"a\":tru}",
            "{\"a\":1} x",
            "[1,]",
            "{\"a\":\"\\ud800\"}",
        ] {
            assert!(
                scan(text, true).is_none()
                    || serde_json::from_str::<serde_json::Value>(text).is_ok(),
                "{text:?}"
            );
        }
        // A key twice is left to the careful path (which keeps the last one).
        assert!(scan("{\"a\":1,\"a\":2}", false).is_none());
    }
}
