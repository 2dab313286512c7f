//! Python records to JSON bytes in one walk, with the webhook's fast check fused into it: each
//! value is dispatched on its exact type and appended to a caller's buffer (strings copied from
//! their UTF-8 with a table escaper, ints by `itoa`, floats by `ryu`), while the record's
//! fields drive [`fast::Object`] and its upsert key is hashed. No tree, no per-value allocation.

use std::borrow::Cow;
use std::os::raw::c_int;

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{intern, Borrowed};

use crate::client::publish::json::{write_float, write_str};
use crate::webhook::fast::{self, FieldRef, Object, Scalar};
use crate::webhook::models::Kind;
use crate::webhook::models::{model_named, MODELS};
use crate::webhook::{Problem, Severity};

/// Containers nested deeper than this (the record itself is the first level) are refused: the
/// record is not sent. `publish`'s docstring says so.
pub const MAX_DEPTH: u32 = 64;

// ---------------------------------------------------------------------------------------------
// Errors.

enum Seg {
    Key(String),
    Index(usize),
}

/// Why a value has no JSON form, and where it is.
pub struct ConvError {
    /// Innermost first.
    path: Vec<Seg>,
    /// What is wrong, lowercase.
    pub message: String,
    /// A KeyboardInterrupt (or another exception that is not an `Exception`) raised by Python
    /// code the conversion called: it stops everything, it is not the record's fault.
    /// (Boxed: the error travels up every level of the walk, so it is kept small.)
    pub interrupt: Option<Box<PyErr>>,
    /// Not an error: the fast walk met something for the careful walk (see [`Writer`]).
    careful: bool,
}

impl ConvError {
    fn new(message: String) -> Self {
        ConvError {
            path: Vec::new(),
            message,
            interrupt: None,
            careful: false,
        }
    }

    /// The fast walk gives the record to the careful walk.
    fn careful() -> Self {
        ConvError {
            careful: true,
            ..ConvError::new(String::new())
        }
    }

    /// The error of Python code called for a value: an interrupt, or the value's problem.
    fn python(py: Python<'_>, e: PyErr, message: String) -> Self {
        let interrupt = (!e.is_instance_of::<PyException>(py)).then(|| Box::new(e));
        ConvError {
            interrupt,
            ..ConvError::new(message)
        }
    }

    fn at(mut self, seg: Seg) -> Self {
        self.path.push(seg);
        self
    }

    /// The path as the validator writes it: `items[3].unitPrice`.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// The error as a Python exception: its interrupt, or a ValueError of its message after
    /// `place(path)` (the path as [`path`](Self::path) writes it, maybe empty), when that is
    /// not empty.
    pub fn into_value_error(self, place: impl FnOnce(&str) -> String) -> PyErr {
        if let Some(interrupt) = self.interrupt {
            return *interrupt;
        }
        match place(&self.path()) {
            at if at.is_empty() => PyValueError::new_err(self.message),
            at => PyValueError::new_err(format!("{at}: {}", self.message)),
        }
    }

