//! The webhook's standard object models (WEBHOOK-MODELS.md): fields, types, required sets,
//! legacy names and published value sets, as static tables that every checker reads: the
//! detailed validator, the fast checks of the publishing paths, and the emulator.

/// What a field holds, and how it is checked.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// The discriminator; checked by `select_model` before the field walk.
    DataType,
    /// Always the string `"1"`.
    SchemaVersion,
    /// Epoch milliseconds or an ISO-8601 timestamp with a zone.
    Time,
    /// A string that identifies something, so it must not be empty.
    Id,
    /// Any string.
    Text,
    /// Any JSON number.
    Number,
    /// retail/restaurant `status`: a string, warned about outside the published values.
    Status,
    /// retail/restaurant item `type`: a string, warned about outside the published (open) list.
    ItemType,
    /// A string that senders often send as a number.
    TableNumber,
    /// An array of objects following the given item fields.
    Items(&'static [Field]),
}

/// One field of a model.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The field's name.
    pub name: &'static str,
    /// Whether the model requires it.
    pub required: bool,
    /// What it holds.
    pub kind: Kind,
}

const fn req(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        required: true,
        kind,
    }
}

const fn opt(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        required: false,
        kind,
    }
}

/// The fields of `first` followed by those of `then`, as a constant (`N` is their sum).
const fn followed<const A: usize, const B: usize, const N: usize>(
    first: [Field; A],
    then: [Field; B],
) -> [Field; N] {
    assert!(A + B == N, "`N` must be the count of both parts' fields");
    let mut out = [opt("", Kind::Text); N];
    let mut i = 0;
    while i < N {
        out[i] = if i < A { first[i] } else { then[i - A] };
        i += 1;
    }
    out
}

/// One standard model: the fields of a `dataType`.
#[derive(Debug)]
pub struct Model {
    /// The `dataType` it is for; `None` for the shared fields, checked when a record's dataType
    /// is unusable.
    pub data_type: Option<&'static str>,
    /// Its fields, in the order the models page lists them.
    pub fields: &'static [Field],
    /// Names accepted besides `fields` (used when the model is unknown).
    pub also_known: &'static [&'static str],
    /// The fields whose values identify a record: a record with the same values replaces the
    /// one stored (the upsert key). Empty for the shared fields.
    pub key: &'static [&'static str],
}

impl Model {
    /// The upsert key of a record whose key fields have the values `value` gives (asked in the
    /// order of [`Model::key`]): the values joined by the unit separator, which cannot appear
    /// in ordinary ids, so the parts stay unambiguous. None when a value is missing or empty
    /// (such a record fails validation, so it has no key).
    pub fn key_text<S: AsRef<str>>(&self, value: impl FnMut(&str) -> Option<S>) -> Option<String> {
        let parts = self.key_parts(value)?;
        let parts: Vec<&str> = parts.iter().map(AsRef::as_ref).collect();
        Some(parts.join("\u{1f}"))
    }

    /// The upsert key of a record as its fields and their values, in the order of
    /// [`Model::key`]; None as for [`Model::key_text`].
    pub fn key_fields<S: AsRef<str>>(
        &self,
        value: impl FnMut(&str) -> Option<S>,
    ) -> Option<Vec<(&'static str, S)>> {
        let parts = self.key_parts(value)?;
        Some(self.key.iter().copied().zip(parts).collect())
    }

    /// [`Model::key_text`], hashed (FNV-1a, mixed: keys are short ids, and a collision only
    /// makes two records wait for each other, which is how publishing uses it: records with
    /// one key are never in flight together); never 0, which stands for no key.
    pub fn key_hash<S: AsRef<str>>(&self, value: impl FnMut(&str) -> Option<S>) -> u64 {
        let Some(parts) = self.key_parts(value) else {
            return 0;
        };
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                h ^= 0x1f;
            }
            for &b in part.as_ref().as_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        crate::rng::mix(h).max(1)
    }

    fn key_parts<S: AsRef<str>>(&self, mut value: impl FnMut(&str) -> Option<S>) -> Option<Vec<S>> {
        if self.key.is_empty() {
            return None;
        }
        self.key
            .iter()
            .map(|f| value(f).filter(|v| !v.as_ref().is_empty()))
            .collect()
    }
}

/// The `dataType` values with a model.
pub const DATA_TYPES: &[&str] = &["retail", "restaurant", "other"];

/// The published retail/restaurant `status` values.
pub const STATUSES: &[&str] = &[
    "sale",
    "void",
    "refund",
    "return",
    "discount",
    "exchange",
    "cancel",
    "no sale",
    "post void",
    "other",
    "rebate",
];

/// The published retail/restaurant item `type` values (the list is open).
pub const ITEM_TYPES: &[&str] = &[
    "SALE",
    "MODIFIER",
    "SALE_OVERRIDE",
    "OVERRIDE_MODIFIER",
    "DISCOUNT",
];

