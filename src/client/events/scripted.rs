//! The planner fed scripted pages, without a server, as its driver feeds it: a service of
//! known events (in any order, with any bound inclusivity) answers each request the planner
//! asks, in the order asked, with as many in flight as the client's limits allow, and the
//! planner's notes are acted on as the driver acts on them (what the service's answers taught
//! kept for the client's later fetches, the pages held for a window looked up). Every order,
//! bound, burst, dense millisecond and quota case, a sync stopped anywhere and its next run,
//! the parts a cache holds (and a damaged file), a fetch after its plan and a quota check run
//! in milliseconds each, their results checked exact and their requests bounded.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use super::page::{parse_events, widened, Reuse};
use super::{
    CacheWrites, CarriedPage, Event, Goal, Note, Outlook, Pace, Page, PageAsk, Planner, Query,
    Sorting, CEILING_PAGE,
};
use crate::client::cache::{Piece, Segment};
use crate::client::error::{Error, Result};
use crate::client::lists::PAGE;
use crate::time::format_ms;

/// 2026-01-05T00:00:00Z.
const DAY0: i64 = 1_767_571_200_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// The orders a service may answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Asc,
    Desc,
    Shuffled,
}

const ORDERS: [Order; 3] = [Order::Asc, Order::Desc, Order::Shuffled];
/// Bound inclusivity: (start included, end included).
const BOUNDS: [(bool, bool); 4] = [(true, false), (true, true), (false, false), (false, true)];

/// A service of known events that answers pages as the real one does.
struct Service {
    /// (startTime, id), sorted.
    events: Vec<(i64, String)>,
    order: Order,
    bounds: (bool, bool),
    url: url::Url,
    /// Each query's answer (indices into `events`, in the service's order), made once.
    answers: RefCell<HashMap<(i64, i64), Vec<usize>>>,
}

impl Service {
    fn new(mut times: Vec<i64>, order: Order, bounds: (bool, bool)) -> Service {
        times.sort_unstable();
        let events = times
            .into_iter()
            .enumerate()
            .map(|(i, t)| (t, format!("e{i:07}")))
            .collect();
        Service {
            events,
            order,
            bounds,
            url: url::Url::parse("http://127.0.0.1:9/v2/events").expect("a url"),
            answers: RefCell::default(),
        }
    }

