//! A batch's rows as records: the columns that the checks and the keys read, each row written
//! as one record's JSON with the fast check of its model fused in, and the chunks of inputs
//! that publishing posts.

use super::*;
use crate::webhook::fast::position;
use crate::webhook::models::Model;

/// Where the columns that matter for the checks and keys are.
#[derive(Debug, Clone)]
pub(super) struct Positions {
    /// `"name":` of each column.
    pub(super) keys: Vec<Vec<u8>>,
    pub(super) names: Vec<String>,
    /// Which columns hold JSON text ([`is_json`]), written as they are.
    pub(super) json: Vec<bool>,
    /// The `dataType` or an upsert key field is such a column: each row is judged from its
    /// whole text, as a JSON Lines record is.
    pub(super) json_keys: bool,
    pub(super) items: Option<usize>,
    pub(super) data_type: Option<usize>,
    /// The columns of the models' upsert key fields, by name.
    pub(super) key_fields: Vec<(&'static str, usize)>,
    /// Each model's fields that the columns are, looked up once for every row.
    pub(super) layouts: Vec<RowLayout>,
}

/// Where a model has each column, and each member of the `items` structs among its item
/// fields (None: it has no such field).
#[derive(Debug, Clone)]
pub(super) struct RowLayout {
    model: &'static Model,
    columns: Vec<Option<usize>>,
    members: Vec<Option<usize>>,
}

impl RowLayout {
    /// Where the model has column `c`.
    fn column(&self, c: usize) -> Option<usize> {
        self.columns.get(c).copied().flatten()
    }

    fn of(model: &'static Model, schema: &Schema, items: Option<usize>) -> RowLayout {
        let item_fields = model
            .fields
            .iter()
            .find(|f| f.name == "items")
            .and_then(|f| match f.kind {
                Kind::Items(fields) => Some(fields),
                _ => None,
            });
        let members = match items.map(|i| element(schema.field(i).data_type())) {
            Some(Some(DataType::Struct(members))) => members
                .iter()
                .map(|m| item_fields.and_then(|f| position(f, m.name().as_bytes())))
                .collect(),
            _ => Vec::new(),
        };
        RowLayout {
            model,
            columns: schema
                .fields()
                .iter()
                .map(|f| position(model.fields, f.name().as_bytes()))
                .collect(),
            members,
        }
    }
}

impl Positions {
    /// The layout of the model named `data_type`, if there is one.
    fn layout(&self, data_type: &str) -> Option<&RowLayout> {
        self.layouts
            .iter()
            .find(|l| l.model.data_type == Some(data_type))
    }

