//! Writing a rendered bundle: `compose.yaml` and the containers' config directories, with the
//! modes their contents call for.
use std::io::Write as _;
use std::path::Path;

use kstack_config::fs;
use kstack_render::compose::{COMPOSE_FILE, CONFIG_DIR, ComposeBundle, HEADER};

use crate::runner::Error;

/// Writes `dir/compose.yaml` and `dir/config/<path>/<file>`: secret files mode 0600, the others
/// 0644. A `config/` left by an earlier kstack render is replaced whole, so a disabled service's
/// files (and passwords) do not linger; one kstack did not write is left alone.
pub fn write_bundle(bundle: &ComposeBundle, dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let compose_path = dir.join(COMPOSE_FILE);
    let config_root = dir.join(CONFIG_DIR);
    let ours = std::fs::read_to_string(&compose_path).is_ok_and(|s| s.starts_with(HEADER));
    if ours && config_root.exists() {
        std::fs::remove_dir_all(&config_root).map_err(Error::io(format!(
            "removing the old {}",
            config_root.display()
        )))?;
    }
    for d in &bundle.config_dirs {
        let path = config_root.join(&d.path);
        std::fs::create_dir_all(&path)
            .map_err(Error::io(format!("creating {}", path.display())))?;
        for f in &d.files {
            write_file(
                &path.join(&f.name),
                f.content.as_bytes(),
                if f.secret { 0o600 } else { 0o644 },
            )?;
        }
    }
    write_file(&compose_path, bundle.to_yaml().as_bytes(), 0o644)
}

/// Creates or replaces a file with `mode`: a secret is never readable by others, not even
/// between creation and a later chmod. A file that exists keeps any permission the operator
/// took away ([`kstack_config::fs::keep_tighter`]): modes stay or tighten, never widen.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mode = fs::keep_tighter(path, mode);
    let writing = || Error::io(format!("writing {}", path.display()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(writing())?;
    // An existing file keeps its old mode on open: set it explicitly.
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(Error::io(format!("setting the mode of {}", path.display())))?;
    f.write_all(bytes).map_err(writing())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::tests::config;
    use kstack_render::compose;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn files_are_written_with_their_modes_and_stale_ones_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = compose::render(&config()).unwrap();
        // Left over from an earlier render of a service that is now disabled.
        let stale = tmp.path().join("config/cinder-api/cinder-api");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("config.json"), "{}").unwrap();
        std::fs::write(tmp.path().join(COMPOSE_FILE), HEADER).unwrap();

        write_bundle(&bundle, tmp.path()).unwrap();
        assert!(!stale.exists(), "a disabled service's files are removed");
        let compose_yaml = std::fs::read_to_string(tmp.path().join(COMPOSE_FILE)).unwrap();
        assert_eq!(compose_yaml, bundle.to_yaml());
        let mut secrets = 0;
        for d in &bundle.config_dirs {
            for f in &d.files {
                let p = tmp.path().join(CONFIG_DIR).join(&d.path).join(&f.name);
                assert_eq!(std::fs::read_to_string(&p).unwrap(), f.content);
                let want = if f.secret { 0o600 } else { 0o644 };
                assert_eq!(mode(&p), want, "{}", p.display());
                secrets += usize::from(f.secret);
            }
        }
        assert!(secrets > 0, "the task files holding passwords are secret");
        assert_eq!(
            mode(
                &tmp.path()
                    .join("config/keystone/tasks/db-create/client.cnf")
            ),
            0o600
        );
        assert_eq!(
            mode(&tmp.path().join("config/keystone/keystone/config.json")),
            0o644
        );
    }

    #[test]
    fn a_mode_the_operator_tightened_is_kept_on_the_next_render() {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = compose::render(&config()).unwrap();
        write_bundle(&bundle, tmp.path()).unwrap();
        let compose_yaml = tmp.path().join(COMPOSE_FILE);
        assert_eq!(mode(&compose_yaml), 0o644);
        std::fs::set_permissions(&compose_yaml, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_bundle(&bundle, tmp.path()).unwrap();
        assert_eq!(mode(&compose_yaml), 0o640, "widened again");
        assert_eq!(
            std::fs::read_to_string(&compose_yaml).unwrap(),
            bundle.to_yaml()
        );
    }

    #[test]
    fn an_unrelated_config_dir_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let mine = tmp.path().join("config/notes.txt");
        std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
        std::fs::write(&mine, "keep").unwrap();
        write_bundle(&compose::render(&config()).unwrap(), tmp.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&mine).unwrap(), "keep");
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("plain-file");
        std::fs::write(&file, "").unwrap();
        let err =
            write_bundle(&compose::render(&config()).unwrap(), &file.join("sub")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("creating {}: ", file.join("sub").display())),
            "{err}"
        );
    }
}
