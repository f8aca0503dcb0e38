//! The embedded templates (`templates/<project>/<file>.j2`) and the minijinja environment
//! they render in: strict undefined, no value that starts a new line, the escaping filters of
//! [`crate::escape`] and `password("key")`; a template error names the template and its line.
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use minijinja::{Environment, UndefinedBehavior, Value};

use super::RenderError;
use crate::escape;
use crate::secrets::{SecretUse, Secrets};

/// The embedded templates, by name (`<project>/<file>.j2`).
const TEMPLATES: &[(&str, &str)] = &[
    (
        "common/macros.j2",
        include_str!("../../templates/common/macros.j2"),
    ),
    (
        "common/uwsgi.j2",
        include_str!("../../templates/common/uwsgi.j2"),
    ),
    (
        "mariadb/galera.cnf.j2",
        include_str!("../../templates/mariadb/galera.cnf.j2"),
    ),
    (
        "mariadb/mariadb-drain.sh.j2",
        include_str!("../../templates/mariadb/mariadb-drain.sh.j2"),
    ),
    (
        "mariadb/mariadb-monitor.sql.j2",
        include_str!("../../templates/mariadb/mariadb-monitor.sql.j2"),
    ),
    (
        "mariadb/mariadb-start.sh.j2",
        include_str!("../../templates/mariadb/mariadb-start.sh.j2"),
    ),
    (
        "rabbitmq/rabbitmq-env.conf.j2",
        include_str!("../../templates/rabbitmq/rabbitmq-env.conf.j2"),
    ),
    (
        "rabbitmq/rabbitmq.conf.j2",
        include_str!("../../templates/rabbitmq/rabbitmq.conf.j2"),
    ),
    (
        "rabbitmq/erl_inetrc.j2",
        include_str!("../../templates/rabbitmq/erl_inetrc.j2"),
    ),
    (
        "rabbitmq/advanced.config.j2",
        include_str!("../../templates/rabbitmq/advanced.config.j2"),
    ),
    (
        "rabbitmq/definitions.json.j2",
        include_str!("../../templates/rabbitmq/definitions.json.j2"),
    ),
    (
        "rabbitmq/enabled_plugins.j2",
        include_str!("../../templates/rabbitmq/enabled_plugins.j2"),
    ),
    (
        "rabbitmq/erlang.cookie.j2",
        include_str!("../../templates/rabbitmq/erlang.cookie.j2"),
    ),
    (
        "rabbitmq/rabbitmq-start.sh.j2",
        include_str!("../../templates/rabbitmq/rabbitmq-start.sh.j2"),
    ),
    (
        "keystone/keystone.conf.j2",
        include_str!("../../templates/keystone/keystone.conf.j2"),
    ),
    (
        "keystone/wsgi-keystone.conf.j2",
        include_str!("../../templates/keystone/wsgi-keystone.conf.j2"),
    ),
    (
        "keystone/keystone-startup.sh.j2",
        include_str!("../../templates/keystone/keystone-startup.sh.j2"),
    ),
    (
        "glance/glance-api.conf.j2",
        include_str!("../../templates/glance/glance-api.conf.j2"),
    ),
    (
        "placement/placement.conf.j2",
        include_str!("../../templates/placement/placement.conf.j2"),
    ),
    (
        "placement/placement-api-uwsgi.ini.j2",
        include_str!("../../templates/placement/placement-api-uwsgi.ini.j2"),
    ),
    (
        "nova/nova.conf.j2",
        include_str!("../../templates/nova/nova.conf.j2"),
    ),
    (
        "nova/nova-api-uwsgi.ini.j2",
        include_str!("../../templates/nova/nova-api-uwsgi.ini.j2"),
    ),
    (
        "nova/nova-metadata-uwsgi.ini.j2",
        include_str!("../../templates/nova/nova-metadata-uwsgi.ini.j2"),
    ),
    (
        "nova/libvirtd.conf.j2",
        include_str!("../../templates/nova/libvirtd.conf.j2"),
    ),
    (
        "nova/qemu.conf.j2",
        include_str!("../../templates/nova/qemu.conf.j2"),
    ),
    (
        "nova/sasl.conf.j2",
        include_str!("../../templates/nova/sasl.conf.j2"),
    ),
    (
        "nova/auth.conf.j2",
        include_str!("../../templates/nova/auth.conf.j2"),
    ),
    (
        "neutron/neutron.conf.j2",
        include_str!("../../templates/neutron/neutron.conf.j2"),
    ),
    (
        "neutron/ml2_conf.ini.j2",
        include_str!("../../templates/neutron/ml2_conf.ini.j2"),
    ),
    (
        "neutron/ovs-agent-start.sh.j2",
        include_str!("../../templates/neutron/ovs-agent-start.sh.j2"),
    ),
    (
        "neutron/openvswitch_agent.ini.j2",
        include_str!("../../templates/neutron/openvswitch_agent.ini.j2"),
    ),
    (
        "neutron/dhcp_agent.ini.j2",
        include_str!("../../templates/neutron/dhcp_agent.ini.j2"),
    ),
    (
        "neutron/dnsmasq.conf.j2",
        include_str!("../../templates/neutron/dnsmasq.conf.j2"),
    ),
    (
        "neutron/neutron-l3-agent-wrapper.sh.j2",
        include_str!("../../templates/neutron/neutron-l3-agent-wrapper.sh.j2"),
    ),
    (
        "neutron/l3_agent.ini.j2",
        include_str!("../../templates/neutron/l3_agent.ini.j2"),
    ),
    (
        "neutron/metadata_agent.ini.j2",
        include_str!("../../templates/neutron/metadata_agent.ini.j2"),
    ),
    (
        "nova/libvirt-sasl-user.sh.j2",
        include_str!("../../templates/nova/libvirt-sasl-user.sh.j2"),
    ),
    (
        "nova/nova-compute-drain.py.j2",
        include_str!("../../templates/nova/nova-compute-drain.py.j2"),
    ),
    (
        "nova/libvirt-start.sh.j2",
        include_str!("../../templates/nova/libvirt-start.sh.j2"),
    ),
    (
        "nova/libvirt-ceph-secret.xml.j2",
        include_str!("../../templates/nova/libvirt-ceph-secret.xml.j2"),
    ),
    (
        "nova/libvirt-ceph-secret.key.j2",
        include_str!("../../templates/nova/libvirt-ceph-secret.key.j2"),
    ),
    (
        "openvswitch/ovs-bridges.sh.j2",
        include_str!("../../templates/openvswitch/ovs-bridges.sh.j2"),
    ),
    (
        "openvswitch/ovs-db-settings.sh.j2",
        include_str!("../../templates/openvswitch/ovs-db-settings.sh.j2"),
    ),
    (
        "horizon/horizon.conf.j2",
        include_str!("../../templates/horizon/horizon.conf.j2"),
    ),
    (
        "horizon/_9998-kolla-settings.py.j2",
        include_str!("../../templates/horizon/_9998-kolla-settings.py.j2"),
    ),
    (
        "horizon/_9999-custom-settings.py.j2",
        include_str!("../../templates/horizon/_9999-custom-settings.py.j2"),
    ),
    (
        "heat/heat.conf.j2",
        include_str!("../../templates/heat/heat.conf.j2"),
    ),
    (
        "heat/wsgi-heat-api.conf.j2",
        include_str!("../../templates/heat/wsgi-heat-api.conf.j2"),
    ),
    (
        "heat/wsgi-heat-api-cfn.conf.j2",
        include_str!("../../templates/heat/wsgi-heat-api-cfn.conf.j2"),
    ),
    (
        "victoria-logs/victoria-logs-start.sh.j2",
        include_str!("../../templates/victoria-logs/victoria-logs-start.sh.j2"),
    ),
    (
        "vlagent/vlagent-start.sh.j2",
        include_str!("../../templates/vlagent/vlagent-start.sh.j2"),
    ),
    (
        "cinder/cinder.conf.j2",
        include_str!("../../templates/cinder/cinder.conf.j2"),
    ),
    (
        "cinder/cinder-api-uwsgi.ini.j2",
        include_str!("../../templates/cinder/cinder-api-uwsgi.ini.j2"),
    ),
    (
        "haproxy/haproxy.cfg.j2",
        include_str!("../../templates/haproxy/haproxy.cfg.j2"),
    ),
    (
        "haproxy/haproxy.pem.j2",
        include_str!("../../templates/haproxy/haproxy.pem.j2"),
    ),
    // The operator's Ceph client files, written as they are (a keyring holds a key: secret).
    (
        "cinder/ceph.conf.j2",
        include_str!("../../templates/cinder/ceph.conf.j2"),
    ),
    (
        "cinder/ceph.keyring.j2",
        include_str!("../../templates/cinder/ceph.keyring.j2"),
    ),
];

