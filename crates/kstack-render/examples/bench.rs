//! Render benchmark.
//!
//! 1. The whole default cloud (every service enabled by default, cinder too), from the built-in
//!    catalog to every config file (templates, overrides) and every Kubernetes object serialized
//!    as a YAML stream, repeated; prints the median and the best time per render.
//! 2. Growth with per-host override files: 0, 250, 500 and 1,000 files, spread over the
//!    DaemonSet services' mergeable INI files on distinct hosts (each host gets its own pinned
//!    DaemonSet variant); prints the time per count so linearity is visible.
//!
//! `cargo run --release -p kstack-render --example bench [-- ITERATIONS]`
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kstack_config::Config;
use kstack_config::passwords::{Passwords, Secret};
use kstack_model::catalog::{Catalog, WorkloadKind};
use kstack_model::globals::Globals;
use kstack_render::kubernetes;

/// Every key kstack knows, with a fixed value (the bench measures rendering, not genpwd).
fn passwords() -> Passwords {
    let mut p = Passwords::default();
    for (_, keys) in kstack_config::passwords::KNOWN_KEYS {
        for k in *keys {
            p.entries
                .insert((*k).to_owned(), Secret::Value(format!("pw-{k}-0123456789")));
        }
    }
    p
}

fn globals() -> Globals {
    let vars = BTreeMap::from([("enable_cinder".to_owned(), serde_json::Value::Bool(true))]);
    Globals::from_vars(&vars).expect("valid globals")
}

/// `n` per-host override files: host `h<i>` overrides one mergeable file of a DaemonSet service.
fn host_overrides(catalog: &Catalog, n: usize) -> BTreeMap<String, Vec<u8>> {
    let mut targets = Vec::new();
    for s in catalog.services.values() {
        if s.kind != WorkloadKind::DaemonSet {
            continue;
        }
        for c in &s.containers {
            for f in c.config_files.iter().filter(|f| f.merge_ini) {
                targets.push((s.project.clone(), f.template.clone()));
            }
        }
    }
    targets.sort();
    targets.dedup();
    (0..n)
        .map(|i| {
            let (project, file) = &targets[i % targets.len()];
            (
                format!("{project}/host-{i:04}/{file}"),
                format!("[DEFAULT]\nhost = host-{i:04}\n").into_bytes(),
            )
        })
        .collect()
}

fn time<F: FnMut() -> (usize, usize)>(
    iterations: usize,
    mut f: F,
) -> (Vec<Duration>, usize, usize) {
    let mut times = Vec::with_capacity(iterations);
    let mut last = (0, 0);
    for _ in 0..iterations {
        let start = Instant::now();
        last = f();
        times.push(start.elapsed());
    }
    times.sort();
    (times, last.0, last.1)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let pw = passwords();
    let g = globals();

    let (times, objects, bytes) = time(iterations, || {
        let catalog = Catalog::builtin().expect("built-in catalog parses");
        let config = Config::from_parts(g.clone(), pw.clone(), Default::default(), catalog);
        let rendered = kubernetes::render(&config).expect("the cloud renders");
        let yaml = rendered.to_yaml();
        (rendered.objects.len(), yaml.len())
    });
    println!(
        "render whole cloud (catalog parse + config files + objects + YAML): {objects} objects, {bytes} bytes; median {:.2} ms, best {:.2} ms over {iterations} runs",
        ms(times[times.len() / 2]),
        ms(times[0])
    );

    let catalog = Catalog::builtin().expect("built-in catalog parses");
    let runs = (iterations / 5).max(5);
    for n in [0, 250, 500, 1000] {
        let config = Config::from_parts(
            g.clone(),
            pw.clone(),
            host_overrides(&catalog, n),
            catalog.clone(),
        );
        let (times, objects, bytes) = time(runs, || {
            let rendered = kubernetes::render(&config).expect("the cloud renders");
            let yaml = rendered.to_yaml();
            (rendered.objects.len(), yaml.len())
        });
        println!(
            "per-host override files {n:>5}: {objects} objects, {bytes} bytes; median {:.2} ms, best {:.2} ms over {runs} runs",
            ms(times[times.len() / 2]),
            ms(times[0])
        );
    }
}
