//! Property test of the bounded-cycle check (E054) against brute force: a one-node
//! loop `work -> work` whose branch arms are random guard expressions over a counter
//! `n` (incremented by 0, 1 or 2 per step), a latch `e` (set to `true` on the loop,
//! or never written), the bound field `max_n` and two free booleans `a`, `b`. The
//! simulation evaluates the arms with minijinja itself and lets an adversary pick
//! `a`/`b` at every step; the loop "can keep going" when, for every step up to
//! `STEPS`, some choice of `a`/`b` picks an arm back to `work`.
//!
//! Soundness (asserted): whenever validate reports no E054, the simulation finds a
//! step at which every choice leaves the loop. Conservativeness (measured, printed
//! with `--nocapture`): how often validate reports E054 for a loop the simulation
//! shows is bounded.
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use ragloop::spec::source::Sources;
use ragloop::validate::{validate_str, Options};
use std::cell::RefCell;
use std::path::Path;

/// Steps simulated: far beyond every constant in the guards (≤ 5, `max_n` = 3).
const STEPS: i64 = 24;

#[derive(Clone, Debug)]
enum G {
    Cmp(&'static str, String, bool),
    Var(&'static str),
    Not(Box<G>),
    And(Box<G>, Box<G>),
    Or(Box<G>, Box<G>),
}

impl G {
    fn render(&self) -> String {
        match self {
            G::Cmp(op, k, flipped) => {
                if *flipped {
                    let op = match *op {
                        "<" => ">",
                        "<=" => ">=",
                        ">" => "<",
                        ">=" => "<=",
                        o => o,
                    };
                    format!("{k} {op} n")
                } else {
                    format!("n {op} {k}")
                }
            }
            G::Var(v) => v.to_string(),
            G::Not(g) => format!("not ({})", g.render()),
            G::And(a, b) => format!("({}) and ({})", a.render(), b.render()),
            G::Or(a, b) => format!("({}) or ({})", a.render(), b.render()),
        }
    }
}

fn guard() -> impl Strategy<Value = G> {
    let leaf = prop_oneof![
        (
            prop::sample::select(vec!["<", "<=", ">", ">=", "==", "!="]),
            prop_oneof![
                (0..6i64).prop_map(|k| k.to_string()),
                Just("max_n".to_string())
            ],
            any::<bool>()
        )
            .prop_map(|(op, k, f)| G::Cmp(op, k, f)),
        prop::sample::select(vec!["a", "b", "e", "e == true", "e == false"]).prop_map(G::Var),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|g| G::Not(Box::new(g))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| G::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner).prop_map(|(a, b)| G::Or(Box::new(a), Box::new(b))),
        ]
    })
}

#[derive(Clone, Debug)]
struct Case {
    inc: i64,
    latch: bool,
    /// `when` arms: guard and whether the arm stays in the loop.
    arms: Vec<(G, bool)>,
    else_stays: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![0i64, 1, 2]),
        any::<bool>(),
        prop::collection::vec((guard(), any::<bool>()), 1..4),
        any::<bool>(),
    )
        .prop_map(|(inc, latch, arms, else_stays)| Case {
            inc,
            latch,
            arms,
            else_stays,
        })
}

fn spec_text(c: &Case) -> String {
    let target = |stay: bool| if stay { "work" } else { "END" };
    let mut arms = String::new();
    for (g, stay) in &c.arms {
        arms.push_str(&format!(
            "    - when: \"{}\"\n      to: {}\n",
            g.render(),
            target(*stay)
        ));
    }
    arms.push_str(&format!("    - else: {}\n", target(c.else_stays)));
    let latch = if c.latch { "      e: true\n" } else { "" };
    format!(
        "version: 1\nname: prop\nstate:\n  schema:\n    type: object\n    properties:\n      \
         n: {{type: integer}}\n      max_n: {{type: integer}}\n      a: {{type: boolean}}\n      \
         b: {{type: boolean}}\n      e: {{type: boolean}}\n  initial: {{n: 0, max_n: 3, a: false, b: false, e: false}}\n  \
         reducers: {{n: add}}\nentry: work\nnodes:\n  work:\n    kind: update\n    update:\n      \
         n: {}\n{latch}edges:\n  work:\n{arms}",
        c.inc
    )
}

/// Whether the loop can go on for `STEPS` steps, with `a` and `b` chosen adversarially.
fn can_keep_going(c: &Case) -> bool {
    let env = minijinja::Environment::new();
    let texts: Vec<String> = c.arms.iter().map(|(g, _)| g.render()).collect();
    let preds: Vec<_> = texts
        .iter()
        .zip(&c.arms)
        .map(|(t, (_, stay))| (env.compile_expression(t).unwrap(), *stay))
        .collect();
    let mut n = 0i64;
    let mut e = false;
    for _ in 0..STEPS {
        n += c.inc;
        e |= c.latch;
        let stays = [(false, false), (false, true), (true, false), (true, true)]
            .iter()
            .any(|&(a, b)| {
                let ctx = minijinja::context! { n, max_n => 3, a, b, e };
                preds
                    .iter()
                    .find(|(p, _)| p.eval(&ctx).unwrap().is_true())
                    .map_or(c.else_stays, |(_, stay)| *stay)
            });
        if !stays {
            return false;
        }
    }
    true
}

fn reports_unbounded(text: &str) -> bool {
    let mut sources = Sources::new();
    let out = validate_str(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs/valid/prop.yaml"),
        text,
        &mut sources,
        &Options::default(),
    );
    for d in &out.diagnostics {
        // Only graph-shape faults are possible here; anything else is a broken case.
        assert!(
            matches!(
                d.code.as_str(),
                "E054" | "E053" | "E052" | "W001" | "W002" | "W003" | "E047"
            ),
            "unexpected {} {}\n{text}",
            d.code.as_str(),
            d.message
        );
    }
    out.diagnostics.iter().any(|d| d.code.as_str() == "E054")
}

#[test]
fn bound_check_is_sound_against_simulation() {
    let mut runner = TestRunner::new(Config {
        cases: 400,
        ..Config::default()
    });
    let stats = RefCell::new((0usize, 0usize, 0usize, Vec::<String>::new()));
    runner
        .run(&case(), |c| {
            let text = spec_text(&c);
            let unbounded = reports_unbounded(&text);
            let keeps_going = can_keep_going(&c);
            prop_assert!(
                unbounded || !keeps_going,
                "validate accepts a loop that runs {STEPS} steps:\n{text}"
            );
            let mut s = stats.borrow_mut();
            s.0 += 1;
            if !keeps_going {
                s.1 += 1;
                if unbounded {
                    s.2 += 1;
                    if s.3.len() < 5 {
                        let arms = text.split("edges:").nth(1).unwrap_or("");
                        s.3.push(format!(
                            "inc {} latch {}:{}",
                            c.inc,
                            c.latch,
                            arms.replace('\n', " ")
                        ));
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    let (total, bounded, conservative, examples) = stats.into_inner();
    eprintln!(
        "bound_props: {total} cases, {bounded} bounded by simulation, {conservative} of them reported E054 (conservative)"
    );
    for e in examples {
        eprintln!("  conservative: {e}");
    }
    // Accepted loops exist among the cases, or the test proves nothing.
    assert!(bounded > conservative, "the checker never accepted a loop");
}
