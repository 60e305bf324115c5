//! A write body (registration, check-ins), its endpoint and content type picked by the first
//! byte, through its endpoint.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some((selector, body)) = data.split_first() {
        eventbox::fuzzing::write(*selector, body);
    }
});
