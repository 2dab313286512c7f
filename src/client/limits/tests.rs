use super::*;

#[tokio::test]
async fn paces_at_the_rate() {
    let g = Gate::new(Some(50.0), Some(3));
    let t0 = Instant::now();
    for _ in 0..6 {
        drop(g.acquire().await.expect("open"));
    }
    // Five intervals of 20 ms after the first.
    assert!(
        t0.elapsed() >= Duration::from_millis(95),
        "{:?}",
        t0.elapsed()
    );
}

/// `s` seconds after `t0`.
fn at(t0: Instant, s: f64) -> Instant {
    t0 + Duration::from_secs_f64(s)
}

/// Feeds `n` answers spread evenly over `[from, to)` seconds (sent and answered at once),
/// the i-th a 429 when `throttled(i)`.
fn feed(
    t: &mut Throttle,
    t0: Instant,
    (from, to): (f64, f64),
    n: usize,
    mut throttled: impl FnMut(usize) -> bool,
) {
    for i in 0..n {
        let now = at(t0, from + (to - from) * i as f64 / n as f64);
        t.answer(now, now, throttled(i));
    }
}

#[tokio::test]
async fn a_429_delays_no_other_request() {
    let g = Gate::new(None, None);
    g.on_rate_limited(Instant::now(), Some(Duration::from_secs(1)));
    let t0 = Instant::now();
    for _ in 0..3 {
        drop(g.acquire().await.expect("open"));
    }
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(g.current_rate(), None);
}

#[test]
fn turns_are_spaced_by_the_rate() {
    let t0 = Instant::now();
    let mut t = Throttle::new(Some(4.0));
    assert_eq!(t.turn(t0), None);
    assert_eq!(t.turn(at(t0, 0.1)), Some(at(t0, 0.25)));
    assert_eq!(t.turn(at(t0, 0.25)), None);
    // Late: the next turn counts from this start, never a catch-up burst.
    assert_eq!(t.turn(at(t0, 2.0)), None);
    assert_eq!(t.turn(at(t0, 2.0)), Some(at(t0, 2.25)));
    // A millisecond past its turn (a timer's lateness): the next counts from the turn, so
    // the rate holds on average.
    assert_eq!(t.turn(at(t0, 2.251)), None);
    assert_eq!(t.turn(at(t0, 2.3)), Some(at(t0, 2.5)));
    let mut unlimited = Throttle::new(None);
    assert!((0..100).all(|_| unlimited.turn(t0).is_none()));
}

#[test]
fn lone_and_sporadic_429s_leave_the_rate() {
    let t0 = Instant::now();
    let mut t = Throttle::new(Some(10.0));
    feed(&mut t, t0, (0.0, 3.0), 30, |i| i == 29);
    assert_eq!(t.rate(at(t0, 3.0)), Some(10.0));
    // 5% of 429s at random, as per-node limits give, for minutes at 2, 50 and 1,000 answers
    // a second, limited or not: not one cut.
    for (per_second, seconds) in [(2, 600), (50, 120), (1000, 60)] {
        for configured in [None, Some(per_second as f64)] {
            let mut t = Throttle::new(configured);
            let mut rng = crate::rng::Rng::new(7, per_second);
            for second in 0..seconds {
                let s = second as f64;
                feed(&mut t, t0, (s, s + 1.0), per_second as usize, |_| {
                    rng.chance(0.05)
                });
                assert!(t.cut.is_none(), "{per_second}/s, second {second}");
            }
            assert_eq!(t.rate(at(t0, seconds as f64)), configured);
        }
    }
}

