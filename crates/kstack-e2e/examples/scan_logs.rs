//! The error lines of a deployed cloud's containers in its central log store, checked against
//! `log-errors-allowed.yaml` as the real-node test checks them: prints how many each entry
//! allowed and every other kind of error line, and exits 1 when there is one.
//!
//! ```sh
//! cargo run -p kstack-e2e --example scan_logs -- http://<victoria-logs address>:9428 openstack
//! ```
use anyhow::Context;
use kstack_e2e::logscan::{Scan, allowed, ordered};
use serde_json::Value;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let store = args
        .next()
        .context("usage: scan_logs <victoria-logs URL> [namespace]")?;
    let namespace = args.next().unwrap_or_else(|| "openstack".to_owned());
    let body = reqwest::Client::new()
        .post(format!("{store}/select/logsql/query"))
        .form(&[(
            "query",
            format!("file:~\"^/var/log/pods/{namespace}_\" | limit 10000000"),
        )])
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    let rows = body
        .lines()
        .map(serde_json::from_str::<Value>)
        .collect::<Result<Vec<_>, _>>()?;
    let allow = allowed()?;
    let scan = Scan::of(ordered(&rows), &allow);
    for (a, n) in allow.iter().zip(&scan.allowed) {
        println!("allowed {n:>5}  {} {:?}", a.container, a.matches.as_str());
    }
    println!(
        "{} lines, {} error lines, {} kinds not allowed",
        rows.len(),
        scan.errors,
        scan.unexpected.len()
    );
    println!("{}", scan.report());
    if !scan.unexpected.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
