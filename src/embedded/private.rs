//! Files only their owner can read and nobody can redirect: the kubeconfig, the credentials and the
//! data directory hold the listener's token and every Secret of the cluster.

use std::io::Write;
use std::path::Path;

fn refused(detail: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, detail)
}

/// The user this process runs as (the owner of `/proc/self`); `None` where that cannot be read.
#[cfg(unix)]
pub fn current_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Writes `bytes` to `path`, readable by its owner only (0600): into a new file beside it, created
/// exclusively (`O_CREAT|O_EXCL` never follows a symbolic link, so nothing planted there can
/// redirect the write), synced, then renamed over `path`. A `path` that is a symbolic link, not a
/// regular file, or owned by another user is refused: writing the token into a file someone else
/// owns would hand it to them.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| refused(format!("{} names no file", path.display())))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let existing = match std::fs::symlink_metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if let Some(m) = &existing {
        if m.file_type().is_symlink() {
            return Err(refused(format!(
                "{} is a symbolic link; refusing to write credentials through it (remove it or choose another path)",
                path.display()
            )));
        }
        if !m.is_file() {
            return Err(refused(format!(
                "{} exists and is not a regular file",
                path.display()
            )));
        }
    }
    #[cfg(unix)]
    if let (Some(m), Some(me)) = (&existing, current_uid()) {
        use std::os::unix::fs::MetadataExt;
        if m.uid() != me {
            return Err(refused(format!(
                "{} is owned by another user (uid {}); refusing to write credentials into it (remove it or choose another path)",
                path.display(),
                m.uid()
            )));
        }
    }
    let tmp = dir.join(format!(
        ".{}.{:016x}.tmp",
        name.to_string_lossy(),
        rand::random::<u64>()
    ));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Makes `dir` (and missing parents) with mode 0700, or checks an existing one: owned by this
/// process's user, and with no group or other access. etcd checks its data directory the same way
/// ("the recommended permission is -rwx------ to prevent possible unprivileged access to the
/// data"); where etcd only warns, a directory holding every Secret is tightened to 0700 (with a log
/// line), and one owned by another user is refused.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let m = std::fs::metadata(dir)?;
        if let Some(me) = current_uid()
            && m.uid() != me
        {
            return Err(refused(format!(
                "{} is owned by another user (uid {}); the data directory must belong to the user quotagate runs as",
                dir.display(),
                m.uid()
            )));
        }
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::info!(
                dir = %dir.display(),
                was = format!("{mode:o}"),
                "data directory had group or other access; set to 0700 (it holds every Secret of the cluster)"
            );
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// Creates `file` readable by its owner only if it is missing, and narrows it to 0600 if it exists.
pub fn private_file(file: &Path) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        opts.mode(0o600);
        let f = opts.open(file)?;
        if f.metadata()?.permissions().mode() & 0o077 != 0 {
            f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
    }
    #[cfg(not(unix))]
    opts.open(file)?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("quotagate-private-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_private_file_replaces_what_was_there_with_a_0600_file() {
        let d = scratch("file");
        let p = d.join("kubeconfig");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&p, b"token").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "token");
        assert_eq!(mode(&p), 0o600);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_planted_symlink_is_refused_and_its_target_untouched() {
        let d = scratch("link");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let p = d.join("kubeconfig");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let err = write_private(&p, b"token").unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(mode(&victim), 0o644);
        // A dangling link too (it would otherwise create the file it points to).
        std::fs::remove_file(&victim).unwrap();
        assert!(write_private(&p, b"token").is_err());
        assert!(!victim.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_data_directory_is_made_0700_and_a_loose_one_tightened() {
        let d = scratch("dir");
        let fresh = d.join("a/b");
        private_dir(&fresh).unwrap();
        assert_eq!(mode(&fresh), 0o700);
        let loose = d.join("loose");
        std::fs::create_dir(&loose).unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&loose).unwrap();
        assert_eq!(mode(&loose), 0o700);
        let f = loose.join("state.redb");
        std::fs::write(&f, "").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        private_file(&f).unwrap();
        assert_eq!(mode(&f), 0o600);
        let new = loose.join("new");
        private_file(&new).unwrap();
        assert_eq!(mode(&new), 0o600);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
