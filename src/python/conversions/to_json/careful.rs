//! The careful walk's conversions: subclasses of the basic types, dates, `Decimal`, numpy
//! values and other mappings.

use std::borrow::Cow;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::client::publish::json::write_str;
use crate::python::conversions::time;

use super::conv_error::{type_name, ConvError};
use super::scalars::{float, utf8};
use super::{FastValue, Writer};

impl<'py> Writer<'py> {
    /// Subclasses of the basic types, and the sensible conversions of other types.
    pub(super) fn other<'a>(
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
            let ms = time::to_ms(obj, "time").map_err(|e| failed(e, "a date"))?;
            let Ok(ms) = ms.into_pyobject(py);
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
