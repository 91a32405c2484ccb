//! meshlink-identity: placeholder; built by a later issue.
