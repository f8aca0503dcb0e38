//! Test support (fakes, fixtures, a test CA, a headless browser) is compiled only behind a
//! cargo feature, and only tests, benchmarks and examples turn the feature on: the `kstack`
//! binary is built without it.
//!
//! Scans the workspace's files: every `crates/*/src/lib.rs` module named in
//! [`SUPPORT_MODULES`] has a `#[cfg(...feature = ...)]` attribute; no `Cargo.toml` (the
//! workspace's included) turns on a feature of [`SUPPORT_FEATURES`] in its `[dependencies]` or
//! through another feature, except kstack-e2e, whose library serves only its own tests and
//! examples and which no crate depends on.
use std::path::Path;

#[path = "../../../tests/support/source_scan.rs"]
mod source_scan;
use source_scan::{crates_dir, read, workspace_crates};

/// Modules that exist for tests only.
const SUPPORT_MODULES: [&str; 3] = ["fake", "testing", "browser"];

/// Features that turn them on.
const SUPPORT_FEATURES: [&str; 2] = ["testing", "fake"];

/// The crate whose library is test code (see the module doc).
const TEST_CRATE: &str = "kstack-e2e";

fn name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn test_support_modules_are_compiled_only_behind_a_feature() {
    let mut found = Vec::new();
    let mut gated = 0;
    for dir in workspace_crates() {
        let lib = dir.join("src/lib.rs");
        if !lib.is_file() {
            continue;
        }
        let text = read(&lib);
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let decl = line.trim_start_matches("pub ").trim();
            let Some(module) = decl.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) else {
                continue;
            };
            if !SUPPORT_MODULES.contains(&module) {
                continue;
            }
            // The attributes directly above the declaration, comments skipped.
            let behind_feature = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim())
                .filter(|l| !l.starts_with("//"))
                .take_while(|l| l.starts_with("#["))
                .any(|l| l.starts_with("#[cfg(") && l.contains("feature = "));
            if behind_feature {
                gated += 1;
            } else {
                found.push(format!(
                    "crates/{}/src/lib.rs:{}: {line}",
                    name(&dir),
                    i + 1
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "test support compiled without a feature (put it behind `#[cfg(feature = \"testing\")]`):\n{}",
        found.join("\n")
    );
    // kstack-engine's fake, kstack-config's testing, kstack-verify's fake, kstack-inventory's
    // testing and browser.
    assert!(gated >= 5, "only {gated} test support modules found");
}

/// `file:line: text` for every line of `manifest` that turns on a test support feature where a
/// build of the binary would see it.
fn feature_leaks(path: &Path, manifest: &str) -> Vec<String> {
    let quoted = |l: &str| {
        SUPPORT_FEATURES
            .iter()
            .any(|f| l.contains(&format!("\"{f}\"")) || l.contains(&format!("/{f}\"")))
    };
    let mut section = String::new();
    let mut found = Vec::new();
    for (i, line) in manifest.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_owned();
            continue;
        }
        let leak = if section == "dependencies" || section.ends_with(".dependencies") {
            quoted(line)
        } else if section == "features" {
            // A feature may not switch another's on; `testing = [...]` itself lists optional
            // dependencies.
            let key = line.split('=').next().unwrap_or("").trim();
            !SUPPORT_FEATURES.contains(&key) && quoted(line)
        } else {
            false
        };
        if leak {
            found.push(format!("{}:{}: {line}", path.display(), i + 1));
        }
    }
    found
}

#[test]
fn only_dev_dependencies_turn_test_support_on() {
    let mut found = Vec::new();
    for dir in workspace_crates() {
        let path = dir.join("Cargo.toml");
        let manifest = read(&path);
        if name(&dir) != TEST_CRATE {
            found.extend(feature_leaks(&path, &manifest));
        }
        // kstack-e2e may turn the features on in its [dependencies] only as long as nothing
        // builds its library but its own tests and examples.
        assert!(
            !manifest
                .lines()
                .any(|l| l.trim_start().starts_with(TEST_CRATE)),
            "{} depends on {TEST_CRATE}, whose library turns on test support",
            path.display()
        );
    }
    // A `[workspace.dependencies]` entry with the feature would turn it on for every crate.
    let root = crates_dir().join("../Cargo.toml");
    found.extend(feature_leaks(&root, &read(&root)));
    assert!(
        found.is_empty(),
        "a test support feature is turned on outside [dev-dependencies]:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_leak_is_found() {
    let manifest = "[dependencies]\nkstack-engine = { workspace = true, features = [\"testing\"] }\n\
                    [features]\ndefault = [\"kstack-verify/fake\"]\ntesting = [\"dep:rcgen\"]\n\
                    [dev-dependencies]\nkstack-config = { workspace = true, features = [\"testing\"] }\n";
    let found = feature_leaks(Path::new("Cargo.toml"), manifest);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("Cargo.toml:2: kstack-engine"),
        "{found:?}"
    );
    assert!(found[1].starts_with("Cargo.toml:4: default"), "{found:?}");
}
