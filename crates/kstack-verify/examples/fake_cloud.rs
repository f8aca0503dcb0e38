//! Serves the fake OpenStack of `kstack_verify::fake` on 127.0.0.1 until Ctrl-C, to try
//! `kstack verify` without a cloud:
//!
//! ```sh
//! cargo run -p kstack-verify --features fake --example fake_cloud [-- FAULT...]
//! # set keystone_admin_password in passwords.yml to the password it prints, then
//! kstack verify --os-auth-url <URL>/identity --horizon-url <URL>/dashboard
//! ```
//!
//! Each FAULT is `METHOD:PATH-PART:STATUS`, e.g. `PUT:/file:500` (an image upload failing).
#[tokio::main]
async fn main() {
    let cloud = kstack_verify::fake::start().await;
    let base = {
        let mut st = cloud.lock().unwrap();
        for f in std::env::args().skip(1) {
            let parts: Vec<&str> = f.splitn(3, ':').collect();
            let [method, path, status] = parts[..] else {
                eprintln!("fault `{f}`: want METHOD:PATH-PART:STATUS");
                std::process::exit(2);
            };
            st.faults.push(kstack_verify::fake::Fault {
                method: method.to_ascii_uppercase(),
                path: path.to_owned(),
                status: status.parse().unwrap_or(500),
                body: format!(r#"{{"message": "injected fault {f}"}}"#),
                echo: false,
            });
        }
        st.base.clone()
    };
    println!("fake OpenStack at {base}");
    println!("admin password: {}", kstack_verify::fake::ADMIN_PASSWORD);
    println!("  kstack verify --os-auth-url {base}/identity --horizon-url {base}/dashboard");
    let _ = tokio::signal::ctrl_c().await;
}
