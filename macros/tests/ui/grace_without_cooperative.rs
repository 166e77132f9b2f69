use cancelkit::{JsonRpcError, cancellable};

#[cancellable(timeout = "30s", grace = "2s")]
async fn abort_mode() -> Result<(), JsonRpcError> {
    Ok(())
}

fn main() {}
