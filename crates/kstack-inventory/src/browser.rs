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

/// A minimal WebSocket client (RFC 6455), enough for the DevTools protocol on loopback: text
/// frames, masked from us, unmasked and possibly fragmented from the browser.
pub struct Ws {
    stream: tokio::io::BufReader<tokio::net::TcpStream>,
}

impl Ws {
    pub async fn connect(url: &str) -> Ws {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let rest = url.strip_prefix("ws://").expect("a ws:// URL");
        let (hostport, path) = rest.split_once('/').expect("a path");
        let tcp = tokio::net::TcpStream::connect(hostport).await.unwrap();
        let mut stream = tokio::io::BufReader::new(tcp);
        stream
            .get_mut()
            .write_all(
                format!(
                    "GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n\
                     Connection: Upgrade\r\nSec-WebSocket-Key: a3N0YWNrLXN0YXR1cy1wYWdl\r\n\
                     Sec-WebSocket-Version: 13\r\n\r\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        let mut status = String::new();
        stream.read_line(&mut status).await.unwrap();
        assert!(status.contains(" 101 "), "no WebSocket upgrade: {status}");
        loop {
            let mut line = String::new();
            stream.read_line(&mut line).await.unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        Ws { stream }
    }

    pub async fn send(&mut self, text: &str) {
        use tokio::io::AsyncWriteExt;
        let payload = text.as_bytes();
        let mask = [0x6b, 0x73, 0x74, 0x6b];
        let mut frame = vec![0x81];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n < 65536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.get_mut().write_all(&frame).await.unwrap();
    }

    pub async fn recv(&mut self) -> String {
        use tokio::io::AsyncReadExt;
        let mut message = Vec::new();
        loop {
            let mut h = [0u8; 2];
            self.stream.read_exact(&mut h).await.unwrap();
            let len = match h[1] & 0x7f {
                126 => self.stream.read_u16().await.unwrap() as usize,
                127 => self.stream.read_u64().await.unwrap() as usize,
                n => n as usize,
            };
            let mut mask = [0u8; 4];
            if h[1] & 0x80 != 0 {
                self.stream.read_exact(&mut mask).await.unwrap();
            }
            let mut payload = vec![0u8; len];
            self.stream.read_exact(&mut payload).await.unwrap();
            if h[1] & 0x80 != 0 {
                for (i, b) in payload.iter_mut().enumerate() {
                    *b ^= mask[i % 4];
                }
            }
            match h[0] & 0x0f {
                0 | 1 => message.extend_from_slice(&payload),
                8 => panic!("the browser closed the DevTools connection"),
                _ => continue, // ping/pong: the browser does not need an answer here
            }
            if h[0] & 0x80 != 0 {
                return String::from_utf8(message).unwrap();
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
