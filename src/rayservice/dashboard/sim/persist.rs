//! The simulated Ray's state across a restart of the process that plays it.
//!
//! A real Ray head does not restart when the operator does: its Serve apps, replicas and nodes keep
//! running. With `--data-dir` the simulator therefore keeps its state in a file beside the API
//! state (`ray-sim.json`), written on every change that is not a mere passing of time, and loads it
//! at start-up. Instants are stored as wall-clock milliseconds (`wall_clock`), so a build or a replica start that
//! was under way finishes when it would have, had the process not stopped.
//!
//! Losing the state is what a head restart without GCS fault tolerance does: `RaySim::start_cluster`
//! (the simulated autoscaler calls it when a cluster's head pod is replaced, see `autoscaler`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::state::SimCluster;

/// File name of the simulator's state in the data directory.
pub const FILE: &str = "ray-sim.json";

/// Bumped when the stored shape changes; a file of another version is not loaded.
const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("reading the simulated Ray state {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the simulated Ray state {path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("the simulated Ray state {path} has version {found}, this build reads version {VERSION}")]
    Version { path: PathBuf, found: u32 },
}

/// What is written: the heads' Serve state and the nodes' capacities (which outlive a head).
#[derive(Serialize)]
pub(super) struct SavedRef<'a> {
    version: u32,
    clusters: &'a HashMap<String, SimCluster>,
    failing_import_paths: &'a HashSet<String>,
    capacities: &'a HashMap<String, Option<u64>>,
}

impl<'a> SavedRef<'a> {
    pub(super) fn new(
        clusters: &'a HashMap<String, SimCluster>,
        failing_import_paths: &'a HashSet<String>,
        capacities: &'a HashMap<String, Option<u64>>,
    ) -> Self {
        Self {
            version: VERSION,
            clusters,
            failing_import_paths,
            capacities,
        }
    }
}

/// What is read back (the same fields as `SavedRef`).
#[derive(Deserialize)]
pub(super) struct Saved {
    version: u32,
    pub(super) clusters: HashMap<String, SimCluster>,
    pub(super) failing_import_paths: HashSet<String>,
    pub(super) capacities: HashMap<String, Option<u64>>,
}

/// Reads the saved state in `dir`, `None` when there is none yet.
pub(super) fn load(dir: &Path) -> Result<Option<Saved>, PersistError> {
    let path = dir.join(FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(PersistError::Read { path, source }),
    };
    let saved: Saved = serde_json::from_slice(&bytes).map_err(|source| PersistError::Parse {
        path: path.clone(),
        source,
    })?;
    if saved.version != VERSION {
        return Err(PersistError::Version {
            path,
            found: saved.version,
        });
    }
    Ok(Some(saved))
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a crash mid-write leaves the
/// previous state, never half of one. Readable by its owner only (0600), like every file of the data
/// directory: it names the clusters and their Serve configs.
pub(super) fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    // A temporary file left by a crash goes first: the new one is created afresh (never through a
    // link), with its mode from the start.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(&tmp)?.write_all(bytes)?;
    std::fs::rename(&tmp, path)
}
