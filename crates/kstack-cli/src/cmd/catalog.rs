//! `kstack services` and `kstack graph`: the service catalog and its dependency graph.
//!
//! Which catalog and services:
//! - `--catalog FILE`: the built-in catalog with FILE merged over it, every service (as before;
//!   for trying a catalog file without a config directory);
//! - else, when the config directory (`--config-dir`, $KSTACK_CONFIG_DIR, /etc/kstack) has a
//!   globals.yml: the directory is loaded like `kstack validate` does, and the effective catalog
//!   (built-in + `catalog.yml`) is shown with only the enabled services;
//! - else the built-in catalog, every service.
//!
//! Bad input files print their diagnostics and exit with code 2.
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kstack_model::catalog::{Catalog, Service};
use kstack_model::graph::Graph;
use serde::Serialize;

use super::InputError;
use crate::exit::Exit;

#[derive(Debug, clap::Subcommand)]
pub enum CatalogCommand {
    /// List the services of the catalog: role, workload kind, images, dependencies.
    #[command(
        after_help = "Examples:\n  kstack services\n  kstack services -o yaml\n  kstack services --catalog /etc/kolla/kstack-catalog.yaml"
    )]
    Services(ServicesArgs),
    /// Print the dependency graph of the services (an arrow points to the service that waits).
    #[command(
        after_help = "Examples:\n  kstack graph\n  kstack graph --format mermaid > graph.mmd\n  kstack graph --format dot | dot -Tsvg > graph.svg"
    )]
    Graph(GraphArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Yaml,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
}

#[derive(Debug, clap::Args)]
pub struct CatalogArgs {
    /// An operator catalog file merged over the built-in catalog by service name.
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    #[command(flatten)]
    pub dir: super::config::ConfigDir,
}

#[derive(Debug, clap::Args)]
pub struct ServicesArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Output,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

#[derive(Debug, clap::Args)]
pub struct GraphArgs {
    /// Graph language.
    #[arg(long, value_enum, default_value = "dot")]
    pub format: GraphFormat,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

/// The catalog to show and the services to keep (see the module doc).
fn load(args: &CatalogArgs) -> anyhow::Result<Catalog> {
    let builtin = Catalog::builtin().context("loading the built-in catalog")?;
    let Some(path) = &args.catalog else {
        return load_dir(&args.dir.config_dir, builtin);
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let overlay = Catalog::overlay_from_yaml(&path.display().to_string(), &text)
        .map_err(|e| InputError(e.to_string()))?;
    Catalog::merge(builtin, overlay).map_err(|e| {
        InputError(format!(
            "merging {} over the built-in catalog: {e}",
            path.display()
        ))
        .into()
    })
}

fn load_dir(dir: &Path, builtin: Catalog) -> anyhow::Result<Catalog> {
    if !dir.join(kstack_config::GLOBALS_FILE).exists() {
        return Ok(builtin);
    }
    let Some(config) = super::load_config(dir)? else {
        return Err(InputError(format!(
            "{}: invalid config directory (run `kstack validate`)",
            dir.display()
        ))
        .into());
    };
    let mut catalog = config.catalog;
    catalog.services.retain(|n, _| config.enabled.contains(n));
    Ok(catalog)
}

pub fn run(command: CatalogCommand) -> anyhow::Result<Exit> {
    let out = match command {
        CatalogCommand::Services(args) => services(&load(&args.catalog)?, args.output)?,
        CatalogCommand::Graph(args) => graph(&load(&args.catalog)?, args.format)?,
    };
    print!("{out}");
    Ok(Exit::Success)
}

/// One line of `kstack services`.
#[derive(Debug, Serialize)]
struct Row<'a> {
    name: &'a str,
    role: String,
    kind: String,
    images: Vec<&'a str>,
    depends_on: &'a [String],
}

fn row<'a>(name: &'a str, s: &'a Service) -> Row<'a> {
    let mut images: Vec<&str> = s.containers.iter().map(|c| c.image.as_str()).collect();
    images.dedup();
    Row {
        name,
        role: s.role.to_string(),
        kind: s.kind.to_string(),
        images,
        depends_on: &s.depends_on,
    }
}

fn services(catalog: &Catalog, output: Output) -> anyhow::Result<String> {
    let rows: Vec<Row<'_>> = catalog.services.iter().map(|(n, s)| row(n, s)).collect();
    Ok(match output {
        Output::Json => serde_json::to_string_pretty(&rows)? + "\n",
        Output::Yaml => serde_saphyr::to_string(&rows)?,
        Output::Table => {
            let mut table = comfy_table::Table::new();
            table
                .load_preset(comfy_table::presets::NOTHING)
                .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
                .set_header(["NAME", "ROLE", "KIND", "IMAGE", "DEPENDS ON"]);
            for r in &rows {
                table.add_row([
                    r.name.to_owned(),
                    r.role.clone(),
                    r.kind.clone(),
                    r.images.join(","),
                    r.depends_on.join(","),
                ]);
            }
            // Trailing blanks from column padding are noise in pipes and snapshots.
            let mut text: String = table
                .to_string()
                .lines()
                .map(|l| l.trim_end().to_owned() + "\n")
                .collect();
            if text.is_empty() {
                text.push('\n');
            }
            text
        }
    })
}

fn graph(catalog: &Catalog, format: GraphFormat) -> anyhow::Result<String> {
    let graph = Graph::from_catalog(catalog, |_| true);
    // Refuse to draw a graph that cannot be deployed; the error shows the cycle.
    graph.levels().map_err(|e| InputError(e.to_string()))?;
    Ok(match format {
        GraphFormat::Dot => graph.to_dot(),
        GraphFormat::Mermaid => graph.to_mermaid(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Catalog {
        Catalog::builtin().unwrap()
    }

    #[test]
    fn services_table() {
        insta::assert_snapshot!(services(&builtin(), Output::Table).unwrap());
    }

    #[test]
    fn graph_mermaid() {
        insta::assert_snapshot!(graph(&builtin(), GraphFormat::Mermaid).unwrap());
    }

    #[test]
    fn services_json_lists_every_service() {
        let text = services(&builtin(), Output::Json).unwrap();
        let rows: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        assert_eq!(rows.len(), 29);
        assert_eq!(rows[0]["name"], "cinder-api");
        assert_eq!(rows[0]["images"][0], "cinder-api");
    }

    #[test]
    fn graph_with_a_cycle_is_an_error_naming_it() {
        let text = kstack_model::catalog::BUILTIN_YAML.replace(
            "depends_on: [openvswitch-db-server]",
            "depends_on: [openvswitch-db-server, neutron-openvswitch-agent]",
        );
        let catalog = Catalog::from_yaml("test", &text).unwrap();
        let err = graph(&catalog, GraphFormat::Dot).unwrap_err();
        assert_eq!(
            err.to_string(),
            "dependency cycle: neutron-openvswitch-agent → openvswitch-vswitchd → neutron-openvswitch-agent"
        );
    }
}
