//! The store's durable layer (`--data-dir`): every committed write goes into one redb database
//! (`state.redb` in the directory) before the API answers. The in-memory `Store` stays the source
//! of reads; this file only records its writes in RV order and loads them back on start.
//!
//! Group commit: the store hands each write to [`Durable::record`] under its lock (so the queue is
//! in RV order), a writer thread commits whatever has queued up in one fsynced transaction, and
//! [`Durable::synced`] resolves once a given RV is on disk. Because batches commit in order, the
//! disk always holds a prefix of the RV sequence: whatever a later write depended on is there too.

use super::registry::ResourceKey;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tokio::sync::watch;

/// The layout of `state.redb`. Bump when the tables or their encoding change; a directory written
/// with another format is refused with both numbers (no silent reinterpretation).
pub const FORMAT_VERSION: u64 = 1;

/// The database file inside the data directory.
pub const FILE_NAME: &str = "state.redb";

/// (group, plural, namespace, name) -> the object as compact JSON.
const OBJECTS: TableDefinition<(&str, &str, &str, &str), &[u8]> = TableDefinition::new("objects");
/// "format" and "rv" (the store's resourceVersion counter, which deletes also advance).
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// "written_by": the quotagate version that last wrote the directory (for error messages).
const INFO: TableDefinition<&str, &str> = TableDefinition::new("info");

/// Most writes one transaction commits: bounds the memory a batch holds while a slow disk catches up.
const MAX_BATCH: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    #[error("data directory {dir}: {source}")]
    Dir { dir: PathBuf, source: std::io::Error },
    #[error(
        "data directory {dir} is in use by another quotagate process ({file} is locked); stop it or use another --data-dir"
    )]
    Locked { dir: PathBuf, file: PathBuf },
    #[error(
        "{file} was written with data format {found} (by quotagate {written_by}); this quotagate {ours} reads format {FORMAT_VERSION}"
    )]
    Version {
        file: PathBuf,
        found: u64,
        written_by: String,
        ours: &'static str,
    },
    #[error("{file} cannot be read: {detail}")]
    Unreadable { file: PathBuf, detail: String },
    #[error("{file}: writing failed, so the API refuses writes until the disk takes them again: {detail}")]
    WriteFailed { file: PathBuf, detail: String },
}

/// One committed change, in RV order.
#[derive(Debug)]
pub enum Op {
    Put {
        key: ResourceKey,
        ns: String,
        name: String,
        /// The object as compact JSON, as the store holds it.
        object: Arc<[u8]>,
        rv: u64,
    },
    Delete {
        key: ResourceKey,
        ns: String,
        name: String,
        rv: u64,
    },
    /// The RV advanced without an object changing (the `expire_all` fault).
    Rv(u64),
}

impl Op {
    fn rv(&self) -> u64 {
        match self {
            Op::Put { rv, .. } | Op::Delete { rv, .. } | Op::Rv(rv) => *rv,
        }
    }
}

/// What the directory held at start.
pub struct Loaded {
    pub rv: u64,
    pub objects: Vec<(ResourceKey, Value)>,
}

#[derive(Clone, Debug, PartialEq)]
enum Synced {
    Upto(u64),
    Failed(String),
}

pub struct Durable {
    file: PathBuf,
    /// `None` only while dropping.
    tx: Option<mpsc::Sender<Op>>,
    synced: watch::Receiver<Synced>,
    writer: Option<JoinHandle<()>>,
    faults: Arc<DiskFaults>,
}

fn unreadable(file: &Path, detail: impl std::fmt::Display) -> DurableError {
    DurableError::Unreadable {
        file: file.to_path_buf(),
        detail: detail.to_string(),
    }
}

