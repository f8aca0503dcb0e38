//! The inventory's client (what `kstack host-*` use) against the real service on a socket:
//! every call, the errors a user meets (no token, a token the service refuses, a host that is
//! not there, a label key already set) and what each says.

use std::sync::Arc;
use std::time::Duration;

use kstack_inventory::client::{Client, ClientError};
use kstack_inventory::model::Administrative;
use kstack_inventory::testing::{free_port, serve_config};
use kstack_inventory::{RecordingSync, serve};

const TOKEN: &str = "client-test-token-0123456789abcdef012";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_does_what_the_host_commands_need_and_says_what_went_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = serve_config(
        ([127, 0, 0, 1], port).into(),
        &dir.path().join("inv.db"),
        TOKEN,
        Duration::from_secs(3600),
        Arc::new(RecordingSync::default()),
    );
    let server = tokio::spawn(serve(config));
    let url = format!("http://127.0.0.1:{port}/");
    let client = Client::new(&url, Some(TOKEN), None).unwrap();
    // Our own server on a port we chose: tried until it answers.
    let mut up = false;
    for _ in 0..200 {
        if client.hosts().await.is_ok() {
            up = true;
            break;
        }
        assert!(!server.is_finished(), "server stopped");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(up, "the service did not answer at {url}");

    let none = Client::new(&url, None, None).unwrap();
    let err = none.hosts().await.unwrap_err();
    assert!(matches!(err, ClientError::NoToken), "{err}");
    assert!(err.to_string().contains("--token"), "{err}");
    let wrong = Client::new(&url, Some("not-the-token-0123456789abcdef0123456"), None).unwrap();
    let err = wrong.hosts().await.unwrap_err().to_string();
    assert!(
        err.starts_with("inventory service answered 401 Unauthorized: "),
        "{err}"
    );

    assert!(client.hosts().await.unwrap().is_empty());
    let host = client
        .add_host("compute-1", "compute", false)
        .await
        .unwrap();
    assert_eq!(host.administrative, Administrative::Unlocked);
    let err = client
        .add_host("compute-2", "router", false)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("answered 400"), "{err}");
    assert!(
        err.contains("`router`, expected one of `controller`, `compute`, `storage`"),
        "{err}"
    );

    let uuid = client.resolve("compute-1").await.unwrap();
    assert_eq!(uuid, host.uuid);
    assert_eq!(client.resolve(&host.uuid).await.unwrap(), host.uuid);
    let err = client.resolve("compute-9").await.unwrap_err().to_string();
    assert_eq!(
        err,
        "no host named compute-9 in the inventory (see kstack host-list)"
    );

    let locked = client.set_locked(&uuid, true, false).await.unwrap();
    assert_eq!(locked.administrative, Administrative::Locked);
    assert_eq!(
        client.host(&uuid).await.unwrap().administrative,
        Administrative::Locked
    );
    let unlocked = client.set_locked(&uuid, false, false).await.unwrap();
    assert_eq!(unlocked.administrative, Administrative::Unlocked);

    let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    let labels = client
        .assign_labels(&uuid, &[pair("rack", "r1"), pair("zone", "a")], false)
        .await
        .unwrap();
    let mut keys: Vec<&str> = labels.iter().map(|l| l.label_key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["rack", "zone"]);
    let err = client
        .assign_labels(&uuid, &[pair("rack", "r2")], false)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("answered 409"), "{err}");
    client
        .assign_labels(&uuid, &[pair("rack", "r2")], true)
        .await
        .unwrap();
    let labels = client.labels(&uuid).await.unwrap();
    let rack = labels.iter().find(|l| l.label_key == "rack").unwrap();
    assert_eq!(rack.label_value, "r2");
    client.delete_label(&rack.uuid).await.unwrap();
    let keys: Vec<String> = client
        .labels(&uuid)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.label_key)
        .collect();
    assert_eq!(keys, ["zone"]);

    client.delete_host(&uuid).await.unwrap();
    assert!(client.hosts().await.unwrap().is_empty());
    server.abort();

    // A service that is not there: the cause, and the URL.
    let gone = Client::new(&url, Some(TOKEN), None).unwrap();
    let err = gone.hosts().await.unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "could not reach the inventory service at http://127.0.0.1:{port}"
        )),
        "{err}"
    );
}

#[test]
fn a_ca_file_that_is_missing_or_not_pem_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("ca.pem");
    let err = Client::new("https://inventory:6385", Some(TOKEN), Some(&missing))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("reading CA file {}: ", missing.display())),
        "{err}"
    );
    std::fs::write(&missing, "not a certificate").unwrap();
    let err = Client::new("https://inventory:6385", Some(TOKEN), Some(&missing))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("{}: no PEM certificate in it", missing.display())),
        "{err}"
    );
}
