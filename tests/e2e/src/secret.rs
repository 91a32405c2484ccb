//! A canonical `kubernetes.io/tls` Secret for tests that need a resource
//! no controller writes to (a Site's status moves under the site
//! controller; a Secret changes only when a client writes it).

use base64::Engine as _;
use serde_json::{Value, json};

/// A Secret `name` with a fresh self-signed certificate (also its own
/// `ca.crt`) and its key, labelled `label: <label>` so that two calls with
/// different labels are different writes.
pub fn tls_secret(name: &str, label: &str) -> Value {
    let pair = rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("a certificate");
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": {"label": label}},
        "spec": {"type": "kubernetes.io/tls", "data": {
            "tls.crt": b64(pair.cert.pem()),
            "tls.key": b64(pair.signing_key.serialize_pem()),
            "ca.crt": b64(pair.cert.pem()),
        }},
    })
}
