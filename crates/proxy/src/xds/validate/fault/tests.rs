//! The fault filter as the validator reads it: what is enforced, and what
//! is refused naming the field.

use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{FaultDelay, fault_delay};
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::FaultAbort;
use envoy_types::pb::envoy::r#type::v3::FractionalPercent;
use envoy_types::pb::xds::core::v3::TypedExtensionConfig as XdsExtension;
use envoy_types::pb::xds::r#type::matcher::v3::matcher::MatcherList;
use envoy_types::pb::xds::r#type::matcher::v3::matcher::matcher_list::FieldMatcher;
use envoy_types::util::pack_any;
use prost::Message;

use super::*;

fn percent(n: u32) -> Option<FractionalPercent> {
    Some(FractionalPercent {
        numerator: n,
        denominator: 0,
    })
}

fn abort_half() -> HttpFault {
    HttpFault {
        abort: Some(FaultAbort {
            error_type: Some(ErrorType::HttpStatus(503)),
            percentage: percent(50),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `config` wrapped to skip it unless the URI SAN is `id` (`only`), or
/// when it is.
fn wrapped(config: HttpFault, id: &str, only: bool) -> Any {
    let san = Predicate {
        match_type: Some(predicate::MatchType::SinglePredicate(
            predicate::SinglePredicate {
                input: Some(XdsExtension {
                    name: "envoy.matching.inputs.uri_san".into(),
                    typed_config: Some(pack_any(UriSanInput {})),
                }),
                matcher: Some(predicate::single_predicate::Matcher::ValueMatch(
                    envoy_types::pb::xds::r#type::matcher::v3::StringMatcher {
                        match_pattern: Some(MatchPattern::Exact(id.into())),
                        ignore_case: false,
                    },
                )),
            },
        )),
    };
    let p = if only {
        Predicate {
            match_type: Some(predicate::MatchType::NotMatcher(Box::new(san))),
        }
    } else {
        san
    };
    pack_any(ExtensionWithMatcher {
        xds_matcher: Some(Matcher {
            matcher_type: Some(MatcherType::MatcherList(MatcherList {
                matchers: vec![FieldMatcher {
                    predicate: Some(p),
                    on_match: Some(
                        envoy_types::pb::xds::r#type::matcher::v3::matcher::OnMatch {
                            keep_matching: false,
                            on_match: Some(on_match::OnMatch::Action(XdsExtension {
                                name: "skip".into(),
                                typed_config: Some(pack_any(SkipFilter {})),
                            })),
                        },
                    ),
                }],
            })),
            on_no_match: None,
        }),
        extension_config: Some(TypedExtensionConfig {
            name: "envoy.filters.http.fault".into(),
            typed_config: Some(pack_any(config)),
        }),
        ..Default::default()
    })
}

#[test]
fn a_bare_filter_applies_to_every_caller() {
    let f = fault(&pack_any(abort_half()), "f").unwrap();
    assert_eq!(f.callers, Callers::All);
    assert_eq!(
        f.abort,
        Some((
            503,
            Fraction {
                numerator: 50,
                denominator: 100
            }
        ))
    );
    assert_eq!((f.delay, f.response_bytes_per_second), (None, None));
}

#[test]
fn a_wrapped_filter_applies_to_the_callers_its_matcher_keeps() {
    let web = "spiffe://default/web";
    let f = fault(&wrapped(abort_half(), web, true), "f").unwrap();
    assert_eq!(f.callers, Callers::Only(vec![web.into()]));
    let f = fault(&wrapped(abort_half(), web, false), "f").unwrap();
    assert_eq!(f.callers, Callers::Except(vec![web.into()]));
}

#[test]
fn what_meshlink_proxy_cannot_enforce_is_refused_naming_the_field() {
    let refused = |config: HttpFault| fault(&pack_any(config), "f").unwrap_err();

    let mut by_header = abort_half();
    by_header.headers = vec![Default::default()];
    assert_eq!(refused(by_header).field, "f.headers");

    let mut grpc = abort_half();
    grpc.abort.as_mut().unwrap().error_type = Some(ErrorType::GrpcStatus(14));
    assert_eq!(refused(grpc).field, "f.abort");

    let mut informational = abort_half();
    informational.abort.as_mut().unwrap().error_type = Some(ErrorType::HttpStatus(100));
    let e = refused(informational);
    assert_eq!(e.field, "f.abort.http_status");
    assert!(e.reason.contains("200-599"), "{e}");

    let header_delay = HttpFault {
        delay: Some(FaultDelay {
            fault_delay_secifier: Some(fault_delay::FaultDelaySecifier::HeaderDelay(
                fault_delay::HeaderDelay {},
            )),
            percentage: percent(100),
        }),
        ..Default::default()
    };
    assert_eq!(refused(header_delay).field, "f.delay");

    let mut runtime = abort_half();
    runtime.abort_percent_runtime = "fault.abort".into();
    assert_eq!(refused(runtime).field, "f.abort_percent_runtime");

    // A matcher of another shape: on_no_match set.
    let Ok(mut w) = ExtensionWithMatcher::decode(
        wrapped(abort_half(), "spiffe://default/web", true)
            .value
            .as_slice(),
    ) else {
        panic!("decodes");
    };
    w.xds_matcher.as_mut().unwrap().on_no_match = Some(Box::default());
    let e = fault(&pack_any(w), "f").unwrap_err();
    assert_eq!(e.field, "f.xds_matcher");
}