/// Opens (creating if needed) `dir`, takes its lock for the life of the returned `Durable`, checks
/// the format and loads every object.
pub fn open(dir: &Path) -> Result<(Durable, Loaded), DurableError> {
    super::private::private_dir(dir).map_err(|source| DurableError::Dir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let file = dir.join(FILE_NAME);
    super::private::private_file(&file).map_err(|source| DurableError::Dir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let db = match Database::create(&file) {
        Ok(db) => db,
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
            return Err(DurableError::Locked {
                dir: dir.to_path_buf(),
                file,
            });
        }
        Err(e) => return Err(unreadable(&file, e)),
    };
    let loaded = load_or_init(&db, &file)?;
    let (tx, rx) = mpsc::channel();
    let (synced_tx, synced) = watch::channel(Synced::Upto(loaded.rv));
    let writer_file = file.clone();
    let faults = Arc::new(DiskFaults::default());
    let writer_faults = faults.clone();
    let writer = std::thread::Builder::new()
        .name("quotagate-durable".into())
        .spawn(move || write_loop(db, &writer_file, rx, synced_tx, &writer_faults))
        .map_err(|source| DurableError::Dir {
            dir: dir.to_path_buf(),
            source,
        })?;
    let durable = Durable {
        file,
        tx: Some(tx),
        synced,
        writer: Some(writer),
        faults,
    };
    Ok((durable, loaded))
}

fn load_or_init(db: &Database, file: &Path) -> Result<Loaded, DurableError> {
    let read = db.begin_read().map_err(|e| unreadable(file, e))?;
    let format = match read.open_table(META) {
        Ok(meta) => meta
            .get("format")
            .map_err(|e| unreadable(file, e))?
            .map(|v| v.value()),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(unreadable(file, e)),
    };
    let Some(format) = format else {
        drop(read);
        init(db, file)?;
        return Ok(Loaded {
            rv: 0,
            objects: Vec::new(),
        });
    };
    if format != FORMAT_VERSION {
        let written_by = match read.open_table(INFO) {
            Ok(t) => t.get("written_by").ok().flatten().map(|v| v.value().to_string()),
            Err(_) => None,
        };
        return Err(DurableError::Version {
            file: file.to_path_buf(),
            found: format,
            written_by: written_by.unwrap_or_else(|| "unknown".into()),
            ours: env!("CARGO_PKG_VERSION"),
        });
    }
    let meta = read.open_table(META).map_err(|e| unreadable(file, e))?;
    let rv = meta
        .get("rv")
        .map_err(|e| unreadable(file, e))?
        .map(|v| v.value())
        .unwrap_or(0);
    let table = read.open_table(OBJECTS).map_err(|e| unreadable(file, e))?;
    let mut objects = Vec::new();
    for entry in table.iter().map_err(|e| unreadable(file, e))? {
        let (k, v) = entry.map_err(|e| unreadable(file, e))?;
        let (group, plural, ns, name) = k.value();
        let what = format!("{plural}.{group} {ns}/{name}");
        let object: Value =
            serde_json::from_slice(v.value()).map_err(|e| unreadable(file, format!("object {what}: {e}")))?;
        let obj_rv = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|r| r.parse::<u64>().ok());
        match obj_rv {
            Some(r) if r <= rv => {}
            _ => {
                return Err(unreadable(
                    file,
                    format!("object {what}: resourceVersion missing or above the stored counter {rv}"),
                ));
            }
        }
        objects.push((
            ResourceKey {
                group: group.to_string(),
                plural: plural.to_string(),
            },
            object,
        ));
    }
    Ok(Loaded { rv, objects })
}

fn init(db: &Database, file: &Path) -> Result<(), DurableError> {
    let txn = db.begin_write().map_err(|e| unreadable(file, e))?;
    {
        let mut meta = txn.open_table(META).map_err(|e| unreadable(file, e))?;
        meta.insert("format", FORMAT_VERSION)
            .map_err(|e| unreadable(file, e))?;
        meta.insert("rv", 0).map_err(|e| unreadable(file, e))?;
        let mut info = txn.open_table(INFO).map_err(|e| unreadable(file, e))?;
        info.insert("written_by", env!("CARGO_PKG_VERSION"))
            .map_err(|e| unreadable(file, e))?;
        txn.open_table(OBJECTS).map_err(|e| unreadable(file, e))?;
    }
    txn.commit().map_err(|e| unreadable(file, e))
}

/// The first and the longest pause between attempts to commit a batch the disk refused.
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(200);
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// Commits what has queued up, one fsynced transaction per round, until every sender is gone.
///
/// A commit the disk refuses (full, read-only, an I/O error) raises an alarm, as etcd's NOSPACE
/// alarm does: `Synced::Failed` makes the API refuse writes and the requests waiting on that batch
/// fail, while reads go on. The same batch is tried again, with back-off, until the disk takes it;
/// then the alarm clears and writes resume. Nothing is dropped: what was acknowledged is on disk, and
/// what was refused stays queued, in order, until it is.
fn write_loop(
    db: Database,
    file: &Path,
    rx: mpsc::Receiver<Op>,
    synced: watch::Sender<Synced>,
    faults: &DiskFaults,
) {
    // redb refuses every transaction after an I/O error until the database is opened again
    // ("Previous I/O error occurred"): after a refused commit the file is closed, and opened again
    // before the next attempt (which replays the whole batch over the last committed prefix).
    let mut db = Some(db);
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        let mut pause = RETRY_FIRST;
        let mut closing = false;
        loop {
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        closing = true;
                        break;
                    }
                }
            }
            let result = if faults.refusing() {
                Err("injected fault: no space left on device".to_string())
            } else {
                match db
                    .take()
                    .map_or_else(|| Database::create(file).map_err(|e| e.to_string()), Ok)
                {
                    Ok(open) => {
                        let r = commit(&open, &batch);
                        if r.is_ok() {
                            db = Some(open);
                        }
                        r
                    }
                    Err(e) => Err(e),
                }
            };
            match result {
                Ok(rv) => {
                    if matches!(*synced.borrow(), Synced::Failed(_)) {
                        tracing::info!(file = %file.display(), "the data directory takes writes again; the API accepts writes");
                    }
                    synced.send_replace(Synced::Upto(rv));
                    break;
                }
                Err(detail) => {
                    if closing {
                        // Shutting down with the disk still refusing: these writes were never
                        // acknowledged, and waiting for space would hang the process's exit.
                        tracing::error!(file = %file.display(), %detail, unwritten = batch.len(), "stopping with writes the data directory refused");
                        return;
                    }
                    if !matches!(*synced.borrow(), Synced::Failed(_)) {
                        tracing::error!(file = %file.display(), %detail, "the data directory cannot be written; refusing writes until it can");
                    }
                    synced.send_replace(Synced::Failed(detail));
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(RETRY_MAX);
                }
            }
        }
    }
}

