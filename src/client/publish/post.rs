//! Posting a range of a batch and reading its answer: a refusal narrowed down to its records, a
//! request that met no answer kept from sending twice, what the service accepted.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;

use super::answer::Stored;
use super::judge::{PROBES, STOP_AFTER};
use super::prepare::Prepared;
use bytes::Bytes;

use super::report::FailureKind;
use super::{Batch, PublishState, RecordOutcome, TaskEnd};
use crate::client::error::Error;
use crate::client::http::Arrays;
use crate::client::words;

/// The body of `recs`: one object alone when `as_array` is false and there is one record.
pub(super) fn body_of(recs: &[&Prepared], as_array: bool) -> Bytes {
    if recs.len() == 1 && !as_array {
        return recs[0].text.clone();
    }
    let size = recs.iter().map(|r| r.text.len() + 1).sum::<usize>() + 1;
    let mut body = Vec::with_capacity(size);
    body.push(b'[');
    for (i, r) in recs.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&r.text);
    }
    body.push(b']');
    Bytes::from(body)
}

/// The message of a record refused with `status` (None: in a 2xx answer), in the service's
/// words.
pub(super) fn refusal_message(status: Option<u16>, words: &str) -> String {
    match status {
        Some(s) => format!("the service refused the record ({s}): {words}"),
        None => format!("the service's answer lists the record as not accepted: {words}"),
    }
}

/// Words compared across refusals: lowercase, digits and spacing folded.
pub(super) fn normalized(words: &str) -> String {
    let folded: String = words
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect();
    folded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Errors after which no other record can succeed either.
pub(super) fn is_fatal(e: &Error) -> bool {
    matches!(
        e,
        Error::Auth { .. } | Error::Config(_) | Error::Closed | Error::Quota { .. }
    )
}

pub(super) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Posts the records `idx` of the batch (an array when more than one, or when `as_array`),
/// and reads what the answer proves about each. `parent` holds the normalized words of the
/// refusal of the body these records were split from, if they were.
pub(super) fn post_range<'a>(
    shared: &'a PublishState,
    batch: &'a Batch,
    idx: Vec<usize>,
    as_array: bool,
    parent: Option<String>,
) -> BoxFuture<'a, TaskEnd> {
    Box::pin(async move {
        let recs: Vec<&Prepared> = idx.iter().map(|&i| &batch.recs[i]).collect();
        let sent = batch.begin(&idx);
        let call = shared.call(batch, body_of(&recs, as_array), Some(sent.clone()));
        let read = |body: Bytes| match super::answer::success(&body, &recs) {
            Stored::NoProof => Err(Error::Decode {
                url: shared.url.path().to_owned(),
                detail: format!(
                    "the answer is not the API's (no proof that the service stored the \
                     record{}): it starts with `{}`",
                    if recs.len() == 1 { "" } else { "s" },
                    crate::client::http::body_start(&body)
                ),
            }),
            said => Ok(said),
        };
        let result = shared.client.http().send_checked(&call, read).await;
        batch.end();
        // A refusal (400, 422) naming records, or none.
        let refusal = match &result {
            Err(Error::Status {
                status: 400 | 422,
                body,
                ..
            }) => Some(super::answer::refusal(body.as_bytes(), &recs)),
            _ => None,
        };
        if !matches!(refusal, Some(None)) {
            shared.judge().answered();
        }
        match result {
            Ok(Stored::All) => {
                accept(shared, batch, &idx);
                TaskEnd::default()
            }
            Ok(Stored::Named {
                failed,
                rest_stored,
            }) => named(shared, batch, idx, failed, rest_stored, None, as_array).await,
            Ok(Stored::Unnamed(words)) => {
                refused_whole(shared, batch, idx, None, words, parent).await
            }
            Ok(Stored::NoProof) => unreachable_no_proof(batch, &idx),
            Err(Error::Status {
                status, body, url, ..
            }) if matches!(status, 400 | 422) => {
                if let Some(Some(Stored::Named {
                    failed,
                    rest_stored,
                })) = refusal
                {
                    return named(
                        shared,
                        batch,
                        idx,
                        failed,
                        rest_stored,
                        Some(status),
                        as_array,
                    )
                    .await;
                }
                let words = words::of_body(body.as_bytes())
                    .unwrap_or_else(|| "no details in the answer".to_owned());
                let norm = normalized(&words);
                let whole = idx.len() > 1 && idx.len() == batch.recs.len();
                let systematic = shared.judge().is_systematic(&norm);
                let end = if status == 400 && as_array && shared.fallback && !systematic {
                    arrays_refused(shared, batch, idx.clone(), words.clone()).await
                } else {
                    refused_whole(
                        shared,
                        batch,
                        idx.clone(),
                        Some(status),
                        words.clone(),
                        parent,
                    )
                    .await
                };
                let none_accepted = !idx.iter().any(|&i| batch.accepted(i));
                if whole && none_accepted && shared.judge().refused_whole(&norm) {
                    let message = format!(
                        "the service refused {STOP_AFTER} arrays in a row whole ({status}), naming \
                         no record, with the words it refused records alone with: {words}; \
                         publishing stopped (fix what those words name, then publish the records \
                         not accepted again)"
                    );
                    return merge(
                        end,
                        TaskEnd {
                            fatal: Some(Error::Status {
                                status,
                                body,
                                url,
                                message,
                            }),
                            ..TaskEnd::default()
                        },
                    );
                }
                end
            }
            Err(Error::Status { status: 413, .. }) if idx.len() > 1 => {
                // Too large as a whole: halves, with no refusal of the records to compare.
                split(shared, batch, idx, None).await
            }
            Err(Error::Status {
                status: 413, body, ..
            }) => {
                let words = words::of_body(body.as_bytes())
                    .unwrap_or_else(|| "the body is too large".to_owned());
                refused_whole(shared, batch, idx, Some(413), words, None).await
            }
            Err(e @ Error::Decode { .. }) => {
                // A 2xx that is not the API's, after every retry: neither accepted nor refused.
                batch.set(
                    &idx,
                    &RecordOutcome::failed(FailureKind::Unconfirmed, None, e.to_string()),
                );
                TaskEnd {
                    unconfirmed: true,
                    last: Some(e),
                    ..TaskEnd::default()
                }
            }
            Err(e) => {
                let status = match &e {
                    Error::Status { status, .. } => Some(*status),
                    Error::Auth { status, .. } => *status,
                    _ => None,
                };
                let left = sent.load(Ordering::Relaxed) > 0;
                let kind = match &e {
                    // Held back by the day's quota before it left: never sent.
                    Error::Quota { .. } | Error::Closed if !left => FailureKind::NotSent,
                    _ => FailureKind::of_status(status),
                };
                let message = match kind {
                    FailureKind::NotSent => format!("not sent: {e}"),
                    _ => e.to_string(),
                };
                batch.set(&idx, &RecordOutcome::failed(kind, status, message));
                if is_fatal(&e) {
                    TaskEnd {
                        fatal: Some(e),
                        ..TaskEnd::default()
                    }
                } else {
                    TaskEnd {
                        retryable: e.is_retryable(),
                        last: Some(e),
                        ..TaskEnd::default()
                    }
                }
            }
        }
    })
}

