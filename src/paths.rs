//! Output paths that must not overwrite an input (`--trace`, `--record`).
use std::path::{Component, Path, PathBuf};

/// Whether two paths name the same file: across hard links (same device and inode
/// when both exist), through symlinks (dangling ones included: their target is
/// followed), and when a file does not exist yet (the longest existing ancestor is
/// resolved, `.` and `..` applied to the rest).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    matches!((resolve(a, 0), resolve(b, 0)), (Some(x), Some(y)) if x == y)
}

/// The first of `inputs` that writing `output` would overwrite.
pub fn clobbers<'a>(output: &Path, inputs: impl IntoIterator<Item = &'a Path>) -> Option<&'a Path> {
    inputs.into_iter().find(|p| same_file(output, p))
}

fn resolve(p: &Path, depth: u32) -> Option<PathBuf> {
    let abs = std::env::current_dir().ok()?.join(p);
    if let Ok(c) = abs.canonicalize() {
        return Some(c);
    }
    if depth > 40 {
        return None;
    }
    let mut out = PathBuf::new();
    let mut resolved = true;
    let mut comps = abs.components();
    while let Some(c) = comps.next() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
        if resolved {
            match out.canonicalize() {
                Ok(c) => out = c,
                Err(_) => {
                    // A dangling symlink: follow it, then resolve what follows it.
                    if let Ok(target) = std::fs::read_link(&out) {
                        let base = out.parent().map(Path::to_path_buf).unwrap_or_default();
                        let rest: PathBuf = comps.collect();
                        return resolve(&base.join(target).join(rest), depth + 1);
                    }
                    resolved = false;
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_links_dangling_symlinks_and_missing_files() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("prompt.jinja");
        std::fs::write(&f, "x").unwrap();
        let hard = d.path().join("hard.jinja");
        std::fs::hard_link(&f, &hard).unwrap();
        assert!(same_file(&hard, &f));
        let later = d.path().join("out/results.jsonl");
        let link = d.path().join("link.jsonl");
        #[cfg(unix)]
        std::os::unix::fs::symlink(&later, &link).unwrap();
        #[cfg(unix)]
        assert!(same_file(&link, &later));
        assert!(same_file(
            &d.path().join("out/../out/./results.jsonl"),
            &later
        ));
        assert!(!same_file(&d.path().join("other.jsonl"), &later));
    }
}
