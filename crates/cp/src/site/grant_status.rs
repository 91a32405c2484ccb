//! AccessGrant status: `url`, `code`, `ca`, `expirationTime`,
//! `redemptions`, `status`, `message` and the `Ready` condition.
//!
//! Owns computing a grant's next status from its current one: the uid in
//! the URL, the code and the expiration time are chosen once and kept (the
//! URL names the advertised host and grant port of the replica that wrote
//! the first status; every replica's grant server accepts it, so replicas
//! never rewrite each other's URL); `redemptions` is the grant server's
//! (never reset here). The move to `Expired` is left to the leader's
//! `grant-expiry` job ([`expire_grants`]), so it happens once. A grant is Ready only in a site that
//! can accept links; otherwise the status says why.

use std::time::SystemTime;

use meshlink_api::spec::{AccessGrantStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Resource, Status};
use rand::Rng as _;
use rand::distr::Alphanumeric;

use crate::grants::redeem::expired;

/// Length of a generated redemption code.
const CODE_LEN: usize = 24;

/// Why grants of this site cannot be redeemed, if they cannot.
pub type NotReady = Option<String>;

/// `https://<host>:<port>`, with brackets for an IPv6 host.
pub fn grant_base_url(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    }
}

/// The next status of `grant`, or `None` when it is current. Returns the
/// expiration time too, so the controller can wake up then.
pub fn next_status(
    grant: &Resource,
    base_url: &str,
    ca_pem: &str,
    site_problem: &NotReady,
    now: SystemTime,
) -> (Option<Status>, Option<SystemTime>) {
    let Some(spec) = grant.spec.as_access_grant() else {
        return (None, None);
    };
    let cur = grant
        .status
        .details
        .as_access_grant()
        .cloned()
        .unwrap_or_default();
    let uid = cur
        .url
        .as_deref()
        .and_then(|u| u.rsplit('/').next())
        .filter(|u| !u.is_empty())
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    let code = spec.code.clone().or(cur.code.clone()).unwrap_or_else(|| {
        rand::rng()
            .sample_iter(Alphanumeric)
            .take(CODE_LEN)
            .map(char::from)
            .collect()
    });
    let expiration = cur.expiration_time.clone().unwrap_or_else(|| {
        humantime::format_rfc3339_seconds(now + spec.expiration_window()).to_string()
    });
    let expires_at = humantime::parse_rfc3339_weak(&expiration).ok();
    let is_expired = expired(Some(&expiration), now);
    let used = cur.redemptions.unwrap_or(0);
    let (ready, reason, message) = grant_ready(
        spec.redemptions_allowed(),
        used,
        &expiration,
        site_problem,
        now,
    );
    let details = AccessGrantStatus {
        url: Some(
            cur.url
                .clone()
                .unwrap_or_else(|| format!("{base_url}/{uid}")),
        ),
        code: Some(code),
        ca: Some(ca_pem.to_owned()),
        expiration_time: Some(expiration),
        redemptions: Some(used),
        ..cur
    };
    let mut next = grant.clone();
    next.status.details = StatusDetails::AccessGrant(details);
    set_ready(&mut next, ready, reason, &message);
    let wake = expires_at.filter(|_| !is_expired);
    let was_expired = grant
        .condition("Ready")
        .is_some_and(|c| c.reason == "Expired");
    if next.status == grant.status || (reason == "Expired" && !was_expired) {
        (None, wake)
    } else {
        (Some(next.status), wake)
    }
}

/// The one Ready rule for AccessGrants, in order: expired (whatever else
/// holds), the site cannot accept links (`site_problem`), every
/// redemption used ("2/2 redemptions used"), else Ready. Returns
/// (ready, reason, message).
pub(crate) fn grant_ready(
    allowed: u64,
    used: u64,
    expiration: &str,
    site_problem: &NotReady,
    now: SystemTime,
) -> (bool, &'static str, String) {
    if expired(Some(expiration), now) {
        return (false, "Expired", format!("expired at {expiration}"));
    }
    match site_problem {
        Some(why) => (false, "SiteNotReady", why.clone()),
        None if used >= allowed => (
            false,
            "RedemptionsUsed",
            format!("{used}/{allowed} redemptions used"),
        ),
        None => (true, "Ready", "OK".to_owned()),
    }
}

