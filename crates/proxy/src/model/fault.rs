//! Envoy's fault injection HTTP filter (`envoy.filters.http.fault`, what
//! Kuma's MeshFaultInjection becomes), possibly wrapped in an
//! `ExtensionWithMatcher` that skips it for some callers (by the peer
//! certificate's URI SAN).
//!
//! Owns the decision for one request over the listener's filters, in
//! order, as Envoy's stacked filters make it: each filter that applies to
//! the caller first samples its response bandwidth limit, then its delay,
//! then its abort; an abort answers the request, so the filters after it
//! never see it (each later percentage is of what the earlier ones let
//! through). Delays add up; the tightest bandwidth limit wins. It never
//! sleeps or answers itself: `crate::http::fault` does.

use std::time::Duration;

use serde::Serialize;

/// Which callers a filter applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Callers {
    /// Every caller (no matcher).
    All,
    /// Only callers with one of these SPIFFE IDs.
    Only(Vec<String>),
    /// Every caller but those with one of these SPIFFE IDs (a caller
    /// without a certificate included).
    Except(Vec<String>),
}

/// A share of requests, Envoy's `FractionalPercent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fraction {
    /// Hits per `denominator` (above it: every request).
    pub numerator: u32,
    /// 100, 10,000 or 1,000,000.
    pub denominator: u32,
}

/// One fault filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fault {
    /// Who it applies to.
    pub callers: Callers,
    /// Answer with this status instead of forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort: Option<(u16, Fraction)>,
    /// Wait this long before going on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<(Duration, Fraction)>,
    /// Send the response body at most this many bytes per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_bytes_per_second: Option<(u64, Fraction)>,
}

/// What the faults do to one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Injection {
    /// The total delay before forwarding (or aborting).
    pub delay: Duration,
    /// The status to answer with instead of forwarding.
    pub abort: Option<u16>,
    /// The response body's limit, bytes per second.
    pub throttle: Option<u64>,
    /// How many delays, aborts and limits were sampled in.
    pub counts: Counts,
}

/// Faults injected into one request, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Delays.
    pub delays: u32,
    /// Aborts (0 or 1).
    pub aborts: u32,
    /// Response bandwidth limits.
    pub throttles: u32,
}

impl Fraction {
    /// Whether a request whose roll is `roll` (uniform in
    /// `0..denominator`) is hit.
    pub fn hits(self, roll: u32) -> bool {
        roll < self.numerator
    }
}

impl Callers {
    /// Whether the caller `peer` (its SPIFFE ID, if it has a certificate)
    /// is one of these.
    pub fn include(&self, peer: Option<&str>) -> bool {
        let listed = |ids: &Vec<String>| peer.is_some_and(|p| ids.iter().any(|id| id == p));
        match self {
            Callers::All => true,
            Callers::Only(ids) => listed(ids),
            Callers::Except(ids) => !listed(ids),
        }
    }
}

/// Decides what `faults` do to a request from `peer`; `roll(d)` draws a
/// uniform number in `0..d`.
pub fn decide(faults: &[Fault], peer: Option<&str>, mut roll: impl FnMut(u32) -> u32) -> Injection {
    let mut out = Injection::default();
    let mut hit = |f: Fraction| f.hits(roll(f.denominator.max(1)));
    for fault in faults.iter().filter(|f| f.callers.include(peer)) {
        if let Some((limit, p)) = fault.response_bytes_per_second
            && hit(p)
        {
            out.throttle = Some(out.throttle.map_or(limit, |t| t.min(limit)));
            out.counts.throttles += 1;
        }
        if let Some((d, p)) = fault.delay
            && hit(p)
        {
            out.delay += d;
            out.counts.delays += 1;
        }
        if let Some((status, p)) = fault.abort
            && hit(p)
        {
            out.abort = Some(status);
            out.counts.aborts = 1;
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abort(status: u16, percent: u32) -> Fault {
        Fault {
            callers: Callers::All,
            abort: Some((
                status,
                Fraction {
                    numerator: percent,
                    denominator: 100,
                },
            )),
            delay: None,
            response_bytes_per_second: None,
        }
    }

    /// Kuma's example: 70 % get 500, and 50 % of the other 30 % get 503.
    /// Every roll pair is tried once, so the shares are exact.
    #[test]
    fn each_percentage_applies_to_what_the_previous_filters_let_through() {
        let faults = [abort(500, 70), abort(503, 50)];
        let mut seen = std::collections::BTreeMap::new();
        for first in 0..100 {
            for second in 0..100 {
                let mut rolls = [first, second].into_iter();
                let i = decide(&faults, None, |_| rolls.next().expect("two rolls at most"));
                *seen.entry(i.abort).or_insert(0) += 1;
            }
        }
        assert_eq!(seen[&Some(500)], 7_000);
        assert_eq!(seen[&Some(503)], 1_500);
        assert_eq!(seen[&None], 1_500);
    }

    #[test]
    fn delays_add_up_and_the_tightest_limit_wins() {
        let every = Fraction {
            numerator: 100,
            denominator: 100,
        };
        let step = |secs, limit| Fault {
            callers: Callers::All,
            abort: None,
            delay: Some((Duration::from_secs(secs), every)),
            response_bytes_per_second: Some((limit, every)),
        };
        let i = decide(&[step(1, 4096), step(2, 1024)], None, |_| 0);
        assert_eq!(i.delay, Duration::from_secs(3));
        assert_eq!(i.throttle, Some(1024));
        assert_eq!(
            i.counts,
            Counts {
                delays: 2,
                aborts: 0,
                throttles: 2
            }
        );
    }

    #[test]
    fn a_filter_for_some_callers_skips_the_others() {
        let web = "spiffe://default/web".to_owned();
        let mut only_web = abort(503, 100);
        only_web.callers = Callers::Only(vec![web.clone()]);
        let mut rest = abort(500, 100);
        rest.callers = Callers::Except(vec![web.clone()]);
        let faults = [only_web, rest];
        assert_eq!(decide(&faults, Some(&web), |_| 0).abort, Some(503));
        assert_eq!(
            decide(&faults, Some("spiffe://default/other"), |_| 0).abort,
            Some(500)
        );
        assert_eq!(decide(&faults, None, |_| 0).abort, Some(500));
    }

    #[test]
    fn a_fraction_above_its_denominator_hits_every_request() {
        let f = Fraction {
            numerator: 250,
            denominator: 100,
        };
        assert!((0..100).all(|r| f.hits(r)));
        let none = Fraction {
            numerator: 0,
            denominator: 100,
        };
        assert!((0..100).all(|r| !none.hits(r)));
    }
}
