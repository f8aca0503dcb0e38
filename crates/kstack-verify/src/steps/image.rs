//! The image step: an image (the guest's disk, or a disk whose boot sector halts) uploaded as
//! the user and read back with the same SHA-256, and the bytes of the raw image it uploads.
use std::time::Instant;

use reqwest::Method;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{Failure, Run, id_of};
use crate::cleanup::{Kind, Owner};
use crate::http::{Body, status_error};

impl Run<'_> {
    pub(super) async fn image(&mut self) -> Result<String, Failure> {
        let user = self.user()?;
        let token = user.token.clone();
        let glance = self.endpoint(user, "image")?;
        let name = self.s.prefix.clone();
        let (data, what) = match &self.s.guest {
            Some(g) => (g.disk.clone(), "guest disk: a "),
            None => (image_bytes(self.s.image_bytes), ""),
        };
        let want = hex::encode(Sha256::digest(&data));
        let size = data.len();
        let id = self.upload(&token, &glance, &name, data).await?;
        let file = format!("{glance}/v2/images/{id}/file");
        let reply = self
            .api
            .send(Method::GET, &file, Some(&token), Body::None)
            .await?;
        if !reply.ok() {
            return Err(status_error(&Method::GET, &file, &reply).into());
        }
        let got = hex::encode(Sha256::digest(&reply.body));
        if got != want {
            return Err(Failure::check(format!(
                "GET {file}: the image read back differs from the upload: {} bytes with SHA-256 {got}, uploaded {size} bytes with SHA-256 {want}",
                reply.body.len()
            )));
        }
        self.image_id = Some(id);
        Ok(format!(
            "{what}{} raw image uploaded, active, read back with the same SHA-256 ({})",
            mib(size),
            &want[..12]
        ))
    }

    /// Creates a raw image, uploads `data` and waits until it is active; returns its id.
    async fn upload(
        &mut self,
        token: &str,
        glance: &str,
        name: &str,
        data: Vec<u8>,
    ) -> Result<String, Failure> {
        let body = json!({
            "name": name, "disk_format": "raw",
            "container_format": "bare", "visibility": "private",
        });
        let (_, v) = self
            .api
            .call(
                Method::POST,
                &format!("{glance}/v2/images"),
                Some(token),
                Body::Json(&body),
            )
            .await?;
        let id = id_of(&v, "image")?;
        let url = format!("{glance}/v2/images/{id}");
        self.record(Kind::Image, &id, url.clone(), Owner::User);
        self.api
            .call(
                Method::PUT,
                &format!("{url}/file"),
                Some(token),
                Body::Bytes(data),
            )
            .await?;
        let deadline = Instant::now() + self.s.timeout;
        loop {
            let (_, v) = self
                .api
                .call(Method::GET, &url, Some(token), Body::None)
                .await?;
            match v["status"].as_str().unwrap_or_default() {
                "active" => return Ok(id),
                bad @ ("killed" | "deleted" | "deactivated") => {
                    return Err(Failure::check(format!(
                        "image {id} went to status {bad} after the upload"
                    )));
                }
                other => {
                    if Instant::now() >= deadline {
                        return Err(Failure::check(format!(
                            "image {id} not active after {:?} (status {other})",
                            self.s.timeout
                        )));
                    }
                }
            }
            tokio::time::sleep(self.s.poll_interval).await;
        }
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// A raw disk image of `len` bytes: a master boot record whose code halts the CPU (so a
/// server booted from it idles) and whose one partition (Linux, type 0x83) holds the rest:
/// random bytes, so every run uploads different content. Nova's image safety check refuses
/// an MBR without a partition.
fn image_bytes(len: usize) -> Vec<u8> {
    use rand::RngCore as _;
    let len = len.max(1024);
    let mut data = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut data[512..]);
    data[..512].fill(0);
    // cli; hlt; jmp $-2
    data[..4].copy_from_slice(&[0xFA, 0xF4, 0xEB, 0xFD]);
    // Partition 1 at 446: not active, CHS fields saturated (LBA addressing), type 0x83,
    // first sector 1, every whole sector after it.
    let sectors = u32::try_from(len / 512 - 1).unwrap_or(u32::MAX);
    let entry = &mut data[446..462];
    entry[..4].copy_from_slice(&[0x00, 0xFE, 0xFF, 0xFF]);
    entry[4..8].copy_from_slice(&[0x83, 0xFE, 0xFF, 0xFF]);
    entry[8..12].copy_from_slice(&1u32.to_le_bytes());
    entry[12..16].copy_from_slice(&sectors.to_le_bytes());
    data[510] = 0x55;
    data[511] = 0xAA;
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_boot_sector_and_random_rest() {
        let a = image_bytes(4096);
        let b = image_bytes(4096);
        assert_eq!(a.len(), 4096);
        assert_eq!(&a[510..512], &[0x55, 0xAA]);
        assert_eq!(a[..512], b[..512]);
        assert_ne!(a[512..], b[512..]);
        // One Linux partition from sector 1 to the end (7 sectors of 512 bytes).
        assert_eq!(a[446 + 4], 0x83);
        assert_eq!(&a[446 + 8..446 + 12], &1u32.to_le_bytes());
        assert_eq!(&a[446 + 12..446 + 16], &7u32.to_le_bytes());
        assert!(a[462..510].iter().all(|&b| b == 0), "one partition only");
    }
}
