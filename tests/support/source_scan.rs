//! Shared by the tests that read kstack's own sources to keep an invariant of ARCHITECTURE.md
//! true (label keys, the distribution table, the render layers, test support behind features,
//! source file sizes):
//! where the checkout is, its files in name order, and the lines of non-test code. A test
//! includes it with `#[path = ".../tests/support/source_scan.rs"] mod source_scan;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `crates/` of the checkout the test runs in: cargo sets `CARGO_MANIFEST_DIR` when it runs a
/// test, so a test binary built from another checkout into a shared target directory still
/// reads this one.
pub fn crates_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    dir.parent()
        .expect("the crate lives in crates/")
        .to_path_buf()
}

/// The repository: the parent of `crates/`.
pub fn repo_dir() -> PathBuf {
    crates_dir()
        .parent()
        .expect("crates/ lives in the repository")
        .to_path_buf()
}

/// Every workspace crate's directory (one with a Cargo.toml under `crates/`), in name order.
pub fn workspace_crates() -> Vec<PathBuf> {
    let mut crates: Vec<PathBuf> = std::fs::read_dir(crates_dir())
        .expect("reading crates/")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    crates.sort();
    assert!(crates.len() >= 8, "too few crates found: {crates:?}");
    crates
}

/// The files under `dir` whose extension is one of `exts`, in name order.
pub fn files(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.expect("a readable directory entry").into_path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| exts.contains(&e))
        })
        .collect()
}

/// The `.rs` files under `dir`, in name order.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    files(dir, &["rs"])
}

/// The file's text; a file that cannot be read fails the test, naming it.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The lines of non-test code in `text`, numbered from 1: those before the first
/// `#[cfg(test)]`, comment lines left out.
pub fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(i, line)| (i + 1, line))
}

/// `<prefix><path from root>:<line>: <text>` for every line of non-test code in `files` where
/// `hit` holds.
pub fn find_in_code(
    root: &Path,
    prefix: &str,
    files: &[PathBuf],
    hit: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut found = Vec::new();
    for path in files {
        let text = read(path);
        for (n, line) in code_lines(&text).filter(|(_, l)| hit(l)) {
            let name = path.strip_prefix(root).unwrap_or(path).display();
            found.push(format!("{prefix}{name}:{n}: {}", line.trim()));
        }
    }
    found
}
