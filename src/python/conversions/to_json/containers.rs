//! Dicts and lists, and the fast check of their keys and items against the record's model.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use pyo3::Borrowed;

use crate::client::publish::json::write_str;
use crate::webhook::fast::{self, FieldRef, Object};
use crate::webhook::models::Kind;

use super::conv_error::{type_name, ConvError, Seg};
use super::scalars::utf8;
use super::{FastValue, Writer};

impl<'py> Writer<'py> {
    /// An object: a dict or a dict subclass (its own entries, as `dict` iterates them); with
    /// `check`, each key and value checked as they are written.
    pub(super) fn object(
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

    pub(super) fn entry(
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
    pub(super) fn field(
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
    pub(super) fn array(
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
    pub(super) fn element(
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
}
