use cancelkit::{JsonRpcError, cancellable};

fn cancelled_turn() -> &'static str {
    "cancelled"
}

#[cancellable(cooperative, on_cancel = cancelled_turn)]
async fn prompt() -> Result<&'static str, JsonRpcError> {
    Ok("end_turn")
}

fn main() {}
