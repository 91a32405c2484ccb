//! meshlink-xds: placeholder; built by a later issue.
