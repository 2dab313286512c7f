//! One column of a batch bound for writing: its typed values (and its nulls, offsets and
//! children), each value written as JSON as the dict path writes it.

use super::*;

/// Why a value has no JSON form.
pub(super) struct Unwritable {
    /// Where, innermost last: `unitPrice`, `items[2].unitPrice`.
    pub(super) path: String,
    pub(super) message: String,
}

/// The positions of a list's elements in its child.
pub(super) enum Offsets<'a> {
    Small(&'a [i32]),
    Large(&'a [i64]),
    Fixed(&'a FixedSizeListArray),
    View(&'a [i32], &'a [i32]),
    LargeView(&'a [i64], &'a [i64]),
}

impl Offsets<'_> {
    /// The elements of list `i`, within `0..len` (the child's length).
    pub(super) fn range(&self, i: usize, len: usize) -> Range<usize> {
        let at = |v: Option<i64>| {
            v.and_then(|v| usize::try_from(v).ok())
                .unwrap_or(0)
                .min(len)
        };
        let (start, end) = match self {
            Offsets::Small(o) => (
                o.get(i).map(|&v| i64::from(v)),
                o.get(i + 1).map(|&v| i64::from(v)),
            ),
            Offsets::Large(o) => (o.get(i).copied(), o.get(i + 1).copied()),
            Offsets::Fixed(a) => {
                let start = i64::from(a.value_offset(i));
                (Some(start), Some(start + i64::from(a.value_length())))
            }
            Offsets::View(o, s) => match (o.get(i), s.get(i)) {
                (Some(&o), Some(&s)) => (Some(i64::from(o)), Some(i64::from(o) + i64::from(s))),
                _ => (None, None),
            },
            Offsets::LargeView(o, s) => match (o.get(i), s.get(i)) {
                (Some(&o), Some(&s)) => (Some(o), o.checked_add(s)),
                _ => (None, None),
            },
        };
        let start = at(start);
        start..at(end).max(start)
    }
}

/// A struct's field, bound.
pub(super) struct BoundMember<'a> {
    pub(super) name: &'a str,
    /// `"name":`, as JSON.
    pub(super) key: Vec<u8>,
    pub(super) col: Col<'a>,
}

