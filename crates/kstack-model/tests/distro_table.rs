//! The base distributions of the Kolla images and their versions are listed once, in
//! `kstack_model::distro::ALL`: the test fails when another copy of that table appears, and
//! names the file and line.
//!
//! - Rust: the non-test code of every `crates/*/src/**/*.rs` (each file up to its first
//!   `#[cfg(test)]` line, as in `labels.rs`) other than `kstack-model/src/distro.rs` holds no
//!   string literal that is a distribution's name or version (`"debian"`, or `'bookworm'` inside
//!   a Jinja string). Kolla-ansible's default of `kolla_base_distro_version` is built from the
//!   table (`kstack_config::jinja::distro_version_default`), the names globals.yml may give
//!   come from `distro::names`, kstack's default distribution is `distro::DEFAULT`.
//! - `hack/`: no line of a shell or Python script outside comments names two distributions;
//!   such a script reads the table from `kstack template --distro-facts`.
//!
//! Comments and tests may name distributions. A version made only of digits (`9`) is too
//! common to look for.
//! The starter globals.yml (`kstack init`) names each distribution and its version in a comment
//! for the operator; that copy is checked against the table instead.

use std::path::{Path, PathBuf};

use kstack_model::distro::{ALL, names};

#[path = "../../../tests/support/source_scan.rs"]
mod source_scan;
use source_scan::{crates_dir, files, find_in_code, read, repo_dir, rust_files, workspace_crates};

/// The one file allowed to spell them, relative to `crates/`.
const DISTRO_MODULE: &str = "kstack-model/src/distro.rs";

/// The names and the versions with a letter, each as a Rust or Jinja string literal.
fn literals() -> Vec<String> {
    ALL.iter()
        .flat_map(|d| [d.name, d.version])
        .filter(|w| w.chars().any(|c| c.is_ascii_alphabetic()))
        .flat_map(|w| [format!("\"{w}\""), format!("'{w}'")])
        .collect()
}

/// `path:line: text` for every line of non-test Rust code in `files` holding a literal.
fn rust_copies(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let literals = literals();
    find_in_code(root, "", files, |line| {
        literals.iter().any(|l| line.contains(l))
    })
}

/// `path:line: text` for every line of a script in `files`, outside comments, that names two
/// or more distributions as words.
fn script_copies(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    for path in files {
        let text = read(path);
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            let named = ALL
                .iter()
                .filter(|d| {
                    line.split(|c: char| !c.is_ascii_alphanumeric())
                        .any(|w| w == d.name)
                })
                .count();
            if named >= 2 {
                let name = path.strip_prefix(root).unwrap_or(path).display();
                found.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_distribution_table_is_spelled_only_in_the_distro_module() {
    let crates = crates_dir();
    let mut rust: Vec<PathBuf> = workspace_crates()
        .iter()
        .flat_map(|c| rust_files(&c.join("src")))
        .collect();
    rust.retain(|f| f.strip_prefix(&crates).ok() != Some(Path::new(DISTRO_MODULE)));
    // The scan reaches the files that use the table (a wrong root would find nothing).
    for user in [
        "kstack-model/src/globals/images.rs",
        "kstack-config/src/jinja.rs",
        "kstack-cli/src/cmd/template.rs",
    ] {
        assert!(
            rust.iter().any(|f| f.ends_with(user)),
            "{user} is not scanned"
        );
    }
    let mut found = rust_copies(&crates, &rust);

    let repo = repo_dir();
    let scripts = files(&repo.join("hack"), &["sh", "py"]);
    assert!(
        scripts.iter().any(|f| f.ends_with("hack/distro-parity.sh"))
            && scripts
                .iter()
                .any(|f| f.ends_with("hack/distro-parity/compare.py")),
        "hack/distro-parity is not scanned"
    );
    found.extend(script_copies(&repo, &scripts));
    assert!(
        found.is_empty(),
        "the distributions and their versions are listed only in crates/{DISTRO_MODULE} \
         (kstack_model::distro::ALL); read them from there (scripts: `kstack template \
         --distro-facts`) instead of:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scans_find_a_copy_in_code_and_only_there() {
    let dir = std::env::temp_dir().join(format!("kstack-distro-scan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rs = dir.join("x.rs");
    std::fs::write(
        &rs,
        "// rocky or \"debian\"\nconst D: &str = \"debian\";\n\
         const J: &str = \"{{ {'debian': 'bookworm'}[d] }}\";\n\
         #[cfg(test)]\nmod tests {\n    const D: &str = \"ubuntu\";\n}\n",
    )
    .unwrap();
    let sh = dir.join("x.sh");
    std::fs::write(
        &sh,
        "# for rocky and centos\nfor d in rocky centos; do :; done\necho debian\n",
    )
    .unwrap();
    let rust = rust_copies(&dir, std::slice::from_ref(&rs));
    let scripts = script_copies(&dir, std::slice::from_ref(&sh));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        rust,
        [
            "x.rs:2: const D: &str = \"debian\";",
            "x.rs:3: const J: &str = \"{{ {'debian': 'bookworm'}[d] }}\";"
        ]
    );
    assert_eq!(scripts, ["x.sh:2: for d in rocky centos; do :; done"]);
}

#[test]
fn the_starter_globals_names_the_distributions_of_the_table() {
    // `kstack init`'s globals.yml tells the operator the choices in comments.
    let path = crates_dir().join("kstack-config/templates/globals.yml");
    let text = read(&path);
    let n = names();
    let list = format!("{} or {}", n[..n.len() - 1].join(", "), n[n.len() - 1]);
    assert!(
        text.contains(&format!("# Base distribution of the images: {list}.")),
        "{} does not list {list}",
        path.display()
    );
    for d in ALL {
        assert!(
            text.contains(&format!("{} \"{}\"", d.name, d.version)),
            "{} does not give {} its version {}",
            path.display(),
            d.name,
            d.version
        );
    }
}
