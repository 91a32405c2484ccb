//! Certificate renewal schedule: when to renew ([`renewal_time`]), how to
//! back off when the CA is failing ([`RetryBackoff`]), and the per-identity
//! actor that does it ([`RenewalDriver`]).
//!
//! Policy (DESIGN §6): renew at 50% of the lifetime ±10% jitter, never at or
//! after expiry; on failure keep serving the still-valid credential and retry
//! with exponential backoff bounded by both a maximum and a fraction of the
//! remaining lifetime, so a CA outage never turns into a tight retry loop and
//! renewals of many certificates issued together do not stampede the CA.
//! When a mesh's lifetime is lowered below what a certificate still has
//! left ([`outlives_lifetime`]), renew within the first 20% of the new
//! lifetime ([`lowered_lifetime_delay`]): the same ±10% spread, so the
//! proxies of a mesh renew over a fifth of the new lifetime, not at once.
//!
//! Must never: read the wall clock or `std::time::Instant` inside a loop (all
//! waiting goes through `tokio::time`, so paused-time tests cover hours of
//! rotation), or depend on a concrete certificate type (see [`Credential`]).

use std::time::{Duration, SystemTime};

use rand::Rng as _;

mod backoff;
mod driver;

pub use backoff::{BackoffPolicy, RetryBackoff};
pub use driver::{RenewalDriver, WallClock};

/// Nominal renewal point, as a fraction of the lifetime.
pub const RENEW_AT_FRACTION: f64 = 0.5;

/// Maximum jitter around [`RENEW_AT_FRACTION`], as a fraction of the lifetime.
pub const MAX_JITTER: f64 = 0.1;

/// Anything with a validity window that can be renewed: a workload
/// certificate, a link certificate, an SDS secret.
pub trait Credential {
    /// Start of validity.
    fn not_before(&self) -> SystemTime;
    /// End of validity; the credential must be replaced before this.
    fn not_after(&self) -> SystemTime;
}

/// Why one renewal attempt failed. The driver logs these and retries; the
/// still-valid credential stays published meanwhile.
#[derive(Debug, thiserror::Error)]
pub enum RenewalError {
    /// The issuer (CA / Certify RPC) returned an error.
    #[error(
        "renewing {identity}: issuer failed: {reason}; keeping the current credential and retrying with backoff"
    )]
    Issuer {
        /// Identity being renewed.
        identity: String,
        /// The issuer's error message.
        reason: String,
    },
    /// The issuer did not answer within the attempt timeout.
    #[error("renewing {identity}: issuer did not answer within {}; keeping the current credential and retrying with backoff", humantime::format_duration(*.after))]
    Timeout {
        /// Identity being renewed.
        identity: String,
        /// The attempt timeout that elapsed.
        after: Duration,
    },
    /// The issuer returned a credential that is already expired, which
    /// usually means the CA's clock is wrong.
    #[error("renewing {identity}: issuer returned a credential that expired at {}; check the control plane's clock", humantime::format_rfc3339_seconds(*.not_after))]
    AlreadyExpired {
        /// Identity being renewed.
        identity: String,
        /// The returned credential's expiry.
        not_after: SystemTime,
    },
}

/// When to renew a credential valid from `not_before` to `not_after`:
/// `not_before + lifetime × (0.5 + jitter)`, with `jitter` clamped to
/// `[-0.1, 0.1]` (NaN counts as 0).
///
/// The result is always strictly before `not_after`. For a degenerate window
/// (`not_after <= not_before`) it is just before `not_after`, i.e. renew now.
pub fn renewal_time(not_before: SystemTime, not_after: SystemTime, jitter: f64) -> SystemTime {
    let Ok(lifetime) = not_after.duration_since(not_before) else {
        return just_before(not_after);
    };
    if lifetime.is_zero() {
        return just_before(not_after);
    }
    let jitter = if jitter.is_nan() {
        0.0
    } else {
        jitter.clamp(-MAX_JITTER, MAX_JITTER)
    };
    let at = not_before + lifetime.mul_f64(RENEW_AT_FRACTION + jitter);
    if at < not_after {
        at
    } else {
        // Only reachable through rounding on nanosecond lifetimes.
        not_before + lifetime / 2
    }
}

