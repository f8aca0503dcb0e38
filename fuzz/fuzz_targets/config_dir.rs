//! The whole directory: `kstack_config::load(&Sources)` with any globals.yml, passwords.yml,
//! catalog.yml and any override files under config/.
//!
//! Input format (so seeds are readable and built from real files): files one after another,
//! each introduced by a header line `==> PATH <==`. `globals.yml`, `passwords.yml` and
//! `catalog.yml` are those files; any other path is an override file under config/. Text
//! before the first header is ignored.
#![no_main]

use kstack_config::{Sources, load};
use libfuzzer_sys::fuzz_target;

fn sources(data: &[u8]) -> Sources {
    let mut s = Sources::default();
    let mut current: Option<(String, Vec<u8>)> = None;
    let finish = |s: &mut Sources, file: Option<(String, Vec<u8>)>| {
        if let Some((path, bytes)) = file {
            match path.as_str() {
                "globals.yml" => s.globals = Some(bytes),
                "passwords.yml" => s.passwords = Some(bytes),
                "catalog.yml" => s.catalog = Some(bytes),
                _ => {
                    s.overrides.insert(path, bytes);
                }
            }
        }
    };
    for line in data.split_inclusive(|b| *b == b'\n') {
        let trimmed = line.strip_suffix(b"\n").unwrap_or(line);
        if let Some(path) = trimmed
            .strip_prefix(b"==> ")
            .and_then(|r| r.strip_suffix(b" <=="))
        {
            finish(&mut s, current.take());
            current = Some((String::from_utf8_lossy(path).into_owned(), Vec::new()));
        } else if let Some((_, bytes)) = current.as_mut() {
            bytes.extend_from_slice(line);
        }
    }
    finish(&mut s, current.take());
    s
}

fuzz_target!(|data: &[u8]| {
    let s = sources(data);
    let loaded = load(&s);
    let _ = kstack_config::render_plain(&loaded.diagnostics);
    // A config is only returned without errors, and errors only come without a config.
    assert_eq!(loaded.config.is_some(), !loaded.has_errors());
});
