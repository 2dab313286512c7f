//! `struct_list_column`: a DataFrame's column of lists of flat dicts (a sale's `items`) as one
//! Arrow `large_list<struct>` column, built straight from the Python objects, so that the core
//! writes and checks it as it does a pyarrow Table's `items` (`columns::rows::write_items`,
//! the model check fused into the writing) instead of writing it as JSON text here and scanning
//! that text again there.
//!
//! Only where the records' JSON stays exactly what the dict path writes: every dict has the
//! same keys in the same order (the struct's fields, whose order the core writes) and each key
//! holds one exact type throughout (str, bool, an int of 64 bits, a finite float), none of them
//! None (the core leaves a null member out, where the dict path writes `null`). Anything else
//! answers None, and the caller writes the column as JSON text (`json_column`).

use std::os::raw::c_int;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, LargeStringBuilder};
use arrow_array::{ArrayRef, LargeListArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields};
use pyo3::prelude::*;
use pyo3::{ffi, Borrowed};

use super::columns::missing;
use crate::python::conversions::to_json::utf8;

/// The builder of one member, by the exact type of its first value.
enum Member {
    Str(LargeStringBuilder),
    Bool(BooleanBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
}

impl Member {
    /// A builder for `value`'s type, sized for `items` values like it, or None for a type
    /// that is not kept.
    fn of(value: Borrowed<'_, '_, PyAny>, items: usize) -> Option<Member> {
        // SAFETY: reads the type of a live object.
        let t = unsafe { ffi::Py_TYPE(value.as_ptr()) };
        Some(if t == &raw mut ffi::PyUnicode_Type {
            let bytes = utf8(&value).map_or(0, |s| s.len());
            Member::Str(LargeStringBuilder::with_capacity(
                items,
                items.saturating_mul(bytes + bytes / 4 + 4),
            ))
        } else if t == &raw mut ffi::PyBool_Type {
            Member::Bool(BooleanBuilder::with_capacity(items))
        } else if t == &raw mut ffi::PyLong_Type {
            Member::Int(Int64Builder::with_capacity(items))
        } else if t == &raw mut ffi::PyFloat_Type {
            Member::Float(Float64Builder::with_capacity(items))
        } else {
            return None;
        })
    }

    /// Appends `value`; false when it is not of this member's exact type or has no place in it
    /// (an int beyond 64 bits, a float with no JSON form, a str that is not Unicode).
    fn push(&mut self, value: Borrowed<'_, '_, PyAny>) -> bool {
        let p = value.as_ptr();
        // SAFETY: reads the type of a live object; the calls below take the exact type they
        // were checked for, with the GIL held.
        let t = unsafe { ffi::Py_TYPE(p) };
        match self {
            Member::Str(b) if t == &raw mut ffi::PyUnicode_Type => match utf8(&value) {
                Ok(s) => {
                    b.append_value(s);
                    true
                }
                Err(_) => false,
            },
            Member::Bool(b) if t == &raw mut ffi::PyBool_Type => {
                b.append_value(p == unsafe { ffi::Py_True() });
                true
            }
            Member::Int(b) if t == &raw mut ffi::PyLong_Type => {
                let mut overflow: c_int = 0;
                let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(p, &mut overflow) };
                if overflow != 0 || (v == -1 && unsafe { !ffi::PyErr_Occurred().is_null() }) {
                    unsafe { ffi::PyErr_Clear() };
                    return false;
                }
                b.append_value(v);
                true
            }
            Member::Float(b) if t == &raw mut ffi::PyFloat_Type => {
                let v = unsafe { ffi::PyFloat_AsDouble(p) };
                b.append_value(v);
                v.is_finite()
            }
            _ => false,
        }
    }

    fn finish(self) -> (DataType, ArrayRef) {
        match self {
            Member::Str(mut b) => (DataType::LargeUtf8, Arc::new(b.finish())),
            Member::Bool(mut b) => (DataType::Boolean, Arc::new(b.finish())),
            Member::Int(mut b) => (DataType::Int64, Arc::new(b.finish())),
            Member::Float(mut b) => (DataType::Float64, Arc::new(b.finish())),
        }
    }
}

/// The members of the struct: each key's object (compared by address first: a DataFrame's
/// dicts usually share their key objects), its text, and its builder.
struct Shape {
    keys: Vec<(Py<PyAny>, String)>,
    members: Vec<Member>,
}

impl Shape {
    /// The shape of the first dict, its builders sized for `items` dicts; None when a key is
    /// not a str or a value is not kept.
    fn of(dict: Borrowed<'_, '_, PyAny>, items: usize) -> Option<Shape> {
        let mut keys = Vec::new();
        let mut members = Vec::new();
        for (k, v) in entries(dict) {
            // SAFETY: reads the type of a live object.
            if unsafe { ffi::PyUnicode_CheckExact(k.as_ptr()) } == 0 {
                return None;
            }
            let text = utf8(&k).ok()?.into_owned();
            keys.push((k.to_owned().unbind(), text));
            members.push(Member::of(v, items)?);
        }
        (!keys.is_empty()).then_some(Shape { keys, members })
    }

