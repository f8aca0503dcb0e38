//! passwords.yml: `passwords::parse` must turn any text into passwords or diagnostics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(diags) = kstack_config::passwords::parse(text) {
        let _ = kstack_config::render_plain(&diags);
    }
});
