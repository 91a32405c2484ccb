//! Which open streams were authenticated by which proxy token, so that
//! revoking a token ends its streams at once.
//!
//! Owns the map token id → open streams, and the set of token ids revoked
//! while this instance runs. Registration and revocation take the same
//! lock, so a stream whose credential was checked just before a revocation
//! either is found and cancelled by it, or finds the token revoked when it
//! registers: no stream outlives its token's revocation. It never checks a
//! credential itself; client-certificate streams carry no token and are
//! never registered here.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

/// Open streams by token id.
#[derive(Debug, Default)]
pub(crate) struct Revocations {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    revoked: HashSet<String>,
    streams: HashMap<String, HashMap<u64, CancellationToken>>,
}

/// A stream's registration; dropping it forgets the stream.
pub(crate) struct TokenBinding<'a> {
    owner: &'a Revocations,
    jti: String,
    stream: u64,
    /// Cancelled when the token is revoked.
    pub(crate) revoked: CancellationToken,
}

impl Revocations {
    /// Registers stream `stream` as authenticated by token `jti`. Fails if
    /// the token was revoked already.
    pub(crate) fn bind(&self, jti: &str, stream: u64) -> Option<TokenBinding<'_>> {
        let mut inner = self.lock();
        if inner.revoked.contains(jti) {
            return None;
        }
        let revoked = CancellationToken::new();
        inner
            .streams
            .entry(jti.to_owned())
            .or_default()
            .insert(stream, revoked.clone());
        Some(TokenBinding {
            owner: self,
            jti: jti.to_owned(),
            stream,
            revoked,
        })
    }

    /// Marks `jti` revoked and cancels its open streams; returns how many.
    pub(crate) fn revoke(&self, jti: &str) -> usize {
        let mut inner = self.lock();
        inner.revoked.insert(jti.to_owned());
        let streams = inner.streams.remove(jti).unwrap_or_default();
        for token in streams.values() {
            token.cancel();
        }
        streams.len()
    }

    /// Number of token ids with open streams (for leak checks).
    pub(crate) fn bound_tokens(&self) -> usize {
        self.lock().streams.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TokenBinding<'_> {
    /// The token id this stream was authenticated with.
    pub(crate) fn jti(&self) -> &str {
        &self.jti
    }
}

impl Drop for TokenBinding<'_> {
    fn drop(&mut self) {
        let mut inner = self.owner.lock();
        if let Some(streams) = inner.streams.get_mut(&self.jti) {
            streams.remove(&self.stream);
            if streams.is_empty() {
                inner.streams.remove(&self.jti);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revoking_cancels_bound_streams_and_refuses_later_ones() {
        let r = Revocations::default();
        let a = r.bind("t1", 1).unwrap();
        let b = r.bind("t1", 2).unwrap();
        let other = r.bind("t2", 3).unwrap();
        assert_eq!(r.revoke("t1"), 2);
        assert!(a.revoked.is_cancelled() && b.revoked.is_cancelled());
        assert!(!other.revoked.is_cancelled());
        assert!(r.bind("t1", 4).is_none(), "a revoked token binds no stream");
        drop((a, b, other));
        assert_eq!(r.bound_tokens(), 0, "dropped bindings are forgotten");
    }
}
