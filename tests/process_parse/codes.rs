//! Every static code of 07 the front end implements, triggered, at its line and column. The
//! column is where `needle` starts in that line (an oracle independent of the checker).

use agentpump::process::check::Policy;
use agentpump::process::{Code, Severity, check_source, check_source_with};

use crate::{codes, wrap};

/// (code, document, line, needle): `code` must be reported at `line`, at the column where
/// `needle` starts in that line.
fn table() -> Vec<(Code, String, u32, &'static str)> {
    let c = |consts: &str, body: &str| {
        format!(
            "<constants>\n{consts}\n</constants>\n{}",
            wrap("n: Number", body)
        )
    };
    use Code::*;
    vec![
        (UndefinedSymbol, wrap("", "  SET AA := BB"), 3, "BB"),
        (UndefinedSymbol, wrap("", "  ASSERT item = 1"), 3, "item"),
        (UndefinedSymbol, wrap("", "  FOREACH it IN AA:\n    TELL\n  ASSERT it = 1"), 3, "AA"),
        (UndefinedSymbol, wrap("", "  SET LL := [1]\n  FOREACH it IN LL:\n    TELL\n  ASSERT it = 1"), 6, "it ="),
        (UndefinedSymbol, wrap("", "  SET AA := 1\n  UNSET AA\n  TELL why:AA"), 5, "AA"),
        // 03: CAPTURE is the binding point; USE does not mutate the symbol table by itself.
        (UndefinedSymbol, wrap("", "  USE `calc`\n  ASSERT RESULT > 0"), 4, "RESULT"),
        (UndefinedSymbol, wrap("", "  SNAP [_INDEX]"), 3, "_INDEX"),
        (UndefinedSymbol, wrap("", "  TRY:\n    USE `aa`\n  RECOVER (err):\n    TELL\n  ASSERT err.type = \"x\""), 7, "err"),
        (ReservedTokenMisuse, wrap("", "  SET THEN := 1"), 3, "THEN"),
        (ReservedTokenMisuse, wrap("", "  USE `tool` where: with=1"), 3, "with"),
        (InvalidId, wrap("", "  USE calc"), 3, "calc"),
        (InvalidId, wrap("", "  SET Ab := 1"), 3, "Ab"),
        (InvalidId, wrap("", "  USE `Calc`"), 3, "`Calc`"),
        (ProcessIdMismatch, wrap("", "  RUN `missing`"), 3, "`missing`"),
        (ProcessIdMismatch, "<triggers>\n<trigger event=\"e\" target=\"nope\" />\n</triggers>\n<processes>\n<process id=\"pp\">\n  TELL\n</process>\n</processes>\n".into(), 2, "nope"),
        (UnresolvedPlaceholder, wrap("", "  SET AA := <NOPE>"), 3, "<NOPE>"),
        (UnresolvedPlaceholder, c("AA: {\"k\": BB}", "  TELL why:AA"), 2, "BB"),
        (BadJson, wrap("", "  SET AA := {\"Key\": 1}"), 3, "\"Key\""),
        (BadJson, wrap("", "  SET AA := {\"k\" 1}"), 3, "1}"),
        (BadJson, c("AA: JSON<<\n{\"k\": }\n>>", "  TELL why:AA"), 3, "}"),
        (CaptureMissing, wrap("", "  CAPTURE AA from `calc`"), 3, "`calc`"),
        (TagMismatch, "<processes>\n<process id=\"pp\">\n  TELL\n</processes>\n".into(), 4, "</processes>"),
        (TagMismatch, "<processes>\n<process id=\"pp\">\n  TELL\n</process>\n".into(), 1, "<processes>"),
        (TagMismatch, format!("<runtime>\n</runtime>\n<constants>\n</constants>\n{}", wrap("", "  TELL")), 3, "<constants>"),
        (CommentDetected, wrap("", "  TELL\n  // a note"), 4, "// a note"),
        (CommentDetected, "<triggers>\n// no\n</triggers>\n".to_string() + &wrap("", "  TELL"), 2, "// no"),
        (TabDetected, wrap("", "  TELL\t\"x\""), 3, "\t"),
        (KeyOrder, wrap("", "  USE `calc` where: b=1, a=2"), 3, "a=2"),
        (KeyOrder, wrap("", "  USE `calc` where: a=1, a=2"), 3, "a=2"),
        (DuplicateSymbol, c("AA: 1\nAA: 2", "  TELL why:AA"), 3, "AA"),
        (DuplicateSymbol, c("AA: 1", "  SET AA := 2"), 6, "AA"),
        (DuplicateSymbol, "<processes>\n<process id=\"pp\">\n  TELL\n</process>\n<process id=\"pp\">\n  TELL\n</process>\n</processes>\n".into(), 5, "pp\">"),
        (TimeFormat, String::from("<processes>\n<process id=\"pp\">\n  RUN `qq` where: at=\"24/11/2026\"\n</process>\n<process id=\"qq\" args=\"at: ISO8601\">\n  TELL\n</process>\n</processes>\n"), 3, "\"24/11/2026\""),
        (TimeFormat, String::from("<processes>\n<process id=\"pp\">\n  RUN `qq` where: at=\"2026-11-24T16:50\"\n</process>\n<process id=\"qq\" args=\"at: ISO8601\">\n  TELL\n</process>\n</processes>\n"), 3, "\"2026"),
        (CasePolicy, wrap("", "  SET AA := True"), 3, "True"),
        (CasePolicy, wrap("", "  TELL 'x'"), 3, "'x'"),
        (CasePolicy, wrap("", "  TELL “x”"), 3, "“"),
        (ProcessNameAttrMismatch, "<processes>\n<process name=\"x\">\n  TELL\n</process>\n</processes>\n".into(), 2, "<process"),
        (ProcessNameAttrMismatch, wrap("count", "  TELL"), 2, "count"),
        (ProcessNameAttrMismatch, "<processes>\n<process id=\"pp\" colour=\"red\">\n  TELL\n</process>\n</processes>\n".into(), 2, "red"),
        (ToolPolicy, "<triggers>\nUSE `calc`\n</triggers>\n".to_string() + &wrap("", "  TELL"), 2, "USE"),
        (ConcurrencyPolicy, wrap("", "  PAR:\n    SET AA := 1"), 4, "SET"),
        (ConcurrencyPolicy, wrap("", "  JOIN:\n    CAPTURE AA from `a`"), 3, "JOIN"),
        (ConcurrencyPolicy, wrap("", "  PAR:\n    USE `a`\n  CAPTURE AA from `a`\n  JOIN:\n    CAPTURE BB from `a`"), 5, "`a`"),
        (ConcurrencyPolicy, wrap("", "  PAR:\n    USE `a`\n    USE `b`\n  JOIN:\n    CAPTURE BB from `b`\n    CAPTURE AA from `a`"), 8, "CAPTURE"),
        (ConcurrencyPolicy, wrap("", "  PAR:\n    USE `a`\n  JOIN:\n    CAPTURE AA from `a`\n    CAPTURE BB from `a`"), 7, "`a`"),
        (ConcurrencyPolicy, wrap("", "  PAR:\n    USE `a`\n  TELL"), 3, "PAR"),
        (ConcurrencyPolicy, wrap("", "  PAR:\n  TELL"), 3, "PAR"),
        (ForbiddenSymbolOrigin, wrap("", "  SET AA := 1 (from `never`)"), 3, "`never`"),
        (ForbiddenSymbolOrigin, wrap("", "  SET AA := 1 (from NOPE)"), 3, "NOPE"),
        (ForbiddenSymbolOrigin, wrap("", "  SET AA := 1 (from nowhere)"), 3, "nowhere"),
        (ForbiddenSymbolOrigin, wrap("", "  SET AA := 1 (by INP)"), 3, "by"),
        (RandomnessPolicy, wrap("", "  SET AA := random()"), 3, "random"),
        (RandomnessPolicy, wrap("", "  USE `random-pick`"), 3, "`random-pick`"),
        (RandomnessPolicy, wrap("", "  USE `dice_shuffle` where: sides=6"), 3, "`dice"),
        (WithScopeError, wrap("", "  WITH [1]:\n    TELL"), 3, "[1]"),
        (WithScopeError, wrap("", "  WITH {\"a\": 1}:\n  TELL"), 3, "WITH"),
        (TimeoutRetryPolicy, wrap("", "  USE `a` (timeout_ms=0)"), 3, "0)"),
        (TimeoutRetryPolicy, wrap("", "  USE `a` (retry=11)"), 3, "11"),
        (TimeoutRetryPolicy, wrap("", "  USE `a` (timeout_ms=1.5)"), 3, "1.5"),
        (TimeoutRetryPolicy, wrap("", "  USE `a` (retry=1, atomic)"), 3, "atomic"),
        (TimeoutRetryPolicy, wrap("", "  USE `a` (fast)"), 3, "fast"),
        (TimeoutRetryPolicy, wrap("", "  USE `a` (retry=\"2\")"), 3, "\"2\""),
        (CapturePathError, wrap("", "  USE `a`\n  CAPTURE AA from `a` map: \"x..y\"→AA"), 4, ".y"),
        (CapturePathError, wrap("", "  USE `a`\n  CAPTURE AA from `a` map: \"x[q]\"→AA"), 4, "q]"),
        (CapturePathError, wrap("", "  USE `a`\n  CAPTURE AA from `a` map: \"x\"→BB"), 4, "BB"),
        (CapturePathError, wrap("", "  USE `a`\n  CAPTURE AA, BB from `a` map: \"x\"→AA"), 4, "BB"),
        (AssertInvalid, wrap("", "  ASSERT 5"), 3, "5"),
        (AssertInvalid, wrap("", "  ASSERT \"a\" + \"b\""), 3, "\"a\""),
        (AssertInvalid, wrap("", "  SET AA := 1\n  IF AA +:\n    TELL"), 4, ":"),
        (AssertInvalid, wrap("", "  ASSERT frob(1)"), 3, "frob"),
        (AssertInvalid, wrap("", "  ASSERT len(1, 2)"), 3, "len"),
        (AssertInvalid, wrap("", "  ASSERT ALL: 1"), 3, "1"),
        (SemicolonDetected, wrap("", "  TELL \"x\";"), 3, ";"),
        (PaddingWhitespace, wrap("", "  TELL  \"x\""), 3, "  \"x"),
        (PaddingWhitespace, wrap("", "  TELL \"x\" "), 3, " \n"),
        (PaddingWhitespace, c("AA:  1", "  TELL why:AA"), 2, " "),
        // 06: "Secrets/PII MUST be redacted as `[REDACTED]` (`AG-032`)" — a RETURN is recorded.
        (SensitiveInLog, wrap("", "  SET SECRET := \"pw\"\n  SNAP [SECRET] redact=[SECRET]\n  RETURN: SECRET"), 5, "SECRET"),
        (SensitiveInLog, wrap("", "  SET KEY := \"pw\"\n  SNAP [KEY] redact=[KEY]\n  RETURN: k=concat(\"x\", KEY)"), 5, "KEY)"),
        (SensitiveInLog, wrap("", "  SET KEY := \"pw\"\n  SNAP [KEY] redact=[KEY]\n  IF true:\n    SET COPY := KEY\n    RETURN: COPY"), 7, "COPY"),
        (InPromptConfigOrImports, format!("<config>\n{}", wrap("", "  TELL")), 1, "<config>"),
        (ProcessArgsMismatch, String::from("<processes>\n<process id=\"pp\">\n  RUN `qq`\n</process>\n<process id=\"qq\" args=\"n: Number\">\n  TELL why:n\n</process>\n</processes>\n"), 3, "`qq`"),
        (ProcessArgsMismatch, String::from("<processes>\n<process id=\"pp\">\n  RUN `qq` where: m=1, n=2\n</process>\n<process id=\"qq\" args=\"n: Number\">\n  ASSERT n > 0\n</process>\n</processes>\n"), 3, "m=1"),
        (ProcessArgsMismatch, String::from("<processes>\n<process id=\"pp\">\n  RUN `qq` where: n=\"two\"\n</process>\n<process id=\"qq\" args=\"n: Number\">\n  ASSERT n > 0\n</process>\n</processes>\n"), 3, "\"two\""),
        (BlockConstantUnterminated, c("AA: TEXT<<\nbody", "  TELL why:AA"), 2, "TEXT<<"),
        (BlockConstantTypeUnknown, c("AA: XML<<\n<a/>\n>>", "  TELL why:AA"), 2, "XML<<"),
        (SymbolNotUsed, wrap("", "  SET AA := 1"), 3, "AA"),
        (SymbolNotUsed, c("AA: 1", "  TELL"), 2, "AA"),
        (SymbolNotUsed, wrap("unused: Number", "  TELL"), 2, "unused"),
        (Syntax, wrap("", "  FROB AA"), 3, "FROB"),
        (Syntax, wrap("", "  TELL\n      TELL"), 4, "TELL"),
        (Syntax, wrap("", "  ELSE:\n    TELL"), 3, "ELSE"),
        (Syntax, wrap("", "  TRY:\n    TELL"), 3, "TRY"),
        (Syntax, wrap("", "  TELL \"open"), 3, "\"open"),
        (Syntax, wrap("", "  SET AA := 1 2"), 3, "2"),
        // Issue 28: an expression or a block nested past its limit (64, 32), where it goes past.
        (LimitExceeded, wrap("", &format!("  SET AA := 0{}\n  TELL why:AA", (1..70).map(|i| format!(" + {i}")).collect::<String>())), 3, "64 +"),
        (LimitExceeded, wrap("", &format!("{}TELL", (1..40).map(|i| format!("{}IF true:\n", " ".repeat(2 * i))).collect::<String>())), 3 + 32, "IF true"),
        // 00: `<trigger event="EVENT_TYPE" [pattern="REGEX"] target="PROCESS_ID" />` — a
        // pattern that is not a regular expression, where it stops compiling (07 has no code).
        (Syntax, "<triggers>\n<trigger event=\"e\" pattern=\"^deploy (\\w+$\" target=\"main\" />\n</triggers>\n".to_string() + &wrap("", "  TELL"), 2, "(\\w+$"),
        (Syntax, "<triggers>\n<trigger event=\"e\" pattern=\"x[z-a]\" target=\"main\" />\n</triggers>\n".to_string() + &wrap("", "  TELL"), 2, "z-a"),
    ]
}

