//! The APS document around the processes: constants (inline, JSON and TEXT blocks), runtime
//! values, triggers and `<process id name args>` (00 Structure).

use agentpump::process::expr::ExprKind;
use agentpump::process::source::{ConstValue, read};

#[test]
fn constants_runtime_triggers_and_process_attributes() {
    let text = "<instructions>\nignored <NOT_A_TAG> text\n</instructions>\n<constants>\nAA: 1\nBB: JSON<<\n{\n  \"k\":  [1, AA]\n}\n>>\nCC: TEXT<<\n  two\n lines \n>>\n</constants>\n<formats>\n<format id=\"x\">\n</format>\n</formats>\n<runtime>\nDD: \"eu\"\n</runtime>\n<triggers>\n<trigger event=\"{urn:x}order\" pattern=\"a.*\" target=\"calc_tax\" />\n</triggers>\n<processes>\n<process id=\"calc_tax\" name=\"Tax\" args=\"amount: Number, region: String\">\n  TELL\n</process>\n</processes>\n<input>\nanything\n</input>\n";
    let (doc, diags) = read(text);
    assert!(diags.is_empty(), "{diags:#?}");
    assert_eq!(doc.constants.len(), 3);
    let ConstValue::Value(bb) = &doc.constants[1].value else {
        panic!()
    };
    assert!(matches!(&bb.kind, ExprKind::Object(o) if o[0].0 == "k"));
    // 00: BODY is the exact text between the opening line and the closing delimiter line.
    assert_eq!(
        doc.constants[2].value,
        ConstValue::Text("  two\n lines ".into())
    );
    assert_eq!(doc.runtime[0].name.name, "DD");
    let t = &doc.triggers[0];
    assert_eq!(
        (
            t.event.as_str(),
            t.pattern.as_ref().map(|(p, _)| p.as_str()),
            t.target.name.as_str()
        ),
        ("{urn:x}order", Some("a.*"), "calc_tax")
    );
    let p = &doc.processes[0];
    assert_eq!(p.name.as_deref(), Some("Tax"));
    let args: Vec<_> = p
        .args
        .iter()
        .map(|a| (a.name.name.as_str(), a.ty.as_str()))
        .collect();
    assert_eq!(args, [("amount", "Number"), ("region", "String")]);
    assert_eq!(p.lines[0].number, 28);
}

#[test]
fn crlf_line_endings_are_normalized() {
    let (doc, diags) =
        read("<processes>\r\n<process id=\"p\">\r\n  TELL\r\n</process>\r\n</processes>\r\n");
    assert!(diags.is_empty(), "{diags:#?}");
    assert_eq!(doc.processes[0].lines[0].text, "TELL");
}
