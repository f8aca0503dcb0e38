//! Which rendered file carries a password, known while it is rendered.
//!
//! The passwords.yml values (and values made from them, such as the RabbitMQ transport URL)
//! never enter a template context as strings. Each render gets its own [`SecretVars`]: a map
//! from key to [`SecretValue`], all bound to one [`SecretUse`]. A [`SecretValue`] writes its
//! text only through [`Object::render`], which is what minijinja calls whenever a value becomes
//! text: printed by `{{ }}`, passed to a filter that takes a string (`oslo`, `sql`,
//! `urlencode`, `tojson`, ...), joined with `~`, compared. Each of those marks the render's
//! [`SecretUse`]; a file whose render is marked is a Secret on Kubernetes and a 0600 file on
//! Compose, whatever the template did to the value (escape, quote, URL-encode, concatenate).
//!
//! A value that is only passed along (to a macro, through `password("key")`, into a closure
//! at `import`) is not text yet and marks nothing until it is written. A filter that needs a
//! `&str` view of its argument refuses a secret ("value is not a string"): that fails the
//! render instead of writing a password unseen.
//!
//! Nothing here searches rendered output for a password, so a password that a template
//! escapes is found as surely as one written raw. The `Debug` form of every type here is
//! redacted: minijinja may put a value's `Debug` form into an error message.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use minijinja::Value;
use minijinja::value::{Enumerator, Object, ObjectRepr};

/// Whether one render wrote a secret.
#[derive(Debug, Default)]
pub(crate) struct SecretUse(AtomicBool);

impl SecretUse {
    pub(crate) fn used(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The secret values of a cloud by template variable name: passwords.yml values and values made
/// from them. Shared by every render of one cloud.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    values: Arc<BTreeMap<String, Arc<str>>>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

impl Secrets {
    pub(crate) fn new(values: BTreeMap<String, Arc<str>>) -> Secrets {
        Secrets {
            values: Arc::new(values),
        }
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The variables of one render, bound to `used`.
    pub(crate) fn vars(&self, used: &Arc<SecretUse>) -> Value {
        Value::from_object(SecretVars {
            values: Arc::clone(&self.values),
            used: Arc::clone(used),
        })
    }
}

/// The secret variables of one render: a map of [`SecretValue`]s bound to its [`SecretUse`].
struct SecretVars {
    values: Arc<BTreeMap<String, Arc<str>>>,
    used: Arc<SecretUse>,
}

impl fmt::Debug for SecretVars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

impl Object for SecretVars {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let value = self.values.get(key.as_str()?)?;
        Some(Value::from_object(SecretValue {
            value: Arc::clone(value),
            used: Arc::clone(&self.used),
        }))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let keys: Vec<Value> = self
            .values
            .keys()
            .map(|k| Value::from(k.as_str()))
            .collect();
        Enumerator::Iter(Box::new(keys.into_iter()))
    }
}

/// One secret in a template: written as its text, and marking its render when it is.
struct SecretValue {
    value: Arc<str>,
    used: Arc<SecretUse>,
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

impl Object for SecretValue {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn is_true(self: &Arc<Self>) -> bool {
        !self.value.is_empty()
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.used.mark();
        f.write_str(&self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::{Environment, context};

    fn render(source: &str) -> Result<(String, bool), minijinja::Error> {
        let mut env = Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.add_filter("oslo", |s: String| s.replace('$', "$$"));
        env.add_template(
            "m.j2",
            "{% macro show(v) %}{{ v }}{% endmacro %}{% macro keep(v) %}kept{% endmacro %}\
             {% macro global() %}{{ pw }}{% endmacro %}",
        )?;
        env.add_template("t.j2", source)?;
        let secrets = Secrets::new(BTreeMap::from([("pw".to_owned(), Arc::from("a$b\"c"))]));
        let used = Arc::new(SecretUse::default());
        let ctx = minijinja::value::merge_maps([
            secrets.vars(&used),
            context! { plain => "x", pw_name => "pw" },
        ]);
        let out = env.get_template("t.j2")?.render(ctx)?;
        Ok((out, used.used()))
    }

    #[test]
    fn every_way_of_writing_a_secret_marks_the_render() {
        for (source, want) in [
            ("{{ pw }}", "a$b\"c"),
            ("{{ pw|oslo }}", "a$$b\"c"),
            ("{{ pw|urlencode }}", "a%24b%22c"),
            ("{{ pw|tojson }}", "\"a$b\\\"c\""),
            ("{{ 'u:' ~ pw }}", "u:a$b\"c"),
            ("{{ pw|string|upper }}", "A$B\"C"),
            ("{% set x = pw %}{{ x }}", "a$b\"c"),
            ("{% from 'm.j2' import show %}{{ show(pw) }}", "a$b\"c"),
            ("{% from 'm.j2' import global %}{{ global() }}", "a$b\"c"),
        ] {
            let (out, used) = render(source).unwrap();
            assert_eq!(out, want, "{source}");
            assert!(used, "{source} marks the render");
        }
    }

    #[test]
    fn a_secret_only_passed_along_marks_nothing() {
        for source in [
            "{{ plain }}",
            "{% if pw %}set{% endif %}",
            "{% from 'm.j2' import keep, global %}{{ keep(pw) }}",
            "{% set x = pw %}{{ plain }}",
            "{{ pw_name }}",
        ] {
            let (_, used) = render(source).unwrap();
            assert!(!used, "{source} marks nothing");
        }
    }

    #[test]
    fn debug_forms_never_show_the_value() {
        let secrets = Secrets::new(BTreeMap::from([("pw".to_owned(), Arc::from("hunter2"))]));
        assert_eq!(format!("{secrets:?}"), "{\"pw\"}");
        let v = SecretValue {
            value: Arc::from("hunter2"),
            used: Arc::default(),
        };
        assert_eq!(format!("{v:?}"), "<secret>");
    }

    #[test]
    fn errors_about_a_secret_never_show_it() {
        for source in [
            "{{ pw + 1 }}",
            "{{ pw|int }}",
            "{{ pw|length }}",
            "{% for c in pw %}{% endfor %}",
            "{{ pw.attr }}",
            "{{ pw[0] }}",
            "{{ pw|split(',') }}",
        ] {
            let e = render(source).unwrap_err();
            let text = format!("{e} {:?} {}", e.detail(), e.kind());
            assert!(!text.contains("a$b"), "{source}: {text}");
        }
    }
}
