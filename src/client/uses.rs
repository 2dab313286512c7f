//! How many requests carry each access token before the service has shown that it takes them:
//! a token's requests go in windows that grow as they are accepted, so that a token the service
//! ends after a few requests costs one refused request, not every request in flight.
//!
//! A service may end a token after a number of requests rather than at its `expires_in`. Every
//! request that reaches it after that is refused and must be sent again with the next token, so
//! a client that sends hundreds at once with each token spends the day's quota many times over.
//! Each token's requests are therefore let out much as TCP's slow start lets out segments: a few,
//! then, once every request sent with it is answered and none was refused, half as many more as
//! it has carried (gentler than doubling: finding where a token ends costs at most about half as
//! many refusals as it took requests), until a window is large enough not to limit anything.
//! Once a token has been refused after `n` acceptances, each new token is given `n` requests at
//! once, then one alone: refused, that one is the only request the renewal cost; accepted, the
//! windows grow again. Once two tokens in a row lasted the same `n`, a token that has had `n`
//! accepted is renewed without that refusal, but for one token in [`PROBE_EVERY`], which still
//! tries one more.

use std::sync::Mutex;

use tokio::sync::Notify;

/// A window this large no longer limits (more than publishing keeps in flight).
const LIFTED: u64 = 256;
/// The first window of a token, while no token has ended after working (TCP's initial window).
const INITIAL: u64 = 4;
/// Of the tokens renewed at the count the ones before lasted, one in this many tries one request
/// more first, so that a service that lets tokens last longer again is noticed.
pub const PROBE_EVERY: u64 = 8;

/// What became of a request that carried a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It never left the machine (closed, the day's quota spent, cancelled before sending).
    Unsent,
    /// It left, and its answer says nothing of the token (another status, no answer).
    Sent,
    /// The service took the token.
    Worked,
    /// The service refused the token.
    Refused,
}

/// The requests of one token.
#[derive(Debug, Clone, Copy, Default)]
struct TokenWindow {
    generation: u64,
    /// Requests let out with it (that left or may have left).
    sent: u64,
    /// Requests let out and not yet answered.
    open: u64,
    /// Requests whose token the service took.
    worked: u64,
    /// Requests answered without a refusal of the token (taken, or another status, or none).
    passed: u64,
    /// Requests it may carry before every one of them is answered; None: no limit.
    budget: Option<u64>,
    /// Refused: no more requests carry it.
    ended: bool,
}

#[derive(Debug, Default)]
struct WindowHistory {
    current: TokenWindow,
    /// The token refused before the current one, whose late acceptances still say how many
    /// requests a token lasts.
    previous: Option<TokenWindow>,
    /// Acceptances of the last token that was refused after working.
    capacity: Option<u64>,
    /// The generation of that token.
    learned_from: u64,
    /// Acceptances of the token refused after working before it.
    before: Option<u64>,
    /// The token the current one replaced, when it was not refused (renewed near its expiry):
    /// the requests it let out that have not left yet keep their places, with the current
    /// one. 0: none.
    replaced: u64,
}

impl WindowHistory {
    fn window(&mut self, generation: u64) -> Option<&mut TokenWindow> {
        if self.current.generation == generation {
            return Some(&mut self.current);
        }
        self.previous
            .as_mut()
            .filter(|w| w.generation == generation)
    }
}

/// Whether a request may carry the token of a generation now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Yes: it is counted among the token's requests until its [`Use`] ends.
    Granted,
    /// Not until the requests it carries are answered, or it is replaced.
    Wait,
    /// The token is no longer the current one: take the current one.
    Stale,
    /// The token has had as many requests accepted as the tokens before it lasted: renew it
    /// rather than send one that would be refused.
    Renew,
}

/// The windows of a client's tokens.
#[derive(Debug, Default)]
pub struct Uses {
    state: Mutex<WindowHistory>,
    changed: Notify,
}

impl Uses {
    fn state(&self) -> std::sync::MutexGuard<'_, WindowHistory> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new token of `generation` is the current one: its first window is the requests the
    /// last refused token lasted, or [`INITIAL`].
    pub fn start(&self, generation: u64) {
        let mut s = self.state();
        let old = std::mem::take(&mut s.current);
        s.replaced = if old.ended { 0 } else { old.generation };
        if old.ended {
            s.previous = Some(old);
        }
        s.current = TokenWindow {
            generation,
            budget: Some(s.capacity.unwrap_or(INITIAL).max(1)),
            ..TokenWindow::default()
        };
        drop(s);
        self.changed.notify_waiters();
    }