/// A test's switch that makes the disk refuse commits (as a full or read-only one does).
#[derive(Default)]
pub struct DiskFaults(std::sync::atomic::AtomicBool);

impl DiskFaults {
    pub fn set_refusing(&self, on: bool) {
        self.0.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    fn refusing(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn commit(db: &Database, batch: &[Op]) -> Result<u64, String> {
    let txn = db.begin_write().map_err(|e| e.to_string())?;
    let mut last = 0;
    {
        let mut objects = txn.open_table(OBJECTS).map_err(|e| e.to_string())?;
        for op in batch {
            match op {
                Op::Put {
                    key,
                    ns,
                    name,
                    object,
                    ..
                } => {
                    objects
                        .insert(
                            (
                                key.group.as_str(),
                                key.plural.as_str(),
                                ns.as_str(),
                                name.as_str(),
                            ),
                            &object[..],
                        )
                        .map_err(|e| e.to_string())?;
                }
                Op::Delete { key, ns, name, .. } => {
                    objects
                        .remove((
                            key.group.as_str(),
                            key.plural.as_str(),
                            ns.as_str(),
                            name.as_str(),
                        ))
                        .map_err(|e| e.to_string())?;
                }
                Op::Rv(_) => {}
            }
            last = last.max(op.rv());
        }
        let mut meta = txn.open_table(META).map_err(|e| e.to_string())?;
        meta.insert("rv", last).map_err(|e| e.to_string())?;
    }
    txn.commit().map_err(|e| e.to_string())?;
    Ok(last)
}

impl Durable {
    /// Queues one committed change. Called under the store's lock, so the queue is in RV order.
    pub fn record(&self, op: Op) {
        // A writer that stopped has published `Failed`; `synced` reports it to the waiting request.
        if let Some(tx) = &self.tx {
            let _ = tx.send(op);
        }
    }

    /// Resolves once every change up to `rv` is on disk; an error once writing has failed.
    pub async fn synced(&self, rv: u64) -> Result<(), DurableError> {
        let mut rx = self.synced.clone();
        let outcome = rx
            .wait_for(|s| match s {
                Synced::Upto(done) => *done >= rv,
                Synced::Failed(_) => true,
            })
            .await
            .map(|s| s.clone());
        match outcome {
            Ok(Synced::Upto(_)) => Ok(()),
            Ok(Synced::Failed(detail)) => Err(DurableError::WriteFailed {
                file: self.file.clone(),
                detail,
            }),
            Err(_) => Err(DurableError::WriteFailed {
                file: self.file.clone(),
                detail: "the writer thread stopped".into(),
            }),
        }
    }

    /// Resolves once every change up to `rv` is on disk, waiting through an alarm (a watch delivers
    /// its events once they are written, however long the disk takes); an error only if the writer
    /// is gone.
    pub async fn persisted(&self, rv: u64) -> Result<(), DurableError> {
        let mut rx = self.synced.clone();
        match rx
            .wait_for(|s| matches!(s, Synced::Upto(done) if *done >= rv))
            .await
        {
            Ok(_) => Ok(()),
            Err(_) => Err(DurableError::WriteFailed {
                file: self.file.clone(),
                detail: "the writer thread stopped".into(),
            }),
        }
    }

    /// Why writes are refused, while the disk refuses them.
    pub fn failure(&self) -> Option<DurableError> {
        match &*self.synced.borrow() {
            Synced::Failed(detail) => Some(DurableError::WriteFailed {
                file: self.file.clone(),
                detail: detail.clone(),
            }),
            Synced::Upto(_) => None,
        }
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The switch tests use to make the disk refuse commits.
    pub fn disk_faults(&self) -> &DiskFaults {
        &self.faults
    }
}

impl Drop for Durable {
    /// Lets the writer commit what is queued, then waits for it: the lock is free once this returns.
    fn drop(&mut self) {
        self.tx.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}
