//! Cinder's volumes in an external Ceph cluster (`cinder_backend_ceph`): the operator's
//! `ceph.conf` and keyring reach cinder-volume as they are, the keyring only through a Secret,
//! and cinder.conf gets the RBD backend; with the setting off nothing of it is rendered.

use kstack_config::Config;
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::{ContainerFiles, Object, Target, kubernetes, render_files};

const CEPH_CONF: &str =
    "[global]\n\tfsid = 5cc463da-cd3f-447c-bc3a-cd1e8720331a\n\tmon_host = 10.245.0.1\n";
const KEYRING: &str = "[client.cinder]\n\tkey = AQBxTbRdvsG3JxAA+mYGYlnJrHd64fc5Yx1tuQ==\n";

fn config(globals: serde_json::Value, with_files: bool) -> Config {
    let serde_json::Value::Object(m) = globals else {
        unreachable!()
    };
    let files = [
        ("cinder/ceph.conf", CEPH_CONF),
        ("cinder/cinder-volume/ceph.client.cinder.keyring", KEYRING),
    ];
    Config::from_parts(
        Globals::from_vars(&m.into_iter().collect()).unwrap(),
        kstack_config::testing::passwords(7),
        files
            .iter()
            .filter(|_| with_files)
            .map(|(p, t)| ((*p).to_owned(), t.as_bytes().to_vec()))
            .collect(),
        Catalog::builtin().unwrap(),
    )
}

fn ceph_on() -> Config {
    config(
        serde_json::json!({ "enable_cinder": "yes", "cinder_backend_ceph": "yes" }),
        true,
    )
}

fn container<'a>(files: &'a [ContainerFiles], service: &str) -> &'a ContainerFiles {
    files
        .iter()
        .find(|c| c.service == service && c.host.is_none())
        .unwrap_or_else(|| panic!("no {service}"))
}

fn content<'a>(c: &'a ContainerFiles, name: &str) -> &'a str {
    &c.files
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no {}/{name}", c.service))
        .content
}

