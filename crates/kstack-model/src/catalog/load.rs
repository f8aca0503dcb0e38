//! Reading a catalog: parsing catalog files, laying an operator's catalog over the built-in
//! one by service name, checking the result (dependencies, bootstrap tasks and their phases,
//! distribution facts, owners, stop signals, `when` settings), and keeping only the config
//! files and tasks whose `when` setting holds.
use std::collections::BTreeMap;

use super::*;

/// One problem found in a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogIssue {
    #[error("service `{service}` depends on unknown service `{unknown}`")]
    UnknownDependency { service: String, unknown: String },
    #[error(
        "service `{service}`: install_after entry `{entry}` {problem}; name a service of its depends_on, or `service/task` for a bootstrap task of one"
    )]
    BadInstallAfter {
        service: String,
        entry: String,
        problem: String,
    },
    #[error(
        "service `{service}`: upgrade_before entry `{entry}` {problem}; name services of its depends_on that nothing else it depends on depends on"
    )]
    BadUpgradeBefore {
        service: String,
        entry: String,
        problem: String,
    },
    #[error(
        "service `{service}`: bootstrap task `{task}` has with_workload but is not a `post` task; only post tasks may start beside the workload"
    )]
    WithWorkloadNotPost { service: String, task: String },
    #[error("service `{service}`: bootstrap task `{task}` needs unknown service `{unknown}`")]
    UnknownBootstrapNeed {
        service: String,
        task: String,
        unknown: String,
    },
    #[error("service `{service}`: bootstrap task `{task}` runs after unknown task `{unknown}`")]
    UnknownBootstrapTask {
        service: String,
        task: String,
        unknown: String,
    },
    #[error(
        "service `{service}`: bootstrap task `{task}` (phase {phase}) runs after `{after}` (phase {after_phase}), which does not run before it: a task may follow tasks of its own phase or earlier ones (always/install, then expand, then contract)"
    )]
    PhaseOrder {
        service: String,
        task: String,
        phase: Phase,
        after: String,
        after_phase: Phase,
    },
    #[error(
        "service `{service}`: also_on lists `{role}`, {problem}; list other roles than the service's own (`every` already means every node with a role)"
    )]
    BadAlsoOn {
        service: String,
        role: Role,
        problem: &'static str,
    },
    #[error("service `{service}` has no containers")]
    NoContainers { service: String },
    #[error(
        "service `{service}`: volume `{volume}` is shared, which needs a host_path volume of a privileged service (mount propagation both ways); drop `shared` or make it a privileged host_path"
    )]
    BadSharedVolume { service: String, volume: String },
    #[error(
        "service `{service}`: port `{port}` is public but not exposed; a public port is published through the service's Service, so set `expose: true` too"
    )]
    PublicNotExposed { service: String, port: String },
    #[error(
        "service `{service}` has public_gateway, and so does `{other}`; one service publishes the public ports, so keep it on one"
    )]
    SeveralGateways { service: String, other: String },
    #[error("service `{service}`, container `{container}`: {field}: {message}")]
    UnknownFact {
        service: String,
        container: String,
        field: String,
        message: String,
    },
    #[error(
        "service `{service}`, container `{container}`: permissions owner `{owner}` for `{path}` is not `user:group`"
    )]
    BadOwner {
        service: String,
        container: String,
        path: String,
        owner: String,
    },
    #[error(
        "service `{service}`, container `{container}`: `stop_signal: {signal}` is not one of TERM, INT, QUIT, HUP, USR1, USR2, WINCH (without `SIG`)"
    )]
    BadStopSignal {
        service: String,
        container: String,
        signal: String,
    },
    #[error(
        "service `{service}`, container `{container}`: `stop_signal_to: workers` needs a `stop_signal` to send them"
    )]
    StopTargetWithoutSignal { service: String, container: String },
    #[error(
        "service `{service}`, container `{container}`: config file `{template}` has `when: {var}`, which is not a boolean setting kstack knows"
    )]
    UnknownCondition {
        service: String,
        container: String,
        template: String,
        var: String,
    },
    #[error(
        "service `{service}`: bootstrap task `{task}` has `when: {var}`, which is not a boolean setting kstack knows"
    )]
    UnknownTaskCondition {
        service: String,
        task: String,
        var: String,
    },
    #[error("service `{service}`: bootstrap task `{task}`, env `{env}`: {message}")]
    UnknownPlaceholder {
        service: String,
        task: String,
        env: String,
        message: String,
    },
    #[error("service `{service}` is new in the operator catalog and lacks field `{field}`")]
    MissingField {
        service: String,
        field: &'static str,
    },
    #[error(
        "service `{service}` has no port named `{port}`, which kstack addresses it by: add `{{ name: {port}, port: <number> }}` to `services.{service}.ports` (an operator catalog's `ports` replaces the whole built-in list)"
    )]
    MissingPort { service: String, port: String },
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{name}: {message}")]
    Parse { name: String, message: String },
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<CatalogIssue>),
}

