//! meshlink CLI
fn main() {}