    /// The ids of `[start, end)`, in (startTime, id) order.
    fn truth(&self, start: i64, end: i64) -> Vec<String> {
        self.events
            .iter()
            .filter(|(t, _)| (start..end).contains(t))
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// The page at `offset` of the window queried as `[qs, qe)` (widened by 1 ms each side).
    fn page(&self, qs: i64, qe: i64, offset: usize) -> Page {
        let (from, to) = widened(qs, qe);
        let mut answers = self.answers.borrow_mut();
        let hits = answers
            .entry((from, to))
            .or_insert_with(|| self.answer(from, to));
        let page: Vec<usize> = hits.iter().skip(offset).take(PAGE).copied().collect();
        drop(answers);
        self.page_of(page)
    }

    /// The page of the events at `indices` of `events`, in that order, as the service writes it.
    fn page_of(&self, indices: impl IntoIterator<Item = usize>) -> Page {
        let body: Vec<String> = indices
            .into_iter()
            .map(|i| {
                let (t, id) = &self.events[i];
                format!("{{\"id\":\"{id}\",\"startTime\":\"{}\"}}", format_ms(*t))
            })
            .collect();
        self.parse(Bytes::from(format!("[{}]", body.join(","))))
    }

    /// The page of `body`, as the service sent it.
    fn parse(&self, body: Bytes) -> Page {
        Page {
            events: parse_events(&self.url, &body).expect("a page"),
            batch: None,
            held: false,
            carried: false,
            body: Some(body),
        }
    }
}

impl Service {
    /// The events the query from `from` to `to` holds, as bounds are read, in the service's
    /// order (a shuffled one the same for every page of a query).
    fn answer(&self, from: i64, to: i64) -> Vec<usize> {
        let lo = match self.bounds.0 {
            true => self.events.partition_point(|(t, _)| *t < from),
            false => self.events.partition_point(|(t, _)| *t <= from),
        };
        let hi = match self.bounds.1 {
            true => self.events.partition_point(|(t, _)| *t <= to),
            false => self.events.partition_point(|(t, _)| *t < to),
        };
        let mut hits: Vec<usize> = (lo..hi.max(lo)).collect();
        match self.order {
            Order::Asc => {}
            Order::Desc => hits.reverse(),
            Order::Shuffled => hits.sort_by_cached_key(|&i| {
                let (t, id) = &self.events[i];
                scramble(*t, id, from, to)
            }),
        }
        hits
    }
}

/// A hash of an event and its query, which orders a shuffled answer.
fn scramble(t: i64, id: &str, from: i64, to: i64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id
        .bytes()
        .chain(t.to_le_bytes())
        .chain((from ^ to).to_le_bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Times spread over `days` days, `per_day` a day, denser in the day's busy hours; seeded.
fn spread(days: i64, per_day: usize, seed: u64) -> Vec<i64> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 11
    };
    let mut out = Vec::new();
    for d in 0..days {
        for _ in 0..per_day {
            // An hour weighted by a day's traffic: the busy hours three times as dense.
            let hour = loop {
                let h = (next() % 24) as i64;
                if (8..20).contains(&h) || next() % 3 == 0 {
                    break h;
                }
            };
            let ms = (next() % HOUR as u64) as i64;
            out.push(DAY0 + d * DAY + hour * HOUR + ms);
        }
    }
    out
}

/// What a client's settings say to its planners: how far ahead they ask, and how many
/// requests are in flight.
#[derive(Debug, Clone, Copy)]
struct Limits {
    pace: Pace,
    in_flight: usize,
}

/// A daily quota, as by default, with the tests' 3 in flight.
fn quota() -> Limits {
    Limits {
        pace: Pace::Frugal,
        in_flight: 3,
    }
}

/// No daily quota, 16 in flight.
fn free() -> Limits {
    Limits {
        pace: Pace::Ahead,
        in_flight: 16,
    }
}

/// A client as its planners see it: its limits, and what its earlier fetches learnt of the
/// service (kept from the planners' notes, as the driver keeps them).
struct Client {
    limits: Limits,
    unsorted: Cell<bool>,
    densest: Cell<Option<f64>>,
    /// The pages held for a later fetch (a plan's, a stopped sync's carried ones), by query and
    /// offset, with whether an earlier run read them.
    held: RefCell<HashMap<(i64, i64, usize), Held>>,
}

/// A page held for a later fetch.
struct Held {
    body: Bytes,
    carried: Carried,
}

/// Whether a held page was read by an earlier run (carried to this one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carried {
    Yes,
    No,
}

fn client(limits: Limits) -> Client {
    Client {
        limits,
        unsorted: Cell::new(false),
        densest: Cell::new(None),
        held: RefCell::default(),
    }
}

impl Client {
    /// What a planner starts from: everything settled, no cache.
    fn outlook(&self) -> Outlook {
        Outlook {
            pace: self.limits.pace,
            sorting: match self.unsorted.get() {
                true => Sorting::Unsorted,
                false => Sorting::Sorted,
            },
            densest: self.densest.get(),
            cutoff: i64::MAX,
            cache_writes: CacheWrites::Skip,
            now: std::time::Instant::now(),
        }
    }

    /// Acts on a planner's notes, as the driver does: what they tell of the service kept, the
    /// pages held for a window opened looked up.
    fn note(&self, p: &mut Planner) {
        for note in p.take_notes() {
            match note {
                Note::Learned(learned) => {
                    self.unsorted.set(self.unsorted.get() | learned.unsorted);
                    if let Some(d) = learned.density {
                        let densest = self.densest.get().map_or(d, |was| was.max(d));
                        self.densest.set(Some(densest));
                    }
                }
                Note::Opened { id, qs, qe } => {
                    let held = self.held.borrow();
                    let furthest = held
                        .keys()
                        .filter(|k| (k.0, k.1) == (qs, qe) && k.2 < CEILING_PAGE)
                        .map(|k| k.2)
                        .max();
                    p.held_to(id, furthest);
                }
                Note::DropCarried => self
                    .held
                    .borrow_mut()
                    .retain(|_, h| h.carried == Carried::No),
                Note::Warn(_) | Note::Saved(_) => {}
            }
        }
    }

    /// The answer to `asked`: a page held for it (no request), else the service's (a count's
    /// held for the fetch that follows, as a plan's pages of a settled range are).
    fn answer(&self, service: &Service, asked: PageAsk, goal: Goal, sent: &Cell<u64>) -> Page {
        let key = (asked.qs, asked.qe, asked.kind.offset());
        if let Some(h) = self.held.borrow_mut().remove(&key) {
            let mut page = service.parse(h.body);
            page.held = true;
            page.carried = h.carried == Carried::Yes;
            return page;
        }
        sent.set(sent.get() + 1);
        let page = service.page(asked.qs, asked.qe, asked.kind.offset());
        if goal.reuse() == Reuse::Settled {
            if let Some(body) = page.body.clone() {
                let held = Held {
                    body,
                    carried: Carried::No,
                };
                self.held.borrow_mut().insert(key, held);
            }
        }
        page
    }

