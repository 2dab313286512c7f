//! The fast check: whether a record conforms to its model (errors only; warnings never stop a
//! record), decided while the record is written or scanned, field by field, from the static
//! tables, with no tree and no allocation. A writer drives it:
//! - [`Object::record`] with the record's `dataType` (no model: the record has errors);
//! - [`Object::field`] for each key, then [`Object::value`] with what the value is
//!   ([`Scalar`]), or [`Object::items`] and an [`Object`] per element for `items`;
//! - [`Object::complete`] at the end: every required field was there.
//!
//! Its verdict agrees with the detailed validator ([`super::validate`]) on every record made of
//! JSON values (the property tests check it): a record it refuses goes to the detailed
//! validator, which says what is wrong. Where a writer meets something it cannot judge (a
//! mapping that may repeat a key, a value with no JSON type of its own), it gives up on the
//! fast check and asks the detailed validator.

use super::models::{model_named, Field, Kind, Model};
use crate::time::parse_iso;

/// What a value is, as far as the checks go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    /// `null`: the field is absent (an error only for a required field).
    Null,
    /// `true` or `false`.
    Bool,
    /// An integer from 0 to `u64::MAX`.
    UInt(u64),
    /// A negative integer.
    NegInt,
    /// An integer above `u64::MAX` (JSON readers take it as a float).
    BigInt,
    /// A finite float.
    Float(f64),
    /// A string (its contents, unescaped).
    Str(&'a str),
    /// An object, or an array where `items` is not expected.
    Container,
}

/// The check of one object: a record under its model, or an item under its item fields.
#[derive(Debug, Clone)]
pub struct Object {
    fields: &'static [Field],
    /// Fields named so far (a name twice is left to the detailed validator).
    named: u32,
    /// Fields present with a value (not null).
    present: u32,
    /// The position of the next field in model order: records are written in one order.
    hint: usize,
    ok: bool,
}

impl Object {
    /// The check of a record whose `dataType` is `data_type`; None when it names no model
    /// (such a record has an error).
    #[must_use]
    pub fn record(data_type: &str) -> Option<Object> {
        model_named(data_type).map(Object::of_model)
    }

    /// The check of a record under `model`.
    #[must_use]
    pub fn of_model(model: &'static Model) -> Object {
        Object::new(model.fields)
    }

    fn new(fields: &'static [Field]) -> Object {
        debug_assert!(fields.len() <= 32);
        Object {
            fields,
            named: 0,
            present: 0,
            hint: 0,
            ok: true,
        }
    }

    /// The field called `name`, to check its value with [`value`](Self::value) or
    /// [`items`](Self::items); None (and the object does not conform) when the model has no
    /// such field, or it was named before.
    pub fn field(&mut self, name: &[u8]) -> Option<FieldRef> {
        let n = self.fields.len();
        let at = if self.hint < n && self.fields[self.hint].name.as_bytes() == name {
            Some(self.hint)
        } else {
            position(self.fields, name)
        };
        self.field_at(at)
    }

    /// As [`field`](Self::field), for the field at `at` in its model, as [`position`] found it
    /// beforehand (None: the model has no such field): what writes many records of one layout
    /// looks each name up once.
    pub fn field_at(&mut self, at: Option<usize>) -> Option<FieldRef> {
        let Some(i) = at.filter(|&i| i < self.fields.len()) else {
            self.ok = false;
            return None;
        };
        let bit = 1u32 << i;
        if self.named & bit != 0 {
            self.ok = false;
            return None;
        }
        self.named |= bit;
        self.hint = i + 1;
        Some(FieldRef(i as u8))
    }

    /// The name of `field` (as the model writes it, which JSON writes with no escape).
    #[must_use]
    pub fn name(&self, field: FieldRef) -> &'static str {
        self.fields[field.0 as usize].name
    }

    /// The kind of value `field` holds.
    #[must_use]
    pub fn kind(&self, field: FieldRef) -> Kind {
        self.fields[field.0 as usize].kind
    }

    /// Checks the value of `field`; false (and the object does not conform) when it does not
    /// fit. A `null` is an absent field.
    pub fn value(&mut self, field: FieldRef, value: Scalar<'_>) -> bool {
        let f = &self.fields[field.0 as usize];
        let fits = match value {
            Scalar::Null => !f.required,
            v => {
                let fits = scalar_fits(f.kind, v);
                if fits {
                    self.present |= 1 << field.0;
                }
                fits
            }
        };
        self.ok &= fits;
        fits
    }

    /// `field` holds an array whose elements are checked by the returned item checker (one
    /// [`Object::item`] per element); None (and the object does not conform) when the field
    /// holds no items.
    pub fn items(&mut self, field: FieldRef) -> Option<Items> {
        match self.fields[field.0 as usize].kind {
            Kind::Items(item_fields) => {
                self.present |= 1 << field.0;
                Some(Items(item_fields))
            }
            _ => {
                self.ok = false;
                None
            }
        }
    }

    /// Marks the object as not conforming (a value the writer found wrong itself, e.g. an
    /// element of `items` that does not conform).
    pub fn fail(&mut self) {
        self.ok = false;
    }

    /// True when the object conforms: every field known, every value fitting, every required
    /// field present.
    #[must_use]
    pub fn complete(&self) -> bool {
        let required = self
            .fields
            .iter()
            .enumerate()
            .filter(|(_, f)| f.required)
            .fold(0u32, |m, (i, _)| m | 1 << i);
        self.ok && self.present & required == required
    }
}

/// The position of the field called `name` among `fields` (a model's, or an item's), for
/// [`Object::field_at`].
#[must_use]
pub fn position(fields: &[Field], name: &[u8]) -> Option<usize> {
    fields.iter().position(|f| f.name.as_bytes() == name)
}

