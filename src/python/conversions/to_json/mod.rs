//! Python records to JSON bytes in one walk, with the webhook's fast check fused into it: each
//! value is dispatched on its exact type and appended to a caller's buffer (strings copied from
//! their UTF-8 with a table escaper, ints by `itoa`, floats by `ryu`), while the record's
//! fields drive [`fast::Object`] and its upsert key is hashed. No tree, no per-value allocation.
//!
//! The walk and what it looks up live here; [`ConvError`] in `conv_error`, strings and numbers
//! in `scalars`, dicts and lists in `containers`, the careful conversions of other types in
//! `careful`.

mod careful;
mod containers;
mod conv_error;
mod scalars;

use std::borrow::Cow;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use crate::client::publish::json::write_str;
use crate::webhook::fast::{Object, Scalar};
use crate::webhook::models::{model_named, MODELS};

pub use conv_error::ConvError;
use scalars::float;
pub(crate) use scalars::utf8;

/// Containers nested deeper than this (the record itself is the first level) are refused: the
/// record is not sent. `publish`'s docstring says so.
pub const MAX_DEPTH: u32 = 64;

// ---------------------------------------------------------------------------------------------
// What the walk looks up once per interpreter.

/// The classes of the careful path and the interned names the record-level lookups use.
struct Lookups {
    date: Py<PyAny>,
    decimal: Py<PyAny>,
    mapping: Py<PyAny>,
    data_type: Py<PyString>,
    /// The models' upsert key fields, by name (see `Model::key`).
    key_fields: Vec<(&'static str, Py<PyString>)>,
}

static LOOKUPS: PyOnceLock<Lookups> = PyOnceLock::new();

fn lookups(py: Python<'_>) -> PyResult<&'static Lookups> {
    LOOKUPS.get_or_try_init(py, || {
        Ok(Lookups {
            date: py.import("datetime")?.getattr("date")?.unbind(),
            decimal: py.import("decimal")?.getattr("Decimal")?.unbind(),
            mapping: py.import("collections.abc")?.getattr("Mapping")?.unbind(),
            data_type: PyString::intern(py, "dataType").unbind(),
            key_fields: MODELS
                .iter()
                .flat_map(|m| m.key.iter())
                .map(|name| (*name, PyString::intern(py, name).unbind()))
                .collect(),
        })
    })
}
// ---------------------------------------------------------------------------------------------
// The walk.

/// What a value was, as far as the fast check goes (a string borrowed from its object).
enum FastValue<'a> {
    Null,
    Bool,
    UInt(u64),
    NegInt,
    Float(f64),
    Str(Cow<'a, str>),
    Container,
}

impl FastValue<'_> {
    fn scalar(&self) -> Scalar<'_> {
        match self {
            FastValue::Null => Scalar::Null,
            FastValue::Bool => Scalar::Bool,
            FastValue::UInt(v) => Scalar::UInt(*v),
            FastValue::NegInt => Scalar::NegInt,
            FastValue::Float(f) => Scalar::Float(*f),
            FastValue::Str(s) => Scalar::Str(s),
            FastValue::Container => Scalar::Container,
        }
    }
}

/// What the walk concluded about a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// False when the record holds something the fast check cannot judge (an integer beyond 64
    /// bits, a `Decimal`, a mapping that is not a dict, a key that is a str subclass): its
    /// text must go the careful way (the core's `check_text`), for its key and its verdict.
    pub judged: bool,
    /// With the check, and `judged`: the record conforms to its model.
    pub conforms: bool,
    /// The upsert key, hashed as the core's scan does (0: none); meaningful when `judged`.
    pub key: u64,
}

/// Writes Python records as JSON: dicts, lists, tuples, str, int, float, bool, None by their
/// exact types, and carefully the rest: subclasses of those, datetimes and dates as epoch
/// milliseconds (naive ones taken as UTC), `Decimal` as a number, numpy scalars and arrays
/// through `tolist()`, other mappings as objects.
///
/// Each record is walked fast first: exact types only, which run no Python code, so the walk
/// borrows what containers hold without taking references, and reads sizes once. What needs
/// more (a value of another type, which may run Python code that changes the record under the
/// walk; a key that is not an exact str; an error, to word it) sends the record back to be
/// walked again carefully, taking a reference to each value and checking sizes as it goes.
pub struct Writer<'py> {
    py: Python<'py>,
    lookups: &'static Lookups,
    none: *mut ffi::PyObject,
    true_: *mut ffi::PyObject,
    false_: *mut ffi::PyObject,
    /// The containers being written, outermost first (a record that contains itself).
    open: Vec<*mut ffi::PyObject>,
    /// The record holds something the fast check cannot judge.
    unjudged: bool,
    /// The careful walk (see above).
    careful: bool,
}

impl<'py> Writer<'py> {
    /// A writer; looks up the classes it recognises (once per interpreter).
    pub fn new(py: Python<'py>) -> PyResult<Self> {
        Ok(Writer {
            py,
            lookups: lookups(py)?,
            // SAFETY: the addresses of the interpreter's singletons (no reference is taken).
            none: unsafe { ffi::Py_None() },
            true_: unsafe { ffi::Py_True() },
            false_: unsafe { ffi::Py_False() },
            open: Vec::with_capacity(MAX_DEPTH as usize + 2),
            unjudged: false,
            careful: false,
        })
    }