    /// Holds the pages a stopped sync carried, for its next run.
    fn carry(&self, pages: Vec<CarriedPage>) {
        let mut held = self.held.borrow_mut();
        for p in pages {
            let page = Held {
                body: p.body,
                carried: Carried::Yes,
            };
            held.insert((p.qs, p.qe, p.offset), page);
        }
    }
}

/// What a planner run made: the events handed out, and the requests it asked.
struct Ran {
    events: Vec<Event>,
    requests: u64,
}

/// A planner run to its end (or stopped), and the events it handed out.
struct Driven {
    p: Planner,
    events: Vec<Event>,
    /// Requests the service answered (not those held pages answered).
    sent: u64,
    /// A sync stopped: the pages it carries.
    carried: Vec<CarriedPage>,
}

/// How a scripted run goes besides its goal and range.
struct Script<'a> {
    /// The parts of the range the cache holds, and the gaps.
    pieces: Option<Vec<Piece>>,
    /// The cache's files: the page a segment's file holds (None: gone or damaged).
    files: &'a dyn Fn(&Segment) -> Option<Page>,
    /// Stopped (Ctrl-C) once this many requests were asked: the answers of those in flight
    /// come back late, and what it read is carried.
    stop_after: Option<u64>,
}

impl Default for Script<'_> {
    fn default() -> Self {
        Script {
            pieces: None,
            files: &|_| None,
            stop_after: None,
        }
    }
}

/// Runs the planner of `goal` over `[start, end)` against `service`: the requests it asks are
/// answered in the order asked, as many in flight as its limits allow.
fn drive(client: &Client, goal: Goal, service: &Service, start: i64, end: i64) -> Result<Driven> {
    run(client, goal, service, start, end, Script::default())
}

/// [`drive`], as `script` says.
fn run(
    client: &Client,
    goal: Goal,
    service: &Service,
    start: i64,
    end: i64,
    script: Script,
) -> Result<Driven> {
    let query = Query {
        start_ms: start,
        end_ms: end,
        report_id: None,
        partial: false,
        refresh: false,
    };
    let pieces = script.pieces.unwrap_or(vec![Piece::Gap(start, end)]);
    let mut p = Planner::new(&query, goal, client.outlook(), pieces);
    if goal == Goal::Sync {
        p.carrying();
    }
    let mut in_flight = VecDeque::new();
    let mut events = Vec::new();
    let sent = Cell::new(0);
    loop {
        let ready = p.drain_ready();
        events.extend(ready.into_iter().flat_map(|r| r.window.events));
        if let Some(segment) = p.wants_file() {
            let served = p.file_read((script.files)(&segment));
            events.extend(served.into_iter().flat_map(|c| c.events));
            client.note(&mut p);
            continue;
        }
        client.note(&mut p);
        if p.is_done() {
            let sent = sent.get();
            let carried = Vec::new();
            return Ok(Driven {
                p,
                events,
                sent,
                carried,
            });
        }
        if script.stop_after.is_some_and(|n| p.sent >= n) {
            for asked in in_flight.drain(..) {
                let page = client.answer(service, asked, goal, &sent);
                p.late(asked.id, asked.kind, page);
            }
            p.end();
            let carried = p.carried();
            let sent = sent.get();
            return Ok(Driven {
                p,
                events,
                sent,
                carried,
            });
        }
        while in_flight.len() < client.limits.in_flight {
            match p.next_ask() {
                Some(asked) => in_flight.push_back(asked),
                None => break,
            }
        }
        let Some(asked) = in_flight.pop_front() else {
            return Err(p.stalled());
        };
        let page = client.answer(service, asked, goal, &sent);
        p.on_result(asked.id, asked.kind, page)?;
    }
}

/// A fetch of `[start, end)`.
fn fetch(client: &Client, service: &Service, start: i64, end: i64) -> Result<Ran> {
    let Driven { p, events, .. } = drive(client, Goal::Fetch, service, start, end)?;
    Ok(Ran {
        events,
        requests: p.sent,
    })
}