/// `read` turns no proof into an error, so it never comes as a value; were it to, its
/// records are unconfirmed.
pub(super) fn unreachable_no_proof(batch: &Batch, idx: &[usize]) -> TaskEnd {
    batch.set(
        idx,
        &RecordOutcome::failed(
            FailureKind::Unconfirmed,
            None,
            "the answer is not the API's: no proof that the service stored it".to_owned(),
        ),
    );
    TaskEnd {
        unconfirmed: true,
        ..TaskEnd::default()
    }
}

/// The answer names the records of `idx` that failed: they are refused with the service's
/// words; the others are accepted, or, when a count says they were not stored either (a
/// service that stores all or nothing), posted again without the failed ones.
async fn named(
    shared: &PublishState,
    batch: &Batch,
    idx: Vec<usize>,
    failed: Vec<super::answer::Named>,
    rest_stored: bool,
    status: Option<u16>,
    as_array: bool,
) -> TaskEnd {
    let mut is_failed = vec![false; idx.len()];
    for f in failed {
        is_failed[f.pos] = true;
        batch.set(
            &[idx[f.pos]],
            &RecordOutcome::Failed {
                kind: FailureKind::Refused,
                status,
                message: refusal_message(status, &f.words),
                problems: f.problems,
            },
        );
    }
    let rest: Vec<usize> = idx
        .iter()
        .zip(&is_failed)
        .filter(|(_, f)| !**f)
        .map(|(i, _)| *i)
        .collect();
    if rest.is_empty() {
        return TaskEnd::default();
    }
    if rest_stored {
        accept(shared, batch, &rest);
        return TaskEnd::default();
    }
    post_range(shared, batch, rest, as_array, None).await
}

