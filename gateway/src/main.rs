//! The `cancelkit-gateway` binary.

fn main() {}