impl Catalog {
    /// Drops every config file and bootstrap task whose `when` setting is not true in `vars`
    /// (globals.yml after defaults), so every consumer of the catalog sees the files the
    /// containers get and the tasks that run.
    pub fn apply_conditions(&mut self, vars: &BTreeMap<String, serde_json::Value>) {
        for s in self.services.values_mut() {
            let holds = |when: &Option<String>| {
                when.as_ref().is_none_or(|var| {
                    vars.get(var)
                        .and_then(crate::globals::parse_bool)
                        .unwrap_or(false)
                })
            };
            for c in &mut s.containers {
                c.config_files.retain(|f| holds(&f.when));
            }
            s.bootstrap.retain(|t| holds(&t.when));
        }
    }

    /// The built-in catalog, validated.
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::from_yaml("built-in catalog", BUILTIN_YAML)
    }

    /// Parse and validate a full catalog; `name` labels errors (a file name).
    pub fn from_yaml(name: &str, text: &str) -> Result<Catalog, CatalogError> {
        let catalog: Catalog = serde_saphyr::from_str(text).map_err(|e| CatalogError::Parse {
            name: name.to_owned(),
            message: e.to_string(),
        })?;
        catalog.validate()?;
        Ok(catalog)
    }

    /// Parse an operator catalog file (not validated until merged).
    pub fn overlay_from_yaml(name: &str, text: &str) -> Result<CatalogOverlay, CatalogError> {
        serde_saphyr::from_str(text).map_err(|e| CatalogError::Parse {
            name: name.to_owned(),
            message: e.to_string(),
        })
    }

    /// Lay `overlay` over `builtin` by service name: a known service gets the given fields
    /// replaced, an unknown one is added. The result is validated; all problems are reported.
    pub fn merge(builtin: Catalog, overlay: CatalogOverlay) -> Result<Catalog, CatalogError> {
        let mut services = builtin.services;
        let mut issues = Vec::new();
        for (name, o) in overlay.services {
            if let Some(s) = services.get_mut(&name) {
                apply(s, o);
                continue;
            }
            let required = [
                ("project", o.project.is_none()),
                ("enable_flag", o.enable_flag.is_none()),
                ("role", o.role.is_none()),
                ("kind", o.kind.is_none()),
                ("containers", o.containers.is_none()),
            ];
            let (Some(project), Some(enable_flag), Some(role), Some(kind), Some(containers)) =
                (o.project, o.enable_flag, o.role, o.kind, o.containers)
            else {
                for (field, missing) in required {
                    if missing {
                        issues.push(CatalogIssue::MissingField {
                            service: name.clone(),
                            field,
                        });
                    }
                }
                continue;
            };
            services.insert(
                name,
                Service {
                    project,
                    enable_flag,
                    role,
                    also_on: o.also_on.unwrap_or_default(),
                    kind,
                    containers,
                    ports: o.ports.unwrap_or_default(),
                    privileges: o.privileges.unwrap_or_default(),
                    volumes: o.volumes.unwrap_or_default(),
                    bootstrap: o.bootstrap.unwrap_or_default(),
                    depends_on: o.depends_on.unwrap_or_default(),
                    install_after: o.install_after.unwrap_or_default(),
                    upgrade_before: o.upgrade_before.unwrap_or_default(),
                    only_kubernetes: o.only_kubernetes,
                    public_gateway: o.public_gateway.unwrap_or(false),
                },
            );
        }
        let catalog = Catalog { services };
        if let Err(CatalogError::Invalid(more)) = catalog.validate() {
            issues.extend(more);
        }
        if issues.is_empty() {
            Ok(catalog)
        } else {
            Err(CatalogError::Invalid(issues))
        }
    }

    /// The number of `service`'s port named `name`, when the catalog declares it.
    /// `service`'s port named `name`.
    fn find_port(&self, service: &str, name: &str) -> Option<&Port> {
        self.services
            .get(service)?
            .ports
            .iter()
            .find(|p| p.name == name)
    }

    /// The port of `service`'s public endpoint named `name` on the public address: its
    /// `public_tls_port` with TLS on the public endpoints, else its number.
    pub fn public_port(&self, service: &str, name: &str, tls: bool) -> Option<u16> {
        let p = self.find_port(service, name)?;
        Some(p.public_tls_port.filter(|_| tls).unwrap_or(p.port))
    }

    pub fn port(&self, service: &str, name: &str) -> Option<u16> {
        self.find_port(service, name).map(|p| p.port)
    }

    /// What is wrong with one `install_after` entry of `service`, if anything.
    fn install_after_problem(&self, service: &Service, entry: &str) -> Option<String> {
        let (dep, task) = match entry.split_once('/') {
            Some((d, t)) => (d, Some(t)),
            None => (entry, None),
        };
        if !service.depends_on.iter().any(|d| d == dep) {
            return Some(format!("names `{dep}`, which is not in depends_on"));
        }
        let task = task?;
        let known = self
            .services
            .get(dep)
            .is_some_and(|s| s.bootstrap.iter().any(|t| t.name == task));
        (!known).then(|| format!("names task `{task}`, which `{dep}` does not have"))
    }

    /// What is wrong with one `upgrade_before` entry of `service`, if anything: it must be in
    /// `depends_on`, and no other service of `depends_on` may depend on it, directly or not (that
    /// one's pods would wait for it, and so this service for its own dependent).
    fn upgrade_before_problem(&self, service: &Service, entry: &str) -> Option<String> {
        if !service.depends_on.iter().any(|d| d == entry) {
            return Some("is not in depends_on".to_owned());
        }
        let through = service
            .depends_on
            .iter()
            .filter(|d| d.as_str() != entry)
            .find(|d| self.depends_on_transitively(d, entry))?;
        Some(format!(
            "is also a dependency of `{through}`, another service of its depends_on (its pods would wait for `{through}`, which waits for them)"
        ))
    }

    /// Whether `from` depends on `to` through `depends_on`, directly or not.
    fn depends_on_transitively(&self, from: &str, to: &str) -> bool {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(s) = todo.pop() {
            if !seen.insert(s) {
                continue;
            }
            for d in self.services.get(s).map_or(&[][..], |s| &s.depends_on) {
                if d == to {
                    return true;
                }
                todo.push(d);
            }
        }
        false
    }

    /// Check references between services and bootstrap tasks, and that every port kstack
    /// addresses a service by ([`ADDRESSED_PORTS`]) is declared; collects every problem.
    pub fn validate(&self) -> Result<(), CatalogError> {
        let mut issues = Vec::new();
        for (service, port) in ADDRESSED_PORTS {
            if self.port(service, port).is_none() {
                issues.push(CatalogIssue::MissingPort {
                    service: (*service).to_owned(),
                    port: (*port).to_owned(),
                });
            }
        }
        let gateways: Vec<&str> = self
            .services
            .iter()
            .filter(|(_, s)| s.public_gateway)
            .map(|(n, _)| n.as_str())
            .collect();
        for extra in gateways.iter().skip(1) {
            issues.push(CatalogIssue::SeveralGateways {
                service: (*extra).to_owned(),
                other: gateways[0].to_owned(),
            });
        }
        for (name, s) in &self.services {
            for (i, r) in s.also_on.iter().enumerate() {
                let problem = if *r == Role::Every || s.role == Role::Every {
                    Some("which `every` covers")
                } else if *r == s.role {
                    Some("the service's own role")
                } else if s.also_on[..i].contains(r) {
                    Some("twice")
                } else {
                    None
                };
                if let Some(problem) = problem {
                    issues.push(CatalogIssue::BadAlsoOn {
                        service: name.clone(),
                        role: *r,
                        problem,
                    });
                }
            }
            if s.containers.is_empty() {
                issues.push(CatalogIssue::NoContainers {
                    service: name.clone(),
                });
            }
            for v in s.volumes.iter().filter(|v| v.shared) {
                if !matches!(v.kind, VolumeKind::HostPath { .. }) || !s.privileges.privileged {
                    issues.push(CatalogIssue::BadSharedVolume {
                        service: name.clone(),
                        volume: v.name.clone(),
                    });
                }
            }
            for p in s.ports.iter().filter(|p| p.public && !p.expose) {
                issues.push(CatalogIssue::PublicNotExposed {
                    service: name.clone(),
                    port: p.name.clone(),
                });
            }
            for c in &s.containers {
                let fields = std::iter::once(("command".to_owned(), &c.command)).chain(
                    c.config_files
                        .iter()
                        .map(|f| (format!("config file `{}` dest", f.template), &f.dest)),
                );
                for (field, text) in fields {
                    if let Err(e) = crate::distro::check(text) {
                        issues.push(CatalogIssue::UnknownFact {
                            service: name.clone(),
                            container: c.name.clone(),
                            field,
                            message: e.to_string(),
                        });
                    }
                }
                for f in &c.config_files {
                    if let Some(var) = &f.when
                        && !known_condition(var)
                    {
                        issues.push(CatalogIssue::UnknownCondition {
                            service: name.clone(),
                            container: c.name.clone(),
                            template: f.template.clone(),
                            var: var.clone(),
                        });
                    }
                }
                if c.stop_signal.is_none() && !c.stop_signal_to.is_main() {
                    issues.push(CatalogIssue::StopTargetWithoutSignal {
                        service: name.clone(),
                        container: c.name.clone(),
                    });
                }
                if let Some(sig) = &c.stop_signal
                    && stop_signal_number(sig).is_none()
                {
                    issues.push(CatalogIssue::BadStopSignal {
                        service: name.clone(),
                        container: c.name.clone(),
                        signal: sig.clone(),
                    });
                }
                for p in &c.permissions {
                    let ok = p
                        .owner
                        .split_once(':')
                        .is_some_and(|(u, g)| !u.is_empty() && !g.is_empty() && !g.contains(':'));
                    if !ok {
                        issues.push(CatalogIssue::BadOwner {
                            service: name.clone(),
                            container: c.name.clone(),
                            path: p.path.clone(),
                            owner: p.owner.clone(),
                        });
                    }
                }
            }
            for dep in &s.depends_on {
                if !self.services.contains_key(dep) {
                    issues.push(CatalogIssue::UnknownDependency {
                        service: name.clone(),
                        unknown: dep.clone(),
                    });
                }
            }
            for entry in &s.install_after {
                if let Some(problem) = self.install_after_problem(s, entry) {
                    issues.push(CatalogIssue::BadInstallAfter {
                        service: name.clone(),
                        entry: entry.clone(),
                        problem,
                    });
                }
            }
            for entry in &s.upgrade_before {
                if let Some(problem) = self.upgrade_before_problem(s, entry) {
                    issues.push(CatalogIssue::BadUpgradeBefore {
                        service: name.clone(),
                        entry: entry.clone(),
                        problem,
                    });
                }
            }
            let tasks: BTreeSet<&str> = s.bootstrap.iter().map(|t| t.name.as_str()).collect();
            for t in &s.bootstrap {
                if t.with_workload && t.phase != Phase::Post {
                    issues.push(CatalogIssue::WithWorkloadNotPost {
                        service: name.clone(),
                        task: t.name.clone(),
                    });
                }
                if let BootstrapKind::KollaBootstrap { env, .. } = &t.task {
                    for (var, value) in env {
                        if let Err(e) = task_env_pieces(value) {
                            issues.push(CatalogIssue::UnknownPlaceholder {
                                service: name.clone(),
                                task: t.name.clone(),
                                env: var.clone(),
                                message: e.to_string(),
                            });
                        }
                    }
                }
                if let Some(var) = &t.when
                    && !known_condition(var)
                {
                    issues.push(CatalogIssue::UnknownTaskCondition {
                        service: name.clone(),
                        task: t.name.clone(),
                        var: var.clone(),
                    });
                }
                for need in &t.needs {
                    if !self.services.contains_key(need) {
                        issues.push(CatalogIssue::UnknownBootstrapNeed {
                            service: name.clone(),
                            task: t.name.clone(),
                            unknown: need.clone(),
                        });
                    }
                }
                for after in &t.after {
                    if !tasks.contains(after.as_str()) {
                        issues.push(CatalogIssue::UnknownBootstrapTask {
                            service: name.clone(),
                            task: t.name.clone(),
                            unknown: after.clone(),
                        });
                    } else if let Some(a) = s.bootstrap.iter().find(|a| &a.name == after)
                        && !phase_may_follow(t.phase, a.phase)
                    {
                        issues.push(CatalogIssue::PhaseOrder {
                            service: name.clone(),
                            task: t.name.clone(),
                            phase: t.phase,
                            after: after.clone(),
                            after_phase: a.phase,
                        });
                    }
                }
            }
        }
        if issues.is_empty() {
            Ok(())
        } else {
            Err(CatalogError::Invalid(issues))
        }
    }

    /// The catalog as YAML (the same shape it is read from).
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).unwrap_or_default()
    }
}

