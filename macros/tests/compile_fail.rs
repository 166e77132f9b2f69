//! `#[cancellable]` at compile time: misuses fail to compile with a message that points at the
//! mistake (`tests/ui`), and correct uses compile without a single warning (`tests/pass`, built
//! with `#![deny(warnings)]` and run).

#[test]
fn misuse_is_reported_at_the_offending_token_and_correct_use_is_warning_free() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/pass/*.rs");
}
