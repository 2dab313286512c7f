//! How results read, in a terminal and in Jupyter, written once for every result of the
//! package: a value as a person reads it ([`text`]), a result's figures as `Name(a=1, ...)`
//! ([`fields`]) and as an HTML table ([`table`], a `_repr_html_`), with the HTML pieces that
//! the publish report's own table is made of ([`esc`], [`rows_table`], [`grid`]).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PySet, PyTuple};

use super::{is_result, mapping_class};
use crate::python::conversions::time;

/// `text` as Python's `html.escape` writes it.
pub fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;")
}

/// `<b>{title}</b>{after}<table>` of one row per `(name, value)`, the name as a left-aligned
/// header: a result's figures. `title` and `after` are HTML already; the rows are escaped.
pub fn rows_table(title: &str, after: &str, rows: &[(String, String)]) -> String {
    let body: String = rows
        .iter()
        .map(|(k, v)| {
            format!(
                "<tr><th style='text-align:left'>{}</th><td>{}</td></tr>",
                esc(k),
                esc(v)
            )
        })
        .collect();
    format!("<b>{}</b>{after}<table>{body}</table>", esc(title))
}

/// A table with a header row of `columns` and one row of cells each (escaped here).
pub fn grid(columns: &[String], rows: &[Vec<String>]) -> String {
    let head: String = columns
        .iter()
        .map(|c| format!("<th>{}</th>", esc(c)))
        .collect();
    let body: String = rows
        .iter()
        .map(|row| {
            let cells: String = row.iter().map(|c| format!("<td>{}</td>", esc(c))).collect();
            format!("<tr>{cells}</tr>")
        })
        .collect();
    format!("<table><tr>{head}</tr>{body}</table>")
}

/// Python's `format(value, spec)`.
pub fn format(value: &Bound<'_, PyAny>, spec: &str) -> PyResult<String> {
    static FORMAT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = value.py();
    let format = FORMAT.get_or_try_init(py, || {
        py.import("builtins")?.getattr("format").map(Bound::unbind)
    })?;
    format.bind(py).call1((value, spec))?.extract()
}

/// A value as a person reads it: times in ISO 8601 UTC (`2026-01-05T06:00:00Z`, milliseconds
/// when there are some), counts with separators (`14,799`; without them when `sep` is false,
/// for a repr's `name=value`), floats to two places, a pair as `a .. b`, a nested result by
/// its repr, a mapping as `{k: v}`, lists item by item.
pub fn text(value: &Bound<'_, PyAny>, sep: bool) -> PyResult<String> {
    let py = value.py();
    if value.is_none() || value.is_instance_of::<PyBool>() {
        return Ok(value.str()?.to_string());
    }
    if value.is_instance_of::<PyInt>() {
        return if sep {
            format(value, ",")
        } else {
            Ok(value.str()?.to_string())
        };
    }
    if value.is_instance_of::<PyFloat>() {
        return format(value, if sep { ",.2f" } else { ".2f" });
    }
    if time::is_datetime(value)? {
        let utc = value.call_method1(intern!(py, "astimezone"), (time::utc_zone(py)?,))?;
        let micros: u32 = utc.getattr(intern!(py, "microsecond"))?.extract()?;
        let frac = if micros != 0 {
            format!(".{:03}", micros / 1000)
        } else {
            String::new()
        };
        let whole = utc
            .call_method1(intern!(py, "strftime"), ("%Y-%m-%dT%H:%M:%S",))?
            .str()?
            .to_string();
        return Ok(format!("{whole}{frac}Z"));
    }
    if let Ok(pair) = value.cast::<PyTuple>() {
        if pair.len() == 2 {
            return Ok(format!(
                "{} .. {}",
                text(&pair.get_item(0)?, sep)?,
                text(&pair.get_item(1)?, sep)?
            ));
        }
    }
    if is_result(value) || (value.hasattr("_repr_html_")? && value.hasattr("to_dict")?) {
        return Ok(value.repr()?.to_string());
    }
    if value.is_instance(mapping_class(py)?)? {
        let parts = value
            .call_method0(intern!(py, "items"))?
            .try_iter()?
            .map(|item| {
                let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
                Ok(format!("{}: {}", k.str()?, text(&v, sep)?))
            })
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(format!("{{{}}}", parts.join(", ")));
    }
    if value.is_instance_of::<PyList>()
        || value.is_instance_of::<PyTuple>()
        || value.is_instance_of::<PySet>()
    {
        let parts = value
            .try_iter()?
            .map(|v| text(&v?, sep))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(format!("[{}]", parts.join(", ")));
    }
    Ok(value.str()?.to_string())
}

/// `name(a=1, b=None, ...)` of a result's figures (`items`, in order): times in ISO 8601 UTC,
/// a nested result by its own repr.
pub fn fields(name: &str, items: &[(String, Bound<'_, PyAny>)]) -> PyResult<String> {
    let parts = items
        .iter()
        .map(|(k, v)| Ok(format!("{k}={}", text(v, false)?)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(format!("{name}({})", parts.join(", ")))
}

/// A result's figures (`items`, in order) as an HTML table under `title`; a figure that is a
/// list of mappings (a cache's entries) becomes a table of its own below, one row each.
pub fn table(title: &str, items: &[(String, Bound<'_, PyAny>)]) -> PyResult<String> {
    let mut rows = Vec::new();
    let mut nested = Vec::new();
    for (name, value) in items {
        if let Ok(list) = value.cast::<PyList>() {
            let mapping = mapping_class(value.py())?;
            let all = list
                .iter()
                .map(|v| v.is_instance(mapping))
                .collect::<PyResult<Vec<bool>>>()?;
            if !list.is_empty() && all.iter().all(|m| *m) {
                nested.push((name, list));
                continue;
            }
        }
        rows.push((name.clone(), text(value, true)?));
    }
    let mut out = rows_table(title, "", &rows);
    for (name, values) in nested {
        let mut columns: Vec<String> = Vec::new();
        for v in values.iter() {
            for k in v.try_iter()? {
                let k = k?.str()?.to_string();
                if !columns.contains(&k) {
                    columns.push(k);
                }
            }
        }
        let cells = values
            .iter()
            .map(|v| {
                columns
                    .iter()
                    .map(|c| text(&v.call_method1(intern!(v.py(), "get"), (c,))?, true))
                    .collect::<PyResult<Vec<_>>>()
            })
            .collect::<PyResult<Vec<_>>>()?;
        out.push_str(&format!("<p>{}</p>{}", esc(name), grid(&columns, &cells)));
    }
    Ok(out)
}

/// ``items`` (``(name, value)`` pairs, in order) as the HTML table of a result called
/// ``title``, for a ``_repr_html_``: the table every result of the package is drawn with.
///
/// Raises nothing.
#[pyfunction]
pub fn html_table(title: &str, items: Vec<(String, Bound<'_, PyAny>)>) -> PyResult<String> {
    table(title, &items)
}
