//! Strings (from their UTF-8, surrogates refused) and numbers (ints of any size, finite
//! floats).

use std::borrow::Cow;
use std::os::raw::c_int;

use pyo3::ffi;
use pyo3::prelude::*;

use crate::client::publish::json::write_float;

use super::conv_error::ConvError;
use super::{FastValue, Writer};

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

pub(super) fn not_finite(v: f64) -> ConvError {
    ConvError::new(format!(
        "`{v}` has no JSON form (JSON has no NaN or infinity); leave the field out instead"
    ))
}

impl<'py> Writer<'py> {
    pub(super) fn int(
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
}

pub(super) fn float(v: f64, out: &mut Vec<u8>) -> Result<FastValue<'static>, ConvError> {
    if !v.is_finite() {
        return Err(not_finite(v));
    }
    write_float(out, v);
    Ok(FastValue::Float(v))
}
