//! Two processes with one token (issue 35 §2): a second meshlink-proxy
//! started with web-1's token and `--name web-1` passes every check, so
//! each process takes the xDS stream from the other in turn. The
//! Dataplane's status says so with a `DuplicateHolder` warning naming
//! both (address, process, since when, certificate), keeps the first
//! process's certificate instead of flipping to whoever renewed last, and
//! drops the warning once the second process stops.

use std::time::Duration;

use meshlink_e2e::proxy::{self, PairPorts, Sidecar, SidecarOptions};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::Value;

const READY: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(60);
/// A displaced holder counts for 30 s after it was last seen.
const CLEARED: Duration = Duration::from_secs(90);
/// The words a stream taken over by a newer one ends with.
const TAKEN_OVER: &str = "took over from this one";

fn dataplane(cp: &ControlPlane) -> Value {
    cp.api("GET", "/api/v1/dataplanes/web-1?mesh=default", None)
        .1
}

fn duplicate(dp: &Value) -> Option<Value> {
    dp["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "DuplicateHolder")
        .cloned()
}

#[test]
fn a_second_process_with_the_same_token_is_a_warning_naming_both_until_it_stops() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut first = Sidecar::start(&cp, dir.path(), "web-1");
    first.wait_ready(READY);
    let first_serial = first
        .serial()
        .expect("the first process holds a certificate");
    eventually("web-1's status to name its certificate", DEADLINE, || {
        (dataplane(&cp)["status"]["mtls"]["serial"].as_str() == Some(first_serial.as_str()))
            .then_some(())
    });
    assert_eq!(duplicate(&dataplane(&cp)), None);

    let mut second = Sidecar::spawn(&SidecarOptions::new(
        &cp,
        &dir.path().join("web-1.token"),
        "web-1",
    ));
    let second_serial = eventually("the second process's certificate", DEADLINE, || {
        second.serial()
    });
    assert_ne!(first_serial, second_serial);
    let condition = eventually("the DuplicateHolder warning naming both", DEADLINE, || {
        let c = duplicate(&dataplane(&cp))?;
        let m = c["message"].as_str()?;
        (m.contains(&first_serial) && m.contains(&second_serial)).then_some(c)
    });
    println!("{condition:#}");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "SecondConnection");
    let message = condition["message"].as_str().unwrap();
    assert!(message.starts_with("2 processes hold"), "{message}");
    assert_eq!(message.matches("127.0.0.1:").count(), 2, "{message}");
    assert_eq!(message.matches(" since ").count(), 2, "{message}");
    assert!(
        message.find(&first_serial) < message.find(&second_serial),
        "the first process comes first: {message}"
    );
    // The status keeps the first process's certificate (the second's was
    // shown from its Certify until the first came back).
    eventually(
        "the status to show the first process's certificate",
        DEADLINE,
        || {
            (dataplane(&cp)["status"]["mtls"]["serial"].as_str() == Some(first_serial.as_str()))
                .then_some(())
        },
    );
    let logs = format!("{}{}", first.logs(), second.logs());
    assert!(
        logs.contains(TAKEN_OVER),
        "a process logs that its stream was taken over:\n{logs}"
    );

    second.terminate();
    eventually("the warning to clear", CLEARED, || {
        duplicate(&dataplane(&cp)).is_none().then_some(())
    });
    let dp = dataplane(&cp);
    assert_eq!(
        dp["status"]["mtls"]["serial"].as_str(),
        Some(first_serial.as_str())
    );
    first.wait_ready(READY);
    assert!(first.exit_status().is_none(), "{}", first.logs());
}
