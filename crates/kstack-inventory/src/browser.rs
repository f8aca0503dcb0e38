//! Test support (feature `testing`): headless Chromium driven over the DevTools protocol, for
//! the status page's browser test and its load benchmark. Like an assertion, it panics when
//! the browser does not do what the caller needs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Debian's `chromium` on the PATH, if installed.
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
}

/// The DevTools protocol's WebSocket (tokio-tungstenite): text messages both ways.
pub struct Ws {
    stream: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl Ws {
    pub async fn connect(url: &str) -> Ws {
        let (stream, _) = tokio_tungstenite::connect_async(url)
            .await
            .unwrap_or_else(|e| panic!("no WebSocket to {url}: {e}"));
        Ws { stream }
    }

    pub async fn send(&mut self, text: &str) {
        use futures::SinkExt as _;
        self.stream
            .send(tokio_tungstenite::tungstenite::Message::text(text))
            .await
            .expect("sending to the browser");
    }

    pub async fn recv(&mut self) -> String {
        use futures::StreamExt as _;
        use tokio_tungstenite::tungstenite::Message;
        loop {
            match self.stream.next().await {
                Some(Ok(Message::Text(t))) => return t.as_str().to_owned(),
                Some(Ok(Message::Close(_))) | None => {
                    panic!("the browser closed the DevTools connection")
                }
                Some(Ok(_)) => continue, // ping/pong and binary: not used by DevTools
                Some(Err(e)) => panic!("reading from the browser: {e}"),
            }
        }
    }
}

/// Headless Chromium driven over the DevTools protocol.
pub struct Browser {
    pub child: tokio::process::Child,
    ws: Ws,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn launch(bin: &Path) -> Browser {
        use tokio::io::AsyncBufReadExt;
        let profile = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("chromium starts");
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut said = Vec::new();
        let port = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(rest) = line.strip_prefix("DevTools listening on ws://127.0.0.1:") {
                    return rest.split('/').next().unwrap().to_string();
                }
                said.push(line);
            }
            panic!("chromium exited: {}", said.join("\n"));
        })
        .await
        .expect("chromium did not open its DevTools port within 60 s");
        // Keep reading what it says, so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let targets: serde_json::Value = reqwest::get(format!("http://127.0.0.1:{port}/json/list"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let page = targets
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .expect("a page target");
        let ws = Ws::connect(page["webSocketDebuggerUrl"].as_str().unwrap()).await;
        let mut b = Browser {
            child,
            ws,
            next_id: 0,
            _profile: profile,
        };
        b.call(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await
        .unwrap();
        b
    }

    /// One DevTools command; its result, or its error message.
    pub async fn call(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.ws
            .send(&serde_json::json!({"id": id, "method": method, "params": params}).to_string())
            .await;
        loop {
            let m: serde_json::Value = serde_json::from_str(&self.ws.recv().await).unwrap();
            if m["id"] == id {
                return match m.get("error") {
                    Some(e) => Err(e.to_string()),
                    None => Ok(m["result"].clone()),
                };
            }
        }
    }

    /// Evaluates `expr` in the page (awaiting a promise); its value, or why it failed.
    pub async fn eval(&mut self, expr: &str) -> Result<serde_json::Value, String> {
        let r = self
            .call(
                "Runtime.evaluate",
                serde_json::json!({"expression": expr, "awaitPromise": true, "returnByValue": true}),
            )
            .await?;
        match r.get("exceptionDetails") {
            Some(e) => Err(e.to_string()),
            None => Ok(r["result"]["value"].clone()),
        }
    }

    /// Waits until `cond` (a JS expression) is true in the page, watching the DOM for changes
    /// (a MutationObserver, no timer polls). A navigation destroys the page's context; the wait
    /// then starts again in the new page. False after `timeout`.
    pub async fn wait_for(&mut self, cond: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .as_millis();
            if left == 0 {
                return false;
            }
            let js = format!(
                "new Promise(resolve => {{
                   const ok = () => {{ try {{ return !!({cond}); }} catch (e) {{ return false; }} }};
                   if (ok()) return resolve(true);
                   const o = new MutationObserver(() => {{ if (ok()) {{ o.disconnect(); resolve(true); }} }});
                   o.observe(document, {{subtree: true, childList: true, attributes: true, characterData: true}});
                   setTimeout(() => {{ o.disconnect(); resolve(false); }}, {left});
                 }})"
            );
            match self.eval(&js).await {
                Ok(v) => return v == true,
                // The page navigated while we waited (sign-in, refresh): wait in the new one.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    pub async fn dom(&mut self) -> String {
        self.eval("document.documentElement.outerHTML")
            .await
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }

    pub async fn screenshot(&mut self, path: &Path) {
        use base64::Engine;
        let r = self
            .call(
                "Page.captureScreenshot",
                serde_json::json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await
            .unwrap();
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).unwrap();
    }
}
