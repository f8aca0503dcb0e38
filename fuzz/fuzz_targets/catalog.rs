//! The operator catalog: any catalog.yml is merged over the built-in catalog or reported, and a
//! merged catalog's dependency graph is checked for cycles without panicking.
#![no_main]

use kstack_config::catalog;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match catalog::effective_catalog(Some(text)) {
        Ok(c) => {
            // Every service enabled, so every edge of the merged graph is walked.
            let all = c.services.keys().cloned().collect();
            if let Some(d) = catalog::check_cycle(&c, &all, Some(text)) {
                let _ = kstack_config::render_plain(&[d]);
            }
        }
        Err(diags) => {
            let _ = kstack_config::render_plain(&diags);
        }
    }
});
