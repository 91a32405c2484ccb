//! Why a link's connection ended, typed where the dialer must tell the
//! cases apart: the peer's TLS alert `access_denied` (it refused this
//! link's certificate), a reset or broken pipe (in TLS 1.3 a refused
//! client certificate often reaches the dialer that way), or anything
//! else. Read from the error values (rustls's alert, the I/O error kind),
//! never from their text, which can change with a dependency's wording.

use std::fmt;
use std::io;

/// How a link's connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ConnectionEnd {
    /// Nothing more specific is known.
    #[default]
    Other,
    /// The peer sent the TLS alert `access_denied`.
    AccessDenied,
    /// The peer reset the connection, or a write found it closed.
    Reset,
}

impl ConnectionEnd {
    /// The end an I/O error says: rustls's alert inside it, else its kind.
    pub(crate) fn of_io(e: &io::Error) -> ConnectionEnd {
        let tls = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if let Some(rustls::Error::AlertReceived(rustls::AlertDescription::AccessDenied)) = tls {
            return ConnectionEnd::AccessDenied;
        }
        match e.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => ConnectionEnd::Reset,
            _ => ConnectionEnd::Other,
        }
    }

    /// The end a yamux connection error says.
    pub(crate) fn of_yamux(e: &yamux::ConnectionError) -> ConnectionEnd {
        match e {
            yamux::ConnectionError::Io(io)
            | yamux::ConnectionError::Decode(yamux::FrameDecodeError::Io(io)) => {
                ConnectionEnd::of_io(io)
            }
            _ => ConnectionEnd::Other,
        }
    }
}

/// Why the multiplexer's driver stopped: the typed end and the words.
#[derive(Debug)]
pub(crate) struct DriverError {
    /// The typed end.
    pub(crate) end: ConnectionEnd,
    message: String,
}

impl DriverError {
    /// A yamux connection error.
    pub(crate) fn yamux(e: &yamux::ConnectionError) -> DriverError {
        DriverError {
            end: ConnectionEnd::of_yamux(e),
            message: e.to_string(),
        }
    }

    /// A failure with nothing typed to say.
    pub(crate) fn other(message: impl Into<String>) -> DriverError {
        DriverError {
            end: ConnectionEnd::Other,
            message: message.into(),
        }
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// How a session ended: the reason in words (a Link's `lastError`) and
/// the connection's typed end.
#[derive(Debug)]
pub(crate) struct SessionEnd {
    pub(crate) reason: String,
    pub(crate) end: ConnectionEnd,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_comes_from_the_alert_and_the_error_kind_not_the_text() {
        let denied = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(rustls::AlertDescription::AccessDenied),
        );
        assert_eq!(ConnectionEnd::of_io(&denied), ConnectionEnd::AccessDenied);
        let other_alert = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(rustls::AlertDescription::BadCertificate),
        );
        assert_eq!(ConnectionEnd::of_io(&other_alert), ConnectionEnd::Other);
        for kind in [io::ErrorKind::BrokenPipe, io::ErrorKind::ConnectionReset] {
            assert_eq!(
                ConnectionEnd::of_io(&io::Error::from(kind)),
                ConnectionEnd::Reset
            );
        }
        // Words alone mean nothing.
        let text = io::Error::other("received fatal alert: AccessDenied; Broken pipe");
        assert_eq!(ConnectionEnd::of_io(&text), ConnectionEnd::Other);
        let yamux_io = yamux::ConnectionError::Io(io::Error::from(io::ErrorKind::ConnectionReset));
        assert_eq!(DriverError::yamux(&yamux_io).end, ConnectionEnd::Reset);
        // How a TLS alert reaches the driver: while yamux reads a frame.
        let alert = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(rustls::AlertDescription::AccessDenied),
        );
        let decoding = yamux::ConnectionError::Decode(yamux::FrameDecodeError::Io(alert));
        assert_eq!(
            DriverError::yamux(&decoding).end,
            ConnectionEnd::AccessDenied
        );
    }
}