/// The host's policy for [`policy_table`]: the time policy on, and `double` a registered tool.
fn policy() -> Policy {
    Policy {
        require_timeout: true,
        tools: vec!["double".into()],
        registered: None,
    }
}

/// The codes that need a host's [`policy`]: AG-W02's time policy and AG-034's tools.
fn policy_table() -> Vec<(Code, String, u32, &'static str)> {
    let double = |call: &str| {
        format!(
            "<processes>\n<process id=\"main\">\n  {call}\n</process>\n<process id=\"double\" args=\"x: Number\">\n  RETURN: y=x\n</process>\n</processes>\n"
        )
    };
    use Code::*;
    vec![
        // 07: "AG-W02, name: LaxTime, desc: Step without explicit time where policy requires."
        (LaxTime, wrap("", "  USE `calc`"), 3, "USE"),
        (
            LaxTime,
            wrap("", "  USE `calc` (atomic, retry=1)"),
            3,
            "USE",
        ),
        (
            LaxTime,
            wrap(
                "",
                "  PAR:\n    USE `a` (timeout_ms=5)\n    USE `b`\n  JOIN:\n    CAPTURE BB from `b`\n  TELL why:BB",
            ),
            5,
            "USE `b`",
        ),
        // 07: "AG-034, name: PredefinedToolCollision, desc: Conflicting tool signatures across
        // host and predefinedTools.json" — a called process and a host tool of one name.
        (
            PredefinedToolCollision,
            double("RUN `double` where: x=1"),
            3,
            "`double`",
        ),
        (
            PredefinedToolCollision,
            double("USE `double` where: x=1 (timeout_ms=9)"),
            3,
            "`double`",
        ),
    ]
}

