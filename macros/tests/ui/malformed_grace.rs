use cancelkit::{JsonRpcError, cancellable};

#[cancellable(cooperative, grace = "2 fortnights")]
async fn wind_down() -> Result<(), JsonRpcError> {
    Ok(())
}

fn main() {}
