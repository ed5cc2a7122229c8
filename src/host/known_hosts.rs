//! How the CLI finds the token of a host it talks to from any folder: a host that starts
//! listening records its token under its address in the user's state directory
//! (`$XDG_STATE_HOME/agentpump/hosts/`, else `~/.local/state/agentpump/hosts/`; the folder
//! mode 0700, each file 0600), and a client command looks there for the address of its
//! `--url` when no token is given (docs/http-api.md, "Authentication").
//!
//! The file is a copy for the user's own commands; the token file next to the organism
//! stays the host's source. A host started again on the same address writes its token anew.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The folder of recorded tokens, or `None` when neither `XDG_STATE_HOME` nor `HOME` is set.
pub fn dir() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| {
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
            Some(PathBuf::from(home).join(".local/state"))
        })?;
    Some(state.join("agentpump/hosts"))
}

/// The file name for a host at `host:port` (`127.0.0.1_7878.token`).
fn file_name(host: &str, port: u16) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    format!("{}_{port}.token", host.replace(':', "-"))
}

/// Records `token` for the host listening on `address` in [`dir`].
///
/// # Errors
///
/// No state directory (neither variable set), or the folder or file cannot be written.
pub fn record(address: SocketAddr, token: &str) -> Result<PathBuf, String> {
    let dir = dir().ok_or("neither XDG_STATE_HOME nor HOME is set")?;
    let file = dir.join(file_name(&address.ip().to_string(), address.port()));
    write_private(&dir, &file, token).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(file)
}

#[cfg(unix)]
fn write_private(dir: &Path, file: &Path, token: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // Written under a private name and renamed into place: a reader sees the old token or the
    // new one, never half of one.
    let staged = file.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&staged)?;
        writeln!(f, "{token}")?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&staged, file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&staged);
    }
    written
}

#[cfg(not(unix))]
fn write_private(dir: &Path, file: &Path, token: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(file, format!("{token}\n"))
}

/// The files that may hold the token of the host at `url`, most specific first: its own
/// address, then (for a loopback URL) a host listening on every interface at that port.
pub fn candidates(url: &str) -> Vec<PathBuf> {
    let Some(dir) = dir() else {
        return Vec::new();
    };
    let Some((host, port)) = authority(url) else {
        return Vec::new();
    };
    let host = if host.eq_ignore_ascii_case("localhost") {
        "127.0.0.1".to_owned()
    } else {
        host
    };
    let mut names = vec![file_name(&host, port)];
    if host == "127.0.0.1" {
        names.push(file_name("0.0.0.0", port));
    } else if host == "[::1]" || host == "::1" {
        names.push(file_name("::", port));
    }
    names.into_iter().map(|n| dir.join(n)).collect()
}

/// The host and port of an `http://` or `https://` URL (the scheme's port when none is given).
fn authority(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => Some((host.to_owned(), port.parse().ok()?)),
        _ => Some((authority.to_owned(), default)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_url_names_its_host_and_port() {
        let cases = [
            ("http://127.0.0.1:7878", Some(("127.0.0.1", 7878))),
            (
                "http://127.0.0.1:7878/threads?x=1",
                Some(("127.0.0.1", 7878)),
            ),
            (
                "https://agents.example.com/",
                Some(("agents.example.com", 443)),
            ),
            ("http://[::1]:9000", Some(("[::1]", 9000))),
            ("http://[::1]", Some(("[::1]", 80))),
            ("http://u:p@h:1", Some(("h", 1))),
            ("ftp://h:1", None),
            ("127.0.0.1:7878", None),
            ("http://h:notaport", None),
        ];
        for (url, expected) in cases {
            let got = authority(url);
            let got = got.as_ref().map(|(h, p)| (h.as_str(), *p));
            assert_eq!(got, expected, "{url}");
        }
    }

    #[test]
    fn file_names_hold_no_colon() {
        assert_eq!(file_name("127.0.0.1", 7878), "127.0.0.1_7878.token");
        assert_eq!(file_name("[::1]", 9), "--1_9.token");
        assert_eq!(file_name("::1", 9), "--1_9.token");
    }
}
