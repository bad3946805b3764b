//! The on-disk store of chunk vectors: one append-only file per (index, embedding
//! identity).
//!
//! Layout of `<index dir>.vectors/<first 16 hex of blake3(identity)>.vec`:
//!
//! ```text
//! magic     8 bytes   b"RLVEC\0\x01\n"
//! len       u32 LE    length of the header
//! header    JSON      {"identity": "...", "dim": N}
//! records   ...       16-byte chunk id (UUID bytes) + N × f32 LE (unit length)
//! ```
//!
//! Records are appended after every embedded batch, so an interrupted build keeps
//! what it paid for; a record cut short by a crash is ignored (and cut off before the
//! next append). A later record for the same id wins. When dead records (chunks no
//! longer in the index, repeats) outnumber live ones, the file is rewritten into a
//! temporary sibling and renamed into place.
use super::RetrievalError;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"RLVEC\0\x01\n";

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    identity: String,
    dim: usize,
}

/// What a store file holds.
pub(crate) struct Loaded {
    /// Vector size of the records (`None`: no usable file).
    pub dim: Option<usize>,
    /// Vectors by chunk id.
    pub records: HashMap<uuid::Uuid, Vec<f32>>,
    /// Records in the file, repeats and dead ones included.
    pub stored: usize,
    /// Bytes of the file that hold whole records (where the next append goes).
    pub valid_len: u64,
    /// Why an existing file was not used, when it was not.
    pub note: Option<String>,
}

/// The store file of `identity` for the index at `index_dir`.
pub(crate) fn store_path(index_dir: &Path, identity: &str) -> PathBuf {
    let name = index_dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "index".into());
    let parent = index_dir.parent().unwrap_or(Path::new("."));
    let key = blake3::hash(identity.as_bytes()).to_hex();
    parent
        .join(format!("{name}.vectors"))
        .join(format!("{}.vec", &key.as_str()[..16]))
}

fn empty(note: Option<String>) -> Loaded {
    Loaded {
        dim: None,
        records: HashMap::new(),
        stored: 0,
        valid_len: 0,
        note,
    }
}

/// Reads the store at `path` made under `identity`; a missing, foreign or damaged
/// file loads as empty (with a note for the last two).
pub(crate) fn load(path: &Path, identity: &str) -> Loaded {
    let mut bytes = Vec::new();
    match File::open(path).and_then(|mut f| f.read_to_end(&mut bytes)) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return empty(None),
        Err(e) => {
            return empty(Some(format!(
                "cannot read {}: {e}; re-embedding",
                path.display()
            )))
        }
    }
    let bad = |why: &str| {
        empty(Some(format!(
            "vector store {} {why}; re-embedding",
            path.display()
        )))
    };
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return bad("is not a ragloop vector file");
    }
    let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    let Some(raw) = bytes.get(12..12 + len) else {
        return bad("has a truncated header");
    };
    let Ok(header) = serde_json::from_slice::<Header>(raw) else {
        return bad("has an invalid header");
    };
    if header.identity != identity {
        return bad("was made by another embedding model");
    }
    if header.dim == 0 {
        return bad("has zero-sized vectors");
    }
    let dim = header.dim;
    let rec = 16 + 4 * dim;
    let body = &bytes[12 + len..];
    let whole = body.len() / rec;
    let mut records = HashMap::with_capacity(whole);
    for r in body.chunks_exact(rec) {
        let mut id = [0u8; 16];
        id.copy_from_slice(&r[..16]);
        let v: Vec<f32> = r[16..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if v.iter().all(|x| x.is_finite()) {
            records.insert(uuid::Uuid::from_bytes(id), v);
        }
    }
    Loaded {
        dim: Some(dim),
        records,
        stored: whole,
        valid_len: (12 + len + whole * rec) as u64,
        note: None,
    }
}

