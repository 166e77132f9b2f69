use cancelkit::{JsonRpcError, cancellable};

#[cancellable(token = ct)]
async fn tool(input: String) -> Result<String, JsonRpcError> {
    Ok(input)
}

fn main() {}
