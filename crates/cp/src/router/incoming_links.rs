//! The Site's `incomingLinks`: links other sites dialled into this one, as
//! this site's router reports them (`RouterReport.accepted_links`), one per
//! peer site. A peer whose link is gone (it died, or went silent and its
//! connection was closed) stays listed as `Down` with since when, so the
//! accepting side sees the outage the dialling side sees; so does every
//! peer while this site's router is not reporting.

use meshlink_api::spec::IncomingLink;
use meshlink_xds::certify::RouterReport;

use super::link_status::{DOWN, OPERATIONAL};

/// The next `incomingLinks`, from the stored ones (`before`), the report
/// (if the router is reporting) or why it is not (`router_down`), at `now`
/// (RFC 3339).
pub(crate) fn incoming_links(
    before: &[IncomingLink],
    report: Option<&RouterReport>,
    router_down: Option<&str>,
    now: &str,
) -> Vec<IncomingLink> {
    let mut out: Vec<IncomingLink> = Vec::new();
    if let Some(report) = report {
        for l in &report.accepted_links {
            // Before the peer's hello there is no peer to name yet.
            if l.remote_site_name.is_empty() {
                continue;
            }
            let entry = IncomingLink {
                remote_site_name: l.remote_site_name.clone(),
                remote_site_id: (!l.remote_site_id.is_empty()).then(|| l.remote_site_id.clone()),
                name: l.name.clone(),
                status: if l.operational { OPERATIONAL } else { DOWN }.to_owned(),
                message: if l.operational {
                    "OK".to_owned()
                } else {
                    format!("Not operational: {}", l.message)
                },
            };
            match out
                .iter_mut()
                .find(|o| o.remote_site_name == entry.remote_site_name)
            {
                // One row per peer: an operational link wins.
                Some(o) if o.status != OPERATIONAL => *o = entry,
                Some(_) => {}
                None => out.push(entry),
            }
        }
    }
    for b in before {
        if out.iter().any(|o| o.remote_site_name == b.remote_site_name) {
            continue;
        }
        let mut gone = b.clone();
        if let Some(why) = router_down {
            gone.status = DOWN.to_owned();
            gone.message = why.to_owned();
        } else if b.status == OPERATIONAL || !b.message.starts_with("no link from") {
            gone.status = DOWN.to_owned();
            gone.message = format!("no link from {} since {now}", b.remote_site_name);
        }
        out.push(gone);
    }
    out.sort_by(|a, b| a.remote_site_name.cmp(&b.remote_site_name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshlink_xds::certify::LinkState;

    fn accepted(peer: &str, up: bool) -> LinkState {
        LinkState {
            name: format!("inter-router/{peer}-router#1"),
            operational: up,
            remote_site_id: format!("id-{peer}"),
            remote_site_name: peer.to_owned(),
            cost: 1,
            message: if up {
                String::new()
            } else {
                "handshake".into()
            },
        }
    }

    fn report(links: Vec<LinkState>) -> RouterReport {
        RouterReport {
            accepted_links: links,
            ..Default::default()
        }
    }

    #[test]
    fn a_peer_that_goes_away_stays_listed_down_with_since_when() {
        let up = incoming_links(&[], Some(&report(vec![accepted("b", true)])), None, "T1");
        assert_eq!(
            (up[0].status.as_str(), up[0].message.as_str()),
            ("Operational", "OK")
        );
        let gone = incoming_links(&up, Some(&report(vec![])), None, "T2");
        assert_eq!(gone[0].status, "Down");
        assert_eq!(gone[0].message, "no link from b since T2");
        // Since when is kept while it lasts.
        let still = incoming_links(&gone, Some(&report(vec![])), None, "T3");
        assert_eq!(still[0].message, "no link from b since T2");
        // Back.
        let back = incoming_links(&still, Some(&report(vec![accepted("b", true)])), None, "T4");
        assert_eq!(back[0].status, "Operational");
    }

    #[test]
    fn without_a_report_every_peer_is_down_naming_this_router() {
        let up = incoming_links(
            &[],
            Some(&report(vec![accepted("b", true), accepted("c", true)])),
            None,
            "T1",
        );
        let down = incoming_links(&up, None, Some("this site's router is not reporting"), "T2");
        assert_eq!(down.len(), 2);
        assert!(
            down.iter()
                .all(|l| l.status == "Down" && l.message == "this site's router is not reporting")
        );
    }

    #[test]
    fn one_row_per_peer_and_an_operational_link_wins() {
        let rows = incoming_links(
            &[],
            Some(&report(vec![accepted("b", false), accepted("b", true)])),
            None,
            "T",
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].status, "Operational");
    }
}
