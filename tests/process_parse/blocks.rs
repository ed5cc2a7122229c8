//! The block constructs of the 05 grammar (production quoted above each test): indentation,
//! IF/ELSE IF/ELSE, GIVEN/WHEN/THEN, WITH, PAR/JOIN, FOREACH, TRY/RECOVER.

use agentpump::process::ast::{Bdd, StmtKind};
use agentpump::process::expr::ExprKind;

use crate::{parse_body, parse_doc, wrap};

fn one(body: &str) -> StmtKind {
    let mut block = parse_body(body);
    assert_eq!(block.len(), 1, "{block:#?}");
    block.remove(0).kind
}

// IfStmt = "IF", Space, <expr>, ":" ;  ElseIfStmt = "ELSE IF", Space, <expr>, ":" ;  ElseStmt = "ELSE", ":" ;
#[test]
fn if_else_if_else_fold_into_one_statement() {
    let body = "  IF AA > 1:\n    SET BB := 1\n  ELSE IF AA = 1:\n    SET BB := 2\n    SET CC := 3\n  ELSE:\n    SET BB := 3\n  TELL";
    let block = parse_body(body);
    assert_eq!(block.len(), 2);
    let StmtKind::If {
        branches,
        otherwise,
    } = &block[0].kind
    else {
        panic!()
    };
    assert_eq!(branches.len(), 2);
    assert_eq!(branches[1].body.len(), 2);
    assert_eq!(otherwise.as_ref().unwrap().len(), 1);
}

