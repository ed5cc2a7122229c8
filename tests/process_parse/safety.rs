//! The safety policy table of 03, shipped as `listeners/processes/safety.aps`, decided at its
//! thresholds by the `<expr>` evaluator. Only SET and IF are interpreted here (the engine is not
//! written yet); that is all the decision uses.

use std::collections::BTreeMap;

use agentpump::process::ast::{Block, StmtKind};
use agentpump::process::check_source;
use agentpump::process::expr::{Env, Value, eval};
use rust_decimal::Decimal;

struct State(BTreeMap<String, Value>);

impl Env for State {
    fn symbol(&self, name: &str) -> Option<Value> {
        self.0.get(name).cloned()
    }
    fn local(&self, name: &str) -> Option<Value> {
        self.0.get(name).cloned()
    }
    fn placeholder(&self, name: &str) -> Option<Value> {
        self.0.get(&name.to_lowercase()).cloned()
    }
}

fn run(block: &Block, state: &mut State) {
    for s in block {
        match &s.kind {
            StmtKind::Set { symbol, value, .. } => {
                let v = eval(value, state).unwrap();
                state.0.insert(symbol.name.clone(), v);
            }
            StmtKind::If {
                branches,
                otherwise,
            } => {
                let taken = branches
                    .iter()
                    .find(|b| eval(&b.cond, state).unwrap() == Value::Bool(true));
                match (taken, otherwise) {
                    (Some(b), _) => run(&b.body, state),
                    (None, Some(body)) => run(body, state),
                    (None, None) => {}
                }
            }
            _ => {}
        }
    }
}

fn decide(ts: &str, hsc: &str, violation: bool, npr: &str) -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/listeners/processes/safety.aps"
    ))
    .unwrap();
    let checked = check_source(&text);
    assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
    let n = |s: &str| Value::Num(Decimal::from_str_exact(s).unwrap());
    let sty = BTreeMap::from([("policy_violation".to_string(), Value::Bool(violation))]);
    let mut state = State(BTreeMap::from([
        ("THR".to_string(), n("0.90")),
        ("HARM_THR".to_string(), n("0.40")),
        ("ts".to_string(), n(ts)),
        ("hsc".to_string(), n(hsc)),
        ("sty_json".to_string(), Value::Object(sty)),
        ("npr".to_string(), Value::Str(npr.into())),
    ]));
    run(&checked.processes[0].body, &mut state);
    state.0["REC"].to_string()
}

// 03: IF TS ≥ THR AND HARM=false: REC := "PROCEED"; ELSE IF NPR != "": …CAUTION; ELSE: HOLD…
#[test]
fn the_decision_at_its_thresholds() {
    assert_eq!(decide("0.90", "0.39", false, ""), "PROCEED");
    assert_eq!(decide("0.89", "0.39", false, ""), "HOLD_FOR_REVIEW");
    assert_eq!(
        decide("0.89", "0.39", false, "note"),
        "PROCEED_WITH_CAUTION"
    );
    assert_eq!(decide("0.95", "0.40", false, ""), "HOLD_FOR_REVIEW");
    assert_eq!(
        decide("0.95", "0.40", false, "note"),
        "PROCEED_WITH_CAUTION"
    );
    assert_eq!(decide("0.99", "0.00", true, ""), "HOLD_FOR_REVIEW");
}
