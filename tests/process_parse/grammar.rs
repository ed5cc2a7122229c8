//! Each construct of the 05 grammar (the production quoted above its test) parses into the
//! typed AST.

use agentpump::process::ast::{Level, Origin, Return, StmtKind};
use agentpump::process::expr::{BinOp, ExprKind, PathSeg};
use rust_decimal::Decimal;

use crate::parse_body;

fn one(body: &str) -> StmtKind {
    let mut block = parse_body(body);
    assert_eq!(block.len(), 1, "{block:#?}");
    block.remove(0).kind
}

// RunStmt = "RUN", Space, BacktickId, [ Space, "where:", Space, ParamList ] ;
#[test]
fn run_with_and_without_params() {
    let StmtKind::Run { process, params } = one("  RUN `calc_tax` where: amount=5, region=\"EU\"")
    else {
        panic!()
    };
    assert_eq!(process.name, "calc_tax");
    let keys: Vec<_> = params.iter().map(|p| p.key.name.as_str()).collect();
    assert_eq!(keys, ["amount", "region"]);
    assert_eq!(params[0].value.kind, ExprKind::Num(Decimal::from(5)));
    assert!(matches!(one("  RUN `other`"), StmtKind::Run { params, .. } if params.is_empty()));
}

// UseStmt = "USE", Space, BacktickId, [ Space, "where:", Space, ParamList ],
//           [ Space, "(", "atomic", [ ",", Space, "timeout_ms", "=", Number ], [ ",", Space, "retry", "=", Number ], ")" ] ;
#[test]
fn use_with_every_modifier_and_with_some() {
    let StmtKind::Use(u) = one("  USE `fetch` where: id=\"a\" (atomic, timeout_ms=500, retry=2)")
    else {
        panic!()
    };
    let m = u.modifiers.unwrap();
    assert!(m.atomic);
    assert_eq!(m.timeout_ms.unwrap().0, Decimal::from(500));
    assert_eq!(m.retry.unwrap().0, Decimal::from(2));
    // Extension: each modifier is optional, `atomic` included.
    let StmtKind::Use(u) = one("  USE `fetch` (retry=1)") else {
        panic!()
    };
    let m = u.modifiers.unwrap();
    assert!(!m.atomic && m.timeout_ms.is_none() && m.retry.is_some());
    let StmtKind::Use(u) = one("  USE `fetch`") else {
        panic!()
    };
    assert!(u.modifiers.is_none() && u.params.is_empty());
}

// CaptureStmt = "CAPTURE", Space, UpperSym, { ",", Space, UpperSym }, Space, "from", Space, BacktickId,
//   [ Space, "map:", Space, "\"", <path>, "\"", "→", UpperSym, { ",", Space, "\"", <path>, "\"", "→", UpperSym } ] ;
// 03: Optional field via suffix '?'; no error if missing; symbol unchanged.
#[test]
fn capture_with_map_and_optional_path() {
    let body =
        "  CAPTURE BODY, CODE from `fetch` map: \"body\"→BODY, \"status.items[2].code?\"→CODE";
    let StmtKind::Capture(c) = one(body) else {
        panic!()
    };
    assert_eq!(c.symbols.len(), 2);
    assert_eq!(c.tool.name, "fetch");
    assert_eq!(c.map[1].symbol.name, "CODE");
    let path = &c.map[1].path;
    assert!(path.optional);
    assert_eq!(
        path.segs,
        [
            PathSeg::Field("status".into()),
            PathSeg::Field("items".into()),
            PathSeg::Index(2),
            PathSeg::Field("code".into())
        ]
    );
    assert_eq!(path.to_string(), "status.items[2].code?");
    // `->` is accepted for `→`.
    let StmtKind::Capture(c) = one("  CAPTURE AA from `t` map: \"x\"->AA") else {
        panic!()
    };
    assert_eq!(c.map.len(), 1);
}

// SetStmt = "SET", Space, UpperSym, Space, ":=", Space, Value,
//           [ Space, "(", "from ", ( BacktickId | "INP" | UpperSym | "Agent Inference" ), ")" ] ;
#[test]
fn set_with_each_origin() {
    let origin = |line: &str| match one(line) {
        StmtKind::Set { origin, .. } => origin,
        other => panic!("{other:?}"),
    };
    assert!(
        matches!(origin("  SET AA := 1 (from `fetch`)"), Some(Origin::Tool(t)) if t.name == "fetch")
    );
    assert_eq!(origin("  SET AA := <X> (from INP)"), Some(Origin::Inp));
    assert!(
        matches!(origin("  SET AA := BB (from BB)"), Some(Origin::Symbol(s)) if s.name == "BB")
    );
    assert_eq!(
        origin("  SET AA := \"x\" (from \"Agent Inference\")"),
        Some(Origin::AgentInference)
    );
    assert_eq!(origin("  SET AA := enum(LOW,HIGH)"), None);
}