#[test]
fn cinder_volume_gets_the_operators_ceph_files_and_an_rbd_backend() {
    let files = render_files(&ceph_on(), Target::Kubernetes).unwrap();
    let volume = container(&files, "cinder-volume");
    assert_eq!(content(volume, "ceph.conf"), CEPH_CONF);
    assert_eq!(content(volume, "ceph.keyring"), KEYRING);
    let secret = |name: &str| volume.files.iter().find(|f| f.name == name).unwrap().secret;
    assert!(secret("ceph.keyring"), "the keyring holds the client's key");
    assert!(!secret("ceph.conf"));

    let kolla: serde_json::Value = serde_json::from_str(content(volume, "config.json")).unwrap();
    let dests: Vec<&str> = kolla["config_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["dest"].as_str().unwrap())
        .collect();
    assert_eq!(
        dests,
        [
            "/etc/cinder/cinder.conf",
            "/etc/ceph/ceph.conf",
            "/etc/ceph/ceph.keyring"
        ]
    );

    let conf = content(volume, "cinder.conf");
    for line in [
        "enabled_backends = rbd-1\n",
        "[rbd-1]\n",
        "volume_driver = cinder.volume.drivers.rbd.RBDDriver\n",
        "volume_backend_name = rbd-1\n",
        "rbd_pool = volumes\n",
        "rbd_user = cinder\n",
        "rbd_ceph_conf = /etc/ceph/ceph.conf\n",
        "rbd_secret_uuid = ",
    ] {
        assert!(
            conf.contains(line),
            "cinder-volume's cinder.conf lacks {line:?}:\n{conf}"
        );
    }
    // The other cinder services know the backend's name (the scheduler filters on it) but get
    // no section of it, nor any Ceph file.
    for service in ["cinder-api", "cinder-scheduler"] {
        let c = container(&files, service);
        let conf = content(c, "cinder.conf");
        assert!(conf.contains("enabled_backends = rbd-1\n"), "{service}");
        assert!(!conf.contains("[rbd-1]"), "{service}");
        assert!(
            c.files.iter().all(|f| !f.name.starts_with("ceph")),
            "{service}"
        );
    }
}

#[test]
fn libvirt_holds_the_clients_key_as_the_secret_nova_names() {
    let config = ceph_on();
    let uuid = config
        .passwords
        .get("cinder_rbd_secret_uuid")
        .unwrap()
        .to_owned();
    let files = render_files(&config, Target::Kubernetes).unwrap();
    let libvirt = container(&files, "nova-libvirt");
    let secret = |name: &str| {
        libvirt
            .files
            .iter()
            .find(|f| f.name == name)
            .unwrap()
            .secret
    };
    let xml = content(libvirt, "libvirt-ceph-secret.xml");
    assert!(
        xml.contains(&format!("<uuid>{uuid}</uuid>")) && xml.contains("<usage type=\"ceph\">"),
        "{xml}"
    );
    assert_eq!(
        content(libvirt, "libvirt-ceph-secret.key"),
        "AQBxTbRdvsG3JxAA+mYGYlnJrHd64fc5Yx1tuQ=="
    );
    let script = content(libvirt, "libvirt-sasl-user.sh");
    assert!(
        script.contains("virsh secret-define /var/lib/kolla/config_files/libvirt-ceph-secret.xml")
            && script.contains(&format!("virsh secret-set-value --secret {uuid} --file")),
        "{script}"
    );
    // The uuid comes from passwords.yml, the key from the keyring: all three files are secret.
    for name in [
        "libvirt-ceph-secret.xml",
        "libvirt-ceph-secret.key",
        "libvirt-sasl-user.sh",
    ] {
        assert!(secret(name), "{name}");
    }
    let compute = content(container(&files, "nova-compute"), "nova.conf");
    assert!(
        compute.contains("rbd_user = cinder\n")
            && compute.contains(&format!("rbd_secret_uuid = {uuid}\n")),
        "{compute}"
    );
}

#[test]
fn the_keyring_reaches_kubernetes_only_as_a_secret() {
    let rendered = kubernetes::render(&ceph_on()).unwrap();
    let key = "AQBxTbRdvsG3JxAA";
    let mut in_secret = false;
    for o in &rendered.objects {
        let json = serde_json::to_string(&o.to_json_value()).unwrap();
        match o {
            Object::Secret(s) => {
                let data = s.data.clone().unwrap_or_default();
                in_secret |= data
                    .values()
                    .any(|v| String::from_utf8_lossy(&v.0).contains(key));
            }
            _ => assert!(
                !json.contains(key),
                "{} {} holds the key",
                o.kind(),
                o.name()
            ),
        }
    }
    assert!(in_secret, "no Secret holds the keyring");
    // ceph.conf is no secret: a ConfigMap carries it.
    assert!(rendered.objects.iter().any(|o| {
        matches!(o, Object::ConfigMap(_))
            && serde_json::to_string(&o.to_json_value())
                .unwrap()
                .contains("mon_host = 10.245.0.1")
    }));
}

#[test]
fn the_single_node_target_writes_the_keyring_as_a_secret_file() {
    let files = render_files(&ceph_on(), Target::Compose).unwrap();
    let volume = container(&files, "cinder-volume");
    let keyring = volume
        .files
        .iter()
        .find(|f| f.name == "ceph.keyring")
        .unwrap();
    assert!(keyring.secret && keyring.content == KEYRING);
}

#[test]
fn without_the_setting_cinder_has_no_ceph_backend() {
    let files = render_files(
        &config(serde_json::json!({ "enable_cinder": "yes" }), false),
        Target::Kubernetes,
    )
    .unwrap();
    let volume = container(&files, "cinder-volume");
    assert!(volume.files.iter().all(|f| !f.name.starts_with("ceph")));
    assert!(!content(volume, "config.json").contains("/etc/ceph"));
    let conf = content(volume, "cinder.conf");
    assert!(
        !conf.contains("enabled_backends =") && !conf.contains("rbd_"),
        "{conf}"
    );
    let libvirt = container(&files, "nova-libvirt");
    assert!(
        libvirt
            .files
            .iter()
            .all(|f| !f.name.starts_with("libvirt-ceph"))
    );
    assert!(!content(libvirt, "libvirt-sasl-user.sh").contains("virsh secret"));
    assert!(!content(container(&files, "nova-compute"), "nova.conf").contains("rbd_"));
}

#[test]
fn the_clients_key_is_among_the_secrets_that_reports_redact() {
    let key = "AQBxTbRdvsG3JxAA+mYGYlnJrHd64fc5Yx1tuQ==";
    let on = ceph_on();
    let values = kstack_render::files::cloud_secret_values(&on);
    assert!(values.iter().any(|v| v == key), "{} values", values.len());
    for password in kstack_render::files::secret_values(&on.passwords) {
        assert!(values.iter().any(|v| v == password));
    }
    // Without the setting the keyring is not the cloud's: nothing of it is a secret of kstack's.
    let off = config(serde_json::json!({ "enable_cinder": "yes" }), true);
    assert!(
        !kstack_render::files::cloud_secret_values(&off)
            .iter()
            .any(|v| v == key)
    );
}