    pub(super) fn new(schema: &Schema) -> Positions {
        let at = |name: &str| schema.index_of(name).ok();
        let json: Vec<bool> = schema.fields().iter().map(|f| is_json(f)).collect();
        let key_fields: Vec<(&'static str, usize)> = MODELS
            .iter()
            .flat_map(|m| m.key.iter())
            .filter_map(|name| Some((*name, at(name)?)))
            .collect();
        let items = at("items").filter(|&i| !json[i] && items_layout(schema.field(i).data_type()));
        Positions {
            keys: schema.fields().iter().map(|f| key_json(f.name())).collect(),
            names: schema.fields().iter().map(|f| f.name().clone()).collect(),
            json_keys: at("dataType")
                .into_iter()
                .chain(key_fields.iter().map(|(_, c)| *c))
                .any(|c| json[c]),
            json,
            items,
            data_type: at("dataType"),
            key_fields,
            layouts: MODELS
                .iter()
                .filter(|m| m.data_type.is_some())
                .map(|m| RowLayout::of(m, schema, items))
                .collect(),
        }
    }
}

/// A batch's columns, bound.
pub(super) struct Rows<'a> {
    pub(super) positions: &'a Positions,
    pub(super) cols: Vec<Col<'a>>,
}

/// What writing a row found.
pub(super) struct WrittenRow {
    /// The fast check's verdict (always true when not checking).
    pub(super) conforms: bool,
    /// The hashed upsert key; 0: none.
    pub(super) key: u64,
    /// A column of JSON text holds what the scanner leaves to the careful path (it may not be
    /// JSON): the row's whole text must be judged so.
    pub(super) careful: bool,
}

impl<'a> Rows<'a> {
    pub(super) fn bind(positions: &'a Positions, batch: &'a RecordBatch) -> Result<Rows<'a>> {
        if batch.num_columns() != positions.names.len() {
            return Err(Error::Io(format!(
                "a batch of the data has {} columns where its schema has {}",
                batch.num_columns(),
                positions.names.len()
            )));
        }
        let cols = batch
            .columns()
            .iter()
            .zip(&positions.names)
            .map(|(a, name)| {
                Col::bind(a.as_ref()).map_err(|t| {
                    Error::Io(format!(
                        "the column `{name}` of a batch cannot be written: {t}"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Rows { positions, cols })
    }

    pub(super) fn str_at(&self, col: Option<usize>, row: usize) -> Option<&'a str> {
        col.and_then(|c| self.cols.get(c))
            .and_then(|c| c.str_at(row))
    }

    /// The hashed upsert key of a row, as the scanner finds it in the row's JSON.
    pub(super) fn key(&self, row: usize) -> u64 {
        let column = |name: &str| self.positions.key_fields.iter().find(|(n, _)| *n == name);
        let value = |name: &str| self.str_at(column(name).map(|(_, c)| *c), row);
        self.str_at(self.positions.data_type, row)
            .and_then(model_named)
            .map_or(0, |m| m.key_hash(value))
    }

    /// Writes row `row` as a JSON object, deciding with `check` whether it conforms. The text
    /// of a column of JSON is written as it is, and scanned: as the record's items, checked,
    /// or as JSON (see [`WrittenRow::careful`]).
    pub(super) fn write(
        &self,
        row: usize,
        check: bool,
        lossy: bool,
        out: &mut Vec<u8>,
    ) -> std::result::Result<WrittenRow, Unwritable> {
        let mut careful = self.positions.json_keys;
        // The check of the row's model, and where that model has each column.
        let mut record = if check {
            self.str_at(self.positions.data_type, row)
                .and_then(|data_type| self.positions.layout(data_type))
                .map(|l| (Object::of_model(l.model), l))
        } else {
            None
        };
        let conforms_so_far = !check || record.is_some();
        out.push(b'{');
        let mut first = true;
        for (c, col) in self.cols.iter().enumerate() {
            if col.is_null(row) {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(&self.positions.keys[c]);
            let name = self.positions.names[c].as_str();
            if self.positions.json[c] {
                let text = col.str_at(row).unwrap_or("null");
                out.extend_from_slice(text.as_bytes());
                let checked = record.as_mut().map(|(rec, l)| (rec, l.column(c)));
                careful |= !json_checked(checked, text);
                continue;
            }
            let located = |mut e: Unwritable| {
                e.path = format!("{name}{}", e.path);
                e
            };
            let Some((rec, layout)) = record.as_mut() else {
                col.write(row, out, lossy).map_err(located)?;
                continue;
            };
            let Some(field) = rec.field_at(layout.column(c)) else {
                col.write(row, out, lossy).map_err(located)?;
                continue;
            };
            if let (Kind::Items(_), true) = (rec.kind(field), self.positions.items == Some(c)) {
                match rec.items(field) {
                    Some(items) => {
                        if !write_items(col, row, &items, &layout.members, out, lossy)
                            .map_err(located)?
                        {
                            rec.fail();
                        }
                    }
                    None => {
                        col.write(row, out, lossy).map_err(located)?;
                    }
                }
            } else {
                let value = col.write(row, out, lossy).map_err(located)?;
                rec.value(field, value);
            }
        }
        out.push(b'}');
        Ok(WrittenRow {
            conforms: conforms_so_far && record.as_ref().is_none_or(|(rec, _)| rec.complete()),
            key: self.key(row),
            careful,
        })
    }
}

/// Scans the JSON `text` of a field, checked as the record's items when it holds them
/// (`record`: the record's check and where its model has the field); false when the scanner
/// leaves it to the careful path (it may not be JSON, or it is a field of the model other than
/// items, which the fused check does not read).
fn json_checked(record: Option<(&mut Object, Option<usize>)>, text: &str) -> bool {
    let Some((rec, at)) = record else {
        return scan::is_json(text);
    };
    let Some(field) = rec.field_at(at) else {
        // Not a field of the model: the record does not conform (the validator says why).
        return scan::is_json(text);
    };
    if !matches!(rec.kind(field), Kind::Items(_)) {
        return false;
    }
    let Some(items) = rec.items(field) else {
        return false;
    };
    match scan::items_text(text, &items) {
        Some(true) => true,
        Some(false) => {
            rec.fail();
            true
        }
        None => false,
    }
}

/// Writes the `items` list of a row, checking each element; false when one does not conform.
/// `members`: where the item model has each of the structs' members.
pub(super) fn write_items(
    col: &Col<'_>,
    row: usize,
    items: &crate::webhook::fast::Items,
    members: &[Option<usize>],
    out: &mut Vec<u8>,
    lossy: bool,
) -> std::result::Result<bool, Unwritable> {
    let Values::List(offsets, child) = &col.values else {
        col.write(row, out, lossy)?;
        return Ok(false);
    };
    let mut ok = true;
    out.push(b'[');
    let mut n = 0;
    for j in offsets.range(row, child.len) {
        if child.is_null(j) {
            continue;
        }
        if n > 0 {
            out.push(b',');
        }
        let at = |mut e: Unwritable| {
            e.path = format!("[{n}]{}", e.path);
            e
        };
        let Values::Struct(structs) = &child.values else {
            child.write(j, out, lossy).map_err(at)?;
            ok = false;
            n += 1;
            continue;
        };
        let mut item = items.item();
        out.push(b'{');
        let mut first = true;
        for (k, m) in structs.iter().enumerate() {
            if m.col.is_null(j) {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(&m.key);
            let value = m.col.write(j, out, lossy).map_err(|mut e| {
                e.path = format!("[{n}].{}{}", m.name, e.path);
                e
            })?;
            if let Some(f) = item.field_at(members.get(k).copied().flatten()) {
                item.value(f, value);
            }
        }
        out.push(b'}');
        ok &= item.complete();
        n += 1;
    }
    out.push(b']');
    Ok(ok)
}

/// The inputs of rows `rows` of a batch, numbered from `index`: their JSON in one buffer, each
/// record a view of it. A row whose column of JSON text the scan could not judge is checked
/// from its whole text, as a JSON Lines record is.
pub(super) fn chunk(
    rows: &Rows<'_>,
    range: Range<usize>,
    index: u64,
    check: bool,
    size_hint: usize,
) -> Vec<Input> {
    let mut buf = Vec::with_capacity(size_hint);
    let mut spans = Vec::with_capacity(range.len());
    for row in range {
        let start = buf.len();
        let outcome = match rows.write(row, check, false, &mut buf) {
            Ok(w) => Ok(w),
            Err(e) => {
                buf.truncate(start);
                // Always writable: what has no JSON form is written as Python writes it.
                let _ = rows.write(row, false, true, &mut buf);
                Err(e)
            }
        };
        spans.push((start..buf.len(), outcome));
    }
    let bytes = Bytes::from(buf);
    spans
        .into_iter()
        .zip(index..)
        .map(|((span, outcome), index)| {
            let text = bytes.slice(span);
            match outcome {
                Ok(WrittenRow { careful: true, .. }) => check_text(index, None, text, check),
                Ok(WrittenRow {
                    conforms: true,
                    key,
                    ..
                }) => Input::Ready {
                    index,
                    line: None,
                    key,
                    text,
                },
                // The detailed validator says what is wrong, as it does for a dict.
                Ok(WrittenRow {
                    conforms: false, ..
                }) => match serde_json::from_slice::<Value>(&text) {
                    Ok(value) => checked_value(index, None, &value, text, true),
                    Err(e) => Input::Rejected {
                        index,
                        line: None,
                        problems: vec![error(String::new(), format!("not valid JSON: {e}"))],
                        text: Some(String::from_utf8_lossy(&text).into_owned()),
                    },
                },
                Err(e) => Input::Rejected {
                    index,
                    line: None,
                    problems: vec![error(e.path, e.message)],
                    text: Some(String::from_utf8_lossy(&text).into_owned()),
                },
            }
        })
        .collect()
}
