//! Unit tests of the events planner's pure helpers: order, times, event views.

use bytes::Bytes;

use super::page::hides_first;
use super::*;
use crate::time::parse_time;

#[test]
fn order_detection() {
    assert_eq!(order_of([1, 2, 2, 3].into_iter()), PageOrder::Asc);
    assert_eq!(order_of([3, 3, 1].into_iter()), PageOrder::Desc);
    assert_eq!(order_of([5, 5].into_iter()), PageOrder::Constant);
    assert_eq!(order_of([1, 3, 2].into_iter()), PageOrder::Unsorted);
}

#[test]
fn only_a_full_page_in_another_order_hides_the_first_events() {
    assert!(hides_first(PageOrder::Desc, PAGE) && hides_first(PageOrder::Unsorted, PAGE));
    assert!(!hides_first(PageOrder::Asc, PAGE) && !hides_first(PageOrder::Constant, PAGE));
    assert!(!hides_first(PageOrder::Desc, PAGE - 1));
}

#[test]
fn time_round_trip() {
    let ms = 1_767_571_200_123;
    assert_eq!(parse_time(&format_ms(ms)), Some(ms));
    assert_eq!(
        parse_time("2026-01-05T09:15:23.123-05:00"),
        Some(1_767_622_523_123)
    );
    assert_eq!(parse_time("garbage"), None);
}

#[test]
fn events_are_views_of_their_page() {
    let url = url::Url::parse("http://127.0.0.1/v2/events").expect("url");
    let body = Bytes::from(
        " [ {\"id\":\"a\\\"b\",\"startTime\":\"2026-01-05T09:15:23.123-05:00\",\"t\":\"é · ✓\"} ,\n{\"startTime\":\"1970-01-01T00:00:00Z\",\"id\":\"c\"}]",
    );
    let events = parse_events(&url, &body).expect("a page");
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].id, "a\"b");
    assert_eq!(events[0].start_ms, 1_767_622_523_123);
    assert_eq!(
        events[0].text(),
        "{\"id\":\"a\\\"b\",\"startTime\":\"2026-01-05T09:15:23.123-05:00\",\"t\":\"é · ✓\"}"
    );
    assert_eq!(
        events[1].text(),
        "{\"startTime\":\"1970-01-01T00:00:00Z\",\"id\":\"c\"}"
    );
    assert!(parse_events(&url, &Bytes::from_static(b"{}")).is_err());
}

#[test]
fn times_are_read_as_chrono_reads_them() {
    let chrono_ms = |s: &str| {
        chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.timestamp_millis())
    };
    let mut cases: Vec<String> = Vec::new();
    for (y, mo, d) in [
        (1969, 12, 31),
        (1970, 1, 1),
        (2000, 2, 29),
        (2024, 2, 29),
        (2025, 2, 29),
        (2100, 2, 29),
        (2026, 13, 1),
        (2026, 4, 31),
        (2026, 12, 31),
        (1, 1, 1),
        (9999, 12, 31),
    ] {
        for time in [
            "00:00:00", "23:59:59", "24:00:00", "12:60:00", "12:00:60", "09:15:23",
        ] {
            for frac in ["", ".", ".1", ".12", ".123", ".123456789", ".9999"] {
                for off in [
                    "Z", "z", "+00:00", "-05:00", "+05:45", "-03:30", "+24:00", "+01:60", "+0100",
                    "",
                ] {
                    cases.push(format!("{y:04}-{mo:02}-{d:02}T{time}{frac}{off}"));
                }
            }
        }
    }
    cases.extend(
        [
            "2026-01-05 09:15:23Z",
            "2026-01-05t09:15:23Z",
            "2026-1-05T09:15:23Z",
            "+2026-01-05T09:15:23Z",
            "2026-01-05T09:15:23.123-05:00 ",
        ]
        .map(String::from),
    );
    for case in &cases {
        let colonless = case.ends_with("+0100");
        match parse_time(case) {
            // The one form chrono refuses and the service may send: `+0100`.
            Some(ms) if colonless => assert_eq!(
                Some(ms),
                chrono_ms(&case.replace("+0100", "+01:00")),
                "{case}"
            ),
            got => assert_eq!(got, chrono_ms(case), "{case}"),
        }
    }
}
