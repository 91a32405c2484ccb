//! Tokens whose signature was already verified, so that a proxy that opens
//! a stream again (a reconnect storm: 10,000 proxies within a second) costs
//! one SHA-256 of its token instead of one Ed25519 verify each time.
//!
//! The memo records a fact that cannot change: "these exact bytes carry a
//! valid signature under this verifier's key". Everything that *can* change
//! (expiry, revocation) is still checked on every use by the caller. The
//! key is the SHA-256 of the whole token (header, payload and signature),
//! so a token that differs in any byte is verified again.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// Digests remembered at most; when full, the memo starts again empty (a
/// forgotten token costs one verify, nothing else). 65,536 × 32 bytes plus
/// the table: about 4 MiB at the cap.
const CAPACITY: usize = 65_536;

/// A token's digest, the memo key.
pub(crate) type Digest = [u8; 32];

/// The set of verified token digests. Shared by a verifier's clones.
#[derive(Debug, Default)]
pub(crate) struct SignatureMemo {
    verified: Mutex<HashSet<Digest>>,
}

// === impl SignatureMemo ===

impl SignatureMemo {
    /// The memo key of `token`.
    pub(crate) fn digest(token: &str) -> Digest {
        let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut out = [0; 32];
        out.copy_from_slice(d.as_ref());
        out
    }

    /// Whether a token with this digest was verified before.
    pub(crate) fn contains(&self, digest: &Digest) -> bool {
        self.lock().contains(digest)
    }

    /// Records that the token with this digest has a valid signature.
    pub(crate) fn insert(&self, digest: Digest) {
        let mut verified = self.lock();
        if verified.len() >= CAPACITY {
            verified.clear();
        }
        verified.insert(digest);
    }

    /// Number of remembered tokens.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<Digest>> {
        self.verified.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_differing_in_one_byte_has_another_key() {
        assert_ne!(
            SignatureMemo::digest("a.b.c"),
            SignatureMemo::digest("a.b.d")
        );
        assert_eq!(
            SignatureMemo::digest("a.b.c"),
            SignatureMemo::digest("a.b.c")
        );
    }

    #[test]
    fn the_memo_starts_again_when_full() {
        let memo = SignatureMemo::default();
        for i in 0..CAPACITY {
            memo.insert(SignatureMemo::digest(&i.to_string()));
        }
        assert_eq!(memo.len(), CAPACITY);
        let last = SignatureMemo::digest("one more");
        memo.insert(last);
        assert_eq!(memo.len(), 1);
        assert!(memo.contains(&last));
    }
}
