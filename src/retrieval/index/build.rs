//! Writing an index: every file of the corpus loaded, chunked and added to a new
//! tantivy index, then the manifest.

use std::io::Write;
use std::path::Path;

use tantivy::TantivyDocument;

use super::super::hygiene::for_each_kept;
use super::super::ingest::chunk_file;
use super::super::{IndexOptions, RetrievalError, Skips};
use super::{analyzer, schema, tv, Manifest, FORMAT_VERSION, MANIFEST, TOKENIZER};

/// The headings of a chunk as indexed with its text: the heading path, after the page
/// title when the path does not start with it.
fn heading_context(title: &str, headings: &[&str]) -> String {
    let mut parts: Vec<&str> = Vec::with_capacity(headings.len() + 1);
    if !title.is_empty() && headings.first() != Some(&title) {
        parts.push(title);
    }
    parts.extend_from_slice(headings);
    parts.join("\n")
}

/// What identifies the corpus an index is built from, written into its manifest: the
/// content fingerprint and the per-file stamps that spare rehashing next time.
pub(super) struct Identity {
    pub fingerprint: String,
    pub stamps: Vec<super::super::fingerprint::FileStamp>,
}

pub(super) fn write_index(
    corpus: &Path,
    dir: &Path,
    files: Vec<super::super::ingest::Candidate>,
    opts: &IndexOptions,
    identity: Identity,
    skips: &mut Skips,
    warnings: &mut Vec<String>,
) -> Result<(usize, usize), RetrievalError> {
    let (schema, f) = schema();
    let index = tantivy::Index::create_in_dir(dir, schema).map_err(tv(dir))?;
    index.tokenizers().register(TOKENIZER, analyzer());
    let budget = opts.writer_memory.clamp(15_000_000, 2_000_000_000);
    let mut writer: tantivy::IndexWriter<TantivyDocument> =
        index.writer_with_num_threads(1, budget).map_err(tv(dir))?;
    let pb = super::super::progress::bar(
        opts.progress,
        files.len(),
        "{spinner} {msg} [{bar:30}] {pos}/{len} files",
    );
    pb.set_message("indexing");
    let (mut n_files, mut n_chunks) = (0usize, 0usize);
    for_each_kept(&files, opts, skips, warnings, |cand, extracted, skips| {
        pb.inc(1);
        let Some(loaded) = chunk_file(cand, extracted, &opts.chunk, skips) else {
            return Ok(());
        };
        n_files += 1;
        for d in loaded.documents {
            let mut doc = TantivyDocument::default();
            let title = d
                .metadata
                .get("title")
                .and_then(|v| v.as_str())
                .unwrap_or("");
            let headings: Vec<&str> = d
                .metadata
                .get("heading_path")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            doc.add_text(f.id, &d.id);
            doc.add_text(f.title, title);
            doc.add_text(f.headings, headings.join("\n"));
            // The stored text is the first value of `content` (what `decode` reads);
            // the heading context is indexed after it.
            doc.add_text(f.content, &d.content);
            if opts.heading_weight > 0 {
                let context = heading_context(title, &headings);
                for _ in 0..opts.heading_weight {
                    doc.add_text(f.content, &context);
                }
            }
            doc.add_text(f.meta, serde_json::Value::Object(d.metadata).to_string());
            writer.add_document(doc).map_err(tv(dir))?;
            n_chunks += 1;
        }
        Ok::<(), RetrievalError>(())
    })?;
    pb.finish_and_clear();
    if n_chunks == 0 {
        return Err(RetrievalError::EmptyCorpus {
            dir: corpus.to_path_buf(),
            skipped: skips.len(),
        });
    }
    writer.commit().map_err(tv(dir))?;
    writer.wait_merging_threads().map_err(tv(dir))?;
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        fingerprint: identity.fingerprint,
        files: n_files,
        chunks: n_chunks,
        skipped: skips.len(),
        skipped_files: skips.files.clone(),
        warnings: warnings.clone(),
        corpus: corpus.display().to_string(),
        stamps: identity.stamps,
    };
    write_manifest(&dir.join(MANIFEST), &manifest)?;
    Ok((n_files, n_chunks))
}

/// Writes `manifest` to `path` and syncs it.
///
/// # Errors
/// [`RetrievalError::Io`] naming `path`.
pub(super) fn write_manifest(path: &Path, manifest: &Manifest) -> Result<(), RetrievalError> {
    let json = serde_json::to_vec_pretty(manifest)
        .map_err(|e| RetrievalError::io("writing", path, e.into()))?;
    let mut file =
        std::fs::File::create(path).map_err(|e| RetrievalError::io("creating", path, e))?;
    file.write_all(&json)
        .and_then(|_| file.sync_all())
        .map_err(|e| RetrievalError::io("writing", path, e))
}
