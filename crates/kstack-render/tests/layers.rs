//! kstack-render is two layers: a shared layer that renders what both targets have in common
//! (config files and addresses, Kolla's config directory, bootstrap tasks, escaping, secret
//! values, names) and two leaves, one per target, that translate it: the Kubernetes module
//! (`src/kubernetes.rs` and `src/kubernetes/`) and the Compose module (`src/compose.rs`).
//!
//! These tests read the crate's sources and fail, naming file and line, when a module names a
//! leaf it does not belong to: the shared layer neither leaf, a leaf not the other. A module
//! names a leaf with a path (`crate::kubernetes`, `kubernetes::…`, also in doc links) or in a
//! `use` group (`use crate::{files, kubernetes}`); prose ("the Kubernetes target", "docker
//! compose") is no mention.

use std::path::{Path, PathBuf};

#[path = "../../../tests/support/source_scan.rs"]
mod source_scan;
use source_scan::{read, rust_files};

/// The target modules, by module name.
const LEAVES: [&str; 2] = ["kubernetes", "compose"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The leaf a source file (relative to `src/`) belongs to, if any: `<leaf>.rs` or a file under
/// `<leaf>/`.
fn leaf_of(file: &Path) -> Option<&'static str> {
    LEAVES
        .iter()
        .copied()
        .find(|leaf| file == Path::new(&format!("{leaf}.rs")) || file.starts_with(leaf))
}

/// Whether `word` occurs in `line` as a whole identifier.
fn has_word(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(i, _)| {
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let before = line[..i].chars().next_back();
        let after = line[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// `file:line: text` for every line of `text` that names the module `leaf`.
fn mentions(name: &str, text: &str, leaf: &str) -> Vec<String> {
    let path = format!("crate::{leaf}");
    let prefix = format!("{leaf}::");
    let mut in_use = false;
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("use ")
            || code.starts_with("pub use ")
            || code.starts_with("pub(crate) use ")
        {
            in_use = true;
        }
        let named = line.contains(&path)
            || line.match_indices(&prefix).any(|(j, _)| {
                // `kubernetes::` but not `some_kubernetes::`
                !line[..j]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
            || (in_use && has_word(line, leaf));
        if named {
            found.push(format!(
                "crates/kstack-render/src/{name}:{}: {}",
                i + 1,
                line.trim()
            ));
        }
        if in_use && line.contains(';') {
            in_use = false;
        }
    }
    found
}

/// Every source file of the crate, relative to `src/`, with its text.
fn sources() -> Vec<(PathBuf, String)> {
    let root = src();
    rust_files(&root)
        .into_iter()
        .map(|f| {
            let text = read(&f);
            (f.strip_prefix(&root).unwrap().to_path_buf(), text)
        })
        .collect()
}

/// Each mention of a leaf by a module outside it.
fn foreign_mentions(sources: &[(PathBuf, String)], shared: bool) -> Vec<String> {
    let mut found = Vec::new();
    for (file, text) in sources {
        let own = leaf_of(file);
        if own.is_none() != shared {
            continue;
        }
        for leaf in LEAVES.iter().filter(|l| Some(**l) != own) {
            found.extend(mentions(&file.display().to_string(), text, leaf));
        }
    }
    found
}

#[test]
fn the_shared_layer_names_no_target_module() {
    let sources = sources();
    // The scan reads the shared layer (a wrong directory would find nothing).
    for shared in [
        "lib.rs",
        "files.rs",
        "kolla.rs",
        "names.rs",
        "tasks.rs",
        "escape.rs",
        "secrets.rs",
    ] {
        assert!(
            sources
                .iter()
                .any(|(f, _)| f == Path::new(shared) && leaf_of(f).is_none()),
            "{shared} is not read as part of the shared layer"
        );
    }
    let found = foreign_mentions(&sources, true);
    assert!(
        found.is_empty(),
        "the shared layer of kstack-render names a target module (kubernetes, compose); what \
         both targets need belongs in the shared layer, which the targets use:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_target_module_names_not_the_other() {
    let sources = sources();
    for leaf in ["kubernetes.rs", "kubernetes/keys.rs", "compose.rs"] {
        assert!(
            sources
                .iter()
                .any(|(f, _)| f == Path::new(leaf) && leaf_of(f).is_some()),
            "{leaf} is not read as part of a target module"
        );
    }
    let found = foreign_mentions(&sources, false);
    assert!(
        found.is_empty(),
        "a target module of kstack-render names the other; what both need belongs in the shared \
         layer:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_mention_is_a_path_or_a_use_and_not_prose() {
    let text = "//! The Kubernetes target; `docker compose up`.\n\
                use crate::{\n    files,\n    kubernetes,\n};\n\
                fn f() { let n = g.kubernetes_namespace; }\n\
                /// See [`crate::kubernetes::render`].\n\
                fn g() { kubernetes::render(c); }\n";
    assert_eq!(
        mentions("x.rs", text, "kubernetes"),
        [
            "crates/kstack-render/src/x.rs:4: kubernetes,",
            "crates/kstack-render/src/x.rs:7: /// See [`crate::kubernetes::render`].",
            "crates/kstack-render/src/x.rs:8: fn g() { kubernetes::render(c); }",
        ]
    );
    assert!(mentions("x.rs", text, "compose").is_empty());
}
