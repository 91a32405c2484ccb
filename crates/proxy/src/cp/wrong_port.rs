//! Telling a control plane's REST API port from its xDS port: a sidecar
//! pointed at the REST port (plain HTTP) sees its TLS handshake answered
//! with an HTTP response, which rustls reports as "received corrupt message
//! of type InvalidContentType". That failure gets a hint naming the port to
//! use instead.

use std::error::Error;

/// The xDS port a control plane listens on unless `--xds-addr` says
/// otherwise (DESIGN.md §5).
pub const DEFAULT_XDS_PORT: u16 = 5678;

/// True when `error`'s chain holds the TLS failure of a handshake answered
/// in plain text (not a TLS record: HTTP, most likely).
pub fn answered_in_plain_text(error: &(dyn Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        let tls = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if matches!(
            tls,
            Some(rustls::Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType
            ))
        ) {
            return true;
        }
        next = e.source();
    }
    false
}

/// The hint for a `--cp` URL whose server answered in plain text.
pub fn hint(host: &str) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    format!(
        "this looks like the control plane's REST API port (plain HTTP), not its xDS port; the xDS port is {DEFAULT_XDS_PORT} by default: pass --cp https://{host}:{DEFAULT_XDS_PORT}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_text_answer_is_told_apart_from_other_tls_failures() {
        let plain = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
        );
        assert!(answered_in_plain_text(&plain));
        assert!(plain.to_string().contains("InvalidContentType"));
        let untrusted = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert!(!answered_in_plain_text(&untrusted));
        assert!(!answered_in_plain_text(&std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused
        )));
    }
}
