//! The loop's folder: AGENTS.md, `evidence/loop/` (§10.1), `scratch/` (the stop flag) and the
//! Solver's artifacts — every path relative to it, checked before use; and the backpressure
//! signals read from it (§6.1: the stop flag, disk usage).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rust_decimal::Decimal;
use sha2::{Digest as _, Sha256};

use crate::listeners::capsule::{ArtifactLink, is_relative_inside};

/// AGENTS.md's path in the workspace.
pub const AGENTS_MD: &str = "AGENTS.md";
/// The evidence folder (§10.1 `${EVIDENCE_ROOT}/loop`).
pub const EVIDENCE: &str = "evidence/loop";
/// The stop flag (§6.1 `stop_flag_file: "scratch/STOP"`).
pub const STOP_FLAG: &str = "scratch/STOP";

/// Reads the used fraction of the file system holding a folder (`None` when unknown).
pub type DiskProbe = Arc<dyn Fn(&Path) -> Option<Decimal> + Send + Sync>;

/// A file operation that failed, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("loop workspace file {path}: {source}")]
pub struct WorkspaceError {
    /// The file, relative to the workspace.
    pub path: String,
    /// What the OS said.
    #[source]
    pub source: std::io::Error,
}

/// The loop's folder.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

/// Why a path a role names is not taken.
pub fn refusal(path: &str) -> Option<String> {
    if !is_relative_inside(path) {
        Some(format!(
            "`{path}` is not a relative path inside the workspace"
        ))
    } else if path == AGENTS_MD {
        Some("AGENTS.md is written by the loop controller only (phuc-loop §7.1: \"Solver writing directly to AGENTS.md without Skeptic verification\" is forbidden)".into())
    } else if path.starts_with("evidence/") || path.starts_with("scratch/") {
        Some(format!("`{path}` is in a folder the loop controller owns"))
    } else {
        None
    }
}

/// sha256 (hex) of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Workspace {
    /// The workspace at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Its root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn err(rel: &str, source: std::io::Error) -> WorkspaceError {
        WorkspaceError {
            path: rel.to_owned(),
            source,
        }
    }

    /// Writes `text` to `rel` (folders created) and links it with `role`.
    ///
    /// # Errors
    ///
    /// The file cannot be written.
    pub async fn write(
        &self,
        rel: &str,
        text: &str,
        role: &str,
    ) -> Result<ArtifactLink, WorkspaceError> {
        let path = self.path(rel);
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| Self::err(rel, e))?;
        }
        tokio::fs::write(&path, text)
            .await
            .map_err(|e| Self::err(rel, e))?;
        Ok(ArtifactLink {
            path: rel.to_owned(),
            sha256: sha256(text.as_bytes()),
            role: role.to_owned(),
        })
    }

    /// Links the existing file `rel` with `role`.
    ///
    /// # Errors
    ///
    /// The file cannot be read.
    pub async fn link(&self, rel: &str, role: &str) -> Result<ArtifactLink, WorkspaceError> {
        let bytes = tokio::fs::read(self.path(rel))
            .await
            .map_err(|e| Self::err(rel, e))?;
        Ok(ArtifactLink {
            path: rel.to_owned(),
            sha256: sha256(&bytes),
            role: role.to_owned(),
        })
    }

    /// The text of `rel`, `None` when it does not exist.
    ///
    /// # Errors
    ///
    /// Any other read failure.
    pub async fn read(&self, rel: &str) -> Result<Option<String>, WorkspaceError> {
        match tokio::fs::read(self.path(rel)).await {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Self::err(rel, e)),
        }
    }

    /// Whether the stop flag is present.
    pub async fn stop_flag(&self) -> bool {
        tokio::fs::try_exists(self.path(STOP_FLAG))
            .await
            .unwrap_or(false)
    }
}

/// The used fraction of the file system holding `dir` (statvfs), `None` when unknown.
pub fn disk_usage(dir: &Path) -> Option<Decimal> {
    #[cfg(unix)]
    {
        let s = nix::sys::statvfs::statvfs(dir).ok()?;
        // As df computes Use%: used / (used + available to unprivileged users).
        // fsblkcnt_t is u64 on Linux, u32 on some other unixes.
        #[allow(clippy::useless_conversion)]
        let (total, free, available) = (
            u64::try_from(s.blocks()).ok()?,
            u64::try_from(s.blocks_free()).ok()?,
            u64::try_from(s.blocks_available()).ok()?,
        );
        let used = Decimal::from(total.saturating_sub(free));
        let room = used + Decimal::from(available);
        (!room.is_zero()).then(|| used / room)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_may_not_name_the_controllers_files() {
        for (path, refused) in [
            ("out/a.txt", false),
            ("AGENTS.md", true),
            ("evidence/loop/manifest.json", true),
            ("scratch/STOP", true),
            ("/tmp/x", true),
            ("a/../../x", true),
        ] {
            assert_eq!(refusal(path).is_some(), refused, "{path}");
        }
    }

    #[test]
    fn disk_usage_is_a_fraction() {
        if let Some(used) = disk_usage(Path::new(".")) {
            assert!(used >= Decimal::ZERO && used <= Decimal::ONE, "{used}");
        }
    }
}