    /// Lets a request carry the token of `generation`, when its window allows.
    pub fn admit(&self, generation: u64) -> Admit {
        let mut s = self.state();
        let capacity = s.capacity;
        let confirmed = s.before.is_some() && s.before == capacity;
        let w = &mut s.current;
        if w.generation != generation {
            return Admit::Stale;
        }
        if w.ended {
            return Admit::Wait;
        }
        match w.budget {
            Some(budget) if w.sent >= budget => {
                if w.open > 0 {
                    return Admit::Wait;
                }
                if confirmed
                    && capacity == Some(w.worked)
                    && w.sent == w.worked
                    && !generation.is_multiple_of(PROBE_EVERY)
                {
                    w.ended = true;
                    return Admit::Renew;
                }
                // Every request it carried is answered and none refused: the next window is
                // one request while the token has not outlived the last one's acceptances,
                // else half as many as it has carried without a refusal (a 5xx or a 429 says
                // nothing against the token).
                let size = match capacity {
                    Some(c) if w.worked <= c && w.sent >= c => 1,
                    _ => w.passed.div_ceil(2).max(1),
                };
                w.budget = (size < LIFTED).then_some(w.sent + size);
            }
            _ => {}
        }
        w.sent += 1;
        w.open += 1;
        Admit::Granted
    }

    /// Whether the token of `generation` is the current one and not refused.
    pub fn is_current(&self, generation: u64) -> bool {
        let s = self.state();
        s.current.generation == generation && !s.current.ended
    }

    /// A request let out with the token of `from`, which was renewed near its expiry (not
    /// refused) before the request left, goes with the current token of `to` instead: counted
    /// in its window, over its size if need be (the place was given when the request was let
    /// out). False, and nothing counted, when `from` was refused or is not the token `to`
    /// replaced: the request must then be let out anew.
    pub fn carry(&self, from: u64, to: u64) -> bool {
        let mut s = self.state();
        if from == 0 || s.replaced != from || s.current.generation != to || s.current.ended {
            return false;
        }
        s.current.sent += 1;
        s.current.open += 1;
        true
    }

    /// Waits for a change of the windows. Made before looking at them (`enable`), so that no
    /// change between is missed.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Wakes the requests waiting for a window (their token was replaced).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// A request that carried the token of `generation` ended with `outcome`.
    fn end(&self, generation: u64, outcome: Outcome) {
        let mut s = self.state();
        let mut learned = None;
        // Waiters are woken only when one of them may now be let out (or must take a new
        // token): not at every answer of a window still open.
        let mut wake = outcome == Outcome::Refused;
        let current = s.current.generation == generation;
        if let Some(w) = s.window(generation) {
            w.open = w.open.saturating_sub(1);
            match outcome {
                Outcome::Unsent => w.sent = w.sent.saturating_sub(1),
                Outcome::Sent => w.passed += 1,
                Outcome::Worked => {
                    w.worked += 1;
                    w.passed += 1;
                    if w.ended {
                        // Accepted after a refusal of the same token: it lasted this many.
                        learned = Some(w.worked);
                    }
                }
                Outcome::Refused => {
                    if !w.ended && w.worked > 0 {
                        learned = Some(w.worked);
                    }
                    w.ended = true;
                }
            }
            wake |= current && (w.open == 0 || w.budget.is_none_or(|b| w.sent < b));
        }
        if let Some(n) = learned {
            if s.learned_from != generation {
                s.before = s.capacity;
                s.learned_from = generation;
            }
            s.capacity = Some(n);
        }
        drop(s);
        if wake {
            self.changed.notify_waiters();
        }
    }

    /// The requests the last token that ended after working had accepted.
    pub fn capacity(&self) -> Option<u64> {
        self.state().capacity
    }
}

/// A request counted in its token's window, until it ends (when dropped, with what it was
/// told: unsent unless [`sent`](Use::sent) or [`end`](Use::end) said otherwise).
#[derive(Debug)]
pub struct Use<'a> {
    uses: &'a Uses,
    generation: u64,
    outcome: Outcome,
    ended: bool,
}