#[test]
fn waves_of_requests_with_sporadic_429s_leave_the_rate() {
    // As a read or a publish gives: a wave of requests answered at once, 5% of them 429s,
    // whose retries come back a second later, 5% of those 429s again, and so on; then the
    // next wave. Ten thousand waves.
    let t0 = Instant::now();
    let mut rng = crate::rng::Rng::new(3, 4);
    let mut t = Throttle::new(None);
    let mut now = 0.0;
    for wave in 0..10_000 {
        let mut n = [1, 2, 100, 500][wave % 4];
        while n > 0 {
            let mut refused = 0;
            for i in 0..n {
                let answered = at(t0, now + 0.0002 * i as f64);
                let throttled = rng.chance(0.05);
                refused += usize::from(throttled);
                t.answer(answered, at(t0, now), throttled);
            }
            assert!(t.cut.is_none(), "wave {wave}");
            now += 1.0;
            n = refused;
        }
    }
}

/// Feeds 429s from `from` seconds, `per_second` of them, until the rate is cut: the cut.
fn throttle_until_cut(t: &mut Throttle, t0: Instant, from: f64, per_second: f64) -> Cut {
    for i in 0..1000 {
        let now = at(t0, from + i as f64 / per_second);
        t.answer(now, now, true);
        if let Some(cut) = t.cut {
            return cut;
        }
    }
    panic!("no cut");
}

#[test]
fn sustained_429s_cut_the_rate_which_recovers_along_a_cubic() {
    let t0 = Instant::now();
    let mut t = Throttle::new(Some(100.0));
    // 50 a second accepted, then every other one refused: the service takes 25 a second.
    feed(&mut t, t0, (0.0, 2.0), 100, |_| false);
    for i in 0..50 {
        let now = at(t0, 2.0 + i as f64 / 50.0);
        t.answer(now, now, i % 2 == 1);
        if t.cut.is_some() {
            break;
        }
    }
    let cut = t.cut.expect("a cut");
    let after = cut.at.duration_since(at(t0, 2.0)).as_secs_f64();
    assert!((0.1..1.5).contains(&after), "{after}");
    assert!(cut.from > 20.0 && cut.from <= 30.0, "{cut:?}");
    assert_eq!(cut.recovery, RECOVERY);
    let rate = |t: &mut Throttle, s: f64| t.rate(cut.at + Duration::from_secs_f64(s)).expect("cut");
    assert!((rate(&mut t, 0.0) - BETA * cut.from).abs() < 1e-9);
    // Concave up to the rate of the cut, reached after RECOVERY seconds, then convex.
    let curve: Vec<f64> = (0..=12).map(|i| rate(&mut t, 0.5 * i as f64)).collect();
    assert!(curve.windows(2).all(|w| w[1] > w[0]), "{curve:?}");
    assert!((curve[6] - cut.from).abs() < 1e-9, "{curve:?}");
    assert!(curve[1] - curve[0] > curve[6] - curve[5], "{curve:?}");
    assert!(curve[12] - curve[11] > curve[7] - curve[6], "{curve:?}");
    // Back at the configured rate (four times the accepted one) within seconds: the cut
    // is over.
    assert_eq!(t.rate(cut.at + Duration::from_secs(12)), Some(100.0));
    assert!(t.cut.is_none());
}

#[test]
fn a_wave_all_refused_cuts_from_the_last_seconds_rate() {
    let t0 = Instant::now();
    let mut t = Throttle::new(None);
    feed(&mut t, t0, (0.0, 2.0), 100, |_| false);
    let cut = throttle_until_cut(&mut t, t0, 2.0, 1000.0);
    // Not a rate of 0: that of the last second.
    assert!(cut.from > 40.0 && cut.from <= 50.0, "{cut:?}");
}

#[test]
fn a_slow_client_recovers_over_as_many_requests() {
    let t0 = Instant::now();
    let mut t = Throttle::new(None);
    feed(&mut t, t0, (0.0, 20.0), 40, |_| false); // 2 a second
    feed(&mut t, t0, (20.0, 40.0), 40, |i| i % 2 == 1);
    let cut = t.cut.expect("a cut");
    assert!(cut.from > 0.75 && cut.from <= 1.5, "{cut:?}");
    assert!((cut.recovery - 60.0 / cut.from).abs() < 1e-9, "{cut:?}");
}

