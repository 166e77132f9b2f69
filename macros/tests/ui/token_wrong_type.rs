use cancelkit::{JsonRpcError, cancellable};

#[cancellable(token = ct)]
async fn tool(input: String, ct: String) -> Result<String, JsonRpcError> {
    Ok(input + &ct)
}

fn main() {}