/// The service refused the records `idx` as a whole, naming none. One record is refused with
/// the service's words. More are split in halves to find those at fault, unless the refusal is
/// systematic: when a part of a refused body is refused with the same words, [`PROBES`] of its
/// records are posted alone, and if each is refused the same way the refusal is found
/// systematic (a refusal of every record would otherwise cost 2n - 1 requests). From then on,
/// until a record is accepted, a body refused with those words is not split: its records are
/// unconfirmed, since a service that stores the valid records of a refused body may have
/// stored some of them, and nothing says which.
async fn refused_whole(
    shared: &PublishState,
    batch: &Batch,
    idx: Vec<usize>,
    status: Option<u16>,
    words: String,
    parent: Option<String>,
) -> TaskEnd {
    if idx.len() == 1 {
        batch.set(
            &idx,
            &RecordOutcome::failed(
                FailureKind::Refused,
                status,
                refusal_message(status, &words),
            ),
        );
        return TaskEnd::default();
    }
    let norm = normalized(&words);
    let unjudged = RecordOutcome::failed(
        FailureKind::Unconfirmed,
        status,
        super::judge::unjudged(status, &words),
    );
    if shared.judge().is_systematic(&norm) {
        batch.set(&idx, &unjudged);
        return TaskEnd::default();
    }
    if idx.len() > PROBES && parent.as_deref() == Some(norm.as_str()) {
        let probes = [idx[0], idx[idx.len() / 2], idx[idx.len() - 1]];
        let mut end = TaskEnd::default();
        for p in probes {
            end = merge(end, post_range(shared, batch, vec![p], false, None).await);
        }
        let rest: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|i| !probes.contains(i))
            .collect();
        if probes.iter().all(|&p| batch.refused_with(p, &norm)) {
            shared.judge().found(norm);
            batch.set(&rest, &unjudged);
            return end;
        }
        return merge(end, split(shared, batch, rest, Some(norm)).await);
    }
    split(shared, batch, idx, Some(norm)).await
}

/// The records `idx` of `batch` were accepted.
pub(super) fn accept(shared: &PublishState, batch: &Batch, idx: &[usize]) {
    batch.set(idx, &RecordOutcome::Accepted);
    shared.judge().accepted();
}

/// Posts `idx` in two halves, one after the other, so that a batch never holds more than one
/// request.
async fn split(
    shared: &PublishState,
    batch: &Batch,
    idx: Vec<usize>,
    parent: Option<String>,
) -> TaskEnd {
    if idx.len() == 1 {
        return post_range(shared, batch, idx, false, parent).await;
    }
    let mid = idx.len() / 2;
    let a = post_range(shared, batch, idx[..mid].to_vec(), false, parent.clone()).await;
    let b = post_range(shared, batch, idx[mid..].to_vec(), false, parent).await;
    merge(a, b)
}

/// An array body refused with 400 naming no record ("auto" batches): is it the array the
/// service refuses, or a record in it? Its first record alone, then the same record in an
/// array of one, tell (once per client). Arrays refused: the batch's other records go again
/// one per request, as every record of the client from now on; otherwise the refusal is
/// handled as any other.
async fn arrays_refused(
    shared: &PublishState,
    batch: &Batch,
    idx: Vec<usize>,
    words: String,
) -> TaskEnd {
    let webhook = &shared.client.http().webhook;
    match webhook.arrays() {
        Arrays::Refused => {
            return TaskEnd {
                singly: true,
                ..TaskEnd::default()
            }
        }
        Arrays::Accepted => return refused_whole(shared, batch, idx, Some(400), words, None).await,
        Arrays::Unknown => {}
    }
    let first = idx[0];
    let alone = post_range(shared, batch, vec![first], false, None).await;
    if !batch.accepted(first) {
        // The first record is refused alone too: it is at fault (perhaps with others).
        let rest = idx[1..].to_vec();
        if rest.is_empty() {
            return alone;
        }
        let rest = post_range(shared, batch, rest, false, None).await;
        return merge(alone, rest);
    }
    let recs = [&batch.recs[first]];
    let call = shared.call(batch, body_of(&recs, true), None);
    let one = shared
        .client
        .http()
        .send_checked(&call, |body: Bytes| {
            Ok(super::answer::success(&body, &recs))
        })
        .await;
    match one {
        Err(Error::Status { status: 400, .. }) => {
            if webhook.refuse_arrays() {
                shared.client.http().warn(
                    "the webhook refuses JSON arrays (400 to a record in an array of one, 200 \
                     to the same record alone): this client posts one record per request from \
                     now on"
                        .to_owned(),
                );
            }
            TaskEnd {
                singly: true,
                ..TaskEnd::default()
            }
        }
        Ok(_) => {
            webhook.accept_arrays();
            let rest = idx[1..].to_vec();
            if rest.is_empty() {
                return alone;
            }
            let rest = post_range(shared, batch, rest, false, None).await;
            merge(alone, rest)
        }
        // No verdict (the service failed): the records without an outcome go again.
        Err(_) => TaskEnd {
            singly: true,
            ..TaskEnd::default()
        },
    }
}

pub(super) fn merge(a: TaskEnd, b: TaskEnd) -> TaskEnd {
    TaskEnd {
        retryable: a.retryable || b.retryable,
        unconfirmed: a.unconfirmed || b.unconfirmed,
        fatal: a.fatal.or(b.fatal),
        last: b.last.or(a.last),
        singly: a.singly || b.singly,
    }
}
