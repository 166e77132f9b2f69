#![no_main]
//! Fuzz target `schema`: see `cancelkit_fuzz::schema::check`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::schema::check(data));
