//! The rotation rule over control-plane candidates, as plain data so it
//! can be tested without a network.
//!
//! Owns the cursor, the epoch that tells a current failure from a stale
//! one, and the count of failures in a row. A failure of the current
//! candidate moves the cursor once; a report about a candidate the cursor
//! already left moves nothing. A failure that says the control plane is
//! going away may be followed at once by an attempt on the next candidate,
//! unless every candidate has failed in a row: then callers back off as
//! with a single URL. It never resolves names or touches the network
//! ([`super::endpoints`] does).

use std::net::SocketAddr;

use super::failure::{FailureKind, Pace};

/// One thing to connect to: a `--cp` URL (by index), and the resolved
/// address when its host is a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Index of the URL in `--cp` order.
    pub(crate) url: usize,
    /// The address to dial, or `None` to dial the URL as given.
    pub(crate) addr: Option<SocketAddr>,
}

/// What a reported failure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// When the reporter may try again.
    pub(crate) pace: Pace,
    /// The cursor moved to another candidate (a failover).
    pub(crate) advanced: bool,
    /// This failure started a run of failures (the last report was a
    /// success, or there was none).
    pub(crate) first_in_row: bool,
}

/// The cursor over the candidates.
#[derive(Debug, Default)]
pub(crate) struct Rotation {
    candidates: Vec<Candidate>,
    cursor: usize,
    /// Bumped whenever the current candidate changes.
    epoch: u64,
    /// Failures of the current candidate since the last success.
    failed_in_row: usize,
    /// Failures since the names were last resolved.
    failed_since_resolve: usize,
}

// === impl Rotation ===

impl Rotation {
    /// Whether the candidates should be (re)built: none yet, or a full
    /// turn failed since they were resolved.
    pub(crate) fn resolve_due(&self) -> bool {
        self.candidates.is_empty() || self.failed_since_resolve >= self.candidates.len()
    }

    /// Takes freshly resolved candidates (never empty). The first set
    /// starts at `first` (modulo its length); later ones keep the cursor
    /// on the same candidate when it is still there.
    pub(crate) fn install(&mut self, fresh: Vec<Candidate>, first: usize) {
        debug_assert!(!fresh.is_empty());
        let current = self.candidates.get(self.cursor).cloned();
        let cursor = match &current {
            None => first % fresh.len(),
            Some(c) => fresh
                .iter()
                .position(|f| f == c)
                .unwrap_or(self.cursor % fresh.len()),
        };
        self.candidates = fresh;
        self.cursor = cursor;
        if self.candidates.get(self.cursor) != current.as_ref() {
            self.epoch += 1;
        }
        self.failed_since_resolve = 0;
    }

    /// The current candidate, its 0-based position, the number of
    /// candidates and the epoch. Only after [`Rotation::install`].
    pub(crate) fn current(&self) -> (Candidate, usize, usize, u64) {
        (
            self.candidates[self.cursor].clone(),
            self.cursor,
            self.candidates.len(),
            self.epoch,
        )
    }

    /// A failure of `tried`, handed out at `epoch`.
    pub(crate) fn failed(&mut self, tried: &Candidate, epoch: u64, kind: FailureKind) -> Outcome {
        let len = self.candidates.len().max(1);
        let mut advanced = false;
        let mut first_in_row = false;
        if epoch == self.epoch {
            first_in_row = self.failed_in_row == 0;
            self.failed_in_row += 1;
            self.failed_since_resolve += 1;
            self.epoch += 1;
            if len > 1 {
                self.cursor = (self.cursor + 1) % len;
                advanced = true;
            }
        }
        let moved = self.candidates.get(self.cursor) != Some(tried);
        let pace = if kind == FailureKind::GoingAway && moved && self.failed_in_row < len {
            Pace::Immediate
        } else {
            Pace::Backoff
        };
        Outcome {
            pace,
            advanced,
            first_in_row,
        }
    }

    /// A success: the next failure starts a new run.
    pub(crate) fn succeeded(&mut self) {
        self.failed_in_row = 0;
    }
}
