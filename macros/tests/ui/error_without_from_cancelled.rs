use cancelkit::cancellable;

#[derive(Debug)]
struct ParseError;

#[cancellable]
async fn parse(input: String) -> Result<u32, ParseError> {
    input.parse().map_err(|_| ParseError)
}

fn main() {}
