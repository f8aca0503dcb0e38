//! The scheduled backup of the databases: a CronJob, its volume and its password, only when
//! `kstack_backup_schedule` is set.
use kstack_config::Config;
use kstack_model::catalog::Catalog;
use kstack_model::globals::Globals;
use kstack_render::{Object, kubernetes};

fn config(vars: serde_json::Value) -> Config {
    let globals =
        Globals::from_vars(&vars.as_object().unwrap().clone().into_iter().collect()).unwrap();
    Config::from_parts(
        globals,
        kstack_config::testing::passwords(1),
        Default::default(),
        Catalog::builtin().unwrap(),
    )
}

#[test]
fn without_a_schedule_nothing_of_it_is_rendered() {
    let r = kubernetes::render(&config(serde_json::json!({}))).unwrap();
    assert!(
        !r.objects
            .iter()
            .any(|o| o.name().starts_with("mariadb-backup")),
        "no backup object without kstack_backup_schedule"
    );
}

#[test]
fn the_schedule_gives_a_cronjob_with_its_own_volume_and_the_password_by_reference() {
    let c = config(serde_json::json!({
        "kstack_backup_schedule": "30 2 * * *",
        "kstack_backup_keep": 5,
        "kstack_backup_volume_size": "20Gi",
    }));
    let r = kubernetes::render(&c).unwrap();
    let cron = r
        .objects
        .iter()
        .find_map(|o| match o {
            Object::CronJob(c) if o.name() == "mariadb-backup" => Some(c),
            _ => None,
        })
        .expect("the mariadb-backup CronJob");
    let spec = &cron.spec;
    assert_eq!(spec.schedule, "30 2 * * *");
    assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
    let pod = spec
        .job_template
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));

    // The claim, kept by name, of the size asked for.
    let claim = r
        .objects
        .iter()
        .find_map(|o| match o {
            Object::PersistentVolumeClaim(p) if o.name() == "mariadb-backups" => Some(p),
            _ => None,
        })
        .expect("the mariadb-backups claim");
    let size = &claim
        .spec
        .as_ref()
        .unwrap()
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()["storage"];
    assert_eq!(size.0, "20Gi");
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "backups")
        .unwrap();
    assert_eq!(
        volume.persistent_volume_claim.as_ref().unwrap().claim_name,
        "mariadb-backups"
    );

    // Only the init container runs as root, and only to give the volume to mysql.
    let init = &pod.init_containers.as_ref().unwrap()[0];
    assert_eq!(init.security_context.as_ref().unwrap().run_as_user, Some(0));
    assert_eq!(
        init.command.as_ref().unwrap()[2],
        "chown mysql:mysql /backups && chmod 0700 /backups"
    );
    let main = &pod.containers[0];
    assert_eq!(main.security_context.as_ref().unwrap().run_as_user, None);
    assert_eq!(
        main.security_context
            .as_ref()
            .unwrap()
            .allow_privilege_escalation,
        Some(false)
    );
    assert_eq!(
        main.image.as_deref(),
        Some(c.globals.image_ref("mariadb", "mariadb-server").as_str())
    );

    // Plain env: no password in it; root's password only by reference, to a Secret holding it.
    let env = main.env.as_ref().unwrap();
    let plain = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
            .unwrap_or_else(|| panic!("{name} in the env"))
    };
    assert_eq!(plain("KSTACK_BACKUP_KEEP"), "5");
    assert_eq!(plain("KSTACK_DB_PORT"), "3306");
    assert_eq!(plain("KSTACK_DB_PEERS"), "mariadb-peers");
    assert_eq!(plain("KSTACK_RELEASE_JSON"), "\"2025.1\"");
    let passwords: Vec<&str> = c
        .passwords
        .entries
        .keys()
        .filter_map(|k| c.passwords.get(k))
        .collect();
    for e in env {
        if let Some(v) = &e.value {
            assert!(
                !passwords.iter().any(|p| v.contains(p)),
                "{} carries a password literally",
                e.name
            );
        }
    }
    let pwd = env.iter().find(|e| e.name == "MYSQL_PWD").unwrap();
    assert!(pwd.value.is_none());
    let by = pwd
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    let Some(Object::Secret(secret)) = r
        .objects
        .iter()
        .find(|o| o.kind() == "Secret" && o.name() == by.name)
    else {
        panic!("the Secret {} is rendered", by.name)
    };
    // The backup's own user's password, and root's nowhere in the backup's objects.
    assert_eq!(plain("KSTACK_DB_USER"), kstack_model::backup::USER);
    assert_eq!(
        secret.data.as_ref().unwrap()[&by.key].0,
        c.passwords
            .get(kstack_model::backup::PASSWORD)
            .unwrap()
            .as_bytes()
    );
    let root = c.passwords.get("database_password").unwrap();
    for o in r
        .objects
        .iter()
        .filter(|o| o.name().starts_with("mariadb-backup"))
    {
        let in_data = match o {
            Object::Secret(s) => s.data.iter().flatten().any(|(_, v)| v.0 == root.as_bytes()),
            _ => false,
        };
        assert!(
            !in_data && !serde_json::to_string(o).unwrap().contains(root),
            "{} holds root's password",
            o.name()
        );
    }
    assert!(
        !by.name.contains("database") && by.name.starts_with("mariadb-backup-env-"),
        "{}",
        by.name
    );
}

#[test]
fn the_backup_script_is_valid_bash() {
    let out = std::process::Command::new("bash")
        .args(["-n", "-c", kubernetes::backup::SCRIPT])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
