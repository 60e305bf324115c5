//! A bundle file, its kind picked by the first byte, through the loader and `prepare`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some((selector, bytes)) = data.split_first() {
        eventbox::fuzzing::load(true, *selector, bytes);
    }
});
