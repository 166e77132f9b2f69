use cancelkit::cancellable;

#[cancellable]
async fn parse(input: String) -> Result<u32, String> {
    input.parse().map_err(|_| input.clone())
}

fn main() {}
