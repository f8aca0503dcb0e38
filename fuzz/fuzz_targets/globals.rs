//! globals.yml: `load_globals` must turn any text into globals or diagnostics, and every
//! diagnostic must render (its span lies inside the text).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (_, diags) = kstack_config::load_globals(text);
    let _ = kstack_config::render_plain(&diags);
});
