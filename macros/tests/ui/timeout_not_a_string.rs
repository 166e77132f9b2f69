use cancelkit::{JsonRpcError, cancellable};

#[cancellable(timeout = 30)]
async fn slow() -> Result<(), JsonRpcError> {
    Ok(())
}

fn main() {}
