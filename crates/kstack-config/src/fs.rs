//! The thin IO layer: reading a config directory into [`Sources`] and writing files.
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::diagnostic::{Diag, Severity};
use crate::load::{GLOBALS_FILE, Loaded, Sources, load};
use crate::{overrides, passwords};

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

/// `path` relative to `root`, with `/` separators.
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// A refused entry of `config/`: an error naming it, with what to do.
fn refuse(out: &mut Sources, rel: &str, message: &str, help: &str) {
    out.refused.push(
        Diag::new(
            Severity::Error,
            &format!("{}/{rel}", overrides::DIR),
            message,
        )
        .help(help),
    );
}

/// Reads the override files under `dir` (inside `root`, the config directory's `config/`).
///
/// Only regular files are read. A symbolic link to a regular file is followed when its
/// target, with every link resolved, is inside `root`; one that leaves `root` is refused
/// unread, so no file elsewhere on the machine becomes config. Links to directories are
/// refused (a link may loop, and a linked tree may leave `root` further down), as are
/// dangling links, devices, sockets and pipes (reading a pipe would block).
fn walk(root: &Path, real_root: &Path, dir: &Path, out: &mut Sources) -> Result<(), FsError> {
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
        let rel = relative(root, &p);
        if rel == "README" || rel == "README.md" {
            continue;
        }
        // The entry itself, not what a link points at.
        let kind = std::fs::symlink_metadata(&p)
            .map_err(|source| FsError::Read {
                path: p.clone(),
                source,
            })?
            .file_type();
        if kind.is_dir() {
            walk(root, real_root, &p, out)?;
            continue;
        }
        if kind.is_symlink() {
            let target = match std::fs::canonicalize(&p) {
                Ok(t) => t,
                Err(_) => {
                    refuse(
                        out,
                        &rel,
                        "the symbolic link points at nothing kstack can read",
                        "fix or remove the link",
                    );
                    continue;
                }
            };
            if !target.starts_with(real_root) {
                refuse(
                    out,
                    &rel,
                    "the symbolic link points outside `config/`; kstack does not read it",
                    "copy the file into `config/`, or link to a file inside `config/`",
                );
                continue;
            }
            match std::fs::metadata(&target) {
                Ok(m) if m.is_file() => {}
                Ok(m) if m.is_dir() => {
                    refuse(
                        out,
                        &rel,
                        "the symbolic link points to a directory; kstack reads only real directories under `config/`",
                        "make it a directory, or link the files in it one by one",
                    );
                    continue;
                }
                _ => {
                    refuse(
                        out,
                        &rel,
                        "the symbolic link points to something that is not a regular file",
                        "link to a regular file inside `config/`, or remove the link",
                    );
                    continue;
                }
            }
        } else if !kind.is_file() {
            refuse(
                out,
                &rel,
                "this is not a regular file (a device, socket or pipe); kstack does not read it",
                "override files are regular INI files; remove it",
            );
            continue;
        }
        let bytes = std::fs::read(&p).map_err(|source| FsError::Read {
            path: p.clone(),
            source,
        })?;
        out.overrides.insert(rel, bytes);
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
    let cfg = dir.join(overrides::DIR);
    // Links are judged by where they lead with every link resolved, `config/` included.
    let real = match std::fs::canonicalize(&cfg) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(s),
        Err(source) => return Err(FsError::Read { path: cfg, source }),
    };
    walk(&cfg, &real, &cfg, &mut s)?;
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

/// The mode to write `path` with when kstack wants `mode`: `mode` for a new file; for one that
/// exists (a regular file, not followed through a link), only the permissions both allow, so a
/// file's mode stays or tightens and never widens.
pub fn keep_tighter(path: &Path, mode: u32) -> u32 {
    #[cfg(unix)]
    if let Ok(m) = std::fs::symlink_metadata(path)
        && m.is_file()
    {
        return mode & std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777;
    }
    mode
}

/// The mode of a new passwords.yml: its owner alone may read it.
pub const PASSWORDS_MODE: u32 = 0o600;

/// Replaces passwords.yml atomically (write + rename). A new file gets [`PASSWORDS_MODE`]; an
/// existing one keeps its mode, except that others lose every permission (a file of secrets
/// is never world-readable), so the mode stays or tightens, never widens.
pub fn write_passwords(dir: &Path, text: &str) -> Result<(), FsError> {
    let path = dir.join(passwords::FILE);
    let tmp = dir.join(".passwords.yml.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mode = match std::fs::metadata(&path) {
        #[cfg(unix)]
        Ok(m) => std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o770,
        _ => PASSWORDS_MODE,
    };
    create_new(&tmp, text.as_bytes(), mode)?;
    // The process umask may have cleared bits of `mode`; set exactly what was decided.
    #[cfg(unix)]
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(mode)).map_err(
        |source| FsError::Write {
            path: tmp.clone(),
            source,
        },
    )?;
    std::fs::rename(&tmp, &path).map_err(|source| FsError::Write { path, source })
}
