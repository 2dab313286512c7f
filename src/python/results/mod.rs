//! The core's results as Python classes, each defined once, here: the plan of a fetch
//! (`EventPlan`), what a call spent (`Cost`), the daily quota (`Quota`), a client's counters
//! (`Stats`) and what the cache of settled events holds (`CacheInfo`, `CacheEntry`). Each is
//! built from the core's struct, frozen, with typed attributes, a `repr` and a table for
//! Jupyter (drawn by `shown`, as every result is), `to_dict()` and pickling. The
//! quota, the stats and the cache's contents were dicts and stay read-only mappings
//! (`collections.abc.Mapping`): `q["used"]`, `dict(q)` and `q == {...}` read them as before.

mod cache;
pub mod fields;
mod plan;
mod quota;
pub mod shown;

pub use cache::{PyCacheEntry, PyCacheInfo};
pub use plan::{PyCost, PyEventPlan};
pub use quota::{PyQuota, PyStats};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};

/// Adds the result classes to the module, the mappings registered as `Mapping`s.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEventPlan>()?;
    m.add_class::<PyCost>()?;
    let mapping = mapping_class(m.py())?;
    for class in [
        m.py().get_type::<PyQuota>(),
        m.py().get_type::<PyStats>(),
        m.py().get_type::<PyCacheInfo>(),
        m.py().get_type::<PyCacheEntry>(),
    ] {
        mapping.call_method1("register", (&class,))?;
        m.add(class.name()?, class)?;
    }
    Ok(())
}

/// `collections.abc.Mapping`, which the mapping results are registered as.
fn mapping_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static MAPPING: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    Ok(MAPPING
        .get_or_try_init(py, || {
            py.import("collections.abc")?
                .getattr("Mapping")
                .map(Bound::unbind)
        })?
        .bind(py))
}

/// The key of `keys` that `key` is, if it is one.
fn known(key: &Bound<'_, PyAny>, keys: &[&'static str]) -> Option<&'static str> {
    let key = key.cast::<PyString>().ok()?.to_cow().ok()?;
    keys.iter().copied().find(|k| *k == key)
}

/// A result's attributes by name, in order: `keys` read from `obj` (shallow: a nested result
/// stays itself).
fn figures<'py>(obj: &Bound<'py, PyAny>, keys: &[&str]) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(obj.py());
    for key in keys {
        out.set_item(*key, obj.getattr(*key)?)?;
    }
    Ok(out)
}

/// A result's attributes as `(name, value)` pairs, in order.
fn pairs<'py>(
    obj: &Bound<'py, PyAny>,
    keys: &[&str],
) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    keys.iter()
        .map(|key| Ok(((*key).to_owned(), obj.getattr(*key)?)))
        .collect()
}

/// `obj` as plain Python values: a result as the dict of [`to_dict`], a list item by item.
fn plain<'py>(value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(list) = value.cast::<PyList>() {
        let items = list.iter().map(plain).collect::<PyResult<Vec<_>>>()?;
        return Ok(PyList::new(value.py(), items)?.into_any());
    }
    if is_result(&value) {
        return value.call_method0("to_dict");
    }
    Ok(value)
}

/// Whether `value` is one of these results.
fn is_result(value: &Bound<'_, PyAny>) -> bool {
    value.is_instance_of::<PyEventPlan>()
        || value.is_instance_of::<PyCost>()
        || value.is_instance_of::<PyQuota>()
        || value.is_instance_of::<PyStats>()
        || value.is_instance_of::<PyCacheInfo>()
        || value.is_instance_of::<PyCacheEntry>()
}

/// `obj`'s figures as plain Python values: nested results as dicts, lists as lists.
fn to_dict<'py>(obj: &Bound<'py, PyAny>, keys: &[&str]) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(obj.py());
    for key in keys {
        out.set_item(*key, plain(obj.getattr(*key)?)?)?;
    }
    Ok(out)
}

/// `Name(a=1, b=None, ...)`, as [`shown::fields`] writes a result.
fn repr(obj: &Bound<'_, PyAny>, name: &str, keys: &[&str]) -> PyResult<String> {
    shown::fields(name, &pairs(obj, keys)?)
}

/// The result as an HTML table, as [`shown::table`] draws every result in Jupyter.
fn html(obj: &Bound<'_, PyAny>, name: &str, keys: &[&str]) -> PyResult<String> {
    shown::table(name, &pairs(obj, keys)?)
}

