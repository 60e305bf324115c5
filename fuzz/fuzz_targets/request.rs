//! Raw bytes as one connection's input, through the HTTP server and the request pipeline.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    eventbox::fuzzing::request(data);
});
