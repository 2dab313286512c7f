//! Unit tests of the publish core's pure parts.

use super::*;

#[test]
fn a_failure_kind_follows_the_last_status() {
    assert_eq!(FailureKind::of_status(Some(400)), FailureKind::Refused);
    assert_eq!(FailureKind::of_status(Some(403)), FailureKind::Refused);
    for failed in [Some(429), Some(500), Some(503), None] {
        assert_eq!(FailureKind::of_status(failed), FailureKind::Failed);
    }
    assert_eq!(FailureKind::NotSent.as_str(), "not sent");
}

#[test]
fn batch_size_is_checked() {
    for bad in [0, 101] {
        let o = Options {
            batch_size: bad,
            ..Options::default()
        };
        assert!(o.check().is_err());
    }
}
