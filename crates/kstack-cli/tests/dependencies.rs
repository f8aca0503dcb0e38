//! The workspace's layering, as cargo resolves it: which kstack crate may depend on which, and
//! which outside packages may never end up in a crate's build. ARCHITECTURE.md explains the
//! layers; this test keeps them true.
//!
//! - [`ALLOWED`]: each workspace crate and the workspace crates its normal and build
//!   dependencies may name (`cargo metadata --no-deps`). A dev-dependency may name the crate
//!   itself (to turn on its test features) or any crate its allowed dependencies reach: tests
//!   may use what the code may reach, never a crate above or beside it.
//! - [`FORBIDDEN`]: outside packages that must not be in a crate's dependency closure (normal
//!   and build dependencies, followed through the whole resolved graph of `cargo metadata`).
//!   That graph has the features of all workspace members unified, so the closure can only be
//!   larger than the build of the crate alone: a package missing from it is missing from every
//!   build of the crate.
//!
//! Every violation is reported at once, with the path through the graph that brings a
//! forbidden package in.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// The library crates: the binary (`kstack-cli`) and the end-to-end tests (`kstack-e2e`) may
/// use any of them.
const LIBRARIES: &[&str] = &[
    "kstack-model",
    "kstack-k8s",
    "kstack-ports",
    "kstack-config",
    "kstack-render",
    "kstack-engine",
    "kstack-kube",
    "kstack-compose",
    "kstack-inventory",
    "kstack-verify",
];

/// Each workspace crate and the workspace crates it may depend on (normal and build
/// dependencies). A new crate needs a row here and its place in ARCHITECTURE.md.
const ALLOWED: &[(&str, &[&str])] = &[
    ("kstack-model", &[]),
    ("kstack-k8s", &[]),
    ("kstack-ports", &[]),
    ("kstack-config", &["kstack-model"]),
    (
        "kstack-render",
        &["kstack-model", "kstack-config", "kstack-k8s"],
    ),
    (
        "kstack-engine",
        &[
            "kstack-model",
            "kstack-render",
            "kstack-k8s",
            "kstack-ports",
        ],
    ),
    (
        "kstack-kube",
        &[
            "kstack-model",
            "kstack-k8s",
            "kstack-engine",
            "kstack-ports",
        ],
    ),
    (
        "kstack-compose",
        &["kstack-model", "kstack-config", "kstack-render"],
    ),
    ("kstack-inventory", &["kstack-ports"]),
    ("kstack-verify", &["kstack-ports"]),
    ("kstack-cli", LIBRARIES),
    ("kstack-e2e", LIBRARIES),
];

/// Outside packages that must not be in a crate's build, and why.
const FORBIDDEN: &[(&str, &[&str], &str)] = &[
    (
        "kstack-kube",
        &["axum", "sqlx"],
        "the Kubernetes adapter reaches the inventory only through kstack-ports, never its \
         HTTP server or database",
    ),
    (
        "kstack-ports",
        &["axum", "sqlx", "hyper", "kube"],
        "the ports are traits and plain data: no HTTP, no database, no Kubernetes client",
    ),
    (
        "kstack-engine",
        &["kube"],
        "the engine reaches a cluster only through its Cluster trait",
    ),
    (
        "kstack-render",
        &["kube"],
        "only kstack-kube talks to an API server",
    ),
    (
        "kstack-config",
        &["kube"],
        "only kstack-kube talks to an API server",
    ),
    (
        "kstack-model",
        &["kube"],
        "only kstack-kube talks to an API server",
    ),
    (
        "kstack-compose",
        &["kube", "tokio", "reqwest"],
        "the single node runs no Kubernetes: its runner drives the docker command line, \
         synchronously, and calls no HTTP API",
    ),
    (
        "kstack-inventory",
        &["kube"],
        "the inventory reaches Kubernetes only through NodeSync and CloudStatus",
    ),
    (
        "kstack-verify",
        &["kube"],
        "verify checks the cloud over its OpenStack APIs, not the cluster",
    ),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate lives in crates/")
        .to_path_buf()
}