/// Like [`renewal_time`], but counting the lifetime from when the
/// credential was obtained if that is later than its `not_before`.
///
/// Issuers backdate `not_before` (meshlink by 60 s) to absorb clock skew.
/// For a short-lived certificate that backdating is a large share of the
/// validity window: a 20 s certificate backdated 60 s would be "due" 20 s
/// before it was even issued, and renewal would spin. Counting from the
/// moment it was obtained keeps renewal at 50% ± 10% of the lifetime the
/// operator configured.
pub fn renewal_time_from(
    obtained_at: SystemTime,
    not_before: SystemTime,
    not_after: SystemTime,
    jitter: f64,
) -> SystemTime {
    renewal_time(obtained_at.max(not_before), not_after, jitter)
}

/// Slack for the whole seconds certificate times are written in (Certify
/// sends notBefore and notAfter as unix seconds), so a certificate issued
/// for exactly the lifetime never looks longer than it.
const WHOLE_SECONDS_SLACK: Duration = Duration::from_secs(2);

/// Whether a certificate valid from `not_before` to `not_after` outlives
/// `lifetime`, the lifetime its mesh issues now (lowered since it was
/// issued): more than `lifetime` of it is left at `now`, and it was issued
/// for longer than `lifetime`.
///
/// The second test reads the certificate alone (its validity less the
/// issuer's 60 s backdating), not the clock: a proxy whose clock is behind
/// the control plane's sees more time left on a fresh certificate than it
/// has, and must not renew it again and again.
pub fn outlives_lifetime(
    not_before: SystemTime,
    not_after: SystemTime,
    now: SystemTime,
    lifetime: Duration,
) -> bool {
    let left = not_after.duration_since(now).unwrap_or_default();
    let issued_for = not_after
        .duration_since(not_before)
        .unwrap_or_default()
        .saturating_sub(crate::ca::BACKDATE);
    left > lifetime && issued_for > lifetime + WHOLE_SECONDS_SLACK
}

/// How long to wait before renewing a certificate that
/// [`outlives_lifetime`]: `lifetime × (0.1 + jitter)`, with `jitter`
/// clamped to `[-0.1, 0.1]` like [`renewal_time`]'s (pass
/// [`random_jitter`]). Certificates of one mesh are thereby renewed spread
/// over the first 20% of the new lifetime, the width the half-life rule
/// spreads certificates issued together over, instead of all in the
/// second the Mesh changed; each is replaced well before the new lifetime
/// would have ended had it been issued then.
pub fn lowered_lifetime_delay(lifetime: Duration, jitter: f64) -> Duration {
    let jitter = if jitter.is_nan() {
        0.0
    } else {
        jitter.clamp(-MAX_JITTER, MAX_JITTER)
    };
    lifetime.mul_f64(MAX_JITTER + jitter)
}

fn just_before(t: SystemTime) -> SystemTime {
    t.checked_sub(Duration::from_nanos(1)).unwrap_or(t)
}