/// Older revisions' names and the current name each one became.
pub const LEGACY: &[(&str, &str)] = &[("storeId", "locationId"), ("registerId", "dataSourceId")];

/// Items of retail and restaurant records.
pub const RETAIL_ITEM: &[Field] = &[
    req("time", Kind::Time),
    req("quantity", Kind::Number),
    req("description", Kind::Text),
    req("unitPrice", Kind::Number),
    req("type", Kind::ItemType),
];

/// Items of `other` records.
pub const OTHER_ITEM: &[Field] = &[
    opt("type", Kind::Text),
    opt("description", Kind::Text),
    opt("quantity", Kind::Number),
    opt("time", Kind::Time),
];

/// Items checked when the dataType is unusable: every field any model allows, none required.
pub const ANY_ITEM: &[Field] = &[
    opt("time", Kind::Time),
    opt("quantity", Kind::Number),
    opt("description", Kind::Text),
    opt("unitPrice", Kind::Number),
    opt("type", Kind::Text),
];

/// The `retail` model.
pub const RETAIL: &[Field] = &RETAIL_FIELDS;
/// The fields of [`RETAIL`], which [`RESTAURANT`]'s begin with.
const RETAIL_FIELDS: [Field; 13] = [
    req("dataType", Kind::DataType),
    req("schemaVersion", Kind::SchemaVersion),
    req("startTime", Kind::Time),
    req("endTime", Kind::Time),
    req("locationId", Kind::Id),
    req("dataSourceId", Kind::Id),
    req("transactionId", Kind::Id),
    req("status", Kind::Status),
    req("items", Kind::Items(RETAIL_ITEM)),
    opt("employeeId", Kind::Text),
    opt("employeeName", Kind::Text),
    opt("customerId", Kind::Text),
    opt("salesAssociateId", Kind::Text),
];

/// Retail's fields followed by the two restaurant ones, as the models page lists them.
pub const RESTAURANT: &[Field] = &followed::<13, 2, 15>(
    RETAIL_FIELDS,
    [
        req("tableNumber", Kind::TableNumber),
        req("guestCount", Kind::Number),
    ],
);

/// The `other` model.
pub const OTHER: &[Field] = &[
    req("dataType", Kind::DataType),
    req("schemaVersion", Kind::SchemaVersion),
    req("startTime", Kind::Time),
    req("locationId", Kind::Id),
    req("dataSourceId", Kind::Id),
    req("eventUniqueId", Kind::Id),
    req("eventType", Kind::Text),
    opt("endTime", Kind::Time),
    opt("eventDetails", Kind::Text),
    opt("employeeId", Kind::Text),
    opt("employeeName", Kind::Text),
    opt("status", Kind::Text),
    opt("items", Kind::Items(OTHER_ITEM)),
];

/// Fields every model shares, with the requirements they have in all of them.
pub const COMMON: &[Field] = &[
    req("dataType", Kind::DataType),
    req("schemaVersion", Kind::SchemaVersion),
    req("startTime", Kind::Time),
    opt("endTime", Kind::Time),
    req("locationId", Kind::Id),
    req("dataSourceId", Kind::Id),
    opt("employeeId", Kind::Text),
    opt("employeeName", Kind::Text),
    opt("status", Kind::Text),
    opt("items", Kind::Items(ANY_ITEM)),
];

/// Model-specific names, so that an unusable dataType only flags names no model knows.
pub const COMMON_ALSO_KNOWN: &[&str] = &[
    "transactionId",
    "customerId",
    "salesAssociateId",
    "tableNumber",
    "guestCount",
    "eventUniqueId",
    "eventType",
    "eventDetails",
];

/// The `retail` model.
pub static RETAIL_MODEL: Model = Model {
    data_type: Some("retail"),
    fields: RETAIL,
    also_known: &[],
    key: &["transactionId"],
};
/// The `restaurant` model.
pub static RESTAURANT_MODEL: Model = Model {
    data_type: Some("restaurant"),
    fields: RESTAURANT,
    also_known: &[],
    key: &["transactionId"],
};
/// The `other` model.
pub static OTHER_MODEL: Model = Model {
    data_type: Some("other"),
    fields: OTHER,
    also_known: &[],
    key: &["locationId", "eventUniqueId"],
};
/// What a record with an unusable `dataType` is checked against: the shared fields.
pub static COMMON_MODEL: Model = Model {
    data_type: None,
    fields: COMMON,
    also_known: COMMON_ALSO_KNOWN,
    key: &[],
};

/// The models of the `dataType`s.
pub static MODELS: &[&Model] = &[&RETAIL_MODEL, &RESTAURANT_MODEL, &OTHER_MODEL];

/// The model of a `dataType`.
pub fn model_named(name: &str) -> Option<&'static Model> {
    MODELS.iter().copied().find(|m| m.data_type == Some(name))
}