/// The auto-escape mode of every template (see [`Templates::new`]).
const LINE_VALUES: &str = "kstack-line-values";

/// Names of the embedded templates, sorted.
pub fn template_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = TEMPLATES.iter().map(|(n, _)| *n).collect();
    v.sort_unstable();
    v
}

/// An environment with kstack's settings (strict undefined, the `oslo` filter) and the given
/// templates. Syntax errors are kept per template and reported when it is rendered.
pub(crate) struct Templates {
    env: Environment<'static>,
    broken: BTreeMap<&'static str, minijinja::Error>,
}

impl Templates {
    pub(crate) fn new(sources: &[(&'static str, &'static str)]) -> Templates {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // Config files are not HTML or JSON documents: no HTML or JSON escaping, even for
        // `definitions.json` (its values go through `tojson`). The custom mode only makes macro
        // output template text (a safe string), so the formatter below tells it from values.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Custom(LINE_VALUES.into()));
        // Every value a `{{ }}` writes stays on its line: a line break (or any other control
        // character) in a globals.yml or passwords.yml value would start new lines, i.e. new
        // options, in the INI files. Refused, naming the template line, never the value.
        // Template text and macro output (safe strings) are written as they are.
        env.set_formatter(|out, _state, value| {
            if value.is_safe() {
                return write!(out, "{value}").map_err(minijinja::Error::from);
            }
            let text = value.to_string();
            if text.contains(char::is_control) {
                return Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    "the value written here holds a line break or another control character, \
                     which would start a new line in the file; kstack refuses to write it (check \
                     the globals.yml or passwords.yml value this line writes)",
                ));
            }
            out.write_str(&text).map_err(minijinja::Error::from)
        });
        if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()
        {
            env.set_syntax(syntax);
        }
        // How a value is written in each format (see `crate::escape`): an oslo.config value,
        // a MariaDB string literal, a MySQL option file value, a GLib key file value, a URL's
        // user or password.
        env.add_filter("oslo", |s: String| escape::oslo(&s));
        env.add_filter("sql", |s: String| escape::sql(&s));
        env.add_filter("option_file", |s: String| escape::option_file(&s));
        env.add_filter("keyfile", |s: String| escape::keyfile(&s));
        env.add_filter("userinfo", |s: String| escape::url_userinfo(&s));
        // `password("key")`: a passwords.yml value, or an error naming the key at the line of
        // the template that asks for it (macro arguments are not checked where they are passed).
        env.add_function(
            "password",
            |state: &minijinja::State, key: String| -> Result<Value, minijinja::Error> {
                match state.lookup(&key) {
                    Some(v) if !v.is_undefined() => Ok(v),
                    _ => Err(minijinja::Error::new(
                        minijinja::ErrorKind::UndefinedError,
                        format!("passwords.yml has no value for `{key}`; run `kstack genpwd`"),
                    )),
                }
            },
        );
        let mut broken = BTreeMap::new();
        for (name, source) in sources {
            if let Err(e) = env.add_template(name, source) {
                broken.insert(*name, e);
            }
        }
        Templates { env, broken }
    }

    pub(super) fn builtin() -> &'static Templates {
        static T: OnceLock<Templates> = OnceLock::new();
        T.get_or_init(|| Templates::new(TEMPLATES))
    }

    pub(super) fn has(&self, name: &str) -> bool {
        self.broken.contains_key(name) || self.env.get_template(name).is_ok()
    }

    /// Renders one template with `ctx` and the `secrets`; errors carry the template name (of
    /// the macro file, when the error is inside a macro) and line. The output is secret when
    /// the template wrote any of the secrets.
    pub(crate) fn render(
        &self,
        name: &str,
        ctx: &Value,
        secrets: &Secrets,
    ) -> Result<Output, RenderError> {
        if let Some(e) = self.broken.get(name) {
            return Err(template_error(name, e));
        }
        let t = self
            .env
            .get_template(name)
            .map_err(|e| template_error(name, &e))?;
        let used = Arc::new(SecretUse::default());
        // Names in `ctx` win; the context never has a name in both (see `TemplateContext`).
        let ctx = minijinja::value::merge_maps([secrets.vars(&used), ctx.clone()]);
        let content = t.render(ctx).map_err(|e| template_error(name, &e))?;
        Ok(Output {
            content,
            secret: used.used(),
        })
    }
}