/// `cargo metadata` of the workspace, with `args` added.
fn metadata(args: &[&str]) -> Value {
    let manifest = workspace_root().join("Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(&manifest)
        .args(args)
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    ALLOWED
        .iter()
        .map(|(c, deps)| (*c, deps.iter().copied().collect()))
        .collect()
}

/// The workspace crates `krate` reaches through [`ALLOWED`], itself included.
fn allowed_closure(krate: &str) -> BTreeSet<String> {
    let table = allowed();
    let mut seen = BTreeSet::from([krate.to_string()]);
    let mut todo = vec![krate.to_string()];
    while let Some(c) = todo.pop() {
        for d in table.get(c.as_str()).into_iter().flatten() {
            if seen.insert(d.to_string()) {
                todo.push(d.to_string());
            }
        }
    }
    seen
}

/// Every dependency between workspace crates that [`ALLOWED`] does not allow, from the
/// workspace members' `packages` of `cargo metadata`; also a crate without a row, or a row
/// without a crate.
fn edge_violations(metadata: &Value) -> Vec<String> {
    let table = allowed();
    let ids: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .expect("workspace members")
        .iter()
        .map(|m| m.as_str().expect("a package id"))
        .collect();
    let packages: Vec<&Value> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| ids.contains(id)))
        .collect();
    let members: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("a package name"))
        .collect();
    let mut found = Vec::new();
    for name in table.keys() {
        if !members.contains(name) {
            found.push(format!(
                "{name} is in the table of this test but not in the workspace"
            ));
        }
    }
    for p in packages {
        let name = p["name"].as_str().expect("a package name");
        let Some(may) = table.get(name) else {
            found.push(format!(
                "{name} has no row in ALLOWED: say which workspace crates it may depend on \
                 (and where it sits in ARCHITECTURE.md)"
            ));
            continue;
        };
        let reach = allowed_closure(name);
        for d in p["dependencies"].as_array().expect("dependencies") {
            let dep = d["name"].as_str().expect("a dependency name");
            if !members.contains(dep) {
                continue;
            }
            match d["kind"].as_str() {
                Some("dev") if !reach.contains(dep) => found.push(format!(
                    "{name} has a dev-dependency on {dep}, which is neither {name} itself nor \
                     reached through the crates {name} may depend on"
                )),
                Some("dev") => {}
                kind if !may.contains(dep) => found.push(format!(
                    "{name} depends on {dep}{}, which it may not: it may depend on {:?}",
                    kind.map(|k| format!(" ({k})")).unwrap_or_default(),
                    may
                )),
                _ => {}
            }
        }
    }
    found
}

