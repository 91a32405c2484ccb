//! meshlink-link: placeholder; built by a later issue.
