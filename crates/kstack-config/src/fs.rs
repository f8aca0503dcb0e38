//! The thin IO layer: reading a config directory into [`Sources`] and writing files.
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::load::{GLOBALS_FILE, Loaded, Sources, load};
use crate::passwords;

/// Errors reading or writing a config directory.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error(
        "{path} already exists; kstack init never overwrites files (remove it or pick another directory)"
    )]
    Exists { path: PathBuf },
}

fn read_opt(path: &Path) -> Result<Option<Vec<u8>>, FsError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FsError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Sources) -> Result<(), FsError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(FsError::Read {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut paths = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|source| FsError::Read {
            path: dir.to_owned(),
            source,
        })?;
        paths.push(entry.path());
    }
    paths.sort();
    for p in paths {
        if p.is_dir() {
            walk(root, &p, out)?;
        } else {
            let rel = p.strip_prefix(root).unwrap_or(&p);
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if rel == "README" || rel == "README.md" {
                continue;
            }
            let bytes = std::fs::read(&p).map_err(|source| FsError::Read {
                path: p.clone(),
                source,
            })?;
            out.overrides.insert(rel, bytes);
        }
    }
    Ok(())
}

/// Reads a config directory's files.
pub fn read_dir(dir: &Path) -> Result<Sources, FsError> {
    let mut s = Sources {
        globals: read_opt(&dir.join(GLOBALS_FILE))?,
        passwords: read_opt(&dir.join(passwords::FILE))?,
        catalog: read_opt(&dir.join(crate::catalog::CATALOG_FILE))?,
        ..Sources::default()
    };
    let cfg = dir.join("config");
    walk(&cfg, &cfg, &mut s)?;
    Ok(s)
}

/// Reads and loads a config directory.
pub fn load_dir(dir: &Path) -> Result<Loaded, FsError> {
    Ok(load(&read_dir(dir)?))
}

/// Writes a new file; fails if it exists. `mode` is applied on Unix.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), FsError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = opts.open(path).map_err(|source| {
        if source.kind() == io::ErrorKind::AlreadyExists {
            FsError::Exists {
                path: path.to_owned(),
            }
        } else {
            FsError::Write {
                path: path.to_owned(),
                source,
            }
        }
    })?;
    f.write_all(bytes).map_err(|source| FsError::Write {
        path: path.to_owned(),
        source,
    })
}

/// Replaces passwords.yml atomically (write + rename) with mode 0640.
pub fn write_passwords(dir: &Path, text: &str) -> Result<(), FsError> {
    let path = dir.join(passwords::FILE);
    let tmp = dir.join(".passwords.yml.tmp");
    let _ = std::fs::remove_file(&tmp);
    create_new(&tmp, text.as_bytes(), 0o640)?;
    std::fs::rename(&tmp, &path).map_err(|source| FsError::Write { path, source })
}