#[test]
fn answers_to_requests_sent_before_a_cut_do_not_cut_again() {
    let t0 = Instant::now();
    let mut t = Throttle::new(None);
    feed(&mut t, t0, (0.0, 1.0), 20, |_| false);
    let cut = throttle_until_cut(&mut t, t0, 1.0, 1000.0);
    // The rest of a burst sent before the cut comes back refused too.
    for i in 0..50 {
        t.answer(cut.at + Duration::from_millis(1 + i), at(t0, 1.0), true);
    }
    assert_eq!(t.cut.map(|c| (c.at, c.from)), Some((cut.at, cut.from)));
}

/// A cut of a client of `configured` that sent 50 a second, every other one refused from
/// 2 s on.
fn cut_at_half(configured: Option<f64>) -> (Throttle, Instant, Cut) {
    let t0 = Instant::now();
    let mut t = Throttle::new(configured);
    feed(&mut t, t0, (0.0, 2.0), 100, |_| false);
    for i in 0..50 {
        let now = at(t0, 2.0 + i as f64 / 50.0);
        t.answer(now, now, i % 2 == 1);
        if let Some(cut) = t.cut {
            return (t, t0, cut);
        }
    }
    panic!("no cut");
}

#[test]
fn near_the_rate_of_a_cut_fewer_429s_cut_again() {
    let (mut t, _, first) = cut_at_half(None);
    // Early in the recovery, well below the rate of the cut, 5% of 429s are no more than
    // sporadic ones.
    let s = |d: f64| first.at + Duration::from_secs_f64(d);
    let mut i = 0;
    while s(0.01 + i as f64 * 0.04) < s(first.recovery) {
        let now = s(0.01 + i as f64 * 0.04);
        t.answer(now, now, first.calm(now) && i % 20 == 19);
        i += 1;
    }
    assert_eq!(t.cut.map(|c| c.at), Some(first.at));
    // Past the rate of the cut, one in five refused is the limit again.
    let mut again = None;
    for i in 0..200 {
        let now = s(first.recovery + 0.01 + i as f64 * 0.04);
        t.answer(now, now, i % 5 == 4);
        if t.cut.is_some_and(|c| c.at != first.at) {
            again = Some(i);
            break;
        }
    }
    assert!(again.is_some_and(|i| i < 40), "{again:?}");
    // From the rate of the first cut, not lower; the limit is where it was: the next
    // probe comes twice as late, and later still the next times, up to SLOWEST times.
    let second = t.cut.expect("a cut");
    assert!(second.from >= first.from, "{second:?}");
    assert!(
        (second.recovery - 2.0 * first.recovery).abs() < 1e-9,
        "{second:?}"
    );
    let mut last = second;
    for round in 0..4 {
        let s = |d: f64| last.at + Duration::from_secs_f64(d);
        for i in 0..2000 {
            let d = 0.01 + i as f64 * 0.04;
            let now = s(d);
            t.answer(now, now, d > last.recovery && i % 5 == 4);
            if t.cut.is_some_and(|c| c.at != last.at) {
                break;
            }
        }
        let next = t.cut.expect("a cut");
        assert!(next.at > last.at, "round {round}: {next:?}");
        last = next;
    }
    assert!(
        (last.recovery - SLOWEST * first.recovery).abs() < 1e-9,
        "{last:?}"
    );
}

#[test]
fn below_the_rate_of_a_cut_a_few_429s_do_not_cut_again() {
    // Past the calm start of the recovery but below the rate of the cut, the rate is one
    // the service took: two 429s close together (a neighbour's burst) are no limit.
    let (mut t, _, first) = cut_at_half(None);
    let s = |d: f64| first.at + Duration::from_secs_f64(d);
    let mut i = 0;
    while s(0.01 + i as f64 * 0.04) < s(first.recovery) {
        let now = s(0.01 + i as f64 * 0.04);
        t.answer(now, now, !first.calm(now) && (i % 40 == 38 || i % 40 == 39));
        i += 1;
    }
    assert_eq!(t.cut.map(|c| c.at), Some(first.at));
}