/// One rendered template.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) content: String,
    /// The template wrote a secret value.
    pub(crate) secret: bool,
}

fn template_error(name: &str, e: &minijinja::Error) -> RenderError {
    let mut message = e
        .detail()
        .map_or_else(|| e.kind().to_string(), str::to_owned);
    if e.kind() == minijinja::ErrorKind::UndefinedError && !message.contains("passwords.yml") {
        message.push_str(
            " (a globals.yml variable or a passwords.yml value the template needs is missing)",
        );
    }
    RenderError::Template {
        template: e.name().unwrap_or(name).to_owned(),
        line: e.line().unwrap_or(0),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_errors_name_template_and_line() {
        let t = Templates::new(&[
            ("t/ok.j2", "a\n{{ defined }}\nc {{ missing }}\n"),
            ("t/syntax.j2", "a\nb {% if %}\n"),
        ]);
        let ctx = Value::from(BTreeMap::from([("defined".to_owned(), Value::from(1))]));
        let e = t.render("t/ok.j2", &ctx, &Secrets::default()).unwrap_err();
        assert_eq!(
            e,
            RenderError::Template {
                template: "t/ok.j2".into(),
                line: 3,
                message: "`missing` is undefined (a globals.yml variable or a passwords.yml value the template needs is missing)".into(),
            }
        );
        let RenderError::Template { template, line, .. } = t
            .render("t/syntax.j2", &ctx, &Secrets::default())
            .unwrap_err()
        else {
            panic!("a template error")
        };
        assert_eq!((template.as_str(), line), ("t/syntax.j2", 2));
    }

    #[test]
    fn every_builtin_template_compiles() {
        let t = Templates::builtin();
        assert!(
            t.broken.is_empty(),
            "{:?}",
            t.broken.keys().collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_value_never_starts_a_new_line() {
        let t = Templates::new(&[
            (
                "t/m.j2",
                "{% macro block(v) %}[a]\nk = {{ v }}\n{% endmacro %}",
            ),
            (
                "t/t.j2",
                "{% from 't/m.j2' import block %}[DEFAULT]\nregion = {{ v }}\n{{ block('ok') }}",
            ),
            ("t/s.j2", "[DEFAULT]\n\npassword = {{ pw|oslo }}\n"),
        ]);
        let ctx = |v: &str| Value::from(BTreeMap::from([("v".to_owned(), Value::from(v))]));
        // Template text and macro output span lines; a value stays on its own.
        let out = t
            .render("t/t.j2", &ctx("RegionOne"), &Secrets::default())
            .unwrap();
        assert_eq!(out.content, "[DEFAULT]\nregion = RegionOne\n[a]\nk = ok\n");
        for bad in [
            "One\n[DEFAULT]\ndebug = True",
            "One\r",
            "One\tTwo",
            "One\u{7f}",
        ] {
            let e = t
                .render("t/t.j2", &ctx(bad), &Secrets::default())
                .unwrap_err();
            let RenderError::Template {
                template,
                line,
                message,
            } = &e
            else {
                panic!("{e:?}")
            };
            assert_eq!((template.as_str(), *line), ("t/t.j2", 2), "{bad:?}");
            assert!(
                message.contains("line break") && !message.contains("One"),
                "{message}"
            );
        }
        // A password too, and the error does not show it.
        let secrets = Secrets::new(BTreeMap::from([(
            "pw".to_owned(),
            Arc::from("Sup3rSecret\n[DEFAULT]\ndebug = True"),
        )]));
        let e = t.render("t/s.j2", &ctx(""), &secrets).unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(
            text.contains("line 3") && !text.contains("Sup3rSecret"),
            "{text}"
        );
    }

    #[test]
    fn oslo_filter_escapes_dollars() {
        let t = Templates::new(&[("t.j2", "{{ v|oslo }}")]);
        let ctx = Value::from(BTreeMap::from([("v".to_owned(), Value::from("a$b"))]));
        assert_eq!(
            t.render("t.j2", &ctx, &Secrets::default()).unwrap().content,
            "a$$b"
        );
    }
}
