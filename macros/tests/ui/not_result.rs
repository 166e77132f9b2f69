use cancelkit::cancellable;

#[cancellable]
async fn count() -> u32 {
    1
}

fn main() {}
