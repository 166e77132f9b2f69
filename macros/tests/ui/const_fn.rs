use cancelkit::{JsonRpcError, cancellable};

#[cancellable]
const fn constant() -> Result<(), JsonRpcError> {
    Ok(())
}

fn main() {}