/// Writes a [`grant_ready`] verdict: `status`, `message` and `Ready`.
fn set_ready(r: &mut Resource, ready: bool, reason: &str, message: &str) {
    if let StatusDetails::AccessGrant(d) = &mut r.status.details {
        d.status = Some(if ready { "Ready" } else { "Pending" }.to_owned());
        d.message = Some(message.to_owned());
    }
    let status = if ready {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    r.set_condition(Condition::now("Ready", status, reason, message));
}

/// The leader's `grant-expiry` job: writes `Ready=False, Expired` on every
/// AccessGrant past its expiration time that does not say so yet (a
/// compare-and-swap per grant). Returns how many it marked.
pub async fn expire_grants(resources: &crate::resources::ResourceService) -> Result<usize, String> {
    use meshlink_api::Kind;
    let now = SystemTime::now();
    let mut marked = 0;
    let grants = resources
        .list(Kind::AccessGrant, None, None)
        .await
        .map_err(|e| e.to_string())?;
    for g in grants {
        let Some(cur) = g.status.details.as_access_grant() else {
            continue;
        };
        let Some(expiration) = cur.expiration_time.clone() else {
            continue;
        };
        if !expired(Some(&expiration), now)
            || g.condition("Ready").is_some_and(|c| c.reason == "Expired")
        {
            continue;
        }
        let wrote =
            crate::status::writer::merge(resources, Kind::AccessGrant, None, g.name(), |r| {
                // Only the clock changed: the same rule, with the
                // stored counts and no site problem (Expired wins anyway).
                let allowed = r
                    .spec
                    .as_access_grant()
                    .map_or(1, |s| s.redemptions_allowed());
                let used = r
                    .status
                    .details
                    .as_access_grant()
                    .and_then(|d| d.redemptions)
                    .unwrap_or(0);
                let (ready, reason, message) = grant_ready(allowed, used, &expiration, &None, now);
                set_ready(r, ready, reason, &message);
            })
            .await;
        match wrote {
            Ok(true) => marked += 1,
            Ok(false) => {}
            Err(crate::status::StatusError::Resource(
                crate::resources::ResourceError::NotFound(_),
            )) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(marked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshlink_api::spec::{AccessGrantSpec, Spec};
    use meshlink_api::{Metadata, Resource};
    use std::time::Duration;

    fn grant(spec: AccessGrantSpec) -> Resource {
        Resource::new(
            Metadata {
                name: "g".into(),
                ..Default::default()
            },
            Spec::AccessGrant(spec),
        )
    }

    #[test]
    fn first_status_then_stable_and_edge_sites_say_why() {
        let now = SystemTime::now();
        let mut g = grant(AccessGrantSpec::default());
        let (s, wake) = next_status(&g, "https://h:9090", "CA", &None, now);
        g.status = s.expect("a new grant gets a status");
        let d = g.status.details.as_access_grant().unwrap().clone();
        assert!(d.url.as_deref().unwrap().starts_with("https://h:9090/"));
        assert_eq!(d.code.as_deref().unwrap().len(), CODE_LEN);
        assert_eq!(d.redemptions, Some(0));
        assert!(wake.unwrap() > now + Duration::from_secs(14 * 60));
        assert_eq!(g.condition("Ready").unwrap().status, ConditionStatus::True);
        assert!(
            next_status(&g, "https://h:9090", "CA", &None, now)
                .0
                .is_none()
        );
        let (s, _) = next_status(&g, "https://h:9090", "CA", &Some("edge".into()), now);
        let mut g2 = g.clone();
        g2.status = s.unwrap();
        let ready = g2.condition("Ready").unwrap();
        assert_eq!(
            (ready.status, ready.message.as_str()),
            (ConditionStatus::False, "edge")
        );
        assert_eq!(
            g2.status.details.as_access_grant().unwrap().code,
            d.code,
            "the code is kept"
        );
        assert_eq!(grant_base_url("::1", 9), "https://[::1]:9");
    }

    /// The grant's three writers interleaved: the site controller
    /// (`next_status`, run again after every write, as the change feed
    /// does), the grant server (one more redemption) and the expiry job
    /// (only the clock moved). Whatever the order, the end state is a
    /// function of the inputs: the number of redemptions, the site's last
    /// problem and the clock.
    #[test]
    fn grant_status_is_a_function_of_its_inputs_not_their_order() {
        #[derive(Clone, Copy, Debug)]
        enum Step {
            Redeem,
            Site(bool),
            Expire,
        }
        fn run(order: &[Step], start: SystemTime) -> (Option<String>, String, u64) {
            let spec = AccessGrantSpec {
                redemptions_allowed: Some(2),
                ..Default::default()
            };
            let mut g = grant(spec);
            let mut problem: NotReady = None;
            let mut now = start;
            let controller = |g: &mut Resource, problem: &NotReady, now| {
                if let (Some(s), _) = next_status(g, "https://h:9090", "CA", problem, now) {
                    g.status = s;
                }
            };
            controller(&mut g, &problem, now);
            for step in order {
                match step {
                    Step::Redeem => {
                        if let StatusDetails::AccessGrant(d) = &mut g.status.details {
                            d.redemptions = Some(d.redemptions.unwrap_or(0) + 1);
                        }
                    }
                    Step::Site(bad) => problem = bad.then(|| "site not ready".to_owned()),
                    Step::Expire => {
                        now = start + Duration::from_secs(3600);
                        let exp = g
                            .status
                            .details
                            .as_access_grant()
                            .unwrap()
                            .expiration_time
                            .clone()
                            .unwrap();
                        if expired(Some(&exp), now) {
                            let d = g.status.details.as_access_grant().unwrap().clone();
                            let (ready, reason, message) =
                                grant_ready(2, d.redemptions.unwrap_or(0), &exp, &None, now);
                            set_ready(&mut g, ready, reason, &message);
                        }
                    }
                }
                controller(&mut g, &problem, now);
            }
            let c = g.condition("Ready").unwrap();
            let d = g.status.details.as_access_grant().unwrap();
            (
                d.message.clone(),
                c.reason.clone(),
                d.redemptions.unwrap_or(0),
            )
        }
        let start = SystemTime::now();
        let steps = [
            Step::Redeem,
            Step::Redeem,
            Step::Site(true),
            Step::Site(false),
            Step::Expire,
        ];
        // Every order of the five steps, keeping Site(true) before
        // Site(false) (the site's last word is "ready").
        let mut ends = std::collections::BTreeSet::new();
        let mut orders = 0;
        for perm in permutations(&[0, 1, 2, 3, 4]) {
            let p2 = perm.iter().position(|&x| x == 2).unwrap();
            let p3 = perm.iter().position(|&x| x == 3).unwrap();
            if p2 > p3 {
                continue;
            }
            let order: Vec<Step> = perm.iter().map(|&i| steps[i]).collect();
            ends.insert(run(&order, start));
            orders += 1;
        }
        assert_eq!(orders, 60);
        assert_eq!(ends.len(), 1, "{ends:#?}");
        let (message, reason, used) = ends.into_iter().next().unwrap();
        assert_eq!((reason.as_str(), used), ("Expired", 2));
        assert!(message.unwrap().starts_with("expired at "));
        // Without the clock: used up, said as Skupper users count.
        let mut ends = std::collections::BTreeSet::new();
        for perm in permutations(&[0, 1, 2, 3]) {
            let p2 = perm.iter().position(|&x| x == 2).unwrap();
            let p3 = perm.iter().position(|&x| x == 3).unwrap();
            if p2 < p3 {
                ends.insert(run(
                    &perm.iter().map(|&i| steps[i]).collect::<Vec<_>>(),
                    start,
                ));
            }
        }
        assert_eq!(
            ends.into_iter().collect::<Vec<_>>(),
            vec![(
                Some("2/2 redemptions used".to_owned()),
                "RedemptionsUsed".to_owned(),
                2
            )]
        );
    }

    fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
        if items.len() <= 1 {
            return vec![items.to_vec()];
        }
        let mut out = Vec::new();
        for (i, &x) in items.iter().enumerate() {
            let mut rest = items.to_vec();
            rest.remove(i);
            for mut p in permutations(&rest) {
                p.insert(0, x);
                out.push(p);
            }
        }
        out
    }
}