/// Asserts `code` at `line`, at the column where `needle` starts in that line.
fn assert_at(code: Code, text: &str, line: u32, needle: &str, found: &[(Code, u32, u32)]) {
    let source_line = text.lines().nth(line as usize - 1).unwrap_or_default();
    let with_newline = format!("{source_line}\n");
    let column = with_newline
        .find(needle)
        .map(|i| with_newline[..i].chars().count() as u32 + 1);
    let column = column.unwrap_or_else(|| panic!("{needle:?} not in line {line} of\n{text}"));
    assert!(
        found.contains(&(code, line, column)),
        "{} expected at {line}:{column} in\n{text}\nfound {found:?}",
        code.as_str()
    );
}

#[test]
fn every_static_code_is_raised_at_its_position() {
    for (code, text, line, needle) in table() {
        assert_at(code, &text, line, needle, &codes(&text));
    }
    for (code, text, line, needle) in policy_table() {
        let found: Vec<_> = check_source_with(&text, &policy())
            .diagnostics
            .iter()
            .map(|d| (d.code, d.span.line, d.span.column))
            .collect();
        assert_at(code, &text, line, needle, &found);
        assert!(
            !codes(&text).iter().any(|f| f.0 == code),
            "{} without the policy in\n{text}",
            code.as_str()
        );
    }
}

