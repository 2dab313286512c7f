//! What a publish has learnt of the webhook's refusals that name no record: whether one is
//! systematic (every record refused with the same words), how many batches may be in flight
//! meanwhile, and when a run of arrays refused that way stops the publish.

/// Records of a refused part posted alone before its refusal is taken as systematic.
pub(super) const PROBES: usize = 3;
/// Arrays refused whole in a row with the words of a systematic refusal before publishing
/// stops.
pub(super) const STOP_AFTER: u32 = 5;

/// The state of one publish's judgement of refusals that name no record.
#[derive(Debug, Default)]
pub(super) struct Judge {
    /// An answer other than a refusal naming no record has come.
    open: bool,
    /// The normalized words of the refusal found systematic, until a record is accepted.
    systematic: Option<String>,
    /// Arrays refused whole with those words in a row.
    in_a_row: u32,
}

impl Judge {
    /// Batches that may be in flight, of `max`: one until the service has answered otherwise
    /// than by refusing a body naming no record, and while a refusal found systematic holds, so
    /// that a publish the service refuses whole costs a few requests, not every array that
    /// would be in flight.
    pub(super) fn room(&self, max: usize) -> usize {
        if self.open && self.systematic.is_none() {
            max
        } else {
            1
        }
    }

    /// The service answered otherwise than by a refusal naming no record: batches may go out
    /// together, and a run of arrays refused systematically is broken.
    pub(super) fn answered(&mut self) {
        self.open = true;
        self.in_a_row = 0;
    }

    /// The service accepted records: no refusal is systematic any more.
    pub(super) fn accepted(&mut self) {
        self.answered();
        self.systematic = None;
    }

    /// A body, its part and records alone were all refused with the words `norm`.
    pub(super) fn found(&mut self, norm: String) {
        self.systematic = Some(norm);
    }

    /// Whether a refusal with the words `norm` is the one found systematic.
    pub(super) fn is_systematic(&self, norm: &str) -> bool {
        self.systematic.as_deref() == Some(norm)
    }

    /// A whole array was refused naming no record, with the words `norm`, none of its records
    /// accepted, and judged; true when that makes [`STOP_AFTER`] arrays in a row refused with
    /// the words of the refusal found systematic. A refusal not found systematic is an answer
    /// like any other (the records at fault were found).
    pub(super) fn refused_whole(&mut self, norm: &str) -> bool {
        if self.is_systematic(norm) {
            self.in_a_row += 1;
        } else {
            self.answered();
        }
        self.in_a_row >= STOP_AFTER
    }
}

/// The message of a record whose body was refused with `words` (`status`; None: a 2xx that
/// counted fewer accepted), a refusal found systematic, and that was not posted alone.
pub(super) fn unjudged(status: Option<u16>, words: &str) -> String {
    let said = match status {
        Some(s) => format!("({s})"),
        None => "(in a 2xx answer)".to_owned(),
    };
    format!(
        "not confirmed: the service refused the body that held it {said}, naming no record, with \
         the words it refused records alone with: {words}; not posted alone, since the refusal \
         looks systematic, so nothing proves whether the service stored it (a service that \
         stores the valid records of a refused body may have); publishing it again is safe"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_batch_in_flight_until_an_answer_and_while_a_refusal_is_systematic() {
        let mut j = Judge::default();
        assert_eq!(j.room(200), 1);
        j.answered();
        assert_eq!(j.room(200), 200);
        j.found("bad".into());
        assert_eq!(j.room(200), 1);
        j.answered();
        assert_eq!(j.room(200), 1, "a refusal naming records does not end it");
        j.accepted();
        assert_eq!(j.room(200), 200);
        assert!(!j.is_systematic("bad"));
    }

    #[test]
    fn an_array_refused_naming_none_but_not_systematically_opens_the_way() {
        let mut j = Judge::default();
        assert!(!j.refused_whole("bad"));
        assert_eq!(j.room(200), 200);
    }

    #[test]
    fn a_run_of_arrays_refused_with_the_systematic_words_stops_publishing() {
        let mut j = Judge::default();
        j.found("bad".into());
        for _ in 1..STOP_AFTER {
            assert!(!j.refused_whole("bad"));
        }
        j.answered();
        for _ in 1..STOP_AFTER {
            assert!(!j.refused_whole("bad"));
        }
        assert!(!j.refused_whole("other words"));
        assert_eq!(j.room(200), 1, "still systematic");
        for _ in 1..STOP_AFTER {
            assert!(!j.refused_whole("bad"));
        }
        assert!(j.refused_whole("bad"));
        j.accepted();
        assert!(
            !j.refused_whole("bad"),
            "accepted records end the refusal's run"
        );
    }
}
