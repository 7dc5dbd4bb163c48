//! The frame parser, the transport parser, the ICRC and `uroce dump`'s printers
//! on arbitrary bytes. Run: `cargo fuzz run frame_parser` (cargo-fuzz, nightly).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uroce_tools::dump::fuzz_one(data);
});