#[test]
fn a_use_with_a_timeout_meets_the_time_policy_and_a_process_no_tool_shares_is_no_collision() {
    let text = "<processes>\n<process id=\"main\">\n  USE `calc` (timeout_ms=10)\n  RUN `half` where: x=1\n</process>\n<process id=\"half\" args=\"x: Number\">\n  RETURN: y=x\n</process>\n</processes>\n";
    let checked = check_source_with(text, &policy());
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
}

#[test]
fn a_redaction_counts_on_its_block_path_only() {
    // Redacted inside a branch that may not run: the engine redacts at run time, the check
    // does not guess. A TELL why: of a redacted symbol is allowed by 06: "only the symbol name
    // may appear".
    let branch = "  SET KEY := \"pw\"\n  IF true:\n    SNAP [KEY] redact=[KEY]\n  RETURN: KEY";
    let told = "  SET KEY := \"pw\"\n  SNAP [KEY] redact=[KEY]\n  TELL \"kept\" why:KEY\n  RETURN: ok=true";
    for body in [branch, told] {
        let found = codes(&wrap("", body));
        assert!(
            !found.iter().any(|f| f.0 == Code::SensitiveInLog),
            "{body}: {found:?}"
        );
    }
}

#[test]
fn the_table_covers_every_static_code() {
    let covered: std::collections::BTreeSet<Code> = table()
        .into_iter()
        .chain(policy_table())
        .map(|c| c.0)
        .collect();
    // Left out (docs/processes.md says why): STE lints, ALIAS (config.json only), the
    // <instructions> lines, and AG-036…AG-043 below; AG-W03 is decided at run time only.
    let runtime_or_left_out = [
        Code::SteValidationFailed,
        Code::AliasMapError,
        Code::InstructionsLinePolicy,
        Code::HeuristicInference,
    ];
    for code in Code::ALL {
        let formatting = (36..=43).any(|n| code.as_str() == format!("AG-0{n}"));
        if !formatting && !runtime_or_left_out.contains(code) {
            assert!(covered.contains(code), "{} has no case", code.as_str());
        }
    }
}

