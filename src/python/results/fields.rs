//! Each result's one field list, [`result_class!`], from which its struct, attributes (with
//! their docstrings), constructor, keys and the field list it shows Python (`_fields`, which
//! the stubs are checked against) are all made; and how a field's value is taken from a
//! constructor's argument ([`Take`]), times ([`Time`]) included.

use pyo3::prelude::*;

use crate::python::conversions::time;

/// How a field's value is taken from the constructor's argument of its name: `Arg` is what
/// Python passes (the field's own type, for most).
pub trait Take: Sized {
    /// The argument's type, as the constructor extracts it.
    type Arg;
    /// The field's value of `arg`; `name` is the argument's, for the error.
    fn take(py: Python<'_>, arg: Self::Arg, name: &str) -> PyResult<Self>;
}

/// Fields taken as Python passes them.
macro_rules! taken_as_given {
    ($($ty:ty),* $(,)?) => {
        $(
            impl Take for $ty {
                type Arg = $ty;
                fn take(_py: Python<'_>, arg: $ty, _name: &str) -> PyResult<Self> {
                    Ok(arg)
                }
            }
        )*
    };
}

taken_as_given!(
    u64,
    Option<u16>,
    i64,
    f64,
    bool,
    String,
    Option<u64>,
    Option<String>,
    std::collections::BTreeMap<String, u64>,
    super::PyQuota,
    Option<super::PyQuota>,
);

/// A list of results, taken as Python passes it (each one checked to be of its class).
impl<T: pyo3::PyClass> Take for Vec<Py<T>> {
    type Arg = Vec<Py<T>>;
    fn take(_py: Python<'_>, arg: Vec<Py<T>>, _name: &str) -> PyResult<Self> {
        Ok(arg)
    }
}

/// An instant, kept as epoch milliseconds and shown as an aware UTC datetime; given as any
/// time `surveillance` reads (a datetime, date, pandas Timestamp or ISO-8601 string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Time(pub i64);

impl<'py> IntoPyObject<'py> for Time {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        time::utc(py, self.0)
    }
}

impl<'py> IntoPyObject<'py> for &Time {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        time::utc(py, self.0)
    }
}

impl Take for Time {
    type Arg = Py<PyAny>;
    fn take(py: Python<'_>, arg: Py<PyAny>, name: &str) -> PyResult<Self> {
        time::to_ms(arg.bind(py), name).map(Time)
    }
}

impl Take for Vec<(Time, Time)> {
    type Arg = Vec<(Py<PyAny>, Py<PyAny>)>;
    fn take(py: Python<'_>, arg: Self::Arg, name: &str) -> PyResult<Self> {
        arg.into_iter()
            .map(|(lo, hi)| Ok((Time::take(py, lo, name)?, Time::take(py, hi, name)?)))
            .collect()
    }
}

/// A result class from its one field list: the struct (`$attr`s, its `pyclass` included, on
/// it), each field a read-only attribute whose docstring is the field's doc, a constructor
/// taking the fields in order (`= default` where one is optional; all by keyword after
/// `[*]`), the keys (`KEYS`), the field lists Python sees (`_fields`: `(name,
/// annotation)` of each attribute, and `_arguments`: of each constructor argument, what the
/// stub must say), and the methods every result of its kind has (`mapping` or `record`, see
/// `result_methods!`; none for `plain`), with the class's own methods (`{ ... }`) among them.
///
/// A field is `/// doc`, `name: Type => "annotation"`, `as "annotation"` where the
/// constructor's argument is typed otherwise than the attribute, and `= default` where the
/// argument may be left out (a literal or `None`, which the signature Python reads shows, or
/// a `{ block }`, shown as `...` unless the class gives the signature Python shows, `shown
/// "(...)"`, after its name); `Type` is taken from its argument by [`Take`]. Fields after a
/// `;` (`name: Type = value`) are the class's own, neither attributes nor arguments.
macro_rules! result_class {
    (
        $(#[$attr:meta])*
        $kind:ident $class:ident $name:literal $(shown $shown:literal)? $([$star:tt])? {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty => $annotation:literal $(as $arg:literal)?
                    $(= $default:tt)?
            ),* $(,)?
            $(; $($own:ident : $own_ty:ty = $own_value:expr),* $(,)?)?
        }
        { $($methods:tt)* }
    ) => {
        $crate::python::results::fields::result_class!(@build
            $(#[$attr])*
            $kind $class $name [$($shown)?]
            ($($star,)? $($field $(= $default)?),*)
            {
                $(
                    $(#[doc = $doc])*
                    $field : $ty => $annotation $(as $arg)?
                ),*
                ; $($($own : $own_ty = $own_value),*)?
            }
            { $($methods)* }
        );
    };
    (@build
        $(#[$attr:meta])*
        $kind:ident $class:ident $name:literal [$($shown:literal)?] ($($signature:tt)*)
        {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty => $annotation:literal $(as $arg:literal)?
            ),*
            ; $($own:ident : $own_ty:ty = $own_value:expr),*
        }
        { $($methods:tt)* }
    ) => {
        $(#[$attr])*
        pub struct $class {
            $(
                $(#[doc = $doc])*
                #[pyo3(get)]
                pub(super) $field: $ty,
            )*
            $(pub(super) $own: $own_ty,)*
        }

        impl $class {
            /// The attributes, in the constructor's order.
            const KEYS: &'static [&'static str] = &[$(stringify!($field)),*];
        }

        $crate::python::results::result_methods!($kind $class, $name, $class::KEYS, {
            #[new]
            #[pyo3(signature = ($($signature)*))]
            $(#[pyo3(text_signature = $shown)])?
            #[allow(clippy::too_many_arguments)] // one argument per field
            fn new(
                py: pyo3::Python<'_>,
                $($field: <$ty as $crate::python::results::fields::Take>::Arg),*
            ) -> pyo3::PyResult<Self> {
                Ok($class {
                    $($field: $crate::python::results::fields::Take::take(
                        py,
                        $field,
                        stringify!($field),
                    )?,)*
                    $($own: $own_value,)*
                })
            }

            /// The attributes, in order, as ``(name, annotation)``: what the stubs say.
            #[classattr]
            fn _fields() -> Vec<(&'static str, &'static str)> {
                vec![$((stringify!($field), $annotation)),*]
            }

            /// The constructor's arguments, in order, as ``(name, annotation)``.
            #[classattr]
            fn _arguments() -> Vec<(&'static str, &'static str)> {
                vec![$((
                    stringify!($field),
                    $crate::python::results::fields::result_class!(@first $($arg)? $annotation),
                )),*]
            }

            $($methods)*
        });
    };
    (@first $first:literal $($rest:literal)?) => {
        $first
    };
}
pub(crate) use result_class;