/// The values of a column, typed.
pub(super) enum Values<'a> {
    Null,
    Bool(&'a BooleanArray),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    F16(&'a Float16Array),
    F32(&'a [f32]),
    F64(&'a [f64]),
    D32(&'a [i32], i8),
    D64(&'a [i64], i8),
    D128(&'a [i128], i8),
    D256(&'a [i256], i8),
    Str(&'a StringArray),
    LargeStr(&'a LargeStringArray),
    View(&'a StringViewArray),
    /// Keys (into the values) of a dictionary-encoded column.
    Dict(Vec<usize>, Box<Col<'a>>),
    Stamp(&'a [i64], TimeUnit),
    Date32(&'a [i32]),
    Date64(&'a [i64]),
    List(Offsets<'a>, Box<Col<'a>>),
    Struct(Vec<BoundMember<'a>>),
}

/// One column (or nested child) of a batch, ready to be written row by row.
pub(super) struct Col<'a> {
    pub(super) len: usize,
    pub(super) nulls: Option<NullBuffer>,
    pub(super) values: Values<'a>,
}

pub(super) fn keys_of<K: ArrowDictionaryKeyType>(a: &dyn Array) -> Option<Vec<usize>> {
    let d = a.as_dictionary_opt::<K>()?;
    let n = d.values().len();
    Some(
        d.keys()
            .values()
            .iter()
            .map(|k| k.to_usize().unwrap_or(n).min(n))
            .collect(),
    )
}

impl<'a> Col<'a> {
    /// Binds `array` for writing; Err names a type with no JSON form.
    pub(super) fn bind(array: &'a dyn Array) -> std::result::Result<Col<'a>, String> {
        use DataType as D;
        let unsupported = || type_name(array.data_type());
        let mismatch = || format!("an array that is not the `{}` it says", unsupported());
        macro_rules! prim {
            ($t:ty, $v:ident) => {
                Values::$v(
                    array
                        .as_primitive_opt::<$t>()
                        .ok_or_else(mismatch)?
                        .values(),
                )
            };
        }
        let values = match array.data_type() {
            D::Null => Values::Null,
            D::Boolean => Values::Bool(array.as_boolean_opt().ok_or_else(mismatch)?),
            D::Int8 => prim!(Int8Type, I8),
            D::Int16 => prim!(Int16Type, I16),
            D::Int32 => prim!(Int32Type, I32),
            D::Int64 => prim!(Int64Type, I64),
            D::UInt8 => prim!(UInt8Type, U8),
            D::UInt16 => prim!(UInt16Type, U16),
            D::UInt32 => prim!(UInt32Type, U32),
            D::UInt64 => prim!(UInt64Type, U64),
            D::Float16 => Values::F16(
                array
                    .as_primitive_opt::<Float16Type>()
                    .ok_or_else(mismatch)?,
            ),
            D::Float32 => prim!(Float32Type, F32),
            D::Float64 => prim!(Float64Type, F64),
            D::Decimal32(_, s) => Values::D32(
                array
                    .as_primitive_opt::<Decimal32Type>()
                    .ok_or_else(mismatch)?
                    .values(),
                *s,
            ),
            D::Decimal64(_, s) => Values::D64(
                array
                    .as_primitive_opt::<Decimal64Type>()
                    .ok_or_else(mismatch)?
                    .values(),
                *s,
            ),
            D::Decimal128(_, s) => Values::D128(
                array
                    .as_primitive_opt::<Decimal128Type>()
                    .ok_or_else(mismatch)?
                    .values(),
                *s,
            ),
            D::Decimal256(_, s) => Values::D256(
                array
                    .as_primitive_opt::<Decimal256Type>()
                    .ok_or_else(mismatch)?
                    .values(),
                *s,
            ),
            D::Utf8 => Values::Str(array.as_string_opt::<i32>().ok_or_else(mismatch)?),
            D::LargeUtf8 => Values::LargeStr(array.as_string_opt::<i64>().ok_or_else(mismatch)?),
            D::Utf8View => Values::View(array.as_string_view_opt().ok_or_else(mismatch)?),
            D::Timestamp(unit, _) => {
                let values: &[i64] = match unit {
                    TimeUnit::Second => array
                        .as_primitive_opt::<arrow_array::types::TimestampSecondType>()
                        .ok_or_else(mismatch)?
                        .values(),
                    TimeUnit::Millisecond => array
                        .as_primitive_opt::<arrow_array::types::TimestampMillisecondType>()
                        .ok_or_else(mismatch)?
                        .values(),
                    TimeUnit::Microsecond => array
                        .as_primitive_opt::<arrow_array::types::TimestampMicrosecondType>()
                        .ok_or_else(mismatch)?
                        .values(),
                    TimeUnit::Nanosecond => array
                        .as_primitive_opt::<arrow_array::types::TimestampNanosecondType>()
                        .ok_or_else(mismatch)?
                        .values(),
                };
                Values::Stamp(values, *unit)
            }
            D::Date32 => prim!(arrow_array::types::Date32Type, Date32),
            D::Date64 => prim!(arrow_array::types::Date64Type, Date64),
            D::Dictionary(key, _) => {
                let d = array.as_any_dictionary_opt().ok_or_else(mismatch)?;
                if d.values().is_empty() {
                    // No values: every key is null.
                    Values::Null
                } else {
                    let keys = match key.as_ref() {
                        D::Int8 => keys_of::<Int8Type>(array),
                        D::Int16 => keys_of::<Int16Type>(array),
                        D::Int32 => keys_of::<Int32Type>(array),
                        D::Int64 => keys_of::<Int64Type>(array),
                        D::UInt8 => keys_of::<UInt8Type>(array),
                        D::UInt16 => keys_of::<UInt16Type>(array),
                        D::UInt32 => keys_of::<UInt32Type>(array),
                        D::UInt64 => keys_of::<UInt64Type>(array),
                        _ => None,
                    }
                    .ok_or_else(unsupported)?;
                    Values::Dict(keys, Box::new(Col::bind(d.values().as_ref())?))
                }
            }
            D::List(_) => {
                let l = array.as_list_opt::<i32>().ok_or_else(mismatch)?;
                Values::List(
                    Offsets::Small(l.value_offsets()),
                    Box::new(Col::bind(l.values().as_ref())?),
                )
            }
            D::LargeList(_) => {
                let l = array.as_list_opt::<i64>().ok_or_else(mismatch)?;
                Values::List(
                    Offsets::Large(l.value_offsets()),
                    Box::new(Col::bind(l.values().as_ref())?),
                )
            }
            D::FixedSizeList(..) => {
                let l = array.as_fixed_size_list_opt().ok_or_else(mismatch)?;
                Values::List(Offsets::Fixed(l), Box::new(Col::bind(l.values().as_ref())?))
            }
            D::ListView(_) => {
                let l = array.as_list_view_opt::<i32>().ok_or_else(mismatch)?;
                Values::List(
                    Offsets::View(l.value_offsets(), l.value_sizes()),
                    Box::new(Col::bind(l.values().as_ref())?),
                )
            }
            D::LargeListView(_) => {
                let l = array.as_list_view_opt::<i64>().ok_or_else(mismatch)?;
                Values::List(
                    Offsets::LargeView(l.value_offsets(), l.value_sizes()),
                    Box::new(Col::bind(l.values().as_ref())?),
                )
            }
            D::Struct(fields) => {
                let s = array.as_struct_opt().ok_or_else(mismatch)?;
                let mut members = Vec::with_capacity(fields.len());
                for (f, child) in fields.iter().zip(s.columns()) {
                    members.push(BoundMember {
                        name: f.name().as_str(),
                        key: key_json(f.name()),
                        col: Col::bind(child.as_ref())?,
                    });
                }
                Values::Struct(members)
            }
            _ => return Err(unsupported()),
        };
        Ok(Col {
            len: array.len(),
            nulls: array.logical_nulls(),
            values,
        })
    }

    /// True when row `i` has no value (null, or past the end of a malformed array).
    #[inline]
    pub(super) fn is_null(&self, i: usize) -> bool {
        i >= self.len || self.nulls.as_ref().is_some_and(|n| n.is_null(i))
    }

    /// The string at row `i`, when the column holds strings and the row one.
    pub(super) fn str_at(&self, i: usize) -> Option<&'a str> {
        if self.is_null(i) {
            return None;
        }
        match &self.values {
            Values::Str(a) => Some(a.value(i)),
            Values::LargeStr(a) => Some(a.value(i)),
            Values::View(a) => Some(a.value(i)),
            Values::Dict(keys, values) => values.str_at(*keys.get(i)?),
            _ => None,
        }
    }

    /// Writes the value of row `i` (not null) as JSON, and says what it is for the checks.
    /// `lossy` writes what has no JSON form as Python's `json.dumps` does (`NaN`), for a record
    /// kept back.
    pub(super) fn write(
        &self,
        i: usize,
        out: &mut Vec<u8>,
        lossy: bool,
    ) -> std::result::Result<Scalar<'a>, Unwritable> {
        Ok(match &self.values {
            Values::Null => {
                out.extend_from_slice(b"null");
                Scalar::Null
            }
            Values::Bool(a) => {
                let b = a.value(i);
                out.extend_from_slice(if b { b"true" } else { b"false" });
                Scalar::Bool
            }
            Values::I8(v) => int(i64::from(at_slice(v, i)?), out),
            Values::I16(v) => int(i64::from(at_slice(v, i)?), out),
            Values::I32(v) => int(i64::from(at_slice(v, i)?), out),
            Values::I64(v) => int(at_slice(v, i)?, out),
            Values::U8(v) => uint(u64::from(at_slice(v, i)?), out),
            Values::U16(v) => uint(u64::from(at_slice(v, i)?), out),
            Values::U32(v) => uint(u64::from(at_slice(v, i)?), out),
            Values::U64(v) => uint(at_slice(v, i)?, out),
            Values::F16(a) => float(a.value(i).to_f64(), out, lossy)?,
            // As Python widens a float32 to a float.
            Values::F32(v) => float(f64::from(at_slice(v, i)?), out, lossy)?,
            Values::F64(v) => float(at_slice(v, i)?, out, lossy)?,
            Values::D32(v, s) => {
                let c = at_slice(v, i)?;
                decimal(&c.unsigned_abs().to_string(), c < 0, *s, out)
            }
            Values::D64(v, s) => {
                let c = at_slice(v, i)?;
                decimal(&c.unsigned_abs().to_string(), c < 0, *s, out)
            }
            Values::D128(v, s) => {
                let c = at_slice(v, i)?;
                decimal(&c.unsigned_abs().to_string(), c < 0, *s, out)
            }
            Values::D256(v, s) => {
                let c = at_slice(v, i)?;
                let text = c.to_string();
                let digits = text.strip_prefix('-').unwrap_or(&text);
                decimal(digits, text.starts_with('-'), *s, out)
            }
            Values::Str(a) => string(a.value(i), out),
            Values::LargeStr(a) => string(a.value(i), out),
            Values::View(a) => string(a.value(i), out),
            Values::Dict(keys, values) => {
                let k = at_slice(keys, i)?;
                if values.is_null(k) {
                    out.extend_from_slice(b"null");
                    Scalar::Null
                } else {
                    values.write(k, out, lossy)?
                }
            }
            Values::Stamp(v, unit) => {
                let raw = at_slice(v, i)?;
                let ms = match unit {
                    TimeUnit::Second => raw.checked_mul(1000),
                    TimeUnit::Millisecond => Some(raw),
                    TimeUnit::Microsecond => Some(raw.div_euclid(1000)),
                    TimeUnit::Nanosecond => Some(raw.div_euclid(1_000_000)),
                };
                match ms {
                    Some(ms) => int(ms, out),
                    None if lossy => int(raw, out),
                    None => {
                        return Err(Unwritable {
                            path: String::new(),
                            message: format!(
                                "the timestamp `{raw}` s is out of range for epoch milliseconds"
                            ),
                        })
                    }
                }
            }
            Values::Date32(v) => int(i64::from(at_slice(v, i)?) * DAY_MS, out),
            // A date64 is a date: as Python's `date`, its midnight.
            Values::Date64(v) => int(at_slice(v, i)?.div_euclid(DAY_MS) * DAY_MS, out),
            Values::List(offsets, child) => {
                out.push(b'[');
                let mut n = 0;
                for j in offsets.range(i, child.len) {
                    if child.is_null(j) {
                        continue;
                    }
                    if n > 0 {
                        out.push(b',');
                    }
                    child.write(j, out, lossy).map_err(|mut e| {
                        e.path = format!("[{n}]{}", e.path);
                        e
                    })?;
                    n += 1;
                }
                out.push(b']');
                Scalar::Container
            }
            Values::Struct(members) => {
                out.push(b'{');
                let mut first = true;
                for m in members {
                    if m.col.is_null(i) {
                        continue;
                    }
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    out.extend_from_slice(&m.key);
                    m.col.write(i, out, lossy).map_err(|mut e| {
                        e.path = format!(".{}{}", m.name, e.path);
                        e
                    })?;
                }
                out.push(b'}');
                Scalar::Container
            }
        })
    }
}

pub(super) fn int(v: i64, out: &mut Vec<u8>) -> Scalar<'static> {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    if v >= 0 {
        Scalar::UInt(v.unsigned_abs())
    } else {
        Scalar::NegInt
    }
}

pub(super) fn uint(v: u64, out: &mut Vec<u8>) -> Scalar<'static> {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    Scalar::UInt(v)
}

pub(super) fn at_slice<T: Copy>(v: &[T], i: usize) -> std::result::Result<T, Unwritable> {
    v.get(i).copied().ok_or_else(|| Unwritable {
        path: String::new(),
        message: "a value past the end of its array".into(),
    })
}

/// `"name":` as JSON.
pub(super) fn key_json(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 3);
    json::write_str(&mut key, name);
    key.push(b':');
    key
}

pub(super) fn string<'a>(s: &'a str, out: &mut Vec<u8>) -> Scalar<'a> {
    json::write_str(out, s);
    Scalar::Str(s)
}

/// A float as the dict path writes it (the same writer: Python's `repr`, `1e+16`).
pub(super) fn float(
    v: f64,
    out: &mut Vec<u8>,
    lossy: bool,
) -> std::result::Result<Scalar<'static>, Unwritable> {
    if v.is_finite() {
        json::write_float(out, v);
        return Ok(Scalar::Float(v));
    }
    if lossy {
        out.extend_from_slice(match v {
            v if v.is_nan() => b"NaN".as_slice(),
            v if v > 0.0 => b"Infinity",
            _ => b"-Infinity",
        });
        return Ok(Scalar::Null);
    }
    Err(Unwritable {
        path: String::new(),
        message: format!(
            "`{v}` has no JSON form (JSON has no NaN or infinity); leave the field out instead"
        ),
    })
}

/// A decimal as Python's `str(Decimal)` writes it (which is what the dict path sends): the
/// coefficient's digits with the point placed by the scale, in exponent form when the exponent
/// is positive or the number very small.
pub(super) fn decimal(
    digits: &str,
    negative: bool,
    scale: i8,
    out: &mut Vec<u8>,
) -> Scalar<'static> {
    let start = out.len();
    let exp = -i64::from(scale);
    let n = digits.len() as i64;
    let left = exp + n;
    let dot = if exp <= 0 && left > -6 { left } else { 1 };
    if negative {
        out.push(b'-');
    }
    if dot <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-dot) as usize));
        out.extend_from_slice(digits.as_bytes());
    } else if dot >= n {
        out.extend_from_slice(digits.as_bytes());
        out.extend(std::iter::repeat_n(b'0', (dot - n) as usize));
    } else {
        out.extend_from_slice(&digits.as_bytes()[..dot as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits.as_bytes()[dot as usize..]);
    }
    if left != dot {
        let _ = write!(Adapter(out), "E{:+}", left - dot);
    }
    number_scalar(&out[start..])
}

/// `fmt::Write` over a byte vector.
pub(super) struct Adapter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Adapter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// What a JSON number's text reads as (as the scanner and serde_json read it).
pub(super) fn number_scalar(text: &[u8]) -> Scalar<'static> {
    let Ok(text) = std::str::from_utf8(text) else {
        return Scalar::Container;
    };
    let integer = !text.contains(['.', 'e', 'E']);
    if integer {
        if let Some(digits) = text.strip_prefix('-') {
            return match digits.parse::<u64>() {
                Ok(0) => Scalar::Float(-0.0),
                Ok(v) if v <= 1 << 63 => Scalar::NegInt,
                _ => text.parse().map_or(Scalar::Container, Scalar::Float),
            };
        }
        return match text.parse::<u64>() {
            Ok(v) => Scalar::UInt(v),
            Err(_) => Scalar::BigInt,
        };
    }
    text.parse().map_or(Scalar::Container, Scalar::Float)
}