#[test]
fn warnings_are_not_fatal_and_errors_are() {
    let warned = check_source(&wrap("", "  SET AA := 1"));
    assert!(
        warned
            .diagnostics
            .iter()
            .all(|d| d.severity() == Severity::Warning)
    );
    assert!(!warned.has_errors());
    assert!(check_source(&wrap("", "  RUN `missing`")).has_errors());
}

#[test]
fn one_run_reports_every_broken_line() {
    let found = codes(&wrap(
        "",
        "  FROB\n  RUN `missing`\n  SET AA := <NOPE>\n  TELL why:AA",
    ));
    let lines: Vec<_> = found.iter().map(|f| (f.0, f.1)).collect();
    assert!(lines.contains(&(Code::Syntax, 3)), "{found:?}");
    assert!(lines.contains(&(Code::ProcessIdMismatch, 4)), "{found:?}");
    assert!(
        lines.contains(&(Code::UnresolvedPlaceholder, 5)),
        "{found:?}"
    );
}

/// "A use is a use whatever else is wrong on its line" (issue 47): a name read on a line
/// with an error (broken, or in the body of a broken block, or wrongly indented) is not
/// reported `AG-W01 … never used`; a name no line reads still is.
#[test]
fn a_name_used_on_a_line_with_an_error_is_used() {
    let c = |consts: &str, body: &str| {
        format!("<constants>\n{consts}\n</constants>\n{}", wrap("", body))
    };
    let used = [
        wrap(
            "amount: Number",
            "  SET TOTAL := amount +\n  TELL why:TOTAL",
        ),
        wrap(
            "amount: Number",
            "  SET TOTAL := <AMOUNT> *\n  TELL why:TOTAL",
        ),
        wrap("", "  SET AA := 1\n  SET BB := AA +"),
        wrap("", "  SET AA := 1\n  IF:\n    TELL why:AA"),
        wrap("", "  SET AA := 1\n      TELL why:AA"),
        wrap("", "  SET AA := 1\n  RUN `missing` where: count=AA"),
        c("AA: 1", "  SET BB := AA +"),
    ];
    for text in used {
        let found = codes(&text);
        assert!(
            found.iter().any(|f| f.0 != Code::SymbolNotUsed),
            "no error in {text}: {found:?}"
        );
        assert!(
            found.iter().all(|f| f.0 != Code::SymbolNotUsed),
            "{text}: {found:?}"
        );
    }
    let unused = codes(&wrap("amount: Number", "  SET TOTAL := 1 +"));
    assert!(unused.contains(&(Code::SymbolNotUsed, 2, 26)), "{unused:?}");
}

