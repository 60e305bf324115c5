//! An upstream answer through `pull`'s parsing (references, record counts, `--pretty`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    eventbox::fuzzing::upstream(data);
});
