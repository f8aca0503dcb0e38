//! `genpwd::fill`: any passwords.yml is filled or reported; a filled file parses again and keeps
//! every value that was set. The random generator is seeded, so a crash reproduces.
#![no_main]

use kstack_config::{genpwd, passwords};
use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    match genpwd::fill(text, &mut rng) {
        Ok(filled) => {
            let before = passwords::parse(text).expect("fill accepted the file, so it parses");
            let after = match passwords::parse(&filled.text) {
                Ok(p) => p,
                Err(d) => panic!(
                    "genpwd wrote a passwords.yml that does not parse:\n{}",
                    kstack_config::render_plain(&d)
                ),
            };
            for (key, secret) in &before.entries {
                if !secret.is_empty() {
                    assert!(
                        after.entries.get(key) == Some(secret),
                        "genpwd changed or dropped the set value of {key}"
                    );
                }
            }
        }
        Err(diags) => {
            let _ = kstack_config::render_plain(&diags);
        }
    }
});