#[test]
fn sporadic_429s_after_a_cut_do_not_ratchet_it_down() {
    for configured in [None, Some(100.0)] {
        let (mut t, t0, first) = cut_at_half(configured);
        let mut rng = crate::rng::Rng::new(5, 6);
        let d = first.at.duration_since(t0).as_secs_f64();
        // Then 5% of 429s at random, at the rate in force, for two minutes: the rate is
        // never below the first cut's, and back to the configured one (or lifted) within
        // seconds of the last cut.
        let mut now = d;
        let mut lowest = f64::INFINITY;
        let mut last_cut = first.at;
        while now < d + 120.0 {
            let rate = t.rate(at(t0, now)).unwrap_or(50.0).min(50.0);
            lowest = lowest.min(rate);
            t.answer(at(t0, now), at(t0, now), rng.chance(0.05));
            last_cut = t.cut.map_or(last_cut, |c| c.at);
            now += 1.0 / rate;
        }
        assert!(lowest >= BETA * first.from - 1e-9, "{lowest} {first:?}");
        let since = at(t0, now).duration_since(last_cut).as_secs_f64();
        assert!(since > 10.0, "{since}");
        assert!(t.cut.is_none(), "{:?}", t.cut);
    }
}

#[test]
fn a_cut_outlives_its_call_by_seconds_at_most() {
    // A call ends at the cut; the next starts 10 s later: at the configured rate, or
    // unlimited again.
    for configured in [Some(100.0), None] {
        let (mut t, _, cut) = cut_at_half(configured);
        assert!(t.rate(cut.at).is_some());
        assert_eq!(t.rate(cut.at + Duration::from_secs(10)), configured);
    }
    // Its 429s make no evidence for the next one.
    let (mut t, _, cut) = cut_at_half(None);
    let later = cut.at + Duration::from_secs(60);
    for i in 0..3 {
        let now = later + Duration::from_millis(i);
        t.answer(now, now, true);
    }
    assert!(t.evidence < FIRST.cut_at);
    let fresh = t.evidence;
    let mut u = Throttle::new(None);
    for i in 0..3 {
        let now = later + Duration::from_millis(i);
        u.answer(now, now, true);
    }
    assert!((fresh - u.evidence).abs() < 1e-9);
}

#[test]
fn an_unlimited_rate_is_lifted_again_when_unused() {
    let (mut t, t0, cut) = cut_at_half(None);
    assert!(t.rate(cut.at).is_some());
    // A few answers a second from then on: the curve passes twice that after the recovery.
    let d = cut.at.duration_since(t0).as_secs_f64();
    feed(&mut t, t0, (d + 0.1, d + 8.0), 16, |_| false);
    assert_eq!(t.rate(at(t0, d + 8.0)), None);
    assert!(t.cut.is_none());
}

/// A service that allows `limit` requests a second (a token bucket holding one second, as
/// the emulator's), refuses a `sporadic` share of the others at random, and answers in
/// 5 ms; a client with always more to send, `in_flight` at a time, that does not know the
/// limit. The requests the service accepts per second, as a share of the limit, and the
/// share of 429s among those sent from `settle` to `total` seconds.
fn against_an_unknown_limit(
    configured: Option<f64>,
    (limit, sporadic): (f64, f64),
    in_flight: usize,
    settle: f64,
    total: f64,
) -> (f64, f64) {
    let (per_second, refused) =
        against_a_service(configured, (limit, sporadic), in_flight, settle, total);
    (per_second / limit, refused)
}

