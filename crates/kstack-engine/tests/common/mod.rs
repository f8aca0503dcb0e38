//! Helpers shared by the engine's integration tests: a config from globals, and one deploy
//! (observe, plan, execute) against a cluster.
#![allow(dead_code)]

use kstack_config::Config;
use kstack_engine::fake::FakeCluster;
use kstack_engine::{Limits, ObjectRef, Options, Report};
use kstack_model::globals::Globals;
use kstack_render::{Rendered, kubernetes};

pub fn config(globals: Globals) -> Config {
    kstack_config::testing::config(globals, &[])
}

pub fn rendered(config: &Config) -> Rendered {
    kubernetes::render(config).unwrap()
}

/// Globals with `vars` set over the defaults.
pub fn globals(vars: &[(&str, &str)]) -> Globals {
    Globals::from_vars(
        &vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::String((*v).to_owned())))
            .collect(),
    )
    .unwrap()
}

pub async fn run(
    fake: &FakeCluster,
    config: &Config,
    serial: bool,
    timeouts: &Limits,
) -> (kstack_engine::Plan, Report) {
    let options = Options {
        serial,
        now: "2026-01-01T00:00:00Z".into(),
        no_rollback: false,
        outage: None,
    };
    run_with(fake, config, &options, timeouts).await
}

pub async fn run_with(
    fake: &FakeCluster,
    config: &Config,
    options: &Options,
    timeouts: &Limits,
) -> (kstack_engine::Plan, Report) {
    let rendered = rendered(config);
    let ns = config.globals.kubernetes_namespace.clone();
    let cluster_scoped = vec![ObjectRef::new("Namespace", None, &ns)];
    let observed = kstack_engine::observe(fake, &ns, &cluster_scoped)
        .await
        .unwrap();
    let plan = kstack_engine::plan(&rendered, &config.catalog, &observed, timeouts).unwrap();
    let report = kstack_engine::deploy(
        fake,
        &plan,
        &observed,
        options,
        &|_: &kstack_engine::Event| {},
    )
    .await
    .unwrap();
    (plan, report)
}
