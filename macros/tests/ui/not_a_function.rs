use cancelkit::cancellable;

#[cancellable]
struct Handler;

fn main() {}
