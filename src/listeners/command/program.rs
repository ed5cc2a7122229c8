//! Finding the program a child process runs, before it is started: a child's environment is
//! cleared, so its own `PATH` cannot be trusted to find a bare name (without `PATH`, the C
//! library looks only in `/bin:/usr/bin`). The command tool and stdio MCP servers both use it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The program to start for `program`: a name with a `/` is a path (relative to `cwd`, the
/// child's working directory); a bare name is the first executable file of that name in a
/// folder of `path` (the host's `PATH`).
///
/// # Example
///
/// ```
/// use agentpump::listeners::command::locate;
/// let sh = locate("sh", std::path::Path::new("."), Some("/usr/bin:/bin".as_ref()));
/// assert!(sh.is_ok_and(|p| p.ends_with("sh")));
/// ```
///
/// # Errors
///
/// Why it cannot be started, to follow "cannot start `PROGRAM`: ": the path it names is
/// missing or not executable, or it is on no folder of `path` (each named), or `PATH` is not
/// set.
pub fn locate(program: &str, cwd: &Path, path: Option<&OsStr>) -> Result<PathBuf, String> {
    if program.contains('/') {
        let at = cwd.join(program);
        return if is_executable(&at) {
            Ok(at)
        } else if at.exists() {
            Err(format!("{} is not an executable file", at.display()))
        } else {
            Err(format!("{} does not exist", at.display()))
        };
    }
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        return Err("PATH is not set, so it cannot be looked up (give its full path)".to_owned());
    };
    let found = std::env::split_paths(path)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            }
        })
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate));
    found.ok_or_else(|| {
        format!(
            "not found on PATH (searched {}); install it or give its full path",
            path.to_string_lossy()
        )
    })
}

/// Whether `path` is a file someone may execute.
#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether `path` is a file (elsewhere than Unix, where execution is not a mode bit).
#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("agentpump-launch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_bare_name_is_the_first_executable_of_that_name_on_path() {
        let dir = scratch("path");
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        write(&a.join("srv"), 0o644); // not executable: passed over
        write(&b.join("srv"), 0o755);
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(locate("srv", &dir, Some(&path)), Ok(b.join("srv")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_program_names_what_was_searched() {
        let dir = scratch("missing");
        let err = locate("no-such-srv", &dir, Some(OsStr::new("/nowhere:/either"))).unwrap_err();
        assert!(
            err.contains("not found on PATH (searched /nowhere:/either)"),
            "{err}"
        );
        let err = locate("srv", &dir, None).unwrap_err();
        assert!(err.contains("PATH is not set"), "{err}");
        let err = locate("./bin/srv", &dir, None).unwrap_err();
        let missing = dir.join("./bin/srv");
        assert_eq!(err, format!("{} does not exist", missing.display()));
        write(&dir.join("plain"), 0o644);
        let err = locate("./plain", &dir, None).unwrap_err();
        assert!(err.contains("is not an executable file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_is_relative_to_the_servers_folder() {
        let dir = scratch("relative");
        write(&dir.join("srv.sh"), 0o755);
        assert_eq!(locate("./srv.sh", &dir, None), Ok(dir.join("./srv.sh")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
