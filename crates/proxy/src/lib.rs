//! meshlink-proxy: placeholder; built by a later issue.