/// The fewest requests that can return `n` events.
fn pages(n: usize) -> u64 {
    n.div_ceil(PAGE).max(1) as u64
}

/// Fetches `[start, end)` and checks it exact: every event once, in order.
fn exact(client: &Client, service: &Service, start: i64, end: i64) -> Ran {
    let ran = fetch(client, service, start, end).expect("a fetch");
    let got: Vec<String> = ran.events.iter().map(|e| e.id.clone()).collect();
    let want = service.truth(start, end);
    assert_eq!(
        got.len(),
        want.len(),
        "{:?} {:?}",
        service.order,
        service.bounds
    );
    assert!(
        got == want,
        "{:?} {:?}: not exact",
        service.order,
        service.bounds
    );
    ran
}

#[test]
fn every_order_and_bound_exact_within_its_bound() {
    // Three days of 8,336 events: over the ceiling, so windows chain (sorted) or split.
    let times = spread(3, 8_336, 7);
    let (start, end) = (DAY0, DAY0 + 3 * DAY);
    for order in ORDERS {
        for bounds in BOUNDS {
            let service = Service::new(times.clone(), order, bounds);
            let n = service.truth(start, end).len();
            let ran = exact(&client(quota()), &service, start, end);
            // Under a quota: 1.03 × ceil(N / 100) + 2 (the house's bound above the ceiling).
            let bound = (1.03 * pages(n) as f64 + 2.0).floor() as u64;
            assert!(
                ran.requests <= bound,
                "{order:?} {bounds:?}: {}",
                ran.requests
            );
            // Without one, speed costs at most a quarter more.
            let ran = exact(&client(free()), &service, start, end);
            let bound = (1.25 * pages(n) as f64).ceil() as u64 + 2;
            assert!(
                ran.requests <= bound,
                "{order:?} {bounds:?}: {}",
                ran.requests
            );
        }
    }
}

#[test]
fn a_range_under_the_ceiling_costs_its_pages_and_one() {
    // 4,000 events in a day: 40 full pages and the empty one that shows the end; a service
    // that does not sort costs its ceiling page too, once: the client then knows.
    let times = spread(1, 4_000, 3);
    let (start, end) = (DAY0, DAY0 + DAY);
    for order in ORDERS {
        let service = Service::new(times.clone(), order, (true, false));
        let client = client(quota());
        let ran = exact(&client, &service, start, end);
        let extra = if order == Order::Shuffled { 2 } else { 1 };
        assert_eq!(ran.requests, pages(4_000) + extra, "{order:?}");
        // A later fetch on the same client: it knows the order, and asks no ceiling page.
        let ran = exact(&client, &service, start + HOUR, end);
        assert!(ran.requests <= pages(ran.events.len()) + 1, "{order:?}");
    }
}

#[test]
fn hourly_fetches_on_one_client_cost_their_pages() {
    let times = spread(1, 4_000, 3);
    for order in ORDERS {
        for bounds in BOUNDS {
            let service = Service::new(times.clone(), order, bounds);
            let client = client(quota());
            for hour in 0..24 {
                let start = DAY0 + hour * HOUR;
                let ran = exact(&client, &service, start, start + HOUR);
                let bound = pages(ran.events.len()) + 1;
                assert!(ran.requests <= bound, "{order:?} {bounds:?} {hour}");
            }
        }
    }
}

#[test]
fn a_burst_past_the_ceiling_is_fetched_once() {
    // 12,000 events in six milliseconds of a quiet hour, after the client walked a quiet one.
    let mut times = spread(1, 2_000, 13);
    let burst = DAY0 + 5 * HOUR + 20 * 60_000;
    for i in 0..6 {
        times.extend(std::iter::repeat_n(burst + 7 * i, 2_000));
    }
    for order in ORDERS {
        for limits in [quota(), free()] {
            let service = Service::new(times.clone(), order, (true, true));
            let client = client(limits);
            exact(&client, &service, DAY0 + 2 * HOUR, DAY0 + 3 * HOUR);
            let ran = exact(&client, &service, DAY0 + 5 * HOUR, DAY0 + 6 * HOUR);
            let n = ran.events.len();
            assert!(n > 12_000);
            // The walk may reach the ceiling before it knows (100 requests), then the rest;
            // no burst is paged twice.
            assert!(
                ran.requests <= pages(n) + 105,
                "{order:?}: {}",
                ran.requests
            );
        }
    }
}