    /// The error as a validation problem of the record.
    pub fn problem(&self) -> Problem {
        Problem {
            path: self.path(),
            message: self.message.clone(),
            severity: Severity::Error,
        }
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}

// ---------------------------------------------------------------------------------------------
// What the walk looks up once per interpreter.

/// The classes of the careful path and the interned names the record-level lookups use.
struct Lookups {
    date: Py<PyAny>,
    to_ms: Py<PyAny>,
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
            to_ms: py.import("surveillance._time")?.getattr("to_ms")?.unbind(),
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
// Strings.

#[cfg(not(windows))]
extern "C" {
    // In the stable ABI since 3.10 and exported by every CPython 3 (pyo3-ffi declares it only
    // for abi3 builds from 3.10). It returns the string's own UTF-8, cached in the object (for
    // an ASCII string, its data), so nothing is copied or allocated to read it.
    fn PyUnicode_AsUTF8AndSize(
        unicode: *mut ffi::PyObject,
        size: *mut ffi::Py_ssize_t,
    ) -> *const std::os::raw::c_char;
}

fn surrogate() -> ConvError {
    ConvError::new("a string that is not valid Unicode (lone surrogate)".to_owned())
}

/// The UTF-8 text of a str (or str subclass), borrowed from the object.
#[cfg(not(windows))]
pub(crate) fn utf8<'a>(s: &'a Bound<'_, PyAny>) -> Result<Cow<'a, str>, ConvError> {
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: `s` is a str (the callers checked), alive for 'a, and the GIL is held; the
    // returned buffer belongs to the object and lives as long as it does.
    let data = unsafe { PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size) };
    if data.is_null() {
        // The UnicodeEncodeError of a lone surrogate: the record's fault, reported as such.
        drop(PyErr::take(s.py()));
        return Err(surrogate());
    }
    let len = usize::try_from(size).map_err(|_| surrogate())?;
    // SAFETY: CPython hands out `size` bytes of valid UTF-8 at `data` (it refuses surrogates).
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    Ok(Cow::Borrowed(unsafe {
        std::str::from_utf8_unchecked(bytes)
    }))
}

/// The UTF-8 text of a str (or str subclass) (a copy: python3.dll of 3.9 lacks the call above).
#[cfg(windows)]
pub(crate) fn utf8<'a>(s: &'a Bound<'_, PyAny>) -> Result<Cow<'a, str>, ConvError> {
    let s = s.cast::<PyString>().map_err(|_| surrogate())?;
    s.to_cow()
        .map(|c| Cow::Owned(c.into_owned()))
        .map_err(|_| surrogate())
}

fn not_finite(v: f64) -> ConvError {
    ConvError::new(format!(
        "`{v}` has no JSON form (JSON has no NaN or infinity); leave the field out instead"
    ))
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

    fn int(
        &mut self,
        obj: &Bound<'py, PyAny>,
        out: &mut Vec<u8>,
    ) -> Result<FastValue<'static>, ConvError> {
        let p = obj.as_ptr();
        let mut overflow: c_int = 0;
        // SAFETY: `p` is an int (or int subclass); the GIL is held.
        let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(p, &mut overflow) };
        if overflow == 0 {
            if v == -1 {
                if let Some(e) = PyErr::take(self.py) {
                    let message = format!("cannot write an integer: {e}");
                    return Err(ConvError::python(self.py, e, message));
                }
            }
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
            return Ok(match u64::try_from(v) {
                Ok(u) => FastValue::UInt(u),
                Err(_) => FastValue::NegInt,
            });
        }
        if overflow > 0 {
            // SAFETY: as above.
            let u = unsafe { ffi::PyLong_AsUnsignedLongLong(p) };
            match PyErr::take(self.py) {
                None => {
                    out.extend_from_slice(itoa::Buffer::new().format(u).as_bytes());
                    return Ok(FastValue::UInt(u));
                }
                Some(_overflow) => {}
            }
        }
        // Beyond 64 bits: still a JSON number, its decimal digits (int's own, as json.dumps
        // writes them); a reader may take it as a float or refuse it, so the careful path
        // judges the record.
        self.unjudged = true;
        // SAFETY: as above; a new reference or NULL with an exception set.
        let digits = unsafe { ffi::PyNumber_ToBase(p, 10) };
        let digits = unsafe { Bound::from_owned_ptr_or_err(self.py, digits) }.map_err(|e| {
            let message = format!("cannot write an integer: {e}");
            ConvError::python(self.py, e, message)
        })?;
        out.extend_from_slice(utf8(&digits)?.as_bytes());
        Ok(FastValue::Container)
    }

    /// An object: a dict or a dict subclass (its own entries, as `dict` iterates them); with
    /// `check`, each key and value checked as they are written.
    fn object(
        &mut self,
        dict: &Bound<'py, PyDict>,
        mut check: Option<&mut Object>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), ConvError> {
        self.enter(dict.as_any(), depth)?;
        let d = dict.as_ptr();
        // SAFETY: `d` is a dict; PyDict_Next stays in bounds and hands out borrowed references.
        // The fast walk runs no Python code, so nothing can change the dict or free its entries
        // while they are borrowed; the careful walk takes a reference to each at once, and
        // catches size changes after each value.
        let size = if self.careful {
            unsafe { ffi::PyDict_Size(d) }
        } else {
            0
        };
        let mut pos: ffi::Py_ssize_t = 0;
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut v: *mut ffi::PyObject = std::ptr::null_mut();
        out.push(b'{');
        let mut first = true;
        while unsafe { ffi::PyDict_Next(d, &mut pos, &mut k, &mut v) } != 0 {
            if !first {
                out.push(b',');
            }
            first = false;
            if !self.careful {
                let (key, value) = unsafe {
                    (
                        Borrowed::from_ptr(self.py, k),
                        Borrowed::from_ptr(self.py, v),
                    )
                };
                self.entry(&key, &value, check.as_deref_mut(), out, depth)?;
                continue;
            }
            let key = unsafe { Bound::from_borrowed_ptr(self.py, k) };
            let value = unsafe { Bound::from_borrowed_ptr(self.py, v) };
            self.entry(&key, &value, check.as_deref_mut(), out, depth)?;
            if unsafe { ffi::PyDict_Size(d) } != size {
                return Err(ConvError::new(
                    "the dict changed size while it was being written".to_owned(),
                ));
            }
        }
        out.push(b'}');
        self.open.pop();
        Ok(())
    }

    fn entry(
        &mut self,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
        check: Option<&mut Object>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), ConvError> {
        // SAFETY: reads the key's type.
        let exact = unsafe { ffi::PyUnicode_CheckExact(key.as_ptr()) } != 0;
        if !exact {
            if !self.careful {
                // Words its error with `repr`, or judges a str subclass: Python code.
                return Err(ConvError::careful());
            }
            if !key.is_instance_of::<PyString>() {
                let shown = key
                    .repr()
                    .map(|r| r.to_string_lossy().into_owned())
                    .unwrap_or_default();
                return Err(ConvError::new(format!(
                    "keys must be strings, found the `{}` key `{shown}`",
                    type_name(key)
                )));
            }
            // A str subclass may compare unequal to a key of the same text: the JSON object
            // could name a field twice, which the careful path judges.
            self.unjudged = true;
        }
        // A key with no JSON form is reported at its object's path, as before.
        let name = utf8(key)?;
        // Unknown, or named twice: the object does not conform (the field's name says so).
        let field = match check {
            Some(object) => object.field(name.as_bytes()).map(|f| (object, f)),
            None => None,
        };
        match &field {
            // A field of the model: its name is the key's text, and needs no escape.
            Some((object, f)) => {
                let lookups = object.name(*f).as_bytes();
                out.reserve(lookups.len() + 3);
                out.push(b'"');
                out.extend_from_slice(lookups);
                out.extend_from_slice(b"\":");
            }
            None => {
                write_str(out, &name);
                out.push(b':');
            }
        }
        self.field(value, field, out, depth)
            .map_err(|e| e.at(Seg::Key(name.as_ref().to_owned())))
    }

    /// The value of a field; with `check`, checked as that field of its object.
    fn field(
        &mut self,
        value: &Bound<'py, PyAny>,
        check: Option<(&mut Object, FieldRef)>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), ConvError> {
        let Some((object, f)) = check else {
            self.value(value, out, depth + 1)?;
            return Ok(());
        };
        if let Kind::Items(_) = object.kind(f) {
            // SAFETY: reads the value's type.
            let t = unsafe { ffi::Py_TYPE(value.as_ptr()) };
            if t == &raw mut ffi::PyList_Type || t == &raw mut ffi::PyTuple_Type {
                if let Some(items) = object.items(f) {
                    if !self.array(value, Some(items), out, depth + 1)? {
                        object.fail();
                    }
                    return Ok(());
                }
            }
        }
        let seen = self.value(value, out, depth + 1)?;
        if let (Kind::Items(_), FastValue::Container) = (object.kind(f), &seen) {
            // An array of another type (a list subclass, numpy's `tolist()`): its elements
            // were not checked, so the careful path judges the record.
            self.unjudged = true;
        }
        object.value(f, seen.scalar());
        Ok(())
    }

    /// An array from a list or a tuple (or a subclass of either); with `items`, each element
    /// checked as an item of a record. True when every element conforms.
    fn array(
        &mut self,
        seq: &Bound<'py, PyAny>,
        items: Option<fast::Items>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<bool, ConvError> {
        self.enter(seq, depth)?;
        let p = seq.as_ptr();
        // SAFETY: reads the type; a list subclass is a list.
        let list =
            unsafe { ffi::Py_TYPE(p) == &raw mut ffi::PyList_Type || ffi::PyList_Check(p) != 0 };
        out.push(b'[');
        let mut conforms = true;
        // SAFETY: `p` is a list or a tuple.
        let len = || unsafe {
            if list {
                ffi::PyList_Size(p)
            } else {
                ffi::PyTuple_Size(p)
            }
        };
        // The careful walk re-reads the length each time, as json.dumps does: Python code it
        // calls may change the list. The fast walk runs none.
        let fixed = len();
        let mut at: ffi::Py_ssize_t = 0;
        while at < if self.careful { len() } else { fixed } {
            // SAFETY: `at` is in bounds; the item is borrowed (as the dict's entries are, see
            // `object`), and owned at once by the careful walk.
            let e = unsafe {
                if list {
                    ffi::PyList_GetItem(p, at)
                } else {
                    ffi::PyTuple_GetItem(p, at)
                }
            };
            if e.is_null() {
                drop(PyErr::take(self.py));
                break;
            }
            let i = usize::try_from(at).unwrap_or_default();
            if i > 0 {
                out.push(b',');
            }
            let ok = if self.careful {
                let element = unsafe { Bound::from_borrowed_ptr(self.py, e) };
                self.element(&element, items, out, depth + 1)
            } else {
                let element = unsafe { Borrowed::from_ptr(self.py, e) };
                self.element(&element, items, out, depth + 1)
            }
            .map_err(|e| e.at(Seg::Index(i)))?;
            conforms &= ok;
            at += 1;
        }
        out.push(b']');
        self.open.pop();
        Ok(conforms)
    }

    /// One element of an array; with `items`, whether it conforms as an item.
    fn element(
        &mut self,
        element: &Bound<'py, PyAny>,
        items: Option<fast::Items>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<bool, ConvError> {
        let Some(items) = items else {
            self.value(element, out, depth)?;
            return Ok(true);
        };
        match element.cast::<PyDict>() {
            Ok(d) => {
                let mut item = items.item();
                self.object(d, Some(&mut item), out, depth)?;
                Ok(item.complete())
            }
            _ => {
                // Not an object: not an item (a mapping of another kind is judged from its
                // text).
                self.value(element, out, depth)?;
                Ok(false)
            }
        }
    }

    /// Subclasses of the basic types, and the sensible conversions of other types.
    fn other<'a>(
        &mut self,
        obj: &'a Bound<'py, PyAny>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<FastValue<'a>, ConvError> {
        if !self.careful {
            return Err(ConvError::careful());
        }
        if obj.is_instance_of::<PyString>() {
            let s = utf8(obj)?;
            write_str(out, &s);
            return Ok(FastValue::Str(s));
        }
        if let Ok(d) = obj.cast::<PyDict>() {
            self.object(d, None, out, depth)?;
            return Ok(FastValue::Container);
        }
        if let Ok(f) = obj.cast::<PyFloat>() {
            return float(f.value(), out);
        }
        if obj.is_instance_of::<PyInt>() {
            return self.int(obj, out);
        }
        if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
            self.array(obj, None, out, depth)?;
            return Ok(FastValue::Container);
        }
        let py = self.py;
        let failed = |e: PyErr, what: &str| {
            let message = format!(
                "cannot convert {what} of type `{}` to JSON: {e}",
                type_name(obj)
            );
            ConvError::python(py, e, message)
        };
        let lookups = self.lookups;
        if obj.is_instance(lookups.date.bind(py)).unwrap_or(false) {
            let ms = lookups
                .to_ms
                .bind(py)
                .call1((obj,))
                .map_err(|e| failed(e, "a date"))?;
            let ms = ms
                .cast_into::<PyInt>()
                .map_err(|e| failed(PyErr::from(e), "a date"))?;
            return self.int(ms.as_any(), out);
        }
        if obj.is_instance(lookups.decimal.bind(py)).unwrap_or(false) {
            let finite: bool = obj
                .call_method0(intern!(py, "is_finite"))
                .and_then(|v| v.extract())
                .map_err(|e| failed(e, "a decimal"))?;
            if !finite {
                return Err(ConvError::new(format!(
                    "`{}` has no JSON form (JSON has no NaN or infinity)",
                    obj.str().map(|s| s.to_string()).unwrap_or_default()
                )));
            }
            let text = obj.str().map_err(|e| failed(e, "a decimal"))?;
            out.extend_from_slice(text.to_string_lossy().as_bytes());
            // Its text may be beyond what a reader takes as a number: the careful path judges.
            self.unjudged = true;
            return Ok(FastValue::Container);
        }
        if obj.hasattr(intern!(py, "tolist")).unwrap_or(false)
            && obj.hasattr(intern!(py, "dtype")).unwrap_or(false)
        {
            // numpy scalars and arrays (and pandas' extension scalars): as Python values. The
            // value counts as a level of nesting, so that a `tolist()` that answers with another
            // such value cannot recurse for ever.
            let plain = obj
                .call_method0(intern!(py, "tolist"))
                .map_err(|e| failed(e, "a value"))?;
            self.enter(obj, depth)?;
            let seen = self.value(&plain, out, depth + 1)?;
            self.open.pop();
            return Ok(match seen {
                FastValue::Null => FastValue::Null,
                FastValue::Bool => FastValue::Bool,
                FastValue::UInt(v) => FastValue::UInt(v),
                FastValue::NegInt => FastValue::NegInt,
                FastValue::Float(f) => FastValue::Float(f),
                FastValue::Str(s) => FastValue::Str(Cow::Owned(s.into_owned())),
                FastValue::Container => FastValue::Container,
            });
        }
        if obj.is_instance(lookups.mapping.bind(py)).unwrap_or(false) {
            // A mapping may name a key twice in its items: the careful path judges the record.
            self.unjudged = true;
            self.enter(obj, depth)?;
            let entries = obj
                .call_method0(intern!(py, "items"))
                .and_then(|i| i.try_iter())
                .map_err(|e| failed(e, "a mapping"))?;
            out.push(b'{');
            for (n, entry) in entries.enumerate() {
                let entry = entry.map_err(|e| failed(e, "a mapping"))?;
                let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) =
                    entry.extract().map_err(|e| failed(e, "a mapping"))?;
                if n > 0 {
                    out.push(b',');
                }
                self.entry(&k, &v, None, out, depth)?;
            }
            out.push(b'}');
            self.open.pop();
            return Ok(FastValue::Container);
        }
        Err(ConvError::new(format!(
            "a value of type `{}` has no JSON form; use str, int, float, bool, None, dict, list \
             or datetime",
            type_name(obj)
        )))
    }
}

fn float(v: f64, out: &mut Vec<u8>) -> Result<FastValue<'static>, ConvError> {
    if !v.is_finite() {
        return Err(not_finite(v));
    }
    write_float(out, v);
    Ok(FastValue::Float(v))
}