impl<'a> Use<'a> {
    /// A request admitted (see [`Uses::admit`]) with the token of `generation`.
    pub fn new(uses: &'a Uses, generation: u64) -> Use<'a> {
        Use {
            uses,
            generation,
            outcome: Outcome::Unsent,
            ended: false,
        }
    }

    /// The request is leaving the machine.
    pub fn sent(&mut self) {
        self.outcome = Outcome::Sent;
    }

    /// The request ended with `outcome` (now rather than when dropped).
    pub fn end(&mut self, outcome: Outcome) {
        if !self.ended {
            self.ended = true;
            self.uses.end(self.generation, outcome);
        }
    }
}

impl Drop for Use<'_> {
    fn drop(&mut self) {
        let outcome = self.outcome;
        self.end(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Admits requests of `generation` until one must wait (1,000 at most); how many.
    fn admit_all(u: &Uses, generation: u64) -> u64 {
        let mut n = 0;
        while n < 1000 && u.admit(generation) == Admit::Granted {
            n += 1;
        }
        n
    }

    fn answer(u: &Uses, generation: u64, n: u64, outcome: Outcome) {
        for _ in 0..n {
            Use::new(u, generation).end(outcome);
        }
    }

    #[test]
    fn windows_double_as_a_token_is_accepted_until_they_no_longer_limit() {
        let u = Uses::default();
        u.start(1);
        let mut sizes = Vec::new();
        loop {
            let n = admit_all(&u, 1);
            sizes.push(n);
            if n == 1000 {
                break;
            }
            answer(&u, 1, n, Outcome::Worked);
        }
        assert_eq!(
            sizes,
            [4, 2, 3, 5, 7, 11, 16, 24, 36, 54, 81, 122, 183, 1000]
        );
    }

    #[test]
    fn a_token_that_ended_gives_the_next_its_acceptances_then_one_alone() {
        let u = Uses::default();
        u.start(1);
        assert_eq!(admit_all(&u, 1), 4);
        answer(&u, 1, 4, Outcome::Worked);
        // The service takes 5 requests with a token: of the next window of 2, one is refused,
        // before the acceptance of the other is counted.
        assert_eq!(admit_all(&u, 1), 2);
        answer(&u, 1, 1, Outcome::Refused);
        assert_eq!(u.admit(1), Admit::Wait);
        answer(&u, 1, 1, Outcome::Worked);
        assert_eq!(u.capacity(), Some(5));
        assert_eq!(u.admit(1), Admit::Wait);
        u.start(2);
        assert_eq!(u.admit(1), Admit::Stale);
        assert_eq!(admit_all(&u, 2), 5);
        answer(&u, 2, 5, Outcome::Worked);
        assert_eq!(admit_all(&u, 2), 1);
        // The one alone accepted: the token outlived the last one, and its windows grow.
        answer(&u, 2, 1, Outcome::Worked);
        assert_eq!(admit_all(&u, 2), 3);
    }

    #[test]
    fn two_tokens_that_lasted_the_same_make_the_next_renewed_at_that_count() {
        let u = Uses::default();
        u.start(1);
        assert_eq!(admit_all(&u, 1), 4);
        answer(&u, 1, 2, Outcome::Worked);
        answer(&u, 1, 2, Outcome::Refused);
        assert_eq!(u.capacity(), Some(2));
        // The second token is given 2, then one alone, which is refused as well.
        u.start(2);
        assert_eq!(admit_all(&u, 2), 2);
        answer(&u, 2, 2, Outcome::Worked);
        assert_eq!(admit_all(&u, 2), 1);
        answer(&u, 2, 1, Outcome::Refused);
        for generation in 3..=PROBE_EVERY {
            u.start(generation);
            assert_eq!(admit_all(&u, generation), 2);
            answer(&u, generation, 2, Outcome::Worked);
            if !generation.is_multiple_of(PROBE_EVERY) {
                assert_eq!(u.admit(generation), Admit::Renew);
                // Ended: nothing more carries it.
                assert_eq!(u.admit(generation), Admit::Wait);
            } else {
                // One token in PROBE_EVERY tries one more.
                assert_eq!(admit_all(&u, generation), 1);
            }
        }
    }

    #[test]
    fn a_request_let_out_before_a_renewal_near_expiry_keeps_its_place_with_the_new_token() {
        let u = Uses::default();
        u.start(1);
        assert_eq!(admit_all(&u, 1), 4);
        answer(&u, 1, 4, Outcome::Worked);
        assert_eq!(admit_all(&u, 1), 2);
        // Renewed near its expiry while two requests it let out wait for their turn.
        u.start(2);
        assert!(!u.is_current(1) && u.is_current(2));
        assert_eq!(admit_all(&u, 2), 4);
        // Their places go over the new token's window: they were given before it came.
        assert!(u.carry(1, 2) && u.carry(1, 2));
        answer(&u, 2, 6, Outcome::Worked);
        assert_eq!(admit_all(&u, 2), 3);
        // A refused token's requests are let out anew, and only by the token that replaced
        // the one they carried.
        answer(&u, 2, 1, Outcome::Refused);
        assert!(!u.is_current(2));
        u.start(3);
        assert!(!u.carry(2, 3) && !u.carry(1, 3) && !u.carry(0, 3));
    }

    #[test]
    fn requests_that_never_left_or_got_no_verdict_free_their_place() {
        let u = Uses::default();
        u.start(1);
        assert_eq!(admit_all(&u, 1), 4);
        // One never left: not a use of the token, and its place is free again.
        drop(Use::new(&u, 1));
        assert_eq!(admit_all(&u, 1), 1);
        // Answered with no verdict on the token (a 503): they count as carried.
        answer(&u, 1, 3, Outcome::Sent);
        assert_eq!(u.admit(1), Admit::Wait);
        answer(&u, 1, 1, Outcome::Worked);
        assert_eq!(admit_all(&u, 1), 2);
    }
}