// UnsetStmt = "UNSET", Space, UpperSym ;
#[test]
fn unset() {
    assert!(matches!(one("  UNSET TEMP"), StmtKind::Unset(s) if s.name == "TEMP"));
}

// ReturnStmt = "RETURN", ":", Space, ( ReturnList | ReturnPairs ) ;
// 03: VALUE may be an artifact reference: {"$artifact":"SYMBOL","hash":"sha256:..."}.
#[test]
fn return_list_and_pairs_with_artifact() {
    let StmtKind::Return(Return::Symbols(list)) = one("  RETURN: AA, BB") else {
        panic!()
    };
    assert_eq!(list.len(), 2);
    let body = "  RETURN: total=AA, doc={\"$artifact\": \"AA\", \"hash\": \"sha256:ab\"}";
    let StmtKind::Return(Return::Pairs(pairs)) = one(body) else {
        panic!()
    };
    assert_eq!(pairs[1].key.name, "doc");
    assert!(matches!(&pairs[1].value.kind, ExprKind::Object(o) if o[0].0 == "$artifact"));
}

// AssertStmt = "ASSERT", Space, <expr> | "ASSERT ALL:", Space, "[", <expr>, { ",", Space, <expr> }, "]" ;
#[test]
fn assert_and_assert_all() {
    let StmtKind::Assert(e) = one("  ASSERT AA >= 1 AND NOT DONE") else {
        panic!()
    };
    assert!(matches!(e.kind, ExprKind::Binary(BinOp::And, _, _)));
    let StmtKind::AssertAll(list) = one("  ASSERT ALL: [AA > 0, BB = \"x\", err.type != \"\"]")
    else {
        panic!()
    };
    assert_eq!(list.len(), 3);
}

// TellStmt = "TELL", [ Space, String ], [ Space, "why:", UpperSym ], [ Space, "level=", ("brief" | "full") ], [ Space, "outcome:", String ] ;
// MileStmt = "MILESTONE", Space, String ;
#[test]
fn tell_and_milestone() {
    let StmtKind::Tell(t) = one("  TELL \"done\" why:AA level=full outcome:\"ok\"") else {
        panic!()
    };
    assert_eq!(t.message.as_deref(), Some("done"));
    assert_eq!(t.why.unwrap().name, "AA");
    assert_eq!(t.level, Some(Level::Full));
    assert_eq!(t.outcome.as_deref(), Some("ok"));
    let StmtKind::Tell(t) = one("  TELL") else {
        panic!()
    };
    assert!(t.message.is_none() && t.level.is_none());
    assert_eq!(
        one("  MILESTONE \"CONVERGED\""),
        StmtKind::Milestone("CONVERGED".into())
    );
}

// SnapStmt = "SNAP", Space, SnapList, [ Space, "delta", "=", Bool ], [ Space, "redact", "=", RedactList ] ;
#[test]
fn snap_with_delta_and_redact() {
    let StmtKind::Snap(s) = one("  SNAP [AA, BB] delta=true redact=[BB]") else {
        panic!()
    };
    assert_eq!(s.symbols.len(), 2);
    assert_eq!(s.delta, Some(true));
    assert_eq!(s.redact[0].name, "BB");
    let StmtKind::Snap(s) = one("  SNAP []") else {
        panic!()
    };
    assert!(s.symbols.is_empty() && s.delta.is_none());
}

// Value = String | Number | Bool | JsonObj | JsonArr | UpperSym | Placeholder | EnumLit ;
#[test]
fn every_kind_of_value() {
    let body = "  USE `t` where: a=\"s\", b=-1.25, c=false, d={\"k\": [1, SYM]}, e=[], f=SYM, g=<NAME>, h=enum(A1,B2)";
    let StmtKind::Use(u) = one(body) else {
        panic!()
    };
    let kinds: Vec<_> = u.params.iter().map(|p| &p.value.kind).collect();
    assert_eq!(kinds[0], &ExprKind::Str("s".into()));
    assert_eq!(kinds[1], &ExprKind::Num(Decimal::new(-125, 2)));
    assert_eq!(kinds[2], &ExprKind::Bool(false));
    assert!(
        matches!(kinds[3], ExprKind::Object(o) if matches!(&o[0].1.kind, ExprKind::List(l) if l.len() == 2))
    );
    assert_eq!(kinds[4], &ExprKind::List(vec![]));
    assert_eq!(kinds[5], &ExprKind::Symbol("SYM".into()));
    assert_eq!(kinds[6], &ExprKind::Placeholder("NAME".into()));
    assert_eq!(kinds[7], &ExprKind::Enum(vec!["A1".into(), "B2".into()]));
}
