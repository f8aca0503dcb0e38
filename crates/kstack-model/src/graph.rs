//! The dependency graph over enabled services: start order, levels, critical path, cycles.
//!
//! Edges point from a service to what it depends on. Every result is deterministic: within a
//! level nodes are sorted by name, and ties in the critical path go to the smaller name.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::catalog::Catalog;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The cycle as a closed walk: first and last element are the same node.
    #[error("dependency cycle: {}", .0.join(" → "))]
    Cycle(Vec<String>),
    #[error("`{node}` depends on unknown node `{unknown}`")]
    UnknownNode { node: String, unknown: String },
}

/// Node name → the nodes it depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    deps: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// Build from (node, dependencies) pairs. A dependency that is not a node is an error.
    pub fn new<I, N, D>(nodes: I) -> Result<Graph, GraphError>
    where
        I: IntoIterator<Item = (N, D)>,
        N: Into<String>,
        D: IntoIterator,
        D::Item: Into<String>,
    {
        let deps: BTreeMap<String, BTreeSet<String>> = nodes
            .into_iter()
            .map(|(n, d)| (n.into(), d.into_iter().map(Into::into).collect()))
            .collect();
        for (node, ds) in &deps {
            if let Some(unknown) = ds.iter().find(|d| !deps.contains_key(*d)) {
                return Err(GraphError::UnknownNode {
                    node: node.clone(),
                    unknown: unknown.clone(),
                });
            }
        }
        Ok(Graph { deps })
    }

    /// The graph of the services for which `enabled` holds. Dependencies on disabled services
    /// are dropped: a service works without an optional neighbour that is not deployed.
    pub fn from_catalog(catalog: &Catalog, enabled: impl Fn(&str) -> bool) -> Graph {
        let deps = catalog
            .services
            .iter()
            .filter(|(name, _)| enabled(name))
            .map(|(name, s)| {
                let ds = s
                    .depends_on
                    .iter()
                    .filter(|d| enabled(d) && catalog.services.contains_key(*d))
                    .cloned()
                    .collect();
                (name.clone(), ds)
            })
            .collect();
        Graph { deps }
    }

    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.deps.keys().map(String::as_str)
    }

    pub fn dependencies(&self, node: &str) -> impl Iterator<Item = &str> {
        self.deps
            .get(node)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Edges (node, dependency), sorted.
    pub fn edges(&self) -> impl Iterator<Item = (&str, &str)> {
        self.deps
            .iter()
            .flat_map(|(n, ds)| ds.iter().map(move |d| (n.as_str(), d.as_str())))
    }

    /// The first cycle found (searching nodes in name order), as `a, b, c, a`: a depends on b,
    /// b on c, c on a.
    pub fn find_cycle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Open,
            Done,
        }
        let mut marks: BTreeMap<&str, Mark> = BTreeMap::new();
        for start in self.deps.keys() {
            if marks.contains_key(start.as_str()) {
                continue;
            }
            // Iterative DFS: stack of (node, remaining dependencies).
            let mut path: Vec<&str> = vec![start];
            let mut iters = vec![self.deps[start].iter()];
            marks.insert(start, Mark::Open);
            while let Some(it) = iters.last_mut() {
                match it.next() {
                    Some(dep) => match marks.get(dep.as_str()) {
                        Some(Mark::Open) => {
                            let from = path.iter().position(|n| *n == dep).unwrap_or(0);
                            let mut cycle: Vec<String> =
                                path[from..].iter().map(|s| s.to_string()).collect();
                            cycle.push(dep.clone());
                            return Some(cycle);
                        }
                        Some(Mark::Done) => {}
                        None => {
                            marks.insert(dep, Mark::Open);
                            path.push(dep);
                            iters.push(self.deps[dep].iter());
                        }
                    },
                    None => {
                        iters.pop();
                        if let Some(done) = path.pop() {
                            marks.insert(done, Mark::Done);
                        }
                    }
                }
            }
        }
        None
    }

    /// Nodes grouped so that each depends only on earlier groups; each group sorted by name.
    pub fn levels(&self) -> Result<Vec<Vec<String>>, GraphError> {
        if let Some(cycle) = self.find_cycle() {
            return Err(GraphError::Cycle(cycle));
        }
        let mut placed: BTreeSet<&str> = BTreeSet::new();
        let mut levels = Vec::new();
        while placed.len() < self.deps.len() {
            let level: Vec<&str> = self
                .deps
                .iter()
                .filter(|(n, ds)| {
                    !placed.contains(n.as_str()) && ds.iter().all(|d| placed.contains(d.as_str()))
                })
                .map(|(n, _)| n.as_str())
                .collect();
            if level.is_empty() {
                // Unreachable after find_cycle, kept so no input can loop forever.
                return Err(GraphError::Cycle(Vec::new()));
            }
            placed.extend(level.iter().copied());
            levels.push(level.into_iter().map(str::to_owned).collect());
        }
        Ok(levels)
    }

    /// A start order: the levels concatenated.
    pub fn topological_order(&self) -> Result<Vec<String>, GraphError> {
        Ok(self.levels()?.into_iter().flatten().collect())
    }

    /// The heaviest chain of dependencies, with node weights summed (a missing weight is 0).
    /// Returns the total and the chain from the first node to start to the last.
    pub fn critical_path(
        &self,
        weights: &BTreeMap<String, u64>,
    ) -> Result<(u64, Vec<String>), GraphError> {
        let order = self.topological_order()?;
        // node -> (finish time, predecessor on the heaviest chain)
        let mut best: BTreeMap<&str, (u64, Option<&str>)> = BTreeMap::new();
        for node in &order {
            let own = weights.get(node).copied().unwrap_or(0);
            let mut pick: (u64, Option<&str>) = (0, None);
            for dep in &self.deps[node] {
                let (finish, _) = best[dep.as_str()];
                if pick.1.is_none() || finish > pick.0 {
                    pick = (finish, Some(dep.as_str()));
                }
            }
            best.insert(node, (pick.0 + own, pick.1));
        }
        let mut end: Option<(&str, u64)> = None;
        for (node, (finish, _)) in &best {
            if end.is_none_or(|(_, f)| *finish > f) {
                end = Some((node, *finish));
            }
        }
        let Some((mut node, total)) = end else {
            return Ok((0, Vec::new()));
        };
        let mut path = vec![node.to_owned()];
        while let Some(prev) = best[node].1 {
            path.push(prev.to_owned());
            node = prev;
        }
        path.reverse();
        Ok((total, path))
    }

    /// Graphviz: an arrow from each dependency to the service that waits for it.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph kstack {\n  rankdir=LR;\n");
        for n in self.deps.keys() {
            let _ = writeln!(out, "  \"{n}\";");
        }
        for (n, d) in self.edges() {
            let _ = writeln!(out, "  \"{d}\" -> \"{n}\";");
        }
        out.push_str("}\n");
        out
    }

    /// Mermaid flowchart: an arrow from each dependency to the service that waits for it.
    pub fn to_mermaid(&self) -> String {
        let id = |s: &str| s.replace('-', "_");
        let mut out = String::from("flowchart LR\n");
        for n in self.deps.keys() {
            let _ = writeln!(out, "  {}[\"{n}\"]", id(n));
        }
        for (n, d) in self.edges() {
            let _ = writeln!(out, "  {} --> {}", id(d), id(n));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> Graph {
        Graph::new(edges.iter().map(|(n, d)| (*n, d.iter().copied()))).unwrap()
    }

    #[test]
    fn levels_are_sorted_by_name() {
        let g = graph(&[
            ("keystone", &["mariadb", "memcached"]),
            ("mariadb", &[]),
            ("memcached", &[]),
            ("glance", &["keystone"]),
            ("cinder", &["keystone"]),
        ]);
        assert_eq!(
            g.levels().unwrap(),
            vec![
                vec!["mariadb", "memcached"],
                vec!["keystone"],
                vec!["cinder", "glance"]
            ]
        );
        assert_eq!(
            g.topological_order().unwrap(),
            ["mariadb", "memcached", "keystone", "cinder", "glance"]
        );
    }

    #[test]
    fn cycle_is_reported_as_a_closed_walk() {
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        let err = g.levels().unwrap_err();
        assert_eq!(err.to_string(), "dependency cycle: a → b → c → a");
        assert_eq!(g.find_cycle().unwrap(), ["a", "b", "c", "a"]);
    }

    #[test]
    fn self_loop_is_a_cycle() {
        let g = graph(&[("a", &["a"])]);
        assert_eq!(g.find_cycle().unwrap(), ["a", "a"]);
    }

    #[test]
    fn no_cycle_in_a_diamond() {
        let g = graph(&[("a", &["b", "c"]), ("b", &["d"]), ("c", &["d"]), ("d", &[])]);
        assert_eq!(g.find_cycle(), None);
    }

    #[test]
    fn unknown_dependency_is_named() {
        let err = Graph::new([("a", vec!["zz"])]).unwrap_err();
        assert_eq!(err.to_string(), "`a` depends on unknown node `zz`");
    }

    #[test]
    fn critical_path_takes_the_heaviest_chain() {
        let g = graph(&[
            ("db", &[]),
            ("cache", &[]),
            ("keystone", &["db", "cache"]),
            ("nova", &["keystone"]),
            ("horizon", &["cache"]),
        ]);
        let w: BTreeMap<String, u64> = [
            ("db", 30),
            ("cache", 5),
            ("keystone", 20),
            ("nova", 40),
            ("horizon", 100),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(
            g.critical_path(&w).unwrap(),
            (105, vec!["cache".to_owned(), "horizon".to_owned()])
        );
        let mut w2 = w.clone();
        w2.insert("horizon".into(), 1);
        assert_eq!(
            g.critical_path(&w2).unwrap(),
            (
                90,
                vec!["db".to_owned(), "keystone".to_owned(), "nova".to_owned()]
            )
        );
    }

    #[test]
    fn disabled_services_and_their_edges_are_left_out() {
        let catalog = Catalog::builtin().unwrap();
        let g = Graph::from_catalog(&catalog, |name| !name.starts_with("glance"));
        assert!(!g.nodes().any(|n| n == "glance-api"));
        let nova_api: Vec<&str> = g.dependencies("nova-api").collect();
        assert_eq!(
            nova_api,
            [
                "keystone",
                "mariadb",
                "memcached",
                "placement-api",
                "rabbitmq"
            ]
        );
        assert_eq!(g.find_cycle(), None);
        assert_eq!(g.nodes().count(), 28);
    }

    #[test]
    fn empty_graph() {
        let g = Graph::default();
        assert_eq!(g.levels().unwrap(), Vec::<Vec<String>>::new());
        assert_eq!(g.critical_path(&BTreeMap::new()).unwrap(), (0, vec![]));
    }

    #[test]
    fn mermaid_and_dot_point_from_dependency_to_dependent() {
        let g = graph(&[("nova-api", &["mariadb"]), ("mariadb", &[])]);
        assert_eq!(
            g.to_mermaid(),
            "flowchart LR\n  mariadb[\"mariadb\"]\n  nova_api[\"nova-api\"]\n  mariadb --> nova_api\n"
        );
        assert!(g.to_dot().contains("  \"mariadb\" -> \"nova-api\";\n"));
    }
}
