//! Did-you-mean: the field or value an unknown name most likely meant.

use super::models::{Field, LEGACY};

/// The field an unknown name most likely meant: the model's names first, then (top level only)
/// the legacy names, each mapped to its current name.
pub(crate) fn suggest_field(
    name: &str,
    fields: &'static [Field],
    also_known: &'static [&'static str],
    legacy: bool,
) -> Option<&'static str> {
    let current = fields
        .iter()
        .map(|f| (f.name, f.name))
        .chain(also_known.iter().map(|k| (*k, *k)));
    let old = LEGACY
        .iter()
        .filter(move |_| legacy)
        .filter(|(_, now)| fields.iter().any(|f| f.name == *now))
        .copied();
    best_match(name, current.chain(old))
}

pub(crate) fn suggest(
    name: &str,
    candidates: impl Iterator<Item = &'static str>,
) -> Option<&'static str> {
    best_match(name, candidates.map(|c| (c, c)))
}

/// Picks the candidate closest to `name` (case-insensitive Levenshtein), first one on ties.
///
/// Distance 2 is allowed from six characters, 1 from three: shorter names would otherwise be
/// "corrected" into unrelated ones (`tip` into `time`).
fn best_match(
    name: &str,
    candidates: impl Iterator<Item = (&'static str, &'static str)>,
) -> Option<&'static str> {
    let limit = match name.len() {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    };
    let mut best: Option<(usize, &'static str)> = None;
    for (candidate, answer) in candidates {
        if let Some(d) = distance_within(name.as_bytes(), candidate.as_bytes(), limit) {
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, answer));
            }
        }
    }
    best.map(|(_, answer)| answer)
}

/// Case-insensitive Levenshtein distance of `a` and `b` when it is at most `limit`.
pub(crate) fn distance_within(a: &[u8], b: &[u8], limit: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > limit {
        return None;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(!ca.eq_ignore_ascii_case(&cb));
            let next = (row[j] + 1).min(row[j + 1] + 1).min(diagonal + cost);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    let d = row[b.len()];
    (d <= limit).then_some(d)
}