    /// Appends the dict's values; false when its keys or their types differ from the shape's.
    fn push(&mut self, dict: Borrowed<'_, '_, PyAny>) -> bool {
        // SAFETY: `dict` is an exact dict (checked by the caller).
        if unsafe { ffi::PyDict_Size(dict.as_ptr()) } != self.keys.len() as ffi::Py_ssize_t {
            return false;
        }
        for (i, (k, v)) in entries(dict).enumerate() {
            let Some((key, text)) = self.keys.get(i) else {
                return false;
            };
            let same = k.as_ptr() == key.as_ptr()
                || (unsafe { ffi::PyUnicode_CheckExact(k.as_ptr()) } != 0
                    && utf8(&k).is_ok_and(|t| t == text.as_str()));
            if !same || !self.members[i].push(v) {
                return false;
            }
        }
        true
    }
}

/// The entries of an exact dict, borrowed: nothing here runs Python code, so the dict cannot
/// change while they are read.
fn entries<'a, 'py>(
    dict: Borrowed<'a, 'py, PyAny>,
) -> impl Iterator<Item = (Borrowed<'a, 'py, PyAny>, Borrowed<'a, 'py, PyAny>)> {
    let py = dict.py();
    let d = dict.as_ptr();
    let mut pos: ffi::Py_ssize_t = 0;
    std::iter::from_fn(move || {
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut v: *mut ffi::PyObject = std::ptr::null_mut();
        // SAFETY: `d` is a dict; PyDict_Next stays in bounds and hands out borrowed references
        // that live as long as the dict is not changed (nothing here changes it).
        if unsafe { ffi::PyDict_Next(d, &mut pos, &mut k, &mut v) } == 0 {
            return None;
        }
        Some(unsafe { (Borrowed::from_ptr(py, k), Borrowed::from_ptr(py, v)) })
    })
}

/// The elements of an exact list or tuple, borrowed (see `entries`).
fn elements<'a, 'py>(
    seq: Borrowed<'a, 'py, PyAny>,
) -> Option<impl ExactSizeIterator<Item = Borrowed<'a, 'py, PyAny>>> {
    let py = seq.py();
    let p = seq.as_ptr();
    // SAFETY: reads the type of a live object, then the size and items of that exact type.
    let t = unsafe { ffi::Py_TYPE(p) };
    let list = t == &raw mut ffi::PyList_Type;
    if !list && t != &raw mut ffi::PyTuple_Type {
        return None;
    }
    let len = unsafe {
        if list {
            ffi::PyList_Size(p)
        } else {
            ffi::PyTuple_Size(p)
        }
    };
    Some((0..len).map(move |i| unsafe {
        Borrowed::from_ptr(
            py,
            if list {
                ffi::PyList_GetItem(p, i)
            } else {
                ffi::PyTuple_GetItem(p, i)
            },
        )
    }))
}

fn is_dict(obj: Borrowed<'_, '_, PyAny>) -> bool {
    // SAFETY: reads the type of a live object.
    unsafe { ffi::Py_TYPE(obj.as_ptr()) == &raw mut ffi::PyDict_Type }
}

/// The values of `values` (a pandas object column's `tolist()`) as one Arrow
/// `large_list<struct>` column when they are lists of flat dicts of one shape (see the
/// module's documentation; a missing value, None, NaN, NaT or NA, is a null list), else None:
/// for publishing a DataFrame's `items` as the core publishes a pyarrow Table's.
#[pyfunction]
pub fn struct_list_column(values: &Bound<'_, PyAny>) -> PyResult<Option<pyo3_arrow::PyArray>> {
    let n = values.len().unwrap_or(0);
    let mut shape: Option<Shape> = None;
    let mut offsets: Vec<i64> = Vec::with_capacity(n + 1);
    offsets.push(0);
    let mut nulls = NullBufferBuilder::new(n);
    let mut count: i64 = 0;
    for value in values.try_iter()? {
        let value = value?;
        if missing(&value) {
            nulls.append_null();
            offsets.push(count);
            continue;
        }
        let Some(items) = elements(value.as_borrowed()) else {
            return Ok(None);
        };
        let row_items = items.len();
        for item in items {
            if !is_dict(item) {
                return Ok(None);
            }
            let kept = match &mut shape {
                Some(s) => s.push(item),
                // The first list sizes the builders: as many items in every row (an eighth
                // over).
                None => match Shape::of(item, n.saturating_mul(row_items) / 8 * 9 + 16) {
                    Some(mut s) => {
                        let kept = s.push(item);
                        shape = Some(s);
                        kept
                    }
                    None => false,
                },
            };
            if !kept {
                return Ok(None);
            }
            count += 1;
        }
        nulls.append_non_null();
        offsets.push(count);
    }
    // A column of empty lists only has no shape to take: JSON text says the same.
    let Some(shape) = shape else {
        return Ok(None);
    };
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = shape
        .keys
        .iter()
        .zip(shape.members)
        .map(|((_, name), member)| {
            let (data_type, array) = member.finish();
            (Field::new(name, data_type, false), array)
        })
        .unzip();
    let fields = Fields::from(fields);
    let structs = StructArray::try_new(fields.clone(), arrays, None)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("cannot build: {e}")))?;
    let item = Arc::new(Field::new("item", DataType::Struct(fields), false));
    let list = LargeListArray::try_new(
        item.clone(),
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Arc::new(structs),
        nulls.finish(),
    )
    .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("cannot build: {e}")))?;
    let field = Field::new("", DataType::LargeList(item), true);
    Ok(Some(pyo3_arrow::PyArray::new(
        Arc::new(list),
        Arc::new(field),
    )))
}