/// A field of an [`Object`] (its position in the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldRef(u8);

/// The fields of the elements of an `items` array.
#[derive(Debug, Clone, Copy)]
pub struct Items(&'static [Field]);

impl Items {
    /// The check of one element (which must be an object).
    #[must_use]
    pub fn item(&self) -> Object {
        Object::new(self.0)
    }
}

/// Whether a value that is not null fits a field of `kind` (errors only).
#[must_use]
pub fn scalar_fits(kind: Kind, value: Scalar<'_>) -> bool {
    match (kind, value) {
        (_, Scalar::Null) => false,
        (Kind::DataType, Scalar::Str(s)) => model_named(s).is_some(),
        (Kind::SchemaVersion, Scalar::Str(s)) => s == "1",
        (Kind::Id, Scalar::Str(s)) => !s.is_empty(),
        (Kind::Text | Kind::Status | Kind::ItemType | Kind::TableNumber, Scalar::Str(_)) => true,
        (Kind::Time, Scalar::Str(s)) => parse_iso(s.as_bytes()).is_ok(),
        // Epoch milliseconds: a JSON number that reads as an integer from 0 (an integral
        // float below 9e18 too); a negative or larger one is not a time.
        (Kind::Time, Scalar::UInt(_)) => true,
        (Kind::Time, Scalar::Float(f)) => f >= 0.0 && f.fract() == 0.0 && f < 9.0e18,
        (Kind::Number, Scalar::UInt(_) | Scalar::NegInt | Scalar::BigInt | Scalar::Float(_)) => {
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(data_type: &str, fields: &[(&str, Scalar<'_>)]) -> bool {
        let Some(mut o) = Object::record(data_type) else {
            return false;
        };
        for (name, v) in fields {
            match o.field(name.as_bytes()) {
                Some(f) if matches!(o.kind(f), Kind::Items(_)) => {
                    let _ = o.items(f);
                }
                Some(f) => {
                    o.value(f, *v);
                }
                None => {}
            }
        }
        o.complete()
    }

    #[test]
    fn a_complete_other_record_conforms() {
        let base = [
            ("dataType", Scalar::Str("other")),
            ("schemaVersion", Scalar::Str("1")),
            ("startTime", Scalar::UInt(1_794_891_600_000)),
            ("locationId", Scalar::Str("s")),
            ("dataSourceId", Scalar::Str("d")),
            ("eventUniqueId", Scalar::Str("e")),
            ("eventType", Scalar::Str("door")),
        ];
        assert!(check("other", &base));
        let mut missing = base.to_vec();
        missing.pop();
        assert!(!check("other", &missing));
        let mut unknown = base.to_vec();
        unknown.push(("storeId", Scalar::Str("s")));
        assert!(!check("other", &unknown));
        let mut twice = base.to_vec();
        twice.push(("locationId", Scalar::Str("t")));
        assert!(!check("other", &twice));
        let mut optional_null = base.to_vec();
        optional_null.push(("endTime", Scalar::Null));
        assert!(check("other", &optional_null));
        let mut required_null = base.to_vec();
        required_null[3].1 = Scalar::Null;
        assert!(!check("other", &required_null));
        assert!(!check("nope", &base));
    }

    #[test]
    fn scalars_fit_their_kinds() {
        assert!(scalar_fits(Kind::Time, Scalar::Str("2026-11-17T05:00:00Z")));
        assert!(!scalar_fits(Kind::Time, Scalar::Str("2026-11-17T05:00:00")));
        assert!(scalar_fits(Kind::Time, Scalar::Float(1.7e12)));
        assert!(!scalar_fits(Kind::Time, Scalar::Float(1.5)));
        assert!(!scalar_fits(Kind::Time, Scalar::NegInt));
        assert!(!scalar_fits(Kind::Time, Scalar::BigInt));
        assert!(!scalar_fits(Kind::Number, Scalar::Bool));
        assert!(!scalar_fits(Kind::Number, Scalar::Str("1")));
        assert!(!scalar_fits(Kind::Id, Scalar::Str("")));
        assert!(!scalar_fits(Kind::SchemaVersion, Scalar::UInt(1)));
        assert!(!scalar_fits(Kind::TableNumber, Scalar::UInt(12)));
        assert!(!scalar_fits(Kind::Text, Scalar::Container));
    }

    #[test]
    fn field_names_need_no_escape_in_json() {
        // Writers copy a known field's name as its key's JSON (`Object::name`).
        let plain = |f: &Field| {
            assert!(
                f.name.bytes().all(|b| b.is_ascii_alphanumeric()),
                "{}",
                f.name
            );
        };
        for model in crate::webhook::models::MODELS {
            for f in model.fields {
                plain(f);
                if let Kind::Items(items) = f.kind {
                    items.iter().for_each(plain);
                }
            }
        }
    }

    /// A field looked up beforehand (`position`, `field_at`) is checked as one looked up by
    /// name: unknown names and names given twice spoil the object either way.
    #[test]
    fn fields_looked_up_beforehand_are_checked_as_by_name() {
        let names = [
            "dataType",
            "locationId",
            "colour",
            "startTime",
            "locationId",
            "items",
            "status",
        ];
        let model = model_named("retail").expect("retail");
        let mut by_name = Object::of_model(model);
        let mut at = Object::of_model(model);
        for name in names {
            let a = by_name.field(name.as_bytes());
            let b = at.field_at(position(model.fields, name.as_bytes()));
            assert_eq!(a, b, "{name}");
            assert_eq!(by_name.ok, at.ok, "{name}");
            assert_eq!(by_name.named, at.named, "{name}");
        }
        assert!(!at.ok);
        assert_eq!(at.field_at(Some(model.fields.len())), None);
    }
}