/// As [`against_an_unknown_limit`]: the requests accepted per second from `settle` to `total`
/// seconds, and the share of 429s among those sent then.
fn against_a_service(
    configured: Option<f64>,
    (limit, sporadic): (f64, f64),
    in_flight: usize,
    settle: f64,
    total: f64,
) -> (f64, f64) {
    let t0 = Instant::now();
    let secs = |i: Instant| i.saturating_duration_since(t0).as_secs_f64();
    let mut rng = crate::rng::Rng::new(11, 2);
    let mut t = Throttle::new(configured);
    let (mut tokens, mut refilled) = (limit, 0.0);
    let mut pending: VecDeque<(f64, f64, bool)> = VecDeque::new();
    let (mut accepted, mut refused) = (0u64, 0u64);
    let mut now = 0.0;
    while now < total {
        let next_send = if pending.len() < in_flight {
            match t.turn(at(t0, now)) {
                None => {
                    tokens = (tokens + (now - refilled) * limit).min(limit);
                    refilled = now;
                    let passed = tokens >= 1.0;
                    if passed {
                        tokens -= 1.0;
                    }
                    let ok = passed && !rng.chance(sporadic);
                    pending.push_back((now + 0.005, now, !ok));
                    continue;
                }
                Some(due) => secs(due),
            }
        } else {
            f64::INFINITY
        };
        match pending.front().copied() {
            Some((answered, sent, throttled)) if answered <= next_send => {
                pending.pop_front();
                now = answered;
                t.answer(at(t0, answered), at(t0, sent), throttled);
                if sent >= settle {
                    *(if throttled {
                        &mut refused
                    } else {
                        &mut accepted
                    }) += 1;
                }
            }
            _ => now = next_send,
        }
    }
    let per_second = accepted as f64 / (total - settle);
    (per_second, refused as f64 / (accepted + refused) as f64)
}

#[test]
fn settles_under_an_unknown_limit_with_few_429s() {
    for (limit, in_flight) in [(20.0, 16), (5.0, 3), (200.0, 32)] {
        let (share, refused) = against_an_unknown_limit(None, (limit, 0.0), in_flight, 10.0, 130.0);
        eprintln!("limit {limit}: {share:.3} of the limit, {refused:.3} of 429s");
        assert!(share >= 0.9, "limit {limit}: {share}");
        assert!(refused < 0.01, "limit {limit}: {refused}");
    }
    // From the start, finding the limit included, over 20 s, for a client configured for
    // twice the limit.
    for (limit, in_flight) in [(20.0, 3), (100.0, 16)] {
        let configured = Some(2.0 * limit);
        let (share, refused) =
            against_an_unknown_limit(configured, (limit, 0.0), in_flight, 0.0, 20.0);
        eprintln!("limit {limit}, from the start: {share:.3} of the limit, {refused:.3} of 429s");
        assert!(share >= 0.8, "limit {limit}: {share}");
        assert!(refused <= 0.05, "limit {limit}: {refused}");
    }
    // With 5% of sporadic 429s besides: they do not drag the rate below the limit.
    let (share, refused) = against_an_unknown_limit(None, (20.0, 0.05), 16, 10.0, 130.0);
    eprintln!("limit 20 and 5% sporadic: {share:.3} of the limit, {refused:.3} of 429s");
    assert!(share >= 0.85, "{share}");
    assert!(refused < 0.1, "{refused}");
}

#[test]
fn random_429s_at_any_share_cost_retries_not_rate() {
    // No limit below the configured 100 a second: a share of the requests refused at random,
    // whatever the rate, from 200 in flight. The service takes about the configured rate
    // times the share it accepts, from the start and once settled.
    for sporadic in [0.05, 0.3] {
        for (settle, total) in [(0.0, 10.0), (10.0, 70.0)] {
            let (per_second, refused) =
                against_a_service(Some(100.0), (1e9, sporadic), 200, settle, total);
            eprintln!(
                "{sporadic} at random, {settle}-{total} s: {per_second:.1}/s, {refused:.3} of 429s"
            );
            assert!(
                per_second >= 0.9 * 100.0 * (1.0 - sporadic),
                "{sporadic}, {settle}-{total} s: {per_second}/s"
            );
        }
    }
}

#[test]
fn published_limits_are_the_default() {
    let l = Limits::PUBLISHED;
    assert_eq!(l.read_per_second, Some(1.0));
    assert_eq!(l.publish_concurrency, Some(200));
}
