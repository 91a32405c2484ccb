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
}

impl Revocations {
    /// Registers stream `stream` as authenticated by token `jti`; revoking
    /// the token cancels `stop` (the stream's stop token, which other
    /// events cancel too: ask [`TokenBinding::is_revoked`] why it stopped).
    /// Fails if the token was revoked already.
    pub(crate) fn bind(
        &self,
        jti: &str,
        stream: u64,
        stop: CancellationToken,
    ) -> Option<TokenBinding<'_>> {
        let mut inner = self.lock();
        if inner.revoked.contains(jti) {
            return None;
        }
        inner
            .streams
            .entry(jti.to_owned())
            .or_default()
            .insert(stream, stop);
        Some(TokenBinding {
            owner: self,
            jti: jti.to_owned(),
            stream,
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

    /// Whether the token was revoked since the stream bound it.
    pub(crate) fn is_revoked(&self) -> bool {
        self.owner.lock().revoked.contains(&self.jti)
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
        let stops: Vec<CancellationToken> = (0..3).map(|_| CancellationToken::new()).collect();
        let a = r.bind("t1", 1, stops[0].clone()).unwrap();
        let b = r.bind("t1", 2, stops[1].clone()).unwrap();
        let other = r.bind("t2", 3, stops[2].clone()).unwrap();
        assert!(!a.is_revoked());
        assert_eq!(r.revoke("t1"), 2);
        assert!(stops[0].is_cancelled() && stops[1].is_cancelled());
        assert!(a.is_revoked() && b.is_revoked());
        assert!(!stops[2].is_cancelled() && !other.is_revoked());
        assert!(
            r.bind("t1", 4, CancellationToken::new()).is_none(),
            "a revoked token binds no stream"
        );
        drop((a, b, other));
        assert_eq!(r.bound_tokens(), 0, "dropped bindings are forgotten");
    }
}
