//! Layers point one way: the graph of `crate::MODULE` references between the
//! top-level modules of `src/`, and the graphs between the files (submodules) of
//! `src/retrieval/` and `src/eval/`, have no cycle. References are read from the
//! code (comment lines, doc links and `#[cfg(test)] mod tests` blocks excluded);
//! a `mod.rs` is its module's facade (declarations and re-exports) and is not a node.
//!
//! `RAGLOOP_LAYERS_SRC=DIR` checks another tree (e.g. an older checkout's `src/`).
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Edges allowed to close a cycle while work on them is under way (none today: keep it
/// empty; a new entry needs a comment saying which issue removes it).
const KNOWN_REMAINING: &[(&str, &str, &str)] = &[];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file: comment lines dropped, cut before its unit-test module.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let t = l.trim_start();
        if t.starts_with("#[cfg(test)]") && lines.peek().is_some_and(|n| n.contains("mod tests")) {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first segment of every path that follows `prefix` (`prefix` must end in
/// `::`) at a word boundary; `prefix{a, b::c}` yields `a` and `b`.
fn heads(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find(prefix) {
        let at = from + i;
        from = at + prefix.len();
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| is_ident(c) || c == '$')
        {
            continue;
        }
        let rest = &code[from..];
        if let Some(inner) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            let mut items = Vec::new();
            for c in inner.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                    _ => {}
                }
                if depth == 0 && c != ',' && c != '{' && c != '}' {
                    item.push(c);
                }
            }
            items.push(item);
            for it in items {
                let head: String = it.trim().chars().take_while(|c| is_ident(*c)).collect();
                if !head.is_empty() {
                    out.push(head);
                }
            }
        } else {
            let head: String = rest.chars().take_while(|c| is_ident(*c)).collect();
            if !head.is_empty() {
                out.push(head);
            }
        }
    }
    out
}

/// The names a `mod.rs` re-exports, each mapped to the submodule defining it.
fn reexports(mod_rs: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in mod_rs.split(';') {
        let s = stmt.trim();
        let Some(rest) = s
            .strip_prefix("pub use ")
            .or_else(|| s.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for it in items.split(',') {
            let name = it.rsplit([':', ' ']).next().unwrap_or("").trim();
            if !name.is_empty() {
                out.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    out
}

fn top_level_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module_of = |p: &Path| -> String {
        let rel = p.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = files
        .iter()
        .map(|p| module_of(p))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut g = Graph::new();
    for f in &files {
        let from = module_of(f);
        if !modules.contains(&from) || f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let code = code(f);
        let node = g.entry(from.clone()).or_default();
        for prefix in ["crate::", "ragloop::"] {
            for to in heads(&code, prefix) {
                if to != from && modules.contains(&to) {
                    node.insert(to);
                }
            }
        }
    }
    g
}

/// The graph between the submodules of `src/<module>/`.
fn inner_graph(src: &Path, module: &str) -> Graph {
    let dir = src.join(module);
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let exports = reexports(&code(&dir.join("mod.rs")));
    let sub_of = |p: &Path| -> Option<(String, usize)> {
        let rel = p.strip_prefix(&dir).unwrap();
        let depth = rel.components().count();
        let first = rel.components().next()?.as_os_str().to_string_lossy();
        (first != "mod.rs").then(|| (first.trim_end_matches(".rs").to_string(), depth))
    };
    let subs: BTreeSet<String> = files
        .iter()
        .filter_map(|p| sub_of(p))
        .map(|s| s.0)
        .collect();
    let resolve = |name: &str| -> Option<String> {
        if subs.contains(name) {
            Some(name.to_string())
        } else {
            exports.get(name).cloned()
        }
    };
    let mut g = Graph::new();
    for f in &files {
        let Some((from, depth)) = sub_of(f) else {
            continue;
        };
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let code = code(f);
        let mut names = heads(&code, &format!("crate::{module}::"));
        let up = if depth == 1 {
            "super::"
        } else {
            "super::super::"
        };
        names.extend(heads(&code, up));
        let node = g.entry(from.clone()).or_default();
        for n in names {
            if let Some(to) = resolve(&n).filter(|t| *t != from) {
                node.insert(to);
            }
        }
    }
    g
}

/// A cycle of `g`, as the list of its nodes (first repeated at the end).
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &Graph,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|x| x == m).unwrap();
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, g, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

fn without_known(mut g: Graph, scope: &str) -> Graph {
    for (s, from, to) in KNOWN_REMAINING {
        if *s == scope {
            if let Some(e) = g.get_mut(*from) {
                e.remove(*to);
            }
        }
    }
    g
}

fn src() -> PathBuf {
    std::env::var_os("RAGLOOP_LAYERS_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

fn show(g: &Graph) -> String {
    g.iter()
        .map(|(k, v)| format!("{k} -> {}", v.iter().cloned().collect::<Vec<_>>().join(" ")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn top_level_modules_form_no_cycle() {
    let g = without_known(top_level_graph(&src()), "");
    if let Some(c) = find_cycle(&g) {
        panic!(
            "import cycle between top-level modules: {}\n\nall edges:\n{}",
            c.join(" -> "),
            show(&g)
        );
    }
}

/// The library never names clap: flags are parsed by the binary (`src/main.rs`,
/// `src/cli/`), which maps them onto library types.
#[test]
fn only_the_binary_uses_clap() {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let offenders: Vec<String> = files
        .iter()
        .filter(|p| !p.starts_with(src.join("cli")) && *p != &src.join("main.rs"))
        .filter(|p| {
            let c = code(p);
            c.contains("clap::") || c.contains("use clap")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "library files using clap: {offenders:?}"
    );
}

#[test]
fn retrieval_and_eval_files_form_no_cycle() {
    for module in ["retrieval", "eval"] {
        let g = without_known(inner_graph(&src(), module), module);
        if let Some(c) = find_cycle(&g) {
            panic!(
                "import cycle inside src/{module}/: {}\n\nall edges:\n{}",
                c.join(" -> "),
                show(&g)
            );
        }
    }
}

#[test]
fn the_parser_sees_groups_and_skips_longer_names() {
    let code = "use crate::{spec::types::X, diag};\nlet a = crate::http::send; my_crate::nope;";
    assert_eq!(heads(code, "crate::"), ["spec", "diag", "http"]);
    let g: Graph = [("a", "b"), ("b", "c"), ("c", "a")]
        .iter()
        .map(|(f, t)| (f.to_string(), BTreeSet::from([t.to_string()])))
        .collect();
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    let m = reexports("pub use index::{Index, FORMAT_VERSION};\npub(crate) use corpus::check_dir;");
    assert_eq!(m["Index"], "index");
    assert_eq!(m["check_dir"], "corpus");
}