/// What pickles a result: its class, and its attributes in the constructor's order.
fn reduce<'py>(obj: &Bound<'py, PyAny>, keys: &[&str]) -> PyResult<Bound<'py, PyTuple>> {
    let values = keys
        .iter()
        .map(|k| obj.getattr(*k))
        .collect::<PyResult<Vec<_>>>()?;
    let class: Bound<'py, PyType> = obj.get_type();
    PyTuple::new(
        obj.py(),
        [class.into_any(), PyTuple::new(obj.py(), values)?.into_any()],
    )
}

/// Equality of a mapping result with any mapping (another result, or a dict): the same keys
/// and values, as `Mapping`'s; NotImplemented against anything else.
fn mapping_eq<'py>(
    obj: &Bound<'py, PyAny>,
    keys: &[&str],
    other: &Bound<'py, PyAny>,
) -> PyResult<Option<bool>> {
    let py = obj.py();
    if !other.is_instance(mapping_class(py)?)? {
        return Ok(None);
    }
    let theirs = PyDict::new(py);
    theirs.call_method1("update", (other,))?;
    Ok(Some(figures(obj, keys)?.eq(theirs)?))
}

/// Equality of a record (the plan, the cost) with one of its class: the same attributes;
/// NotImplemented against anything else, as a dataclass's.
fn record_eq<'py>(
    obj: &Bound<'py, PyAny>,
    keys: &[&str],
    other: &Bound<'py, PyAny>,
) -> PyResult<Option<bool>> {
    if !other.get_type().is(obj.get_type()) {
        return Ok(None);
    }
    Ok(Some(figures(obj, keys)?.eq(figures(other, keys)?)?))
}

/// A record's hash: its attributes', as a frozen dataclass's (they must all hash).
fn record_hash(obj: &Bound<'_, PyAny>, keys: &[&str]) -> PyResult<isize> {
    let values = keys
        .iter()
        .map(|k| obj.getattr(*k))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(obj.py(), values)?.hash()
}