fn apply(s: &mut Service, o: ServiceOverlay) {
    if let Some(v) = o.project {
        s.project = v;
    }
    if let Some(v) = o.enable_flag {
        s.enable_flag = v;
    }
    if let Some(v) = o.role {
        s.role = v;
    }
    if let Some(v) = o.also_on {
        s.also_on = v;
    }
    if let Some(v) = o.kind {
        s.kind = v;
    }
    if let Some(v) = o.containers {
        s.containers = v;
    }
    if let Some(v) = o.ports {
        s.ports = v;
    }
    if let Some(v) = o.privileges {
        s.privileges = v;
    }
    if let Some(v) = o.volumes {
        s.volumes = v;
    }
    if let Some(v) = o.bootstrap {
        s.bootstrap = v;
    }
    if let Some(v) = o.depends_on {
        s.depends_on = v;
        // An overlay that changes only depends_on keeps the built-in install_after entries
        // that still name one of its services.
        if o.install_after.is_none() {
            let deps = &s.depends_on;
            s.install_after
                .retain(|e| deps.iter().any(|d| d == e.split('/').next().unwrap_or(e)));
        }
        if o.upgrade_before.is_none() {
            let deps = &s.depends_on;
            s.upgrade_before.retain(|e| deps.contains(e));
        }
    }
    if let Some(v) = o.install_after {
        s.install_after = v;
    }
    if let Some(v) = o.upgrade_before {
        s.upgrade_before = v;
    }
    if let Some(v) = o.only_kubernetes {
        s.only_kubernetes = Some(v);
    }
    if let Some(v) = o.public_gateway {
        s.public_gateway = v;
    }
}

#[cfg(test)]
mod tests;
