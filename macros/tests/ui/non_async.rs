use cancelkit::{JsonRpcError, cancellable};

#[cancellable]
fn not_async() -> Result<(), JsonRpcError> {
    Ok(())
}

fn main() {}