// GivenStmt/WhenStmt/ThenStmt = "GIVEN"|"WHEN"|"THEN", Space, <condition-text-no-colon>, ":" ;
// 03: Each keyword opens a block with `:` (Python-style).
#[test]
fn given_when_then_open_blocks() {
    let body = "  GIVEN AA > 0:\n    TELL \"ready\"\n  WHEN READY:\n  THEN DONE = true:\n    MILESTONE \"end\"";
    let kinds: Vec<_> = parse_body(body)
        .into_iter()
        .map(|s| match s.kind {
            StmtKind::Condition { kind, body, .. } => (kind, body.len()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(kinds, [(Bdd::Given, 1), (Bdd::When, 0), (Bdd::Then, 1)]);
}

// WithBlock = "WITH", Space, JsonObj, ":", EOL, { <indented Statement>, EOL } ;
#[test]
fn with_block_and_nested_with() {
    let body = "  WITH {\"endpoint\": \"a\", \"region\": REGION}:\n    WITH {\"endpoint\": \"b\"}:\n      USE `fetch`\n    USE `fetch`";
    let StmtKind::With { defaults, body } = one(body) else {
        panic!()
    };
    assert_eq!(defaults[1].key.name, "region");
    assert!(matches!(&body[0].kind, StmtKind::With { body, .. } if body.len() == 1));
    assert!(matches!(body[1].kind, StmtKind::Use(_)));
}

// ParBlock = "PAR", ":", EOL, { <indented UseStmt>, EOL } ;
// JoinBlock = "JOIN", ":", EOL, { <indented CaptureStmt>, EOL } ;
#[test]
fn par_and_join_keep_lexical_order() {
    let body = "  PAR:\n    USE `aa`\n    USE `bb` where: x=1\n  JOIN:\n    CAPTURE AA from `aa`\n    CAPTURE BB from `bb`";
    let block = parse_body(body);
    let StmtKind::Par(uses) = &block[0].kind else {
        panic!()
    };
    let tools: Vec<_> = uses.iter().map(|u| u.tool.name.as_str()).collect();
    assert_eq!(tools, ["aa", "bb"]);
    let StmtKind::Join(caps) = &block[1].kind else {
        panic!()
    };
    assert_eq!(caps[1].symbols[0].name, "BB");
}

// ForEachStmt = "FOREACH", Space, IdLower, Space, "IN", Space, UpperSym, ":", EOL, { <indented Statement>, EOL } ;
#[test]
fn foreach() {
    let StmtKind::Foreach { var, list, body } =
        one("  FOREACH item IN ITEMS:\n    TELL \"x\"\n    SNAP [_INDEX]")
    else {
        panic!()
    };
    assert_eq!(
        (var.name.as_str(), list.name.as_str(), body.len()),
        ("item", "ITEMS", 2)
    );
}

// TryBlock = "TRY", ":", EOL, { <indented Statement>, EOL },
//            "RECOVER", Space, "(", IdLower, ")", ":", EOL, { <indented Statement>, EOL } ;
#[test]
fn try_recover_nested() {
    let body = "  TRY:\n    TRY:\n      USE `a`\n    RECOVER (inner):\n      TELL \"inner\"\n  RECOVER (err):\n    ASSERT err.type = \"timeout\"";
    let StmtKind::Try { body, err, recover } = one(body) else {
        panic!()
    };
    assert_eq!(err.name, "err");
    assert!(matches!(&body[0].kind, StmtKind::Try { err, .. } if err.name == "inner"));
    let StmtKind::Assert(e) = &recover[0].kind else {
        panic!()
    };
    let ExprKind::Binary(_, left, _) = &e.kind else {
        panic!()
    };
    assert!(
        matches!(&left.kind, ExprKind::Member(base, m) if m == "type" && base.kind == ExprKind::Local("err".into()))
    );
}

// 05 notes: Indentation is significant for block bodies. A process body may sit at any
// indentation; deeper blocks may use any consistent step.
#[test]
fn indentation_levels_and_several_processes() {
    let text = wrap(
        "",
        "    IF AA:\n          TELL \"deep\"\n    TELL \"after\"",
    )
    .replace(
        "</process>\n</processes>",
        "</process>\n<process id=\"q\">\nTELL \"flush left\"\n</process>\n</processes>",
    );
    let ps = parse_doc(&text);
    assert_eq!(ps.len(), 2);
    assert_eq!(ps[0].body.len(), 2);
    assert_eq!(ps[1].id.name, "q");
}

// Statement = RunStmt | UseStmt | CaptureStmt | SetStmt | UnsetStmt | ReturnStmt | AssertStmt
//           | TellStmt | MileStmt | WithBlock | ParBlock | JoinBlock | ForEachStmt | TryBlock
//           | IfStmt | ElseIfStmt | ElseStmt | GivenStmt | WhenStmt | ThenStmt | SnapStmt ;
#[test]
fn the_fixture_with_every_construct_checks_clean() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/processes/all_constructs.aps"
    ))
    .unwrap();
    let checked = agentpump::process::check_source(&text);
    assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
    let mut seen = std::collections::BTreeSet::new();
    fn visit(
        block: &[agentpump::process::ast::Stmt],
        seen: &mut std::collections::BTreeSet<String>,
    ) {
        for s in block {
            let name = format!("{:?}", s.kind);
            seen.insert(name.split([' ', '(', '{']).next().unwrap().to_string());
            match &s.kind {
                StmtKind::If {
                    branches,
                    otherwise,
                } => {
                    branches.iter().for_each(|b| visit(&b.body, seen));
                    otherwise.iter().for_each(|b| visit(b, seen));
                }
                StmtKind::Condition { body, .. }
                | StmtKind::With { body, .. }
                | StmtKind::Foreach { body, .. } => visit(body, seen),
                StmtKind::Try { body, recover, .. } => {
                    visit(body, seen);
                    visit(recover, seen);
                }
                _ => {}
            }
        }
    }
    visit(&checked.processes[0].body, &mut seen);
    let all = [
        "Assert",
        "AssertAll",
        "Capture",
        "Condition",
        "Foreach",
        "If",
        "Join",
        "Milestone",
        "Par",
        "Return",
        "Run",
        "Set",
        "Snap",
        "Tell",
        "Try",
        "Unset",
        "Use",
        "With",
    ];
    assert_eq!(seen.iter().map(String::as_str).collect::<Vec<_>>(), all);
}
