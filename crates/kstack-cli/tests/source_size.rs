//! No source file of a crate (`crates/*/src/**.rs`) is longer than [`MAX_LINES`] lines unless
//! its first lines say why it stays whole (a line starting `//! Kept whole:`): a file a
//! newcomer must read end to end to change one thing is split along its seams instead.
#[path = "../../../tests/support/source_scan.rs"]
mod source_scan;
use source_scan::{read, rust_files, workspace_crates};

const MAX_LINES: usize = 1_000;

/// How far from the top the reason may stand (below the module's first paragraph).
const REASON_WITHIN: usize = 40;

fn has_reason(text: &str) -> bool {
    text.lines()
        .take(REASON_WITHIN)
        .any(|l| l.trim_start().starts_with("//! Kept whole:"))
}

#[test]
fn no_source_file_is_over_a_thousand_lines_without_a_reason_at_its_top() {
    let mut long = Vec::new();
    let mut files = 0;
    for krate in workspace_crates() {
        for path in rust_files(&krate.join("src")) {
            files += 1;
            let text = read(&path);
            let lines = text.lines().count();
            if lines > MAX_LINES && !has_reason(&text) {
                long.push(format!("{} ({lines} lines)", path.display()));
            }
        }
    }
    assert!(files > 100, "only {files} source files found");
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines, with no `//! Kept whole: <why>` in their first {REASON_WITHIN} lines: split them along their seams, or say why not:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_check_sees_a_long_file_and_its_reason() {
    let long = "//! A module.\nfn f() {}\n".repeat(MAX_LINES);
    assert!(long.lines().count() > MAX_LINES && !has_reason(&long));
    let kept = format!("//! A module.\n//!\n//! Kept whole: one state machine.\n{long}");
    assert!(has_reason(&kept));
}