/// A uniformly random jitter in `[-0.1, 0.1]` for [`renewal_time`].
pub fn random_jitter() -> f64 {
    rand::rng().random_range(-MAX_JITTER..=MAX_JITTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backdated_short_certificates_renew_after_they_were_obtained() {
        let issued = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let not_before = issued - Duration::from_secs(60);
        let not_after = issued + Duration::from_secs(20);
        // Counting from notBefore, a 20 s certificate backdated 60 s is due
        // before it was issued; counting from issuance it is due at 50%.
        assert!(renewal_time(not_before, not_after, 0.0) < issued);
        assert_eq!(
            renewal_time_from(issued, not_before, not_after, 0.0),
            issued + Duration::from_secs(10)
        );
    }
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn renews_at_half_life_plus_jitter() {
        let (nb, na) = (at(1_000), at(1_000 + 86_400));
        assert_eq!(renewal_time(nb, na, 0.0), at(1_000 + 43_200));
        assert_eq!(renewal_time(nb, na, 0.1), nb + Duration::from_secs(51_840));
        assert_eq!(renewal_time(nb, na, -0.1), nb + Duration::from_secs(34_560));
    }

    #[test]
    fn jitter_is_clamped() {
        let (nb, na) = (at(0), at(100));
        assert_eq!(renewal_time(nb, na, 5.0), renewal_time(nb, na, 0.1));
        assert_eq!(renewal_time(nb, na, -5.0), renewal_time(nb, na, -0.1));
        assert_eq!(renewal_time(nb, na, f64::NAN), at(50));
        assert_eq!(
            renewal_time(nb, na, f64::INFINITY),
            renewal_time(nb, na, 0.1)
        );
    }

    #[test]
    fn always_strictly_before_expiry() {
        let nb = at(10);
        for nanos in [1u64, 2, 3, 7, 1_000, 10_000_000_000] {
            let na = nb + Duration::from_nanos(nanos);
            for jitter in [-0.1, 0.0, 0.1] {
                let t = renewal_time(nb, na, jitter);
                assert!(t < na && t >= nb, "lifetime {nanos}ns jitter {jitter}");
            }
        }
        // Degenerate windows: renew immediately, still before expiry.
        assert!(renewal_time(at(10), at(10), 0.0) < at(10));
        assert!(renewal_time(at(20), at(10), 0.0) < at(10));
    }

    #[test]
    fn a_certificate_outlives_a_lowered_lifetime_by_what_is_left_and_what_it_was_issued_for() {
        let day = Duration::from_secs(86_400);
        let thirty = Duration::from_secs(30);
        let issued = at(1_000_000);
        let nb = issued - Duration::from_secs(60);
        // A day's certificate, an hour in: lowered to 30 s, it outlives it.
        let now = issued + Duration::from_secs(3_600);
        assert!(outlives_lifetime(nb, issued + day, now, thirty));
        // Not when the lifetime stays (or grows), nor once less is left.
        assert!(!outlives_lifetime(nb, issued + day, now, day));
        assert!(!outlives_lifetime(
            nb,
            issued + day,
            issued + day - Duration::from_secs(20),
            thirty
        ));
        // A fresh 30 s certificate (times in whole seconds) does not, even
        // on a proxy whose clock is an hour behind.
        let behind = issued - Duration::from_secs(3_600);
        for (nb, na) in [
            (nb, issued + thirty),
            (nb - Duration::from_secs(1), issued + thirty),
            (nb, issued + thirty + Duration::from_secs(1)),
        ] {
            assert!(!outlives_lifetime(nb, na, issued, thirty));
            assert!(!outlives_lifetime(nb, na, behind, thirty));
        }
    }

    #[test]
    fn a_lowered_lifetime_renews_within_its_first_fifth() {
        let l = Duration::from_secs(100);
        assert_eq!(lowered_lifetime_delay(l, -0.1), Duration::ZERO);
        assert_eq!(lowered_lifetime_delay(l, 0.0), Duration::from_secs(10));
        assert_eq!(lowered_lifetime_delay(l, 0.1), Duration::from_secs(20));
        assert_eq!(lowered_lifetime_delay(l, 7.0), Duration::from_secs(20));
        assert_eq!(lowered_lifetime_delay(l, f64::NAN), Duration::from_secs(10));
        for _ in 0..1_000 {
            assert!(lowered_lifetime_delay(l, random_jitter()) <= l / 5);
        }
    }

    #[test]
    fn random_jitter_is_bounded_and_varies() {
        let samples: Vec<f64> = (0..1_000).map(|_| random_jitter()).collect();
        assert!(
            samples
                .iter()
                .all(|j| (-MAX_JITTER..=MAX_JITTER).contains(j))
        );
        let min = samples.iter().copied().fold(f64::MAX, f64::min);
        let max = samples.iter().copied().fold(f64::MIN, f64::max);
        assert!(min < -0.09 && max > 0.09, "jitter range {min}..{max}");
    }
}
