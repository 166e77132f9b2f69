use cancelkit::{JsonRpcError, cancellable};

#[cancellable(on_cancel = "cancelled")]
async fn prompt() -> Result<&'static str, JsonRpcError> {
    Ok("end_turn")
}

fn main() {}
