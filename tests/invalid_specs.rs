//! Every spec under tests/specs/invalid/ has exactly one fault. Its header names the
//! expected code (`# expect: E022`) and, optionally, follow-on codes (`also: E026`)
//! and a place in another file (`expect-at: files/x.json:4`); otherwise the expected
//! line is the one marked `# <- E022`.
use ragloop::diag::{Code, Diagnostic};
use ragloop::spec::source::Sources;
use ragloop::validate::{validate_file, Options};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

struct Case {
    path: PathBuf,
    code: String,
    also: Vec<String>,
    file_suffix: String,
    line: u32,
}

fn cases() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs/invalid");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            let code = text
                .lines()
                .find_map(|l| l.strip_prefix("# expect: "))
                .unwrap_or_else(|| panic!("{}: no `# expect:` header", path.display()))
                .trim()
                .to_string();
            let also = text
                .lines()
                .take(3)
                .flat_map(|l| {
                    l.split("also: ")
                        .nth(1)
                        .map(|s| s.split_whitespace().map(String::from).collect::<Vec<_>>())
                })
                .flatten()
                .collect();
            let (file_suffix, line) = match text
                .lines()
                .take(3)
                .find_map(|l| l.split("expect-at: ").nth(1))
            {
                Some(at) => {
                    let (f, l) = at.trim().rsplit_once(':').unwrap();
                    (f.to_string(), l.parse().unwrap())
                }
                None => {
                    let marker = format!("# <- {code}");
                    let line = text
                        .lines()
                        .position(|l| l.contains(&marker))
                        .unwrap_or_else(|| panic!("{}: no `{marker}` marker", path.display()));
                    (
                        path.file_name().unwrap().to_string_lossy().into_owned(),
                        line as u32 + 1,
                    )
                }
            };
            Case {
                path,
                code,
                also,
                file_suffix,
                line,
            }
        })
        .collect()
}

fn summary(diags: &[Diagnostic], sources: &Sources) -> String {
    diags
        .iter()
        .map(|d| match d.span {
            Some(s) => format!(
                "{} {}:{}: {}",
                d.code.as_str(),
                sources.get(s.file).path.display(),
                s.line,
                d.message
            ),
            None => format!("{} {}", d.code.as_str(), d.message),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn each_invalid_spec_reports_its_code_at_its_line() {
    let cases = cases();
    assert!(cases.len() >= 30, "only {} invalid specs", cases.len());
    for case in &cases {
        let mut sources = Sources::new();
        let outcome = validate_file(&case.path, &mut sources, &Options::default());
        let found = outcome.diagnostics.iter().any(|d| {
            d.code.as_str() == case.code
                && d.span.is_some_and(|s| {
                    s.line == case.line
                        && sources
                            .get(s.file)
                            .path
                            .to_string_lossy()
                            .ends_with(&case.file_suffix)
                })
        });
        assert!(
            found,
            "{}: expected {} at {}:{}, got:\n{}",
            case.path.display(),
            case.code,
            case.file_suffix,
            case.line,
            summary(&outcome.diagnostics, &sources)
        );
        for d in outcome.diagnostics.iter().filter(|d| d.is_error()) {
            let c = d.code.as_str().to_string();
            assert!(
                c == case.code || case.also.contains(&c),
                "{}: unexpected extra diagnostic:\n{}",
                case.path.display(),
                summary(&outcome.diagnostics, &sources)
            );
        }
    }
}

#[test]
fn every_error_code_has_an_invalid_spec() {
    // Codes exercised elsewhere: E007 (a missing file cannot live in the corpus; see
    // tests/cli.rs) and warnings.
    let covered: BTreeSet<String> = cases().into_iter().map(|c| c.code).collect();
    for code in Code::ALL {
        let s = code.as_str();
        if s.starts_with('W') || s == "E007" {
            continue;
        }
        assert!(
            covered.contains(s),
            "no invalid spec for {s} ({})",
            code.summary()
        );
    }
}

#[test]
fn invalid_specs_are_distinct() {
    let names: Vec<String> = cases()
        .iter()
        .map(|c| c.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
}

#[test]
fn shipped_and_valid_specs_have_no_diagnostics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut specs: Vec<PathBuf> = std::fs::read_dir(root.join("graphs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    specs.extend(
        std::fs::read_dir(root.join("tests/specs/valid"))
            .unwrap()
            .map(|e| e.unwrap().path()),
    );
    assert!(specs.len() >= 4);
    for spec in specs {
        let mut sources = Sources::new();
        let outcome = validate_file(&spec, &mut sources, &Options::default());
        assert!(
            outcome.diagnostics.is_empty(),
            "{}:\n{}",
            spec.display(),
            summary(&outcome.diagnostics, &sources)
        );
    }
}
