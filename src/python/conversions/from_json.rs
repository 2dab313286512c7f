//! JSON text to Python objects in one pass, with no intermediate Python string: a serde visitor
//! that builds dicts, lists and scalars directly, interning the keys (and short string values)
//! that repeat on every record, with the cyclic garbage collector paused while it builds.

use std::collections::HashMap;
use std::fmt;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::client::Record;

/// Strings at most this long are interned when they are values (types, names, markers).
const SHORT: usize = 24;

/// Interned Python strings of one conversion.
#[derive(Default)]
pub struct Strings {
    cache: HashMap<Box<str>, Py<PyString>>,
}

impl Strings {
    fn get<'py>(&mut self, py: Python<'py>, s: &str) -> Bound<'py, PyString> {
        if let Some(v) = self.cache.get(s) {
            return v.bind(py).clone();
        }
        let v = PyString::new(py, s);
        if self.cache.len() < 4096 {
            self.cache.insert(s.into(), v.clone().unbind());
        }
        v
    }
}

struct Seed<'a, 'py> {
    py: Python<'py>,
    strings: &'a mut Strings,
}

impl<'de, 'py> DeserializeSeed<'de> for Seed<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

fn py_err<E: serde::de::Error>(e: PyErr) -> E {
    E::custom(format!("cannot build a Python value: {e}"))
}

impl<'de, 'py> Visitor<'de> for Seed<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(pyo3::types::PyBool::new(self.py, v).to_owned().into_any())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        let Ok(o) = v.into_pyobject(self.py);
        Ok(o.into_any())
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        let Ok(o) = v.into_pyobject(self.py);
        Ok(o.into_any())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        let Ok(o) = v.into_pyobject(self.py);
        Ok(o.into_any())
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if v.len() <= SHORT {
            Ok(self.strings.get(self.py, v).into_any())
        } else {
            Ok(PyString::new(self.py, v).into_any())
        }
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.py.None().into_bound(self.py))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let list = PyList::empty(self.py);
        while let Some(v) = seq.next_element_seed(Seed {
            py: self.py,
            strings: self.strings,
        })? {
            list.append(v).map_err(py_err)?;
        }
        Ok(list.into_any())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.py);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let k = self.strings.get(self.py, &key);
            let v = map.next_value_seed(Seed {
                py: self.py,
                strings: self.strings,
            })?;
            dict.set_item(k, v).map_err(py_err)?;
        }
        Ok(dict.into_any())
    }
}

/// Builds the Python objects of each JSON text (one JSON value each) and appends them to one
/// list. Integers beyond 64 bits become floats, as serde_json reads them.
pub fn to_list<'py, 'a>(
    py: Python<'py>,
    texts: impl Iterator<Item = &'a str>,
) -> PyResult<Bound<'py, PyList>> {
    let gc = py.import("gc")?;
    let was_enabled: bool = gc.call_method0("isenabled")?.extract()?;
    // Records are trees (no cycles): collecting while hundreds of thousands of containers are
    // created costs more than building them.
    gc.call_method0("disable")?;
    let result = (|| {
        let out = PyList::empty(py);
        let mut strings = Strings::default();
        for text in texts {
            let mut de = serde_json::Deserializer::from_str(text);
            let value = Seed {
                py,
                strings: &mut strings,
            }
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
            .map_err(|e| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "invalid JSON from the service: {e}"
                ))
            })?;
            out.append(value)?;
        }
        Ok(out)
    })();
    if was_enabled {
        gc.call_method0("enable")?;
    }
    result
}

/// The records of a list, as the list of their dicts (built when the caller has them).
pub struct Records(pub Vec<Record>);

impl<'py> IntoPyObject<'py> for Records {
    type Target = PyList;
    type Output = Bound<'py, PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        to_list(py, self.0.iter().map(|r| r.get()))
    }
}

/// One JSON text as Python objects.
pub fn to_object<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    to_list(py, std::iter::once(text))?.get_item(0)
}

/// One JSON text as Python objects, built by the converter of the service's answers (for the
/// property tests that compare it with `json.loads`).
#[cfg(feature = "test-seams")]
#[pyfunction]
#[pyo3(name = "_loads")]
pub fn loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    to_object(py, text)
}
