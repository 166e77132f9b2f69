use cancelkit::cancellable;

#[cancellable]
async fn fire_and_forget() {}

fn main() {}
