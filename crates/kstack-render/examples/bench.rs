//! Render benchmark: the whole default cloud, from the built-in catalog and default globals to
//! the serialized YAML stream, repeated; prints the median and the best time per render.
//!
//! `cargo run --release -p kstack-render --example bench [-- ITERATIONS]`
use std::time::{Duration, Instant};

use kstack_config::Config;
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::kubernetes;

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let mut times = Vec::with_capacity(iterations);
    let mut bytes = 0;
    let mut objects = 0;
    for _ in 0..iterations {
        let start = Instant::now();
        let catalog = Catalog::builtin().expect("built-in catalog parses");
        let config = Config::from_parts(
            Globals::default(),
            Default::default(),
            Default::default(),
            catalog,
        );
        let rendered = kubernetes::render(&config).expect("the default cloud renders");
        let yaml = rendered.to_yaml();
        times.push(start.elapsed());
        bytes = yaml.len();
        objects = rendered.objects.len();
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "render whole cloud (catalog parse + objects + YAML): {objects} objects, {bytes} bytes; median {:.2} ms, best {:.2} ms over {iterations} runs",
        ms(times[times.len() / 2]),
        ms(times[0])
    );
}