#[test]
fn a_broken_block_opener_does_not_cascade_into_its_body() {
    let found = codes(&wrap(
        "",
        "  IF:\n    TELL\n    TELL\n  ELSE IF true:\n    TELL\n  ELSE:\n    TELL\n  TELL",
    ));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, Code::AssertInvalid);
}

#[test]
fn diagnostics_render_like_rustc_with_caret_and_hint() {
    let text = wrap("", "  RUN `missing`");
    let d = &check_source(&text).diagnostics[0];
    let rendered = d.render("f.aps", &text);
    let expected = "error[AG-004 ProcessIdMismatch]: RUN names process missing, which is not defined\n \
                    --> f.aps:3:7\n  |\n3 |   RUN `missing`\n  |       ^^^^^^^^^\n  = hint: ";
    assert!(rendered.starts_with(expected), "{rendered}");
    let json = d.to_json("f.aps");
    assert_eq!(json["code"], "AG-004");
    assert_eq!(json["name"], "ProcessIdMismatch");
    assert_eq!(
        (json["line"].as_u64(), json["column"].as_u64()),
        (Some(3), Some(7))
    );
    assert_eq!(json["severity"], "error");
}

#[test]
fn a_trigger_pattern_that_does_not_compile_is_a_static_error_naming_why() {
    // 00: `<trigger event="EVENT_TYPE" [pattern="REGEX"] target="PROCESS_ID" />`.
    let text = "<triggers>\n<trigger event=\"e\" pattern=\"a(b\" target=\"main\" />\n</triggers>\n"
        .to_string()
        + &wrap("", "  TELL");
    let checked = check_source(&text);
    let d = checked
        .diagnostics
        .iter()
        .find(|d| d.code == Code::Syntax)
        .unwrap_or_else(|| panic!("{:#?}", checked.diagnostics));
    assert_eq!(d.severity(), Severity::Error);
    assert_eq!((d.span.line, d.span.column), (2, 30), "at the unclosed `(`");
    assert_eq!(
        d.message,
        "trigger pattern does not compile: unclosed group"
    );
    let refused = agentpump::process::engine::Program::parse(&text).unwrap_err();
    assert_eq!(refused.0[0].code, Code::Syntax);
}
