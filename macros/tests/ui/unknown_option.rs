use cancelkit::{JsonRpcError, cancellable};

#[cancellable(retries = 3)]
async fn flaky() -> Result<(), JsonRpcError> {
    Ok(())
}

fn main() {}
