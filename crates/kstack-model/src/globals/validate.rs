//! The checks on the final values, after typing and derivation: every value (also of the
//! variables kstack does not type, since templates read them all) must be safe to write into
//! a config file, and the values that name things must be names Kubernetes and the registry
//! accept.
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::images::{Images, check_image_names};
use super::kolla::Issues;
use super::kubernetes::check_namespace;

/// Reports every string below `key` that holds a control character (a line break, a tab, ...);
/// returns whether there was one. Any globals.yml value can reach a rendered config file
/// (templates read every variable), where a line break would start new options.
fn control_characters(t: &mut Issues, key: &str, path: Option<String>, v: &Value) -> bool {
    match v {
        Value::String(s) => match s.chars().find(|c| c.is_control()) {
            Some(c) => {
                let what = match c {
                    '\n' | '\r' => "a line break".to_owned(),
                    '\t' => "a tab".to_owned(),
                    c => format!("the control character U+{:04X}", c as u32),
                };
                let block = s.ends_with('\n');
                t.push(
                    key,
                    path,
                    format!("the value contains {what}"),
                    if block {
                        "a YAML block scalar (`|` or `>`) ends with a line break: write the value on one line, or use `|-` / `>-`".into()
                    } else {
                        "remove it: values are written into line-based config files, where it would start a new line".into()
                    },
                );
                true
            }
            None => false,
        },
        Value::Array(a) => {
            let mut found = false;
            for (i, x) in a.iter().enumerate() {
                let sub = match &path {
                    Some(p) => format!("{p}[{i}]"),
                    None => format!("[{i}]"),
                };
                found |= control_characters(t, key, Some(sub), x);
            }
            found
        }
        Value::Object(m) => {
            let mut found = false;
            for (k, x) in m {
                let sub = match &path {
                    Some(p) => format!("{p}.{k}"),
                    None => k.clone(),
                };
                found |= control_characters(t, key, Some(sub), x);
            }
            found
        }
        _ => false,
    }
}

/// Checks the final values: no control characters in any value not already reported, then
/// the namespace and the image references against their grammars, leaving out the variables
/// already reported (one problem per value).
pub(super) fn final_values(
    t: &mut Issues,
    vars: &BTreeMap<String, Value>,
    namespace: &str,
    images: &Images,
) {
    let typed_badly: BTreeSet<String> = t.0.iter().map(|i| i.key.clone()).collect();
    let mut unprintable = BTreeSet::new();
    for (key, value) in vars {
        if !typed_badly.contains(key) && control_characters(t, key, None, value) {
            unprintable.insert(key.clone());
        }
    }
    let skip: BTreeSet<&String> = typed_badly.iter().chain(&unprintable).collect();
    check_namespace(t, &skip, namespace);
    check_image_names(t, vars, &skip, images);
}
