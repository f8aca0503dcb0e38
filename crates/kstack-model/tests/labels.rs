//! Every label and annotation key kstack writes or selects by is spelled once, in
//! `kstack_model::labels`: the test fails when a crate's code spells one as a string literal
//! anywhere else, and names the file and line.
//!
//! It scans the non-test code of every `crates/*/src/**/*.rs`: each file up to its first
//! `#[cfg(test)]` line (a unit test module comes last in its file), so unit tests, integration
//! tests and snapshots may still spell the keys, asserting on what users see. A literal counts
//! when it starts with one of the keys: `"app.kubernetes.io/…`, `"kstack.io/…` or
//! `"kubernetes.io/hostname"`; comment lines are skipped, and messages may name a key inside
//! backquotes.
//! `kstack-inventory` is not scanned: it depends on no kstack crate but `kstack-ports` (the
//! cluster is reached through its traits) and checks node labels by rules of its own.

use std::path::{Path, PathBuf};

#[path = "../../../tests/support/source_scan.rs"]
mod source_scan;
use source_scan::{crates_dir, find_in_code, rust_files, workspace_crates};

/// What a label key literal starts with.
const KEY_LITERALS: [&str; 3] = [
    "\"app.kubernetes.io/",
    "\"kstack.io/",
    "\"kubernetes.io/hostname\"",
];

/// The one file allowed to spell them, relative to `crates/`.
const LABELS_MODULE: &str = "kstack-model/src/labels.rs";

/// Crates not scanned (see the module doc).
const UNSCANNED_CRATES: [&str; 1] = ["kstack-inventory"];

/// `crates/<path>:line: text` for every line of non-test code in `files` that spells a key
/// literal.
fn key_literals(root: &Path, files: &[PathBuf]) -> Vec<String> {
    find_in_code(root, "crates/", files, |line| {
        KEY_LITERALS.iter().any(|k| line.contains(k))
    })
}

fn scanned_files() -> Vec<PathBuf> {
    let root = crates_dir();
    let mut files: Vec<PathBuf> = workspace_crates()
        .iter()
        .filter(|c| !UNSCANNED_CRATES.iter().any(|u| c.ends_with(u)))
        .flat_map(|c| rust_files(&c.join("src")))
        .collect();
    files.retain(|f| f.strip_prefix(&root).ok() != Some(Path::new(LABELS_MODULE)));
    files
}

#[test]
fn label_keys_are_spelled_only_in_the_labels_module() {
    let files = scanned_files();
    // The scan reaches the crates that use the keys (a wrong root would find nothing).
    for user in [
        "kstack-render/src/kubernetes.rs",
        "kstack-engine/src/plan.rs",
        "kstack-kube/src/lock.rs",
        "kstack-e2e/src/cloud.rs",
    ] {
        assert!(
            files.iter().any(|f| f.ends_with(user)),
            "{user} is not scanned"
        );
    }
    let found = key_literals(&crates_dir(), &files);
    assert!(
        found.is_empty(),
        "label and annotation keys are spelled only in crates/{LABELS_MODULE}; use its constants \
         instead of:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_finds_a_key_literal_before_the_tests_and_only_there() {
    let dir = std::env::temp_dir().join(format!("kstack-labels-scan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x.rs");
    std::fs::write(
        &file,
        "fn f() -> &'static str {\n    \"kstack.io/task\"\n}\n/// e.g. `\"kstack.io/task\"`\n\
         #[cfg(test)]\nmod tests {\n    const K: &str = \"app.kubernetes.io/name\";\n}\n",
    )
    .unwrap();
    let found = key_literals(&dir, std::slice::from_ref(&file));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, ["crates/x.rs:2: \"kstack.io/task\""]);
}