    /// The JSON text of `obj` (no check).
    pub fn text(&mut self, obj: &Bound<'py, PyAny>) -> Result<String, ConvError> {
        let mut out = Vec::with_capacity(512);
        self.record(obj, &mut out, false)?;
        // Everything written is UTF-8 (strings come from their UTF-8, the rest is ASCII).
        String::from_utf8(out).map_err(|e| ConvError::new(format!("not UTF-8: {e}")))
    }

    /// Appends the JSON of the record `obj` to `out`; with `check`, decides whether it conforms
    /// to its model on the way. On an error, `out` holds a part of the record: cut it back.
    pub fn record(
        &mut self,
        obj: &Bound<'py, PyAny>,
        out: &mut Vec<u8>,
        check: bool,
    ) -> Result<Written, ConvError> {
        let start = out.len();
        self.careful = false;
        match self.walk(obj, out, check) {
            Err(e) if e.careful => {
                out.truncate(start);
                self.careful = true;
                self.walk(obj, out, check)
            }
            done => done,
        }
    }

    fn walk(
        &mut self,
        obj: &Bound<'py, PyAny>,
        out: &mut Vec<u8>,
        check: bool,
    ) -> Result<Written, ConvError> {
        self.unjudged = false;
        self.open.clear();
        let Ok(dict) = obj.cast::<PyDict>() else {
            // Not an object, so no model and no key; a mapping of another kind is judged
            // from its text.
            self.value(obj, out, 0)?;
            return Ok(Written {
                judged: !self.unjudged,
                conforms: false,
                key: 0,
            });
        };
        let lookups = self.lookups;
        let data_type = self.lookup_str(dict, &lookups.data_type);
        let data_type = match &data_type {
            Some(v) => utf8(v).ok(),
            None => None,
        };
        let value = |name: &str| {
            let (_, field) = lookups.key_fields.iter().find(|(n, _)| *n == name)?;
            let v = self.lookup_str(dict, field)?;
            utf8(&v).ok().map(|t| t.into_owned())
        };
        let key = data_type
            .as_deref()
            .and_then(model_named)
            .map_or(0, |m| m.key_hash(value));
        let mut model = if check {
            data_type.as_deref().and_then(Object::record)
        } else {
            None
        };
        self.object(dict, model.as_mut(), out, 0)?;
        Ok(Written {
            judged: !self.unjudged,
            conforms: model.is_some_and(|m| m.complete()),
            key,
        })
    }

    /// The value of `name` in `dict` when it is a str (or str subclass).
    fn lookup_str(
        &self,
        dict: &Bound<'py, PyDict>,
        name: &Py<PyString>,
    ) -> Option<Bound<'py, PyAny>> {
        let value = dict.get_item(name.bind(self.py)).ok()??;
        value.is_instance_of::<PyString>().then_some(value)
    }

    /// Opens the container `obj`, `depth` containers deep (the record: 0); refuses one that
    /// is open already (a cycle) or nested too deep. Each `enter` is paired with a pop.
    fn enter(&mut self, obj: &Bound<'py, PyAny>, depth: u32) -> Result<(), ConvError> {
        let p = obj.as_ptr();
        if self.open.contains(&p) {
            return Err(ConvError::new(
                "the record contains itself here (a circular reference), which JSON cannot \
                 hold"
                    .to_owned(),
            ));
        }
        if depth >= MAX_DEPTH {
            return Err(ConvError::new(format!(
                "nested more than {MAX_DEPTH} levels deep"
            )));
        }
        self.open.push(p);
        Ok(())
    }

    /// Any value; what it was, for the fast check.
    fn value<'a>(
        &mut self,
        obj: &'a Bound<'py, PyAny>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<FastValue<'a>, ConvError> {
        let p = obj.as_ptr();
        // SAFETY: `p` is a live object; reading its type and comparing addresses.
        let t = unsafe { ffi::Py_TYPE(p) };
        unsafe {
            if t == &raw mut ffi::PyUnicode_Type {
                let s = utf8(obj)?;
                write_str(out, &s);
                return Ok(FastValue::Str(s));
            }
            if t == &raw mut ffi::PyLong_Type {
                return self.int(obj, out);
            }
            if t == &raw mut ffi::PyFloat_Type {
                return float(ffi::PyFloat_AsDouble(p), out);
            }
            if p == self.none {
                out.extend_from_slice(b"null");
                return Ok(FastValue::Null);
            }
            if p == self.true_ {
                out.extend_from_slice(b"true");
                return Ok(FastValue::Bool);
            }
            if p == self.false_ {
                out.extend_from_slice(b"false");
                return Ok(FastValue::Bool);
            }
            if t == &raw mut ffi::PyDict_Type {
                self.object(obj.cast_unchecked::<PyDict>(), None, out, depth)?;
                return Ok(FastValue::Container);
            }
            if t == &raw mut ffi::PyList_Type || t == &raw mut ffi::PyTuple_Type {
                self.array(obj, None, out, depth)?;
                return Ok(FastValue::Container);
            }
        }
        self.other(obj, out, depth)
    }
}