/// The packages from `krate`'s node to the first package named `target`, through normal and
/// build dependencies of the `resolve` graph of `cargo metadata`; `None` when it is not there.
fn path_to(metadata: &Value, krate: &str, target: &str) -> Option<Vec<String>> {
    let names: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: BTreeMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .expect("resolve nodes")
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .expect("workspace members")
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let start = *members
        .iter()
        .find(|id| names.get(*id) == Some(&krate))
        .unwrap_or_else(|| panic!("{krate} is not a workspace member"));
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    let mut seen = BTreeSet::from([start]);
    while let Some(id) = queue.pop_front() {
        if names[id] == target {
            let mut path = vec![names[id].to_string()];
            let mut at = id;
            while let Some(p) = parent.get(at) {
                path.push(names[p].to_string());
                at = p;
            }
            path.reverse();
            return Some(path);
        }
        for d in nodes[id]["deps"].as_array().into_iter().flatten() {
            let built = d["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].as_str() != Some("dev"));
            let pkg = d["pkg"].as_str().unwrap();
            if built && seen.insert(pkg) {
                parent.insert(pkg, id);
                queue.push_back(pkg);
            }
        }
    }
    None
}

/// Every package of [`FORBIDDEN`] found in its crate's closure, with the path to it.
fn closure_violations(metadata: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for (krate, packages, why) in FORBIDDEN {
        for p in *packages {
            if let Some(path) = path_to(metadata, krate, p) {
                found.push(format!(
                    "{krate} builds {p} ({}), but {why}",
                    path.join(" -> ")
                ));
            }
        }
    }
    found
}

#[test]
fn workspace_crates_depend_only_on_the_crates_their_layer_allows() {
    let found = edge_violations(&metadata(&["--no-deps"]));
    assert!(
        found.is_empty(),
        "dependencies between workspace crates that the layering does not allow (the table is \
         in crates/kstack-cli/tests/dependencies.rs, the layers in ARCHITECTURE.md):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_crate_builds_a_package_its_layer_forbids() {
    // The host's platform only: other platforms' packages are neither built nor downloaded.
    let found = closure_violations(&metadata(&["--filter-platform", "host-tuple"]));
    assert!(
        found.is_empty(),
        "packages in a crate's build that must not be there:\n{}",
        found.join("\n")
    );
}

/// The workspace as `cargo metadata` would describe it if kstack-kube depended on
/// kstack-inventory (which depends on axum) and kstack-engine had a dev-dependency on
/// kstack-cli (which depends on kube).
fn bad_workspace() -> Value {
    let deps: BTreeMap<&str, Vec<(&str, Option<&str>)>> = BTreeMap::from([
        (
            "kstack-kube",
            vec![("kstack-engine", None), ("kstack-inventory", None)],
        ),
        (
            "kstack-engine",
            vec![("kstack-model", None), ("kstack-cli", Some("dev"))],
        ),
        ("kstack-inventory", vec![("axum", None)]),
        ("kstack-cli", vec![("kube", None)]),
    ]);
    let id = |name: &str| format!("{name} 0.1.0");
    let mut packages = Vec::new();
    let mut nodes = Vec::new();
    let outside = ["axum", "kube"];
    for name in ALLOWED.iter().map(|(c, _)| *c).chain(outside) {
        let mine = deps.get(name).cloned().unwrap_or_default();
        packages.push(json!({
            "name": name,
            "id": id(name),
            "dependencies": mine
                .iter()
                .map(|(d, kind)| json!({"name": d, "kind": kind}))
                .collect::<Vec<_>>(),
        }));
        nodes.push(json!({
            "id": id(name),
            "deps": mine
                .iter()
                .map(|(d, kind)| json!({"pkg": id(d), "dep_kinds": [{"kind": kind}]}))
                .collect::<Vec<_>>(),
        }));
    }
    json!({
        "packages": packages,
        "workspace_members": ALLOWED.iter().map(|(c, _)| id(c)).collect::<Vec<_>>(),
        "resolve": {"nodes": nodes},
    })
}

#[test]
fn the_checks_find_a_forbidden_edge_and_the_path_to_a_forbidden_package() {
    let m = bad_workspace();
    let edges = edge_violations(&m);
    assert!(
        edges
            .iter()
            .any(|e| e.starts_with("kstack-kube depends on kstack-inventory, which it may not")),
        "{edges:#?}"
    );
    assert!(
        edges
            .iter()
            .any(|e| e
                .starts_with("kstack-engine has a dev-dependency on kstack-cli, which is neither")),
        "{edges:#?}"
    );
    assert_eq!(edges.len(), 2, "{edges:#?}");
    assert_eq!(
        path_to(&m, "kstack-kube", "axum"),
        Some(vec![
            "kstack-kube".to_string(),
            "kstack-inventory".to_string(),
            "axum".to_string()
        ])
    );
    // A dev-dependency is not built into the crate.
    assert_eq!(path_to(&m, "kstack-engine", "kube"), None);
    let closure = closure_violations(&m);
    assert_eq!(closure.len(), 1, "{closure:#?}");
    assert!(
        closure[0].starts_with("kstack-kube builds axum (kstack-kube -> kstack-inventory -> axum)"),
        "{closure:#?}"
    );
}

/// The library and binary sources (`crates/*/src/**/*.rs`) that spawn the `docker` command,
/// but for the crate whose job it is.
fn docker_callers(crates: &Path) -> Vec<String> {
    const RUNNER: &str = "kstack-compose";
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(crates).sort_by_file_name() {
        let entry = entry.expect("walking crates/");
        let path = entry.path();
        let rel = path.strip_prefix(crates).expect("under crates/");
        let mut parts = rel.components().map(|c| c.as_os_str().to_string_lossy());
        let (Some(krate), Some(dir)) = (parts.next(), parts.next()) else {
            continue;
        };
        if krate == RUNNER || dir != "src" || path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("reading a source file");
        for (i, line) in text.lines().enumerate() {
            if line.contains(r#"Command::new("docker")"#) {
                found.push(format!(
                    "crates/{}:{}: {}",
                    rel.display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    found
}

#[test]
fn only_kstack_compose_runs_docker() {
    let found = docker_callers(&workspace_root().join("crates"));
    assert!(
        found.is_empty(),
        "only kstack-compose runs docker (its Runner); use kstack_compose::DockerCompose:\n{}",
        found.join("\n")
    );
    // The scan finds a call where there is one.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("kstack-cli/src/cmd");
    std::fs::create_dir_all(&src).unwrap();
    let call = r#"    let out = std::process::Command::new("docker").arg("ps");"#;
    std::fs::write(src.join("compose.rs"), format!("fn f() {{\n{call}\n}}\n")).unwrap();
    let runner = tmp.path().join("kstack-compose/src");
    std::fs::create_dir_all(&runner).unwrap();
    std::fs::write(runner.join("docker.rs"), call).unwrap();
    assert_eq!(
        docker_callers(tmp.path()),
        [format!(
            "crates/kstack-cli/src/cmd/compose.rs:2: {}",
            call.trim()
        )]
    );
}
