//! Unit tests of access log lines: the JSON object written directly (keys
//! sorted, last repeat wins, strings escaped, `null` or left out when a
//! field has no value), `:N` cuts, and the request headers a format needs.

use std::sync::mpsc::Receiver;

use meshlink_api::spec::access_log_format::parse;

use super::*;

/// A log of `format` whose lines the test reads from the returned queue.
fn log(format: LineFormat, omit_empty_values: bool) -> (AccessLog, Receiver<Vec<u8>>) {
    let (tx, rx) = sync_channel(16);
    let mut l = AccessLog::new(
        LogTarget::File("/dev/null".into()),
        format,
        omit_empty_values,
    );
    l.sink = Arc::new(Sink { tx });
    (l, rx)
}

fn json(fields: &[(&str, &str)]) -> LineFormat {
    LineFormat::json(
        fields
            .iter()
            .map(|(k, t)| ((*k).to_owned(), parse(t).expect("template")))
            .collect(),
    )
}

/// Values: `REQ(X-NAME)` has one with a quote and a newline, `DURATION`
/// has "12", anything else none.
fn value(op: &Operator, out: &mut String) -> bool {
    match op.name.as_str() {
        "REQ" => {
            out.push_str("a\"b\nc");
            true
        }
        "DURATION" => {
            out.push_str("12");
            true
        }
        _ => false,
    }
}

fn line(rx: &Receiver<Vec<u8>>) -> String {
    String::from_utf8(rx.try_recv().expect("a line")).expect("UTF-8")
}

#[test]
fn json_lines_are_sorted_escaped_and_parse_back() {
    let format = json(&[
        ("z", "%DURATION%ms"),
        ("name", "%REQ(X-NAME)%"),
        ("none", "%RESPONSE_CODE%"),
        ("fixed", "literal"),
        ("z", "%DURATION%"),
    ]);
    let (l, rx) = log(format, false);
    assert!(l.write(value));
    let text = line(&rx);
    assert_eq!(
        text,
        "{\"fixed\":\"literal\",\"name\":\"a\\\"b\\nc\",\"none\":null,\"z\":\"12\"}\n"
    );
    let parsed: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(parsed["name"], "a\"b\nc");
}

#[test]
fn omit_empty_values_leaves_valueless_keys_out() {
    let (l, rx) = log(
        json(&[("none", "%RESPONSE_CODE%"), ("d", "%DURATION%")]),
        true,
    );
    assert!(l.write(value));
    assert_eq!(line(&rx), "{\"d\":\"12\"}\n");
    let (l, rx) = log(json(&[("none", "%RESPONSE_CODE%")]), true);
    assert!(l.write(value));
    assert_eq!(line(&rx), "{}\n");
}

#[test]
fn text_lines_cut_values_and_mark_missing_ones() {
    let format = LineFormat::Text(parse("[%REQ(X-NAME):2%] %RESPONSE_CODE% %DURATION%\n").unwrap());
    let (l, rx) = log(format.clone(), false);
    assert!(l.write(value));
    assert_eq!(line(&rx), "[a\"] - 12\n");
    let (l, rx) = log(format, true);
    assert!(l.write(value));
    assert_eq!(line(&rx), "[a\"]  12\n");
}

#[test]
fn only_the_headers_a_format_names_are_kept() {
    let format = LineFormat::Text(
        parse("%REQ(X-Request-Id?:AUTHORITY)% %REQ(:PATH)% %BYTES_RECEIVED% %RESP(X-Other)%\n")
            .unwrap(),
    );
    let (l, _rx) = log(format, false);
    let names: Vec<&str> = l.request_headers.iter().map(HeaderName::as_str).collect();
    assert_eq!(names, ["x-request-id", "host", "content-length"]);
}

#[test]
fn a_full_queue_drops_the_line() {
    let (tx, _rx) = sync_channel(1);
    let mut l = AccessLog::new(
        LogTarget::File("/dev/null".into()),
        json(&[("d", "%DURATION%")]),
        false,
    );
    l.sink = Arc::new(Sink { tx });
    assert!(l.write(value));
    assert!(!l.write(value), "the second line finds the queue full");
}