/// The methods every result has: `to_dict`, `_repr_html_`, `__reduce__` (pickling, copying);
/// a mapping's `__getitem__`, `__len__`, `__iter__`, `__contains__`, `keys`, `items`,
/// `values`, `get` and `==` with any mapping; a record's `==` with one of its class. `$class`
/// is the Rust type, `$name` the Python class's, `$keys` its attributes in order; `$($extra)*`
/// are the class's own methods (its constructor, its computed attributes, a record's hash where
/// all its figures hash: a class that defines `==` and no hash is unhashable).
macro_rules! result_methods {
    (@impl $class:ty, $name:literal, $keys:expr, $eq:ident, { $($methods:tt)* }) => {
        #[pymethods]
        impl $class {
            $($methods)*

            /// The figures as a dict of plain values (nested results as dicts).
            ///
            /// Returns:
            ///     A new ``dict``, its keys in the order of the attributes.
            ///
            /// Raises nothing.
            ///
            /// Example:
            ///     >>> figures = client.last_cost.to_dict()  # every result has it
            ///     >>> list(figures)[:2], type(figures["requests"]).__name__
            ///     (['requests', 'quota'], 'int')
            fn to_dict<'py>(
                slf: &pyo3::Bound<'py, Self>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyDict>> {
                $crate::python::results::to_dict(slf.as_any(), $keys)
            }

            /// The figures as an HTML table, for Jupyter.
            fn _repr_html_(slf: &pyo3::Bound<'_, Self>) -> pyo3::PyResult<String> {
                $crate::python::results::html(slf.as_any(), $name, $keys)
            }

            fn __reduce__<'py>(
                slf: &pyo3::Bound<'py, Self>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyTuple>> {
                $crate::python::results::reduce(slf.as_any(), $keys)
            }

            fn __richcmp__<'py>(
                slf: &pyo3::Bound<'py, Self>,
                other: &pyo3::Bound<'py, pyo3::PyAny>,
                op: pyo3::basic::CompareOp,
            ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                let py = slf.py();
                let eq = match op {
                    pyo3::basic::CompareOp::Eq | pyo3::basic::CompareOp::Ne => {
                        $crate::python::results::$eq(slf.as_any(), $keys, other)?
                    }
                    _ => None,
                };
                Ok(match eq {
                    Some(eq) => (eq == matches!(op, pyo3::basic::CompareOp::Eq))
                        .into_pyobject(py)?
                        .to_owned()
                        .into_any()
                        .unbind(),
                    None => py.NotImplemented(),
                })
            }
        }
    };
    (mapping $class:ty, $name:literal, $keys:expr, { $($extra:tt)* }) => {
        $crate::python::results::result_methods!(@impl $class, $name, $keys, mapping_eq, {
            $($extra)*

            fn __repr__(slf: &pyo3::Bound<'_, Self>) -> pyo3::PyResult<String> {
                $crate::python::results::repr(slf.as_any(), $name, $keys)
            }

            fn __getitem__<'py>(
                slf: &pyo3::Bound<'py, Self>,
                key: &pyo3::Bound<'py, pyo3::PyAny>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                match $crate::python::results::known(key, $keys) {
                    Some(k) => slf.getattr(k),
                    None => Err(pyo3::exceptions::PyKeyError::new_err(key.clone().unbind())),
                }
            }

            fn __len__(&self) -> usize {
                $keys.len()
            }

            fn __iter__<'py>(
                slf: &pyo3::Bound<'py, Self>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyIterator>> {
                pyo3::types::PyList::new(slf.py(), $keys)?.try_iter()
            }

            fn __contains__(&self, key: &pyo3::Bound<'_, pyo3::PyAny>) -> bool {
                $crate::python::results::known(key, $keys).is_some()
            }

            /// The keys, as a dict's ``keys()``.
            ///
            /// Returns:
            ///     A view of the keys, in the order of the attributes.
            ///
            /// Raises nothing.
            ///
            /// Example:
            ///     >>> list(client.quota().keys())  # every mapping result has it
            ///     ['limit', 'used', 'remaining', 'resets_at']
            fn keys<'py>(
                slf: &pyo3::Bound<'py, Self>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                $crate::python::results::figures(slf.as_any(), $keys)?.call_method0("keys")
            }

            /// The ``(key, value)`` pairs, as a dict's ``items()``.
            ///
            /// Returns:
            ///     A view of the pairs, in the order of the attributes.
            ///
            /// Raises nothing.
            ///
            /// Example:
            ///     >>> quota = client.quota()  # every mapping result has it
            ///     >>> [key for key, value in quota.items() if value is None]  # no daily limit
            ///     ['limit', 'remaining']
            fn items<'py>(
                slf: &pyo3::Bound<'py, Self>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                $crate::python::results::figures(slf.as_any(), $keys)?.call_method0("items")
            }

            /// The values, as a dict's ``values()``.
            ///
            /// Returns:
            ///     A view of the values, in the order of the attributes.
            ///
            /// Raises nothing.
            ///
            /// Example:
            ///     >>> quota = client.quota()  # every mapping result has it
            ///     >>> list(quota.values())[:2] == [quota.limit, quota.used]
            ///     True
            fn values<'py>(
                slf: &pyo3::Bound<'py, Self>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                $crate::python::results::figures(slf.as_any(), $keys)?.call_method0("values")
            }

            /// The value of ``key``, or ``default`` when it has no such key.
            ///
            /// Args:
            ///     key: an attribute's name.
            ///     default: what to return when ``key`` is not one.
            ///
            /// Returns:
            ///     The attribute's value, or ``default``.
            ///
            /// Raises nothing.
            ///
            /// Example:
            ///     >>> quota = client.quota()  # every mapping result has it
            ///     >>> quota.get("used") == quota.used, quota.get("spent", 0)
            ///     (True, 0)
            #[pyo3(signature = (key, default=None, /))]
            fn get<'py>(
                slf: &pyo3::Bound<'py, Self>,
                key: &pyo3::Bound<'py, pyo3::PyAny>,
                default: Option<pyo3::Bound<'py, pyo3::PyAny>>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                match $crate::python::results::known(key, $keys) {
                    Some(k) => slf.getattr(k),
                    None => Ok(default.unwrap_or_else(|| slf.py().None().into_bound(slf.py()))),
                }
            }
        });
    };
    (plain $class:ty, $name:literal, $keys:expr, { $($extra:tt)* }) => {
        #[pymethods]
        impl $class {
            $($extra)*
        }
    };
    (record $class:ty, $name:literal, $keys:expr, { $($extra:tt)* }) => {
        $crate::python::results::result_methods!(@impl $class, $name, $keys, record_eq, {
            $($extra)*
        });
    };
}
pub(crate) use result_methods;
