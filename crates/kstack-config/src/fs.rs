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
        let mut read_from = (p.clone(), std::fs::symlink_metadata(&p).ok());
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
                Ok(m) if m.is_file() => read_from = (target.clone(), Some(m)),
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
        // What was checked is what is read: the link's resolved target, or the file itself,
        // still the same file (a link swapped in meanwhile is not followed).
        let (path, seen) = read_from;
        let bytes = match seen {
            Some(seen) => read_same(&path, &seen)?,
            None => None,
        };
        let Some(bytes) = bytes else {
            refuse(
                out,
                &rel,
                "the file changed while kstack read it (it was replaced); nothing was read",
                "run the command again",
            );
            continue;
        };
        out.overrides.insert(rel, bytes);
    }
    Ok(())
}

/// Reads `path`, which must still be the file `seen` described when it was checked (same
/// device and inode): a file swapped for another (a link to a file elsewhere) between the
/// check and the read is not read. `None`: it changed.
fn read_same(path: &Path, seen: &std::fs::Metadata) -> Result<Option<Vec<u8>>, FsError> {
    use std::io::Read as _;
    let err = |source| FsError::Read {
        path: path.to_owned(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(err)?;
    let now = f.metadata().map_err(err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if (now.dev(), now.ino()) != (seen.dev(), seen.ino()) || !now.is_file() {
            return Ok(None);
        }
    }
    #[cfg(not(unix))]
    if !now.is_file() || !seen.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(err)?;
    Ok(Some(bytes))
}

/// Reads `name`, a file of the config directory `dir` (`real_dir`: its path with every link
/// resolved): a regular file, or a symbolic link to a regular file inside the directory.
/// Anything else (a link leading out of the directory, a device, a pipe) is refused unread
/// with an error in `refused`, so no other file of the machine is read, or quoted in a
/// message, as config.
fn read_top(
    dir: &Path,
    real_dir: &Path,
    name: &str,
    refused: &mut Vec<Diag>,
) -> Result<Option<Vec<u8>>, FsError> {
    let path = dir.join(name);
    let mut refuse = |message: &str, help: &str| {
        refused.push(Diag::new(Severity::Error, name, message).help(help));
        Ok(None)
    };
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(FsError::Read { path, source }),
    };
    let (read_path, seen) = if meta.file_type().is_symlink() {
        let Ok(target) = std::fs::canonicalize(&path) else {
            return refuse(
                "the symbolic link points at nothing kstack can read",
                "fix or remove the link",
            );
        };
        if !target.starts_with(real_dir) {
            return refuse(
                "the symbolic link points outside the config directory; kstack does not read it",
                "copy the file into the config directory, or point --config-dir at the directory that holds it",
            );
        }
        match std::fs::metadata(&target) {
            Ok(m) if m.is_file() => (target, m),
            _ => {
                return refuse(
                    "the symbolic link points to something that is not a regular file",
                    "link to a regular file inside the config directory, or remove the link",
                );
            }
        }
    } else if meta.is_file() {
        // A file under a linked directory (`certificates/`) is judged by where it really is.
        if std::fs::canonicalize(&path).is_ok_and(|real| !real.starts_with(real_dir)) {
            return refuse(
                "the file is under a symbolic link that leads outside the config directory; kstack does not read it",
                "copy the file into the config directory",
            );
        }
        (path, meta)
    } else {
        return refuse(
            "this is not a regular file (a directory, device, socket or pipe); kstack does not read it",
            "make it a regular YAML file",
        );
    };
    match read_same(&read_path, &seen)? {
        Some(bytes) => Ok(Some(bytes)),
        None => refuse(
            "the file changed while kstack read it (it was replaced); nothing was read",
            "run the command again",
        ),
    }
}

/// Reads a config directory's files.
pub fn read_dir(dir: &Path) -> Result<Sources, FsError> {
    let real_dir = match std::fs::canonicalize(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Sources::default()),
        Err(source) => {
            return Err(FsError::Read {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut refused = Vec::new();
    let mut s = Sources {
        globals: read_top(dir, &real_dir, GLOBALS_FILE, &mut refused)?,
        passwords: read_top(dir, &real_dir, passwords::FILE, &mut refused)?,
        catalog: read_top(dir, &real_dir, crate::catalog::CATALOG_FILE, &mut refused)?,
        public_certificate: read_top(
            dir,
            &real_dir,
            crate::load::PUBLIC_CERTIFICATE_FILE,
            &mut refused,
        )?,
        ..Sources::default()
    };
    s.refused = refused;
    let cfg = dir.join(overrides::DIR);
    // Links are judged by where they lead with every link resolved, `config/` included.
    let real = match std::fs::canonicalize(&cfg) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(s),
        Err(source) => return Err(FsError::Read { path: cfg, source }),
    };
    if !real.starts_with(&real_dir) {
        refuse(
            &mut s,
            "",
            "`config/` is a symbolic link leading outside the config directory; kstack does not read it",
            "make `config/` a directory of the config directory (copy the files into it)",
        );
        return Ok(s);
    }
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

/// Writes `path` anew with `mode`, or the tighter mode an existing file has ([`keep_tighter`]):
/// what is there is removed first, never followed (a planted link gets replaced, its target
/// untouched), and the new file has its mode from the first byte.
pub fn replace_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), FsError> {
    let mode = keep_tighter(path, mode);
    let _ = std::fs::remove_file(path);
    create_new(path, bytes, mode)
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
