//! Placeholders resolved by agent inference, the last resort of 03's order, only where the
//! organism allows it: asked of the inference tool when a statement first reads them, recorded
//! as AG-W03 with the value and an input hash; unresolved otherwise (AG-006).

use std::sync::{Arc, Mutex};

use agentpump::history::{Record, RecordKind};
use agentpump::process::Code;
use agentpump::process::engine::{ProcessListener, Program};
use agentpump::tool::{self, Answer, Call, Signature, Tool, ToolError, ToolResult};
use agentpump::value::Value;
use agentpump::{Context, Payload, PumpBuilder};

const NS: &str = "urn:test:inference:v1";

/// An inference tool answering by the placeholder asked; remembers what it was asked.
#[derive(Default, Clone)]
struct Oracle {
    asked: Arc<Mutex<Vec<String>>>,
}

#[agentpump::async_trait]
impl Tool for Oracle {
    fn signature(&self) -> Signature {
        Signature::new("oracle", "infers a value")
            .arg("symbol", "string", "what is asked for", true)
            .arg("question", "string", "the question", true)
            .arg("process", "string", "the asking process", true)
            .arg("input_hash", "string", "the inputs' hash", true)
            .field("value", "string", "the inferred value")
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        let symbol = call.args["symbol"].to_string();
        self.asked.lock().unwrap().push(symbol.clone());
        let value = match symbol.as_str() {
            "<AUDIENCE>" => "engineers",
            _ => "a guess",
        };
        Ok(call.result().field("value", value))
    }
}

/// INP (`name`) shadows the constant `NAME`; `GREETING` is a constant; `AUDIENCE` resolves
/// from nothing, and is read twice.
const TEXT: &str = "<constants>\nNAME: \"constant\"\nGREETING: \"hello\"\n</constants>\n<triggers>\n<trigger event=\"{urn:test:inference:v1}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\" args=\"name: String\">\n  SET WHO := <NAME>\n  SET LINE := concat(<GREETING>, \", \", <AUDIENCE>)\n  RETURN: who=WHO, line=LINE, again=<AUDIENCE>\n</process>\n</processes>\n";

async fn run(program: Arc<Program>, oracle: Oracle) -> Vec<Record> {
    let pump = PumpBuilder::new()
        .register(
            ProcessListener::new(program, "main")
                .unwrap()
                .infer_with("oracle")
                .registration(),
        )
        .register(tool::register(oracle))
        .build()
        .unwrap();
    let start = format!("<go xmlns=\"{NS}\"><name>input</name></go>");
    let thread = pump.post(None, None, &start).await.unwrap().thread();
    pump.settle(thread).await;
    pump.history(thread).await.unwrap()
}

/// 03: "Placeholder resolution … order: [INP, CONSTANTS, RUNTIME, Agent Inference (only if
/// allowed)]" and "If inference occurs under a non-strict policy, the engine MUST emit `AG-W03`
/// with the inferred value and a deterministic input hash in the invocation log."
#[tokio::test]
async fn a_placeholder_nothing_resolves_is_inferred_where_allowed_and_recorded() {
    // Not allowed (03's default): a hard error, before anything runs.
    let refused = Program::parse(TEXT).unwrap_err();
    assert!(
        refused
            .0
            .iter()
            .any(|d| d.code == Code::UnresolvedPlaceholder && d.message.contains("<AUDIENCE>")),
        "{refused:?}"
    );
    // Allowed: parsed, and asked at run time.
    let oracle = Oracle::default();
    let records = run(Program::parse_inferring(TEXT).unwrap(), oracle.clone()).await;
    let egress = records
        .iter()
        .rfind(|r| r.kind == RecordKind::Egress)
        .expect("the RETURN");
    let payload = Payload::parse(&egress.payload, &Default::default()).unwrap();
    let Answer::Result(result) = Answer::parse(&payload).unwrap().unwrap() else {
        panic!("{}", egress.payload);
    };
    // INP before constants; constants before inference; inference last.
    assert_eq!(result.fields["who"], Value::from("input"));
    assert_eq!(result.fields["line"], Value::from("hello, engineers"));
    assert_eq!(result.fields["again"], Value::from("engineers"));
    // Asked once, though read twice; nothing else was asked.
    assert_eq!(*oracle.asked.lock().unwrap(), ["<AUDIENCE>"]);
    let warnings: Vec<&Record> = records
        .iter()
        .filter(|r| r.root.local() == "warning")
        .collect();
    assert_eq!(warnings.len(), 1);
    let w = &warnings[0].payload;
    for part in [
        r#"code="AG-W03""#,
        r#"input-hash="sha256:"#,
        r#"line="11""#,
        r#"<symbol name="&lt;AUDIENCE&gt;">engineers</symbol>"#,
    ] {
        assert!(w.contains(part), "{part} in {w}");
    }
}

/// The organism decides: `infer_with` on a process listener lets its file's unresolved
/// placeholders through to be inferred; without it, loading names the AG-006.
#[test]
fn an_organism_allows_inference_per_process_listener() {
    let organism = |infer: &str| {
        let toml = format!(
            "[organism]\nname = \"t\"\n\n[[listener]]\nname = \"main\"\nkind = \"process\"\nfile = \"main.aps\"\n{infer}\n"
        );
        let mut o = agentpump::host::organism::Organism::parse(&toml, "o.toml").unwrap();
        o.embed("main.aps", TEXT);
        o.registrations("o.toml").map(|r| r.len())
    };
    // Its listener and the inbox's `ask` tool.
    assert_eq!(organism("infer_with = \"oracle\"").unwrap(), 2);
    let err = organism("").unwrap_err().to_string();
    assert!(
        err.contains("AG-006") && err.contains("<AUDIENCE>"),
        "{err}"
    );
}
