//! The engine-defined `<expr>`: precedence, exact decimals, strings, lists, member paths,
//! functions; and `<path>` for CAPTURE maps.

use std::collections::BTreeMap;

use agentpump::process::Code;
use agentpump::process::diagnostic::Span;
use agentpump::process::expr::{Env, Value, eval, parse_expr, parse_path};
use agentpump::process::lexer::{Cursor, lex};
use rust_decimal::Decimal;

struct Vars(BTreeMap<&'static str, Value>);

impl Env for Vars {
    fn symbol(&self, name: &str) -> Option<Value> {
        self.0.get(name).cloned()
    }
    fn local(&self, name: &str) -> Option<Value> {
        self.0.get(name).cloned()
    }
    fn placeholder(&self, name: &str) -> Option<Value> {
        self.0.get(format!("<{name}>").as_str()).cloned()
    }
}

fn env() -> Vars {
    let err = BTreeMap::from([
        ("type".to_string(), Value::Str("timeout".into())),
        ("message".to_string(), Value::Str("too slow".into())),
    ]);
    Vars(BTreeMap::from([
        ("HSC", Value::Num(Decimal::new(35, 2))),
        ("HARM_THR", Value::Num(Decimal::new(40, 2))),
        (
            "ITEMS",
            Value::List(vec![Value::Str("a".into()), Value::Str("b".into())]),
        ),
        ("err", Value::Object(err)),
        ("<NAME>", Value::Str("Ada".into())),
    ]))
}

fn run(text: &str) -> Result<Value, (Code, String)> {
    let (tokens, diags) = lex(text, 1, 1);
    assert!(diags.is_empty(), "{diags:?}");
    let mut cur = Cursor::new(&tokens, Span::new(1, text.len() as u32 + 1, 1));
    let e = parse_expr(&mut cur).map_err(|d| (d.code, d.message))?;
    assert!(cur.at_end(), "{text}: tokens left");
    eval(&e, &env()).map_err(|e| (e.code, e.message))
}

fn num(s: &str) -> Value {
    Value::Num(Decimal::from_str_exact(s).unwrap())
}

#[test]
fn arithmetic_is_exact_and_follows_precedence() {
    assert_eq!(run("1 + 2 * 3").unwrap(), num("7"));
    assert_eq!(run("(1 + 2) * 3").unwrap(), num("9"));
    assert_eq!(run("0.1 + 0.2 = 0.3").unwrap(), Value::Bool(true));
    assert_eq!(run("10 - 2 - 3").unwrap(), num("5"));
    assert_eq!(run("-2 * -3").unwrap(), num("6"));
    assert_eq!(run("7 % 4").unwrap(), num("3"));
    assert_eq!(run("1 / 4").unwrap(), num("0.25"));
    assert_eq!(
        run("sqrt(2) * sqrt(2) - 2 < 0.000000001").unwrap(),
        Value::Bool(true)
    );
    assert_eq!(run("1 / 0").unwrap_err().0, Code::AssertInvalid);
}

// 03 safety policy: HARM := (HSC ≥ HARM_THR) OR (STY_JSON.policy_violation = true)
#[test]
fn logic_comparisons_and_unicode_operators() {
    assert_eq!(
        run("(HSC ≥ HARM_THR) OR (HSC ≠ HSC)").unwrap(),
        Value::Bool(false)
    );
    assert_eq!(
        run("HSC < HARM_THR AND HSC <= 0.35 AND HSC >= 0.35").unwrap(),
        Value::Bool(true)
    );
    assert_eq!(run("NOT true OR false").unwrap(), Value::Bool(false));
    assert_eq!(run("NOT (HSC ≠ HSC)").unwrap(), Value::Bool(true));
    assert_eq!(run("1 = 1.0").unwrap(), Value::Bool(true));
    assert_eq!(run("\"b\" > \"a\"").unwrap(), Value::Bool(true));
    assert_eq!(run("1 AND true").unwrap_err().0, Code::AssertInvalid);
}

#[test]
fn strings_lists_members_and_placeholders() {
    assert_eq!(run("err.type = \"timeout\"").unwrap(), Value::Bool(true));
    assert_eq!(
        run("err.message + \"!\"").unwrap(),
        Value::Str("too slow!".into())
    );
    assert_eq!(
        run("\"b\" IN ITEMS AND \"slow\" IN err.message AND \"type\" IN err").unwrap(),
        Value::Bool(true)
    );
    assert_eq!(run("ITEMS[1]").unwrap(), Value::Str("b".into()));
    assert_eq!(run("len(ITEMS + [\"c\"])").unwrap(), num("3"));
    assert_eq!(
        run("join(append(ITEMS, \"c\"), \"-\")").unwrap(),
        Value::Str("a-b-c".into())
    );
    assert_eq!(run("upper(<NAME>)").unwrap(), Value::Str("ADA".into()));
    assert_eq!(
        run("concat(\"x=\", 1.50, true)").unwrap(),
        Value::Str("x=1.5true".into())
    );
    assert_eq!(
        run("range(3)").unwrap(),
        Value::List(vec![num("0"), num("1"), num("2")])
    );
    assert_eq!(
        run("round(2.345, 2) + abs(-1) + max(1, 4, 2) - min(3, 2)").unwrap(),
        num("5.34")
    );
    assert_eq!(run("number(\" 2.5 \") * 2").unwrap(), num("5.0"));
    assert_eq!(
        run("keys({\"b\": 1, \"a\": 2})").unwrap(),
        Value::List(vec![Value::Str("a".into()), Value::Str("b".into())])
    );
    assert_eq!(
        run("split(\"a,b\", \",\") = ITEMS").unwrap(),
        Value::Bool(true)
    );
    assert_eq!(
        run("first(ITEMS) + last(ITEMS)").unwrap(),
        Value::Str("ab".into())
    );
    assert_eq!(
        run(
            "starts_with(\"abc\", \"ab\") AND ends_with(\"abc\", \"bc\") AND contains(ITEMS, \"a\")"
        )
        .unwrap(),
        Value::Bool(true)
    );
    assert_eq!(
        run("trim(\" x \") + lower(\"Y\") + text([1, \"z\"])").unwrap(),
        Value::Str("xy[1, \"z\"]".into())
    );
    assert_eq!(
        run("enum(LOW,HIGH)").unwrap(),
        Value::List(vec![Value::Str("LOW".into()), Value::Str("HIGH".into())])
    );
}

#[test]
fn unbound_names_and_bad_calls_name_their_codes() {
    assert_eq!(run("MISSING + 1").unwrap_err().0, Code::UndefinedSymbol);
    assert_eq!(run("<OTHER>").unwrap_err().0, Code::UnresolvedPlaceholder);
    assert_eq!(run("err.code").unwrap_err().0, Code::AssertInvalid);
    assert_eq!(run("ITEMS[5]").unwrap_err().0, Code::AssertInvalid);
    assert_eq!(run("first([])").unwrap_err().0, Code::AssertInvalid);
    assert_eq!(run("random()").unwrap_err().0, Code::RandomnessPolicy);
    assert_eq!(run("nope(1)").unwrap_err().0, Code::AssertInvalid);
    assert_eq!(run("sqrt(1, 2)").unwrap_err().0, Code::AssertInvalid);
}

#[test]
fn capture_paths() {
    let at = Span::new(1, 10, 8);
    let p = parse_path("a.b[0]", at).unwrap();
    assert_eq!(p.to_string(), "a.b[0]");
    assert!(!p.optional);
    assert!(parse_path("[1].x?", at).unwrap().optional);
    assert!(parse_path("$artifact", at).is_ok());
    for (bad, offset) in [
        ("", 0),
        ("a.", 2),
        ("a[", 2),
        ("a[1", 3),
        ("a b", 1),
        (".a", 0),
        ("?", 0),
    ] {
        let d = parse_path(bad, at).unwrap_err();
        assert_eq!(d.code, Code::CapturePathError, "{bad}");
        assert_eq!(
            d.span.column,
            at.column + 1 + offset,
            "{bad}: {}",
            d.message
        );
    }
}
