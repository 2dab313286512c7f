//! The access tokens the emulator issues, and why one is refused.

use std::sync::atomic::Ordering;

use super::{lock, State};
use crate::rng::mix;

/// Lifetime of a token in seconds, as the service reports it (just under 4 hours).
pub const DEFAULT_TOKEN_LIFETIME: u64 = 14_399;

#[derive(Debug)]
pub(super) struct TokenInfo {
    issued_ms: i64,
    lifetime_s: u64,
    generation: u64,
    /// Data requests it was accepted for.
    uses: u64,
}

/// Why a bearer token is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token was issued with this value.
    Unknown,
    /// Issued before `revoke_tokens`.
    Revoked,
    /// Past its lifetime, or past the requests the dialect gives a token.
    Expired,
}

impl Refusal {
    /// The reason in the words of the 401 answer.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Unknown => "unknown access token",
            Refusal::Revoked => "access token revoked",
            Refusal::Expired => "access token expired",
        }
    }

    /// The reason as a sentence, for a 403 that explains itself.
    pub fn sentence(self) -> &'static str {
        match self {
            Refusal::Unknown => "the access token is not valid",
            Refusal::Revoked => "the access token has been revoked",
            Refusal::Expired => "the access token has expired",
        }
    }
}

impl State {
    /// Every token issued so far is refused from now on.
    pub fn revoke_tokens(&self) {
        let g = self.token_generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.revoked_generation.store(g, Ordering::SeqCst);
    }

    /// `expires_in` of the tokens issued from now on.
    pub fn set_token_lifetime(&self, seconds: u64) {
        self.token_lifetime.store(seconds, Ordering::SeqCst);
    }

    /// Creates a token and returns it with its lifetime.
    pub fn issue_token(&self) -> (String, u64) {
        let n = self.token_counter.fetch_add(1, Ordering::SeqCst);
        let token = format!(
            "emu.{:016x}{:016x}",
            mix(self.seed ^ mix(n) ^ self.started.elapsed().as_nanos() as u64),
            mix(n ^ 0x70CE)
        );
        let lifetime = self.token_lifetime.load(Ordering::SeqCst);
        lock(&self.tokens).insert(
            token.clone(),
            TokenInfo {
                issued_ms: self.now_ms(),
                lifetime_s: lifetime,
                generation: self.token_generation.load(Ordering::SeqCst),
                uses: 0,
            },
        );
        lock(&self.stats).tokens_issued += 1;
        (token, lifetime)
    }

    /// Why a bearer token is refused, or None when it is good (and then counts one use of it,
    /// which the dialect's `token_requests` limits).
    pub fn use_token(&self, token: &str) -> Option<Refusal> {
        let limit = self.dialect().token_requests;
        let mut tokens = lock(&self.tokens);
        let Some(info) = tokens.get_mut(token) else {
            return Some(Refusal::Unknown);
        };
        if info.generation < self.revoked_generation.load(Ordering::SeqCst) {
            return Some(Refusal::Revoked);
        }
        let lifetime_ms = (info.lifetime_s as i64).saturating_mul(1000) + 1000;
        if self.now_ms() - info.issued_ms >= lifetime_ms {
            return Some(Refusal::Expired);
        }
        if limit.is_some_and(|n| info.uses >= n) {
            return Some(Refusal::Expired);
        }
        info.uses += 1;
        None
    }
}
