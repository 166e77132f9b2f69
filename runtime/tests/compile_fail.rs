//! Misuses of `#[cancellable]` fail to compile with a message that points at the mistake.

#[test]
fn misuse_is_reported_at_the_offending_token() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
