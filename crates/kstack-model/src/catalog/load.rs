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
    #[error("service `{service}` has no containers")]
    NoContainers { service: String },
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
                    kind,
                    containers,
                    ports: o.ports.unwrap_or_default(),
                    privileges: o.privileges.unwrap_or_default(),
                    volumes: o.volumes.unwrap_or_default(),
                    bootstrap: o.bootstrap.unwrap_or_default(),
                    depends_on: o.depends_on.unwrap_or_default(),
                    install_after: o.install_after.unwrap_or_default(),
                    only_kubernetes: o.only_kubernetes,
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
    pub fn port(&self, service: &str, name: &str) -> Option<u16> {
        self.services
            .get(service)?
            .ports
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.port)
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
        for (name, s) in &self.services {
            if s.containers.is_empty() {
                issues.push(CatalogIssue::NoContainers {
                    service: name.clone(),
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
                    && !STOP_SIGNALS.contains(&sig.as_str())
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
    }
    if let Some(v) = o.install_after {
        s.install_after = v;
    }
    if let Some(v) = o.only_kubernetes {
        s.only_kubernetes = Some(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;

    const EXPECTED: [&str; 28] = [
        "mariadb",
        "rabbitmq",
        "memcached",
        "keystone",
        "glance-api",
        "placement-api",
        "nova-api",
        "nova-scheduler",
        "nova-conductor",
        "nova-novncproxy",
        "nova-compute",
        "nova-libvirt",
        "neutron-server",
        "neutron-openvswitch-agent",
        "neutron-dhcp-agent",
        "neutron-l3-agent",
        "neutron-metadata-agent",
        "openvswitch-db-server",
        "openvswitch-vswitchd",
        "horizon",
        "heat-api",
        "heat-api-cfn",
        "heat-engine",
        "cinder-api",
        "cinder-scheduler",
        "cinder-volume",
        "victoria-logs",
        "vlagent",
    ];

    fn builtin() -> Catalog {
        Catalog::builtin().unwrap_or_else(|e| panic!("built-in catalog: {e}"))
    }

    #[test]
    fn wsgi_servers_are_the_apache_and_uwsgi_containers() {
        let c = builtin();
        let mut wsgi: Vec<&str> = c
            .services
            .values()
            .flat_map(|s| &s.containers)
            .filter(|c| c.serves_wsgi())
            .map(|c| c.name.as_str())
            .collect();
        wsgi.sort_unstable();
        assert_eq!(
            wsgi,
            [
                "cinder-api",
                "heat-api",
                "heat-api-cfn",
                "horizon",
                "keystone",
                "nova-api",
                "nova-metadata",
                "placement-api"
            ]
        );
    }

    #[test]
    fn builtin_has_exactly_the_expected_services() {
        let c = builtin();
        let names: BTreeSet<&str> = c.services.keys().map(String::as_str).collect();
        let expected: BTreeSet<&str> = EXPECTED.into_iter().collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn every_dependency_names_a_real_service() {
        let c = builtin();
        for (name, s) in &c.services {
            for d in s
                .depends_on
                .iter()
                .chain(s.bootstrap.iter().flat_map(|t| &t.needs))
            {
                assert!(c.services.contains_key(d), "{name} depends on unknown {d}");
                assert_ne!(d, name, "{name} depends on itself");
            }
        }
    }

    #[test]
    fn builtin_graph_is_acyclic_and_starts_with_infrastructure() {
        let g = Graph::from_catalog(&builtin(), |_| true);
        assert_eq!(g.find_cycle(), None);
        let levels = g.levels().unwrap();
        assert_eq!(
            levels[0],
            [
                "mariadb",
                "memcached",
                "nova-libvirt",
                "openvswitch-db-server",
                "rabbitmq",
                "victoria-logs"
            ]
        );
        assert_eq!(levels[1], ["keystone", "openvswitch-vswitchd", "vlagent"]);
    }

    #[test]
    fn workload_kinds_follow_the_rules() {
        let c = builtin();
        for (name, s) in &c.services {
            let want = match name.as_str() {
                // Stores, each pod with its own data and name.
                "mariadb" | "rabbitmq" | "memcached" | "victoria-logs" => WorkloadKind::StatefulSet,
                // One per node.
                n if n.starts_with("openvswitch")
                    || n.ends_with("-agent")
                    || n == "vlagent"
                    || n == "nova-compute"
                    || n == "nova-libvirt"
                    || n == "cinder-volume" =>
                {
                    WorkloadKind::DaemonSet
                }
                _ => WorkloadKind::Deployment,
            };
            assert_eq!(s.kind, want, "{name}");
        }
    }

    #[test]
    fn healthchecks_use_kolla_ansible_default_timings() {
        let c = builtin();
        for (name, s) in &c.services {
            for ct in &s.containers {
                let h = ct
                    .healthcheck
                    .as_ref()
                    .unwrap_or_else(|| panic!("{name}/{}", ct.name));
                // One exception, said in the catalog: RabbitMQ's check (six Erlang CLI runs)
                // gets 90 s, as an operator sets rabbitmq_healthcheck_timeout.
                let timeout = if name == "rabbitmq" { 90 } else { 30 };
                assert_eq!(
                    (
                        h.interval_secs,
                        h.timeout_secs,
                        h.retries,
                        h.start_period_secs
                    ),
                    (30, timeout, 3, 5),
                    "{name}"
                );
            }
        }
        let keystone = &c.services["keystone"].containers[0];
        assert_eq!(
            keystone.healthcheck.as_ref().unwrap().test,
            HealthTest::Http {
                port: 5000,
                path: "/".into()
            }
        );
    }

    #[test]
    fn start_intervals_are_short_for_http_checks_and_longer_for_commands() {
        let c = Catalog::builtin().unwrap();
        let check = |s: &str| c.services[s].containers[0].healthcheck.clone().unwrap();
        assert_eq!(check("keystone").start_interval(), 2);
        assert_eq!(check("rabbitmq").start_interval(), 5);
        let mut h = check("keystone");
        h.start_interval_secs = Some(7);
        assert_eq!(h.start_interval(), 7);
        let parsed: Healthcheck = serde_saphyr::from_str(
            "test: { http: { port: 1, path: / } }\nstart_interval_secs: 3\n",
        )
        .unwrap();
        assert_eq!(parsed.start_interval(), 3);
    }

    #[test]
    fn privileges_only_where_the_reference_needs_them() {
        let c = builtin();
        let privileged: BTreeSet<&str> = c
            .services
            .iter()
            .filter(|(_, s)| s.privileges.privileged)
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(
            privileged,
            BTreeSet::from([
                "cinder-volume",
                "neutron-dhcp-agent",
                "neutron-l3-agent",
                "neutron-metadata-agent",
                "neutron-openvswitch-agent",
                "nova-api",
                "nova-compute",
                "nova-libvirt",
                "openvswitch-vswitchd",
            ])
        );
        assert!(c.services["nova-libvirt"].privileges.host_pid);
        assert!(c.services["nova-compute"].privileges.host_ipc);
        assert!(!c.services["keystone"].privileges.host_network);
    }

    #[test]
    fn every_data_volume_a_non_root_container_writes_is_chowned_to_its_user() {
        let c = builtin();
        let mut checked = 0;
        for (name, s) in &c.services {
            for ct in s.containers.iter().filter(|ct| ct.user != "root") {
                for v in &s.volumes {
                    // Claims, and host directories kstack keeps state in; not the host's own
                    // /dev, /run, /lib/modules, /etc/iscsi.
                    let data = match &v.kind {
                        VolumeKind::PersistentClaim { .. }
                        | VolumeKind::SharedEmptyDir
                        | VolumeKind::KeyRepository { .. } => true,
                        VolumeKind::HostPath { path } => path.starts_with("/var/lib/kstack/"),
                    };
                    // libvirtd's state, written by nova-libvirt (root); nova-compute reads it.
                    let other_owner = (name.as_str(), v.mount_path.as_str())
                        == ("nova-compute", "/var/lib/libvirt");
                    if !data || v.read_only || other_owner {
                        continue;
                    }
                    let p = ct
                        .permissions
                        .iter()
                        .find(|p| p.path == v.mount_path)
                        .unwrap_or_else(|| {
                            panic!("{name}/{}: nothing chowns {}", ct.name, v.mount_path)
                        });
                    assert_eq!(
                        p.owner.split(':').next(),
                        Some(ct.user.as_str()),
                        "{name}/{}",
                        ct.name
                    );
                    checked += 1;
                }
            }
        }
        // Keystone's two key repositories and the log store's claim among them.
        assert_eq!(checked, 11);
    }

    #[test]
    fn distribution_facts_and_owners_are_checked() {
        let text = BUILTIN_YAML
            .replace(
                "{apache_conf_dir}/wsgi-keystone.conf",
                "{apache_dir}/wsgi-keystone.conf",
            )
            .replace("owner: \"glance:glance\"", "owner: glance");
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "service `glance-api`, container `glance-api`: permissions owner `glance` for `/var/lib/glance` is not `user:group`\n\
                 service `keystone`, container `keystone`: config file `wsgi-keystone.conf` dest: unknown fact `{{apache_dir}}`; known: {}, {}",
                crate::distro::FACTS.join(", "),
                crate::distro::TARGET_FACTS.join(", ")
            )
        );
    }

    #[test]
    fn yaml_round_trips() {
        let c = builtin();
        let again = Catalog::from_yaml("round trip", &c.to_yaml()).unwrap();
        assert_eq!(c, again);
    }

    #[test]
    fn overlay_replaces_fields_and_adds_services() {
        let overlay = Catalog::overlay_from_yaml(
            "ops.yaml",
            r#"
services:
  horizon:
    depends_on: [keystone]
  barbican-api:
    project: barbican
    enable_flag: enable_barbican
    role: control
    kind: Deployment
    containers:
      - { name: barbican-api, image: barbican-api, command: uwsgi /etc/barbican/barbican-api-uwsgi.ini, user: barbican }
    depends_on: [keystone]
"#,
        )
        .unwrap();
        let merged = Catalog::merge(builtin(), overlay).unwrap();
        assert_eq!(merged.services["horizon"].depends_on, ["keystone"]);
        assert_eq!(
            merged.services["horizon"].ports[0].port, 80,
            "other fields kept"
        );
        assert_eq!(merged.services["barbican-api"].role, Role::Control);
        assert_eq!(merged.services.len(), 29);
    }

    #[test]
    fn an_overlay_dropping_a_port_kstack_addresses_is_refused() {
        // The operator lists keystone's ports without `api`: no number is assumed for it.
        let overlay = Catalog::overlay_from_yaml(
            "ops.yaml",
            "services:\n  keystone:\n    ports: [{ name: public, port: 5000 }]\n",
        )
        .unwrap();
        let err = Catalog::merge(builtin(), overlay).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service `keystone` has no port named `api`, which kstack addresses it by: add `{ name: api, port: <number> }` to `services.keystone.ports` (an operator catalog's `ports` replaces the whole built-in list)"
        );
        // Every port in the table is declared by the built-in catalog.
        let c = builtin();
        for (service, port) in ADDRESSED_PORTS {
            assert!(c.port(service, port).is_some(), "{service}/{port}");
        }
    }

    #[test]
    fn overlay_with_unknown_dependency_names_both() {
        let overlay = Catalog::overlay_from_yaml(
            "ops.yaml",
            "services:\n  heat-engine:\n    depends_on: [heat-api, nova-cells]\n",
        )
        .unwrap();
        let err = Catalog::merge(builtin(), overlay).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service `heat-engine` depends on unknown service `nova-cells`"
        );
    }

    #[test]
    fn new_service_must_give_required_fields() {
        let overlay = Catalog::overlay_from_yaml(
            "ops.yaml",
            "services:\n  octavia-api:\n    project: octavia\n    role: control\n",
        )
        .unwrap();
        let err = Catalog::merge(builtin(), overlay).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service `octavia-api` is new in the operator catalog and lacks field `enable_flag`\n\
             service `octavia-api` is new in the operator catalog and lacks field `kind`\n\
             service `octavia-api` is new in the operator catalog and lacks field `containers`"
        );
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err =
            Catalog::overlay_from_yaml("ops.yaml", "services:\n  horizon:\n    replicas: 3\n")
                .unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("ops.yaml: "), "{msg}");
        assert!(msg.contains("replicas"), "{msg}");
        let err = Catalog::from_yaml("x", &BUILTIN_YAML.replace("user: mysql", "usr: mysql"))
            .unwrap_err();
        assert!(err.to_string().contains("usr"), "{err}");
    }

    #[test]
    fn install_after_names_only_dependencies_and_their_tasks() {
        for (bad, says) in [
            (
                "install_after: [nova-api/cell, rabbitmq]",
                "service `nova-conductor`: install_after entry `nova-api/cell` names task `cell`, which `nova-api` does not have",
            ),
            (
                "install_after: [nova-api/cells, keystone]",
                "service `nova-conductor`: install_after entry `keystone` names `keystone`, which is not in depends_on",
            ),
        ] {
            let text =
                BUILTIN_YAML.replace("install_after: [nova-api/cells, nova-api/register, placement-api, mariadb, rabbitmq]", bad);
            assert_ne!(text, BUILTIN_YAML);
            let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
            assert!(err.starts_with(says), "{err}");
        }
        let text = BUILTIN_YAML.replace(
            "phase: post\n        # It polls for the computes' service records, so it starts with their pods.\n        with_workload: true",
            "with_workload: true",
        );
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert!(
            err.starts_with("service `nova-compute`: bootstrap task `discover-hosts` has with_workload but is not a `post` task"),
            "{err}"
        );
    }

    #[test]
    fn an_overlay_changing_depends_on_keeps_the_install_after_entries_it_still_names() {
        let overlay = Catalog::overlay_from_yaml(
            "ops.yaml",
            "services:\n  nova-conductor:\n    depends_on: [nova-api, rabbitmq]\n",
        )
        .unwrap();
        let c = Catalog::merge(builtin(), overlay).unwrap();
        assert_eq!(
            c.services["nova-conductor"].install_after,
            ["nova-api/cells", "nova-api/register", "rabbitmq"]
        );
    }

    #[test]
    fn unknown_bootstrap_task_is_reported() {
        let text = BUILTIN_YAML.replace(
            "after: [db-create]\n        phase: install\n      - name: db-expand\n        task: { command: { command: [kolla_start], env: { KOLLA_UPGRADE: \"\", GLANCE",
            "after: [db-creat]\n        phase: install\n      - name: db-expand\n        task: { command: { command: [kolla_start], env: { KOLLA_UPGRADE: \"\", GLANCE",
        );
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service `glance-api`: bootstrap task `db-sync` runs after unknown task `db-creat`"
        );
    }

    #[test]
    fn a_task_after_one_of_a_later_phase_is_reported() {
        // glance's register (phase always) after its contract migration would never run on
        // install.
        let text = BUILTIN_YAML.replace(
            "service_type: image, endpoints: [{ port: 9292 }] } }\n        needs: [keystone]",
            "service_type: image, endpoints: [{ port: 9292 }] } }\n        needs: [keystone]\n        after: [db-contract]",
        );
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert!(
            err.contains(
                "bootstrap task `register` (phase always) runs after `db-contract` (phase contract)"
            ),
            "{err}"
        );
        // The built-in catalog has every phase, in order.
        let c = Catalog::builtin().unwrap();
        let phases: BTreeSet<Phase> = c
            .services
            .values()
            .flat_map(|s| s.bootstrap.iter().map(|t| t.phase))
            .collect();
        assert_eq!(phases.len(), 5, "{phases:?}");
    }

    #[test]
    fn a_bootstrap_env_placeholder_kstack_does_not_fill_is_reported() {
        let text = BUILTIN_YAML.replace("{keystone_admin_project}", "{keystone_admin_tenant}");
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "service `heat-api`: bootstrap task `db-sync`, env `OS_PROJECT_NAME`: `{{keystone_admin_tenant}}` is not a value kstack fills; known: {}",
                TASK_ENV_PLACEHOLDERS.join(", ")
            )
        );
        assert_eq!(
            task_env_pieces("{keystone_internal_url}/v3 in {openstack_region_name}").unwrap(),
            [
                EnvPiece::Placeholder("keystone_internal_url"),
                EnvPiece::Text("/v3 in "),
                EnvPiece::Placeholder("openstack_region_name"),
            ]
        );
        assert_eq!(task_env_pieces("60").unwrap(), [EnvPiece::Text("60")]);
        assert_eq!(
            task_env_pieces("{keystone_admin_user").unwrap_err().name,
            "keystone_admin_user"
        );
        // Every placeholder is used by the built-in catalog.
        let c = builtin();
        for p in TASK_ENV_PLACEHOLDERS {
            let used = c.services.values().flat_map(|s| &s.bootstrap).any(|t| {
                matches!(&t.task, BootstrapKind::KollaBootstrap { env, .. }
                    if env.values().any(|v| v.contains(&format!("{{{p}}}"))))
            });
            assert!(used, "{p}");
        }
    }

    #[test]
    fn a_config_file_only_some_clouds_get_names_a_boolean_setting() {
        let text = BUILTIN_YAML.replace("when: cinder_backend_ceph", "when: cinder_backend_cepf");
        assert_ne!(text, BUILTIN_YAML);
        let err = Catalog::from_yaml("x", &text).unwrap_err().to_string();
        assert!(
            err.contains("config file `ceph.conf` has `when: cinder_backend_cepf`, which is not a boolean setting kstack knows"),
            "{err}"
        );

        let files = |c: &Catalog| -> Vec<String> {
            c.services["cinder-volume"].containers[0]
                .config_files
                .iter()
                .map(|f| f.template.clone())
                .collect()
        };
        let mut c = Catalog::builtin().unwrap();
        assert_eq!(files(&c), ["cinder.conf", "ceph.conf", "ceph.keyring"]);
        let mut vars = crate::globals::defaults();
        c.apply_conditions(&vars);
        assert_eq!(files(&c), ["cinder.conf"]);
        let mut c = Catalog::builtin().unwrap();
        vars.insert("cinder_backend_ceph".into(), serde_json::json!("yes"));
        c.apply_conditions(&vars);
        assert_eq!(files(&c), ["cinder.conf", "ceph.conf", "ceph.keyring"]);
    }
}