fn header_bytes(identity: &str, dim: usize) -> Vec<u8> {
    let header = serde_json::to_vec(&Header {
        identity: identity.to_string(),
        dim,
    })
    .unwrap_or_default();
    let mut out = Vec::with_capacity(12 + header.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out
}

fn record_bytes(out: &mut Vec<u8>, id: &uuid::Uuid, v: &[f32]) {
    out.extend_from_slice(id.as_bytes());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

fn io(action: &'static str, path: &Path, e: std::io::Error) -> RetrievalError {
    RetrievalError::io(action, path, e)
}

/// Writes `records` (in the given order) as a fresh store, atomically: temporary
/// sibling, fsync, rename.
pub(crate) fn rewrite<'a>(
    path: &Path,
    identity: &str,
    dim: usize,
    records: impl Iterator<Item = (&'a uuid::Uuid, &'a [f32])>,
) -> Result<u64, RetrievalError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("creating", dir, e))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut bytes = header_bytes(identity, dim);
    for (id, v) in records {
        record_bytes(&mut bytes, id, v);
    }
    let mut f = File::create(&tmp).map_err(|e| io("creating", &tmp, e))?;
    f.write_all(&bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| io("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io("moving into place", path, e)
    })?;
    Ok(bytes.len() as u64)
}

/// Appends records to a store whose whole records end at `valid_len`.
pub(crate) struct Appender {
    file: File,
    path: PathBuf,
}

impl Appender {
    /// Opens `path` for appending after cutting it to `valid_len` bytes.
    pub(crate) fn open(path: &Path, valid_len: u64) -> Result<Appender, RetrievalError> {
        let mut file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io("opening", path, e))?;
        file.set_len(valid_len)
            .and_then(|_| file.seek(SeekFrom::End(0)).map(|_| ()))
            .map_err(|e| io("truncating", path, e))?;
        Ok(Appender {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Appends one batch of records (one write).
    pub(crate) fn append(
        &mut self,
        batch: &[(uuid::Uuid, Vec<f32>)],
    ) -> Result<(), RetrievalError> {
        let mut bytes = Vec::new();
        for (id, v) in batch {
            record_bytes(&mut bytes, id, v);
        }
        self.file
            .write_all(&bytes)
            .map_err(|e| io("writing", &self.path, e))
    }

    /// Flushes the file to disk.
    pub(crate) fn finish(self) -> Result<(), RetrievalError> {
        self.file
            .sync_all()
            .map_err(|e| io("syncing", &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_io_failures_are_retrieval_errors_naming_the_action_and_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.vectors");
        let e = Appender::open(&missing, 0).err().unwrap();
        assert!(
            matches!(&e, RetrievalError::Io { action: "opening", path, .. } if path == &missing)
        );
        assert!(e
            .to_string()
            .starts_with(&format!("opening {}: ", missing.display())));
    }

    #[test]
    fn round_trip_append_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = store_path(&dir.path().join("abc"), "m\0u\0native");
        assert!(path
            .ends_with("abc.vectors/".to_string() + path.file_name().unwrap().to_str().unwrap()));
        let a = uuid::Uuid::from_u128(1);
        let b = uuid::Uuid::from_u128(2);
        let len = rewrite(&path, "id", 2, [(&a, &[1.0f32, 0.0][..])].into_iter()).unwrap();
        let mut app = Appender::open(&path, len).unwrap();
        app.append(&[(b, vec![0.0, 1.0])]).unwrap();
        app.finish().unwrap();
        // A torn record at the end.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[7u8; 10]).unwrap();
        let l = load(&path, "id");
        assert_eq!(l.dim, Some(2));
        assert_eq!(l.stored, 2);
        assert_eq!(l.records[&b], vec![0.0, 1.0]);
        assert_eq!(l.valid_len, len + 16 + 8);
        assert!(load(&path, "other")
            .note
            .unwrap()
            .contains("another embedding model"));
        std::fs::write(&path, b"garbage").unwrap();
        assert!(load(&path, "id")
            .note
            .unwrap()
            .contains("not a ragloop vector file"));
    }
}