#[test]
fn a_dense_millisecond_has_a_window_of_its_own() {
    // 9,990 of about 30,000 events in one millisecond.
    let mut times = spread(3, 6_768, 7);
    times.extend(std::iter::repeat_n(DAY0 + 36 * HOUR + 5, 9_990));
    let (start, end) = (DAY0, DAY0 + 3 * DAY);
    for order in ORDERS {
        for bounds in [(true, false), (true, true)] {
            let service = Service::new(times.clone(), order, bounds);
            let n = service.truth(start, end).len();
            let ran = exact(&client(quota()), &service, start, end);
            let bound = (1.03 * pages(n) as f64 + 2.0).floor() as u64;
            assert!(
                ran.requests <= bound,
                "{order:?} {bounds:?}: {}",
                ran.requests
            );
            let ran = exact(&client(free()), &service, start, end);
            let bound = (1.35 * pages(n) as f64) as u64;
            assert!(
                ran.requests <= bound,
                "{order:?} {bounds:?}: {}",
                ran.requests
            );
        }
    }
}

#[test]
fn more_than_the_ceiling_in_one_millisecond_is_a_dense_window() {
    let at = DAY0 + 12 * HOUR + 5;
    for order in ORDERS {
        for limits in [quota(), free()] {
            let mut times = spread(1, 500, 2);
            times.extend(std::iter::repeat_n(at, 9_999));
            let service = Service::new(times.clone(), order, (false, false));
            exact(&client(limits), &service, DAY0, DAY0 + DAY);
            times.extend([at, at]);
            let service = Service::new(times, order, (false, false));
            match fetch(&client(limits), &service, DAY0, DAY0 + DAY) {
                Err(Error::DenseWindow { timestamp }) => {
                    assert_eq!(timestamp, "2026-01-05T12:00:00.005Z", "{order:?}")
                }
                Err(e) => panic!("{order:?}: {e}"),
                Ok(_) => panic!("{order:?}: no error"),
            }
        }
    }
}

#[test]
fn a_plan_counts_what_the_fetch_fetches() {
    let times = spread(3, 8_336, 7);
    let (start, end) = (DAY0, DAY0 + 3 * DAY);
    for order in ORDERS {
        for limits in [quota(), free()] {
            let service = Service::new(times.clone(), order, (true, false));
            let client = client(limits);
            let goal = Goal::Plan {
                walk_pages: usize::MAX,
            };
            let plan = drive(&client, goal, &service, start, end)
                .expect("a count")
                .p;
            let fetched = exact(&client, &service, start, end);
            let n = fetched.events.len() as f64;
            assert!(
                (plan.counted - n).abs() <= 0.1 * n,
                "{order:?}: {}",
                plan.counted
            );
            let requests = fetched.requests as f64;
            let off = (plan.predicted - requests).abs();
            assert!(off <= 0.1 * requests, "{order:?}: {}", plan.predicted);
            // It asks a fraction of what the fetch does (a third at most on a sorting service).
            assert!(plan.sent * 2 < fetched.requests, "{order:?}: {}", plan.sent);
        }
    }
}

/// The ids of `events`.
fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

#[test]
fn a_sync_stopped_anywhere_carries_what_it_read_and_its_next_run_asks_none_again() {
    // Two days of 12,000 events: windows chain (sorted) or split (shuffled).
    let times = spread(2, 6_000, 5);
    let (start, end) = (DAY0, DAY0 + 2 * DAY);
    for order in ORDERS {
        for limits in [quota(), free()] {
            let service = Service::new(times.clone(), order, (true, false));
            let whole = drive(&client(limits), Goal::Sync, &service, start, end).expect("a sync");
            for stop in [1, 7, 40, 95] {
                let c = client(limits);
                let script = Script {
                    stop_after: Some(stop),
                    ..Script::default()
                };
                let first = run(&c, Goal::Sync, &service, start, end, script).expect("a stop");
                let from = first.p.frontier;
                c.carry(first.carried);
                let next = drive(&c, Goal::Sync, &service, from, end).expect("the next run");
                let mut got = ids(&first.events);
                got.extend(ids(&next.events));
                assert!(
                    got == service.truth(start, end),
                    "{order:?} {stop}: not exact"
                );
                // Sorted, the next run plans the same windows from the same pages: the two
                // runs pay what one would. Not sorted, a window split into parts ends where
                // the next run starts its own query: the parts it read are carried, those it
                // had not reached are planned anew (up to half as much again, in a stop
                // inside a split under a quota).
                let paid = first.sent + next.sent;
                let bound = match order {
                    Order::Shuffled => whole.sent * 3 / 2,
                    _ => whole.sent,
                };
                assert!(
                    paid <= bound,
                    "{order:?} {stop}: {paid} against {}",
                    whole.sent
                );
            }
        }
    }
}

