//! What the real 2025.1 services need from kstack's files, learnt by running them on the
//! rendered default cloud: a WSGI script Apache may serve.

use std::collections::BTreeSet;

use kstack_config::Config;
use kstack_model::globals::Globals;
use kstack_render::{Target, render_files};

fn config(globals: Globals) -> Config {
    kstack_config::testing::config(globals, &[])
}

// ---- Apache: the WSGI script must be servable -------------------------------------------------

/// The 2025.1 WSGI entry points (checked against the 2025.1 wheels: keystone 27.1.0 and
/// openstack-heat 24.1.2 install these `wsgi_scripts` into the venv's `bin`; Kolla's images
/// link `lib/python3` to the distribution's Python, so horizon's module has a fixed path).
const WSGI_SCRIPTS: &[(&str, &str)] = &[
    (
        "wsgi-keystone.conf",
        "/var/lib/kolla/venv/bin/keystone-wsgi-public",
    ),
    (
        "wsgi-heat-api.conf",
        "/var/lib/kolla/venv/bin/heat-wsgi-api",
    ),
    (
        "horizon.conf",
        "/var/lib/kolla/venv/lib/python3/site-packages/openstack_dashboard/wsgi.py",
    ),
];

/// Whether Apache grants access to `script` in `conf`: a `<Location "/">` granting all, or a
/// `<Directory>` holding the script's directory whose grant (inside a `<FilesMatch>` naming
/// the script, if any) is `Require all granted`.
fn grants(conf: &str, script: &str) -> bool {
    let (dir, name) = script.rsplit_once('/').unwrap();
    let mut blocks: Vec<(String, String)> = Vec::new(); // (opening line, body)
    let mut open: Vec<(String, String)> = Vec::new();
    for line in conf.lines().map(str::trim) {
        if line.starts_with("</") {
            if let Some((head, body)) = open.pop() {
                if let Some(parent) = open.last_mut() {
                    parent.1.push_str(&format!("{head}\n{body}\n{line}\n"));
                }
                blocks.push((head, body));
            }
        } else if line.starts_with('<') {
            open.push((line.to_owned(), String::new()));
        } else if let Some(cur) = open.last_mut() {
            cur.1.push_str(line);
            cur.1.push('\n');
        }
    }
    let arg = |head: &str| {
        head.trim_start_matches('<')
            .trim_end_matches('>')
            .split_once(' ')
            .map(|(_, a)| a.trim().trim_matches('"').to_owned())
            .unwrap_or_default()
    };
    blocks.iter().any(|(head, body)| {
        let granted = body.contains("Require all granted");
        if head.starts_with("<Location ") {
            return arg(head) == "/" && granted;
        }
        if !head.starts_with("<Directory ") {
            return false;
        }
        let d = arg(head);
        if !(dir == d || dir.starts_with(&format!("{}/", d.trim_end_matches('/')))) {
            return false;
        }
        if body.contains("<FilesMatch") {
            // `<FilesMatch "^name$">`: the grant must be inside one naming the script.
            body.lines()
                .filter(|l| l.starts_with("<FilesMatch"))
                .any(|l| arg(l).trim_start_matches('^').trim_end_matches('$') == name)
                && granted
        } else {
            granted
        }
    })
}

#[test]
fn every_apache_vhost_serves_a_2025_1_wsgi_script_it_grants_access_to() {
    let files = render_files(&config(Globals::default()), Target::Kubernetes).unwrap();
    let mut seen = BTreeSet::new();
    let mut denied = Vec::new();
    for cf in &files {
        for f in &cf.files {
            let Some(script) = f
                .content
                .lines()
                .find_map(|l| l.trim().strip_prefix("WSGIScriptAlias / "))
            else {
                continue;
            };
            let script = script.trim().trim_matches('"');
            let want = WSGI_SCRIPTS
                .iter()
                .find(|(n, _)| *n == f.name)
                .unwrap_or_else(|| panic!("{}: an Apache vhost this test does not know", f.name));
            if script != want.1 {
                denied.push(format!(
                    "{}: {script} is not the 2025.1 entry point {}",
                    f.name, want.1
                ));
            } else if !grants(&f.content, script) {
                denied.push(format!(
                    "{}/{}: Apache answers 403: nothing grants access to {script}",
                    cf.container, f.name
                ));
            }
            seen.insert(f.name.clone());
        }
    }
    assert!(denied.is_empty(), "{}", denied.join("\n"));
    assert_eq!(seen.len(), WSGI_SCRIPTS.len(), "{seen:?}");
}

#[test]
fn the_grant_check_can_fail() {
    let script = "/var/lib/kolla/venv/bin/keystone-wsgi-public";
    let bare = "<VirtualHost *:5000>\n    WSGIScriptAlias / /var/lib/kolla/venv/bin/keystone-wsgi-public\n</VirtualHost>\n";
    assert!(!grants(bare, script));
    let other = "<Directory \"/var/lib/kolla/venv/bin\">\n    <FilesMatch \"^heat-wsgi-api$\">\n        Require all granted\n    </FilesMatch>\n</Directory>\n";
    assert!(!grants(other, script));
    let ok = other.replace("heat-wsgi-api", "keystone-wsgi-public");
    assert!(grants(&ok, script));
}
