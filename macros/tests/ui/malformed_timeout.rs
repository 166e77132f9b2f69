use cancelkit::{JsonRpcError, cancellable};

#[cancellable(timeout = "30 parsecs")]
async fn far() -> Result<(), JsonRpcError> {
    Ok(())
}

fn main() {}