#[test]
fn a_range_the_cache_holds_in_part_asks_only_its_gaps() {
    let times = spread(1, 4_000, 3);
    let (start, end) = (DAY0, DAY0 + DAY);
    let (lo, hi) = (DAY0 + 6 * HOUR, DAY0 + 18 * HOUR);
    for order in ORDERS {
        let service = Service::new(times.clone(), order, (true, false));
        let held = service.truth(lo, hi);
        let segment = Segment {
            lo,
            hi,
            events: held.len() as u64,
            requests: pages(held.len()) + 1,
            path: "cached".into(),
        };
        let pieces = vec![
            Piece::Gap(start, lo),
            Piece::Held(segment.clone(), lo, hi),
            Piece::Gap(hi, end),
        ];
        let whole = |_: &Segment| {
            let held = service.events.iter().enumerate();
            let indices = held
                .filter(|(_, (t, _))| (lo..hi).contains(t))
                .map(|(i, _)| i);
            Some(service.page_of(indices))
        };
        for limits in [quota(), free()] {
            let script = Script {
                pieces: Some(pieces.clone()),
                files: &whole,
                ..Script::default()
            };
            let ran =
                run(&client(limits), Goal::Fetch, &service, start, end, script).expect("a fetch");
            assert!(
                ids(&ran.events) == service.truth(start, end),
                "{order:?}: not exact"
            );
            // The gaps' pages and the page that ends each (a shuffled first window its
            // ceiling page too); the file's part costs none, and counts as saved.
            let gaps = pages(service.truth(start, lo).len()) + pages(service.truth(hi, end).len());
            assert!(
                ran.sent <= gaps + 4,
                "{order:?}: {} against {gaps}",
                ran.sent
            );
            assert_eq!(ran.p.progress.saved, segment.requests, "{order:?}");
            // A damaged file: its range is fetched again, exact.
            let script = Script {
                pieces: Some(pieces.clone()),
                ..Script::default()
            };
            let ran =
                run(&client(limits), Goal::Fetch, &service, start, end, script).expect("a fetch");
            assert!(
                ids(&ran.events) == service.truth(start, end),
                "{order:?}: not exact"
            );
            // A count of the same: the file's header counts its part.
            let script = Script {
                pieces: Some(pieces.clone()),
                ..Script::default()
            };
            let count = run(&client(limits), Goal::Check, &service, start, end, script);
            let n = service.truth(start, end).len() as f64;
            let counted = count.expect("a count").p.counted;
            assert!(
                (counted - n).abs() <= 0.1 * n,
                "{order:?}: {counted} of {n}"
            );
        }
    }
}

#[test]
fn a_fetch_after_its_plan_takes_the_plans_pages() {
    let times = spread(3, 8_336, 7);
    let (start, end) = (DAY0, DAY0 + 3 * DAY);
    for order in ORDERS {
        for limits in [quota(), free()] {
            let service = Service::new(times.clone(), order, (true, false));
            let alone = drive(&client(limits), Goal::Fetch, &service, start, end).expect("a fetch");
            let c = client(limits);
            let walk = Goal::Plan {
                walk_pages: usize::MAX,
            };
            let plan = drive(&c, walk, &service, start, end).expect("a plan");
            let fetch = drive(&c, Goal::Fetch, &service, start, end).expect("a fetch");
            assert!(
                ids(&fetch.events) == service.truth(start, end),
                "{order:?}: not exact"
            );
            // The fetch takes the pages its plan read, so that the two cost about what the
            // fetch alone does.
            assert!(fetch.sent < alone.sent, "{order:?}: {}", fetch.sent);
            let bound = (alone.sent as f64 * 1.02).ceil() as u64 + 2;
            let both = plan.sent + fetch.sent;
            assert!(both <= bound, "{order:?}: {both} against {}", alone.sent);
            // A quota check counts as a plan does, spending no more.
            let check = drive(&client(limits), Goal::Check, &service, start, end).expect("a check");
            let n = service.truth(start, end).len() as f64;
            assert!(
                (check.p.counted - n).abs() <= 0.1 * n,
                "{order:?}: {}",
                check.p.counted
            );
            assert!(check.sent <= plan.sent, "{order:?}: {}", check.sent);
        }
    }
}
