//! The Python that bootstrap Jobs run (`tasks/*.py`), tested by its own unit tests against an
//! in-process fake of the API it calls. They need a `python3` (3.9 or later) on the PATH, as
//! `hack/tempest.sh` does; the standard library is all they use.
use std::path::Path;
use std::process::Command;

#[test]
fn the_registration_script_passes_its_tests_against_a_fake_keystone() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks");
    let out = Command::new("python3")
        .args(["-m", "unittest", "-v", "test_register"])
        .current_dir(&dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs (install Debian's python3)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "test_register.py failed:\n{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    // unittest prints "Ran N tests"; zero would be a test file that lost its tests.
    let ran = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split(' ')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(0);
    assert!(ran >= 8, "only {ran} tests ran:\n{stderr}");
}
