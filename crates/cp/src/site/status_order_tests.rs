//! The Site's two status owners, interleaved: whatever the order in which
//! the site controller and the router status task write, the end state is
//! a function of their last inputs only.
//!
//! The system modelled: each owner writes with read-merge-CAS (here: in
//! turn on one stored copy), and every write to the Site wakes the site
//! controller through the change feed, which then runs again with its
//! current facts. Every order of the two owners' input sequences is
//! tried.

use meshlink_api::spec::{Endpoint, NetworkSite, SiteSpec, Spec};
use meshlink_api::{ConditionStatus, Metadata, Resource};

use super::site_status::{SiteFacts, next_site_status};
use crate::router::status::{running_condition, site_status};

#[derive(Clone, Debug)]
enum Step {
    /// The site controller reconciles with these facts.
    Controller(Option<&'static str>, bool),
    /// The router status task flushes: reporting or not.
    Router(bool),
}

fn site() -> Resource {
    Resource::new(
        Metadata {
            name: "west".into(),
            ..Default::default()
        },
        Spec::Site(SiteSpec::default()),
    )
}

fn facts(problem: Option<&str>, endpoints: bool) -> SiteFacts {
    SiteFacts {
        config_problem: problem.map(str::to_owned),
        endpoints: if endpoints {
            vec![Endpoint {
                name: "inter-router".into(),
                host: "127.0.0.1".into(),
                port: "55671".into(),
                group: None,
            }]
        } else {
            Vec::new()
        },
        accepts_links: true,
    }
}

fn apply(r: &mut Resource, step: &Step, last_facts: &mut SiteFacts) {
    match step {
        Step::Controller(problem, endpoints) => *last_facts = facts(*problem, *endpoints),
        Step::Router(running) => {
            let network = vec![NetworkSite {
                name: "west".into(),
                id: None,
                namespace: None,
                platform: Some("meshlink".into()),
                version: None,
                links: Vec::new(),
                services: Vec::new(),
            }];
            let c = running_condition(r.condition("Running"), *running);
            site_status(r, &network, &c, None);
        }
    }
    // Any write reaches the site controller through the feed.
    if let Some(s) = next_site_status(r, last_facts) {
        r.status = s;
    }
}

/// What an operator reads, without transition times.
fn observed(r: &Resource) -> (Option<String>, Vec<(String, ConditionStatus, String)>) {
    let d = r.status.details.as_site().cloned().unwrap_or_default();
    let mut cs: Vec<_> = r
        .status
        .conditions
        .iter()
        .map(|c| {
            // Running's message carries "since <time>".
            let m = if c.type_ == "Running" || c.reason == "RouterNotConnected" {
                c.reason.clone()
            } else {
                c.message.clone()
            };
            (c.type_.clone(), c.status, m)
        })
        .collect();
    cs.sort_by(|a, b| a.0.cmp(&b.0));
    (d.status, cs)
}

/// Every interleaving of `a` and `b` that keeps each one's order.
fn interleavings(a: &[Step], b: &[Step]) -> Vec<Vec<Step>> {
    if a.is_empty() {
        return vec![b.to_vec()];
    }
    if b.is_empty() {
        return vec![a.to_vec()];
    }
    let mut out = Vec::new();
    for mut rest in interleavings(&a[1..], b) {
        rest.insert(0, a[0].clone());
        out.push(rest);
    }
    for mut rest in interleavings(a, &b[1..]) {
        rest.insert(0, b[0].clone());
        out.push(rest);
    }
    out
}

#[test]
fn site_status_is_a_function_of_the_owners_last_inputs() {
    let controller_runs = [
        vec![
            Step::Controller(Some("no site CA yet"), false),
            Step::Controller(None, true),
        ],
        vec![Step::Controller(None, true), Step::Controller(None, false)],
        vec![
            Step::Controller(None, true),
            Step::Controller(Some("bad"), true),
        ],
    ];
    let router_runs = [
        vec![Step::Router(false), Step::Router(true)],
        vec![Step::Router(true), Step::Router(false)],
        vec![Step::Router(true), Step::Router(false), Step::Router(true)],
    ];
    let mut checked = 0;
    for c in &controller_runs {
        for r in &router_runs {
            let mut ends = Vec::new();
            for order in interleavings(c, r) {
                let mut s = site();
                let mut last = facts(None, false);
                for step in &order {
                    apply(&mut s, step, &mut last);
                }
                ends.push((
                    observed(&s),
                    s.status.details.as_site().unwrap().site_id.clone(),
                ));
            }
            let first = &ends[0].0;
            assert!(
                ends.iter().all(|(o, _)| o == first),
                "the end state depends on the order for {c:?} / {r:?}: {ends:#?}"
            );
            // Ready is True exactly when all three hold.
            let ready = first.1.iter().find(|x| x.0 == "Ready").unwrap().1;
            let all = ["Configured", "Resolved", "Running"].iter().all(|t| {
                first
                    .1
                    .iter()
                    .any(|x| x.0 == *t && x.1 == ConditionStatus::True)
            });
            assert_eq!(ready == ConditionStatus::True, all, "{first:?}");
            // One siteId per Site, minted by the controller and kept.
            assert!(ends.iter().all(|(_, id)| id.is_some()));
            checked += ends.len();
        }
    }
    assert!(checked > 50, "only {checked} orders tried");
}

#[test]
fn the_site_id_is_minted_once_and_kept_by_both_owners() {
    let mut s = site();
    let mut last = facts(None, true);
    apply(&mut s, &Step::Controller(None, true), &mut last);
    let id = s.status.details.as_site().unwrap().site_id.clone();
    assert!(id.is_some());
    for step in [
        Step::Router(true),
        Step::Router(false),
        Step::Controller(Some("x"), true),
    ] {
        apply(&mut s, &step, &mut last);
        assert_eq!(s.status.details.as_site().unwrap().site_id, id);
    }
}
