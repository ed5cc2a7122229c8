//! Hostile input, in one auditable table: every row names a case, the way it enters the pump
//! (`pump.send`, `pump.post`, a listener's output, HTTP) and the answer the pump must give — a
//! recorded `huh` / `system-error` code, an HTTP status with its problem code, or exact delivery.
//! After every row the pump must still serve: an echo in a new thread answers and a thread that
//! was live before is untouched. The table is docs/reliability.md's table, row for row.
//!
//! Cases that need their own organism (a second pump, a spawn bomb, a panicking handler, a
//! 100 MB body, outputs over the limit) follow the table, each stating its answer the same way.

mod support;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentpump::envelope::{AGENTSERVER_NS, ENVELOPE_NS};
use agentpump::governor::Budget;
use agentpump::history::{Record, RecordKind};
use agentpump::listeners::Echo;
use agentpump::system::{GOVERNOR_NS, ORIGINAL_ATTEMPT_LIMIT, SYSTEM_NS, Spawn, SystemMessage};
use agentpump::{PumpBuilder, PumpHandle, Registration, ThreadId, ThreadState};
use base64::Engine as _;
use support::{Script, notices, p, q, start};

/// The bearer token of every HTTP API in this file.
const TOKEN: &str = "hostile-token-0123456789";

/// Stands for the id of the thread that was live before the table ran (which the table is
/// built before): rows aim at it with this, and it is replaced before the input is sent.
const LIVE: &str = "LIVE-THREAD-ID";

/// How a hostile input reaches the pump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// `PumpHandle::send`: the bytes as one whole envelope.
    Send,
    /// `PumpHandle::post`: the text as a bare payload, starting a thread.
    Post,
    /// A listener's `Context::emit`: the text as one payload.
    Emit,
    /// A listener's `Context::emit_text`: the text as model output, payloads extracted from it.
    EmitText,
    /// A listener's `Context::send` of the text to the named listener.
    SendTo(&'static str),
    /// `POST /threads` with the bytes as the body.
    Http,
}

impl Via {
    /// Whether a listener says the input (so its answer comes back to that listener).
    fn is_listener(self) -> bool {
        matches!(self, Self::Emit | Self::EmitText | Self::SendTo(_))
    }
}

/// What the pump must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Refused with this code, recorded: for outside input an `IngressError` whose answer is in
    /// history; for a listener's output a `huh` / `system-error` to the listener in its thread.
    Refused(&'static str),
    /// An HTTP status with this problem-JSON `code`; the pump's answer is recorded.
    Http(u16, &'static str),
    /// Accepted: this many payloads reach `echo`, each byte for byte as it stands in the input.
    Delivered(usize),
    /// The output is a governor message: the thread halts with this class.
    Halted(&'static str),
}

/// One row of the table.
#[derive(Debug)]
struct Case {
    name: &'static str,
    via: Via,
    input: Vec<u8>,
    answer: Answer,
    /// Words the answer's message must contain ("" for none).
    detail: &'static str,
}

/// A row: `name` given `input` `via` a way in gets `answer`, whose message says `detail`.
fn case(
    name: &'static str,
    via: Via,
    input: impl Into<Vec<u8>>,
    answer: Answer,
    detail: &'static str,
) -> Case {
    Case {
        name,
        via,
        input: input.into(),
        answer,
        detail,
    }
}

/// `<message xmlns="urn:agentpump:envelope:v1"><meta/>PAYLOAD</message>`.
fn env(payload: &str) -> String {
    format!(r#"<message xmlns="{ENVELOPE_NS}"><meta/>{payload}</message>"#)
}

/// An envelope cut off after `start`, for rows that finish it with raw bytes.
fn env_open(start: &str) -> String {
    format!(r#"<message xmlns="{ENVELOPE_NS}"><meta/>{start}"#)
}

/// `<say xmlns="urn:test:v1">BODY</say>`: what `echo` accepts.
fn say(body: &str) -> String {
    p("say", body)
}

/// The internal subset of the billion-laughs attack: `&lol9;` expands to 10⁹ `lol`s.
fn laughs() -> String {
    let mut subset = String::from(r#"<!ENTITY lol "lol">"#);
    for i in 1..10 {
        let prev = if i == 1 {
            "lol".to_owned()
        } else {
            format!("lol{}", i - 1)
        };
        subset.push_str(&format!(
            r#"<!ENTITY lol{i} "{}">"#,
            format!("&{prev};").repeat(10)
        ));
    }
    subset
}

/// A payload that uses the billion-laughs entities, with their DOCTYPE before it.
fn billion_laughs() -> String {
    format!("<!DOCTYPE say [{}]>{}", laughs(), say("&lol9;"))
}

/// A DOCTYPE that declares `/etc/passwd` as an external entity, and a payload that uses it.
fn xxe() -> String {
    format!(
        r#"<!DOCTYPE say [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>{}"#,
        say("&xxe;")
    )
}

/// `n` nested `<a>` elements inside one `<say>`.
fn deep(n: usize) -> String {
    p("say", &format!("{}{}", "<a>".repeat(n), "</a>".repeat(n)))
}

/// `n` attributes (or namespace declarations) on one element.
fn attributes(n: usize, namespaces: bool) -> String {
    (0..n)
        .map(|i| match namespaces {
            false => format!(" a{i}='1'"),
            true => format!(" xmlns:p{i}='urn:p:{i}'"),
        })
        .collect()
}

/// The table. Rows that only differ in the way in are kept together, so each case reads as one
/// block; every row is one line of docs/reliability.md's table.
#[rustfmt::skip]
fn cases() -> Vec<Case> {
    use Answer::{Delivered, Halted, Http, Refused};
    use Via::{Emit, EmitText, Post, Send, SendTo};
    let http = Via::Http; // `Http` is the answer's name

    let wide = attributes(10_000, false);
    let namespaces = attributes(10_000, true);
    let long_value = "v".repeat(1_000_000);
    let long_name = "n".repeat(1_000_000);
    vec![
        // 1. Entity expansion.
        case("billion laughs before the envelope", Send, format!("<!DOCTYPE message [{}]>{}", laughs(), env(&say("&lol9;"))), Refused("forbidden-dtd"), "DOCTYPE declarations are refused"),
        case("billion laughs before the payload", Send, env(&billion_laughs()), Refused("forbidden-dtd"), "DOCTYPE declarations are refused"),
        case("billion laughs into the live thread", Send, format!("<message xmlns='{ENVELOPE_NS}'><meta><thread>{LIVE}</thread></meta>{}</message>", billion_laughs()), Refused("forbidden-dtd"), ""),
        case("billion laughs", Post, billion_laughs(), Refused("forbidden-dtd"), ""),
        case("billion laughs", Emit, billion_laughs(), Refused("forbidden-dtd"), ""),
        // Extraction reads a DOCTYPE as prose, never as a DTD: the reference is what is refused.
        case("billion laughs", EmitText, billion_laughs(), Refused("unknown-entity"), "`&lol9;`"),
        case("billion laughs", http, billion_laughs(), Http(400, "forbidden-dtd"), ""),
        case("undeclared entity in text", Send, env(&say("&foo;")), Refused("unknown-entity"), "undeclared entity `&foo;`"),
        case("undeclared entity in text", Emit, say("&foo;"), Refused("unknown-entity"), ""),
        case("undeclared entity in an attribute", Post, r#"<say xmlns="urn:test:v1" a="&foo;"/>"#, Refused("unknown-entity"), ""),
        case("undeclared entity in <meta>", Send, format!(r#"<message xmlns="{ENVELOPE_NS}"><meta><to>&foo;</to></meta>{}</message>"#, say("")), Refused("unknown-entity"), ""),
        case("undeclared entity in a namespace URI", Send, env(r#"<say xmlns="urn:test:v1&foo;"/>"#), Refused("unknown-entity"), ""),
        case("parameter entity in an internal subset", Send, env(&format!(r#"<!DOCTYPE say [<!ENTITY % p "<!ENTITY e 'x'>"> %p;]>{}"#, say("&e;"))), Refused("forbidden-dtd"), ""),
        case("`%p;` outside a DTD is text", Send, env(&say("%p;")), Delivered(1), ""),
        case("predefined entities and character references", Send, env(&say("&lt;&amp;&#x41;&#66;")), Delivered(1), ""),
        case("character reference to NUL", Send, env(&say("&#0;")), Refused("malformed-xml"), "invalid character reference"),
        // 2. External entities: refused, and /etc/passwd never appears in history (checked at the end).
        case("external entity (file:///etc/passwd)", Send, env(&xxe()), Refused("forbidden-dtd"), ""),
        case("external entity (file:///etc/passwd)", Emit, xxe(), Refused("forbidden-dtd"), ""),
        case("external entity (file:///etc/passwd)", EmitText, xxe(), Refused("unknown-entity"), "`&xxe;`"),
        case("external entity (file:///etc/passwd)", http, xxe(), Http(400, "forbidden-dtd"), ""),
        case("external DTD subset", Send, format!(r#"<!DOCTYPE message SYSTEM "http://127.0.0.1:1/evil.dtd">{}"#, env(&say(""))), Refused("forbidden-dtd"), ""),
        // 3. Depth 100 000.
        case("100 000 nested elements", Send, env(&deep(100_000)), Refused("limit-exceeded"), "nested deeper than the limit of 64"),
        case("100 000 nested elements", Post, deep(100_000), Refused("limit-exceeded"), ""),
        case("100 000 nested elements", Emit, deep(100_000), Refused("limit-exceeded"), ""),
        case("100 000 nested elements", EmitText, deep(100_000), Refused("limit-exceeded"), ""),
        case("100 000 nested elements", http, deep(100_000), Http(400, "limit-exceeded"), ""),
        case("100 000 unclosed elements", Send, env(&format!("<say xmlns='urn:test:v1'>{}", "<a>".repeat(100_000))), Refused("limit-exceeded"), ""),
        // 4. 10 000 attributes.
        case("10 000 attributes on the payload", Send, env(&format!("<say xmlns='urn:test:v1'{wide}/>")), Refused("limit-exceeded"), "more than 64 attributes"),
        case("10 000 attributes on the envelope", Send, format!("<message xmlns='{ENVELOPE_NS}'{wide}><meta/>{}</message>", say("")), Refused("limit-exceeded"), ""),
        case("10 000 attributes on <meta>", Send, format!("<message xmlns='{ENVELOPE_NS}'><meta{wide}/>{}</message>", say("")), Refused("limit-exceeded"), ""),
        case("10 000 attributes", Post, format!("<say xmlns='urn:test:v1'{wide}/>"), Refused("limit-exceeded"), ""),
        case("10 000 attributes", Emit, format!("<say xmlns='urn:test:v1'{wide}/>"), Refused("limit-exceeded"), ""),
        case("10 000 attributes", http, format!("<say xmlns='urn:test:v1'{wide}/>"), Http(400, "limit-exceeded"), ""),
        case("10 000 namespace declarations", Send, env(&format!("<say xmlns='urn:test:v1'{namespaces}/>")), Refused("limit-exceeded"), ""),
        case("10 000 namespace declarations on the envelope", Send, format!("<message xmlns='{ENVELOPE_NS}'{namespaces}><meta/>{}</message>", say("")), Refused("limit-exceeded"), ""),
        case("duplicate attribute", Send, env("<say xmlns='urn:test:v1' a='1' a='2'/>"), Refused("malformed-xml"), "duplicated attribute"),
        // 5. Over the byte limit (100 MB has its own test below).
        case("2 MiB payload", Emit, say(&"x".repeat(2 << 20)), Refused("limit-exceeded"), "over the limit of 1048576 bytes"),
        case("2 MiB model output", EmitText, say(&"x".repeat(2 << 20)), Refused("limit-exceeded"), ""),
        // 6. Invalid UTF-8 and NUL.
        case("invalid UTF-8 (0xFF)", Send, [ env_open("<say xmlns='urn:test:v1'>").as_bytes(), &b"\xff</say></message>"[..], ] .concat(), Refused("malformed-xml"), "invalid UTF-8 at byte 75"),
        case("invalid UTF-8 (0xFF)", http, [&b"<say xmlns=\"urn:test:v1\">\xff</say>"[..]].concat(), Http(400, "malformed-xml"), "invalid UTF-8 at byte 25"),
        case("UTF-16 surrogate encoded in UTF-8", Send, [ env_open("<say xmlns='urn:test:v1'>").as_bytes(), &b"\xed\xa0\x80</say></message>"[..], ] .concat(), Refused("malformed-xml"), "invalid UTF-8"),
        case("overlong encoding of `<`", Send, [ env_open("<say xmlns='urn:test:v1'>").as_bytes(), &b"\xc0\xbc/say></message>"[..], ] .concat(), Refused("malformed-xml"), "invalid UTF-8"),
        case("UTF-16 bytes", Send, [ &[0xff, 0xfe][..], &env(&say("")) .encode_utf16() .flat_map(u16::to_le_bytes) .collect::<Vec<u8>>(), ] .concat(), Refused("malformed-xml"), "invalid UTF-8 at byte 0"),
        case("NUL in the payload", Send, env(&say("\0")), Refused("malformed-xml"), "U+0000"),
        case("NUL in <meta>", Send, format!("<message xmlns='{ENVELOPE_NS}'><meta><to>echo\0</to></meta>{}</message>", say("")), Refused("malformed-xml"), "U+0000"),
        case("NUL", Post, say("\0"), Refused("malformed-xml"), ""),
        // 6b. An XML declaration: what XML libraries write by default; UTF-8 only.
        case("XML declaration before a bare payload", Post, format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}", say("d")), Delivered(1), ""),
        case("XML declaration before a bare payload", http, format!("<?xml version='1.0'?>\n<!-- a comment -->\n{}", say("d")), Delivered(1), ""),
        case("XML declaration naming another encoding", Post, format!("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>{}", say("d")), Refused("malformed-xml"), "encoding `ISO-8859-1`: only UTF-8 is accepted"),
        case("XML declaration naming another encoding", http, format!("<?xml version=\"1.0\" encoding=\"UTF-16\"?>{}", say("d")), Http(400, "malformed-xml"), "only UTF-8 is accepted"),
        case("XML declaration naming another encoding", Send, format!("<?xml version=\"1.0\" encoding=\"latin1\"?>{}", env(&say("d"))), Refused("malformed-xml"), "encoding `latin1`: only UTF-8 is accepted"),
        case("XML declaration inside a payload", Post, "<say xmlns='urn:test:v1'><?xml version='1.0'?></say>", Refused("malformed-xml"), "XML declaration inside a message"),
        case("NUL", Emit, say("\0"), Refused("malformed-xml"), ""),
        case("NUL", EmitText, format!("ok {}", say("\0")), Refused("malformed-xml"), ""),
        case("NUL", http, say("\0"), Http(400, "malformed-xml"), "U+0000"),
        // 7. Mismatched and unclosed tags.
        case("mismatched tags", Send, env("<say xmlns='urn:test:v1'><b></c></say>"), Refused("malformed-xml"), "expected `</b>`, but `</c>` was found"),
        case("mismatched tags", Post, "<say xmlns='urn:test:v1'><b></c></say>", Refused("malformed-xml"), ""),
        case("mismatched tags", Emit, "<say xmlns='urn:test:v1'><b></c></say>", Refused("malformed-xml"), ""),
        case("mismatched tags", EmitText, "see <say xmlns='urn:test:v1'><b></c></say>", Refused("malformed-xml"), ""),
        case("mismatched tags", http, "<say xmlns='urn:test:v1'><b></c></say>", Http(400, "malformed-xml"), ""),
        case("unclosed payload", Send, env("<say xmlns='urn:test:v1'><b>"), Refused("malformed-xml"), ""),
        case("unclosed payload", Post, "<say xmlns='urn:test:v1'><b>", Refused("malformed-xml"), "unclosed element <say>"),
        case("unclosed envelope", Send, format!("<message xmlns='{ENVELOPE_NS}'><meta/>{}", say("")), Refused("malformed-xml"), "expected </message> after the payload"),
        case("envelope closed inside the payload", Send, format!("<message xmlns='{ENVELOPE_NS}'><meta/><say xmlns='urn:test:v1'></message>"), Refused("malformed-xml"), ""),
        // 8. A second payload smuggled after the first.
        case("second payload", Send, env(&format!("{}{}", say("1"), say("2"))), Refused("malformed-xml"), "second payload element <say>"),
        case("text after the payload", Send, env(&format!("{}tail", say("1"))), Refused("malformed-xml"), "expected </message> after the payload"),
        case("second envelope", Send, format!("{}{}", env(&say("1")), env(&say("2"))), Refused("malformed-xml"), "expected </message> after the payload"),
        case("second envelope", http, format!("{}{}", env(&say("1")), env(&say("2"))), Http(400, "malformed-xml"), ""),
        case("second payload", Post, format!("{}{}", say("1"), say("2")), Refused("malformed-xml"), "second payload element"),
        case("second payload", Emit, format!("{}{}", say("1"), say("2")), Refused("malformed-xml"), "second payload element"),
        // Model output may carry several payloads by design: each is checked and routed alone.
        case("second payload", EmitText, format!("{} and {}", say("1"), say("2")), Delivered(2), ""),
        // 9. The system or governor namespace under another prefix.
        case("system namespace, other prefix", Post, format!("<x:thread-done xmlns:x='{SYSTEM_NS}'/>"), Refused("reserved-namespace"), ""),
        case("system namespace, other prefix", Emit, format!("<x:huh xmlns:x='{SYSTEM_NS}'/>"), Refused("reserved-namespace"), ""),
        case("system namespace, other prefix", http, format!("<s:boot xmlns:s='{SYSTEM_NS}'/>"), Http(422, "reserved-namespace"), ""),
        case("governor namespace, other prefix", Post, format!("<g:loop xmlns:g='{GOVERNOR_NS}' control='done'/>"), Refused("reserved-namespace"), ""),
        case("governor element inside a payload", Send, env(&p("say", &format!("<g:loop xmlns:g='{GOVERNOR_NS}' control='abort'/>"))), Refused("reserved-namespace"), ""),
        case("governor element inside a payload", Emit, p("say", &format!("<g:loop xmlns:g='{GOVERNOR_NS}' control='abort'/>")), Refused("reserved-namespace"), ""),
        // From a listener the governor namespace is the governor's, whatever the prefix.
        case("governor namespace, other prefix", Emit, format!("<g:loop xmlns:g='{GOVERNOR_NS}' control='abort'/>"), Halted("aborted"), ""),
        case("envelope as the payload", Send, env(&env(&say(""))), Refused("reserved-namespace"), ""),
        case("AgentServer envelope as the payload", Post, format!("<message xmlns='{AGENTSERVER_NS}'><meta/>{}</message>", say("")), Refused("reserved-namespace"), ""),
        case("system-namespace attribute on a payload", Send, env(&format!("<say xmlns='urn:test:v1' xmlns:s='{SYSTEM_NS}' s:code='x'/>")), Delivered(1), ""),
        // 10. Redefined default namespaces.
        case("default namespace redefined to the system namespace", Send, env(&format!("<a xmlns='urn:test:v1'><b xmlns='{SYSTEM_NS}'/></a>")), Refused("reserved-namespace"), ""),
        case("default namespace redefined to the system namespace", Post, format!("<say xmlns='urn:test:v1'><huh xmlns='{SYSTEM_NS}'/></say>"), Refused("reserved-namespace"), ""),
        case("default namespace redefined to the system namespace", Emit, format!("<say xmlns='urn:test:v1'><halt xmlns='{SYSTEM_NS}'/></say>"), Refused("reserved-namespace"), ""),
        case("default namespace redefined to the envelope namespace", Send, env(&format!("<say xmlns='urn:test:v1'><meta xmlns='{ENVELOPE_NS}'><from>system</from></meta></say>")), Refused("reserved-namespace"), ""),
        // A payload is self-contained: it does not inherit the envelope's default namespace
        // (nor its prefixes), so `<say>` here is `{}say`, which no listener can accept.
        case("payload without xmlns inside a default-namespace envelope", Send, env("<say>hi</say>"), Refused("unknown-root"), "no listener accepts say"),
        case("payload using a prefix declared on the envelope", Send, format!("<e:message xmlns:e='{ENVELOPE_NS}' xmlns:t='urn:test:v1'><e:meta/><t:say/></e:message>"), Refused("unknown-prefix"), "prefix `t`"),
        case("default namespace undeclared inside the payload", Send, env("<say xmlns='urn:test:v1'><x xmlns=''/></say>"), Delivered(1), ""),
        // 11. Forged sender and thread.
        case("forged <from>system</from> and <thread> of the live thread (whole envelope)", Emit, format!("<message xmlns='{ENVELOPE_NS}'><meta><from>system</from><thread>{LIVE}</thread></meta>{}</message>", say("")), Refused("reserved-namespace"), ""),
        case("<from>system</from> inside a payload is just data", Emit, say("<from>system</from><thread>00000000-0000-0000-0000-000000000000</thread>"), Delivered(1), ""),
        case("<from>system</from> in a client's <meta> is ignored", Send, format!("<message xmlns='{ENVELOPE_NS}'><meta><from>system</from></meta>{}</message>", say("")), Delivered(1), ""),
        // 12. Addressed to a non-peer.
        case("to a listener that is not a peer", SendTo("stranger"), p("psst", ""), Refused("peer-not-allowed"), "`stranger` is not a peer of `mouth`"),
        case("to a listener that does not exist", SendTo("nobody"), say(""), Refused("no-route"), "no listener is named `nobody`"),
        case("to `system`", SendTo("system"), say(""), Refused("no-route"), ""),
        case("to `governor`", SendTo("governor"), say(""), Refused("no-route"), ""),
        case("<to> a listener that does not exist", Send, format!("<message xmlns='{ENVELOPE_NS}'><meta><to>nobody</to></meta>{}</message>", say("")), Refused("no-route"), ""),
        // Others.
        case("CDATA containing </say></message>", Send, env(&say("<![CDATA[</say></message><message>]]>")), Delivered(1), ""),
        case("CDATA containing </say>", EmitText, format!("ok {}", say("<![CDATA[</say>]]>")), Delivered(1), ""),
        case("comments and a PI before the envelope", Send, format!("<?xml version='1.0'?><!-- c --><?pi x?>{}", env(&say(""))), Delivered(1), ""),
        case("comment before a bare payload", Post, format!("<!-- c -->{}", say("")), Delivered(1), ""),
        case("comment before a bare payload", http, format!("<!-- c -->{}", say("")), Delivered(1), ""),
        case("byte order mark", Send, format!("\u{feff}{}", env(&say(""))), Delivered(1), ""),
        case("byte order mark and <meta …/> ending in a multi-byte character", Send, format!("\u{feff}<message xmlns='{ENVELOPE_NS}'><meta x='1'\u{3000}/>{}</message>", say("")), Delivered(1), ""),
        // A payload is an element, not a document: a mark before it is stray text.
        case("byte order mark", Post, format!("\u{feff}{}", say("")), Refused("malformed-xml"), "text outside the payload element at line 1, column 1"),
        case("byte order mark", http, format!("\u{feff}{}", say("")), Delivered(1), ""),
        case("UTF-16 declared, UTF-8 sent", Send, format!("<?xml version='1.0' encoding='UTF-16'?>{}", env(&say(""))), Refused("malformed-xml"), "encoding `UTF-16`: only UTF-8 is accepted"),
        case("xml:base and XInclude are never resolved", Send, env("<say xmlns='urn:test:v1' xmlns:xi='http://www.w3.org/2001/XInclude' xml:base='file:///etc/'><xi:include href='passwd' parse='text'/></say>"), Delivered(1), ""),
        case("1 MB attribute value", Send, env(&format!("<say xmlns='urn:test:v1' v='{long_value}'/>")), Delivered(1), ""),
        case("1 MB element name", Send, env(&say(&format!("<{long_name}/>"))), Delivered(1), ""),
        case("unknown <meta> field", Send, format!("<message xmlns='{ENVELOPE_NS}'><meta><evil/></meta>{}</message>", say("")), Refused("malformed-xml"), "unexpected <evil>"),
        case("empty body", http, "", Http(400, "no-payload"), ""),
        case("whitespace only", Post, " \n\t", Refused("no-payload"), ""),
        case("prose without a payload", EmitText, "I would rather not.", Refused("no-payload"), ""),
    ]
}

/// The pump of the table, its HTTP API, and a thread that was live before any row ran.
struct Bench {
    pump: PumpHandle,
    base: String,
    client: reqwest::Client,
    live: ThreadId,
    live_records: Vec<Record>,
}

impl Bench {
    /// A pump with `echo` (answers `say`), `mouth` (says what a listener row gives it) and
    /// `stranger` (a listener no one has as a peer), served over HTTP, with one live thread.
    async fn start(cases: Arc<Vec<Case>>) -> Self {
        // `mouth` says what the row gives it, the way the row says; `echo` answers `say`.
        let live = Arc::new(OnceLock::new());
        let aim = Arc::clone(&live);
        let mouth = Registration::new(
            "mouth",
            Script::new(move |msg, cx| {
                if *msg.qname() != q("go") {
                    return Ok(());
                }
                let text = msg.payload().as_str();
                let i: usize = text[text.find('>').unwrap() + 1..text.rfind("</").unwrap()]
                    .parse()
                    .unwrap();
                let case = &cases[i];
                let input = aimed(&case.input, *aim.get().expect("the live thread"));
                let output = String::from_utf8(input).expect("listener output is text");
                match case.via {
                    Via::Emit => cx.emit(output),
                    Via::EmitText => cx.emit_text(output),
                    Via::SendTo(to) => cx.send(to, output),
                    _ => unreachable!("not a listener row"),
                }
                Ok(())
            }),
        )
        .accepts(q("go"))
        .peers(["echo"]);
        let stranger = Registration::new("stranger", Echo).accepts(q("psst"));
        let pump = PumpBuilder::new()
            .register(Registration::new("echo", Echo).accepts(q("say")))
            .register(mouth)
            .register(stranger)
            .build()
            .unwrap();
        let base = support::serve(&pump, TOKEN, 1 << 20).await;
        let live_thread = start(&pump, &say("live before")).await;
        live.set(live_thread).expect("set once");
        let live_records = pump.history(live_thread).await.unwrap();
        Self {
            pump,
            base,
            client: support::http_client(),
            live: live_thread,
            live_records,
        }
    }

    /// Runs row `i` and checks its answer.
    async fn run(&self, i: usize, case: &Case) {
        let label = format!("row {i}: {} via {:?}", case.name, case.via);
        let system_before = self.system_len().await;
        let input = aimed(&case.input, self.live);
        match case.via {
            Via::Send => {
                let result = self.pump.send(&input).await;
                self.check_outside(&label, case, result, system_before)
                    .await;
            }
            Via::Post => {
                let text = std::str::from_utf8(&input).unwrap();
                let result = self.pump.post(None, None, text).await;
                self.check_outside(&label, case, result, system_before)
                    .await;
            }
            Via::Http => self.check_http(&label, case, input, system_before).await,
            _ => {
                let thread = start(&self.pump, &p("go", &i.to_string())).await;
                self.check_listener(&label, case, thread).await;
            }
        }
        self.still_serving(&label).await;
    }

    /// How many records the system thread holds.
    async fn system_len(&self) -> usize {
        self.pump
            .history(self.pump.system_thread())
            .await
            .unwrap()
            .len()
    }

    /// The answer to input from outside: the refusal and its record, or the delivery.
    async fn check_outside(
        &self,
        label: &str,
        case: &Case,
        result: Result<agentpump::Receipt, agentpump::IngressError>,
        system_before: usize,
    ) {
        match (case.answer, result) {
            (Answer::Refused(code), Err(err)) => {
                assert_eq!(err.code(), code, "{label}: {err}");
                assert!(err.to_string().contains(case.detail), "{label}: {err}");
                let thread = err.recorded_in().expect("the answer is recorded");
                let recorded = self.pump.history(thread).await.unwrap();
                if thread == self.pump.system_thread() {
                    assert_eq!(recorded.len(), system_before + 1, "{label}");
                }
                let last = recorded.last().unwrap();
                assert_eq!(last.kind, RecordKind::System, "{label}");
                assert_eq!(last.to.as_deref(), Some("client"), "{label}");
                assert_eq!(support::notice(last).1, code, "{label}");
            }
            (Answer::Delivered(n), Ok(receipt)) => {
                self.pump.settle(receipt.thread()).await;
                self.check_delivered(label, case, receipt.thread(), n).await;
            }
            (expected, got) => panic!("{label}: expected {expected:?}, got {got:?}"),
        }
    }

    /// POSTs `input` to `/threads` and checks the status, the problem and the pump's record.
    async fn check_http(&self, label: &str, case: &Case, input: Vec<u8>, system_before: usize) {
        let response = self
            .client
            .post(format!("{}/threads", self.base))
            .bearer_auth(TOKEN)
            .body(input)
            .send()
            .await
            .unwrap();
        match case.answer {
            Answer::Http(status, code) => {
                let (got, body) = support::problem(response).await;
                assert_eq!(
                    (got.as_u16(), body["code"].as_str()),
                    (status, Some(code)),
                    "{label}: {body}"
                );
                let detail = body["detail"].as_str().unwrap();
                assert!(detail.contains(case.detail), "{label}: {detail}");
                let answer = body["answer"].as_str().expect("the pump's answer");
                assert!(answer.contains(code), "{label}: {answer}");
                let system = self.pump.history(self.pump.system_thread()).await.unwrap();
                assert_eq!(system.len(), system_before + 1, "{label}: recorded");
                assert_eq!(support::notice(system.last().unwrap()).1, code, "{label}");
            }
            Answer::Delivered(n) => {
                assert_eq!(response.status(), reqwest::StatusCode::CREATED, "{label}");
                let body: serde_json::Value = response.json().await.unwrap();
                let thread: ThreadId = body["thread"].as_str().unwrap().parse().unwrap();
                self.pump.settle(thread).await;
                self.check_delivered(label, case, thread, n).await;
            }
            other => panic!("{label}: {other:?} is not an HTTP answer"),
        }
    }

    /// The answer to `mouth`'s output in `thread`: one notice to it, a delivery, or a halt.
    async fn check_listener(&self, label: &str, case: &Case, thread: ThreadId) {
        let got = notices(&self.pump, thread).await;
        match case.answer {
            Answer::Refused(code) => {
                assert_eq!(got.len(), 1, "{label}: {got:?}");
                let (to, element, got_code) = &got[0];
                assert_eq!((to.as_str(), got_code.as_str()), ("mouth", code), "{label}");
                assert!(element == "huh" || element == "system-error", "{label}");
                let history = self.pump.history(thread).await.unwrap();
                let text = unescape(&history.last().unwrap().payload);
                assert!(text.contains(case.detail), "{label}: {text}");
                assert!(
                    history.iter().all(|r| r.to.as_deref() != Some("echo")),
                    "{label}: nothing delivered"
                );
            }
            Answer::Delivered(n) => {
                assert!(got.is_empty(), "{label}: {got:?}");
                self.check_delivered(label, case, thread, n).await;
            }
            Answer::Halted(class) => {
                let info = self.pump.thread(thread).unwrap();
                assert_eq!(info.state, ThreadState::Halted, "{label}");
                let reports = self.pump.reports(thread).await.unwrap();
                assert_eq!(reports.len(), 1, "{label}");
                assert_eq!(reports[0].class, class, "{label}");
            }
            Answer::Http(..) => panic!("{label}: not a listener answer"),
        }
    }

    /// `n` payloads reached `echo` in `thread`, each exactly as it stands in the input.
    async fn check_delivered(&self, label: &str, case: &Case, thread: ThreadId, n: usize) {
        let input = String::from_utf8_lossy(&case.input);
        let history = self.pump.history(thread).await.unwrap();
        let delivered: Vec<&Record> = history
            .iter()
            .filter(|r| r.kind == RecordKind::Message && r.to.as_deref() == Some("echo"))
            .collect();
        assert_eq!(delivered.len(), n, "{label}");
        for record in delivered {
            assert!(input.contains(&*record.payload), "{label}: bytes kept");
            let from = if case.via.is_listener() {
                "mouth"
            } else {
                "client"
            };
            assert_eq!(&*record.from, from, "{label}");
        }
    }

    /// An echo in a new thread answers, the live thread is untouched, the API answers.
    async fn still_serving(&self, label: &str) {
        support::assert_echo_serves(&self.pump).await;
        let live = self.pump.history(self.live).await.unwrap();
        assert_eq!(
            live, self.live_records,
            "{label}: the live thread is untouched"
        );
        let response = self
            .client
            .get(format!("{}/threads/{}", self.base, self.live))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::OK, "{label}");
    }
}

/// `input` with [`LIVE`] replaced by the live thread's id.
fn aimed(input: &[u8], live: ThreadId) -> Vec<u8> {
    let text = String::from_utf8_lossy(input);
    if !text.contains(LIVE) {
        return input.to_vec();
    }
    text.replace(LIVE, &live.to_string()).into_bytes()
}

/// Undoes the escaping of a notice's message, so details can be matched as written.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The table, row by row on one pump; then the hash chains verify and nothing of
/// `/etc/passwd` is anywhere in history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_input_gets_its_answer_and_the_pump_keeps_serving() {
    let cases = Arc::new(cases());
    let bench = Arc::new(Bench::start(Arc::clone(&cases)).await);
    // Every row runs even when one fails, so a report lists all rows that do not hold.
    let mut failed = Vec::new();
    for i in 0..cases.len() {
        let (bench, table) = (Arc::clone(&bench), Arc::clone(&cases));
        if tokio::spawn(async move { bench.run(i, &table[i]).await })
            .await
            .is_err()
        {
            failed.push(format!("row {i}: {} via {:?}", cases[i].name, cases[i].via));
        }
    }
    assert!(failed.is_empty(), "rows that do not hold: {failed:#?}");
    // Nothing the external entity pointed at reached history, not even inside an attempt.
    if let Ok(passwd) = std::fs::read_to_string("/etc/passwd") {
        let secret = passwd.lines().next().unwrap_or_default();
        for thread in bench.pump.threads() {
            for record in bench.pump.history(thread.id).await.unwrap() {
                assert!(!secret.is_empty() && !record.payload.contains(secret));
                for attempt in original_attempts(&record.payload) {
                    assert!(!attempt.contains(secret));
                }
            }
        }
    }
    bench.pump.verify().await.unwrap();
}

/// The decoded `<original-attempt>`s of a record's payload.
fn original_attempts(payload: &str) -> Vec<String> {
    payload
        .split("<original-attempt")
        .skip(1)
        .filter_map(|rest| {
            let body = &rest[rest.find('>')? + 1..rest.find("</original-attempt>")?];
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(body)
                .ok()?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        })
        .collect()
}

/// 5. A 100 MB body. Over HTTP it is streamed in 1 MiB chunks of the same bytes (never built
/// whole) and refused with 413 `too-large` once the body limit is passed; via `pump.send` it is
/// refused by the 1 MiB message limit, and the recorded answer carries a few KiB of it, not
/// 100 MB. Both times the pump keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_body_is_refused_at_the_door() {
    const SIZE: usize = 100 << 20;
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let base = support::serve(&pump, TOKEN, 1 << 20).await;
    let system = pump.system_thread();
    let before = pump.history(system).await.unwrap().len();
    let (status, body) = post_streamed(&base, "/threads", SIZE).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("too-large")),
        "{body}"
    );
    // The server stops reading at the limit; the pump never sees the body, so nothing is
    // recorded (as for a request without the token).
    assert_eq!(pump.history(system).await.unwrap().len(), before);
    support::assert_echo_serves(&pump).await;

    let huge = vec![b'x'; SIZE];
    let err = pump.send(&huge).await.unwrap_err();
    assert_eq!(err.code(), "limit-exceeded");
    assert!(
        err.to_string()
            .contains("message is 104857600 bytes, over the limit of 1048576 bytes")
    );
    assert_keeps_little(&err);
    let recorded = pump.history(system).await.unwrap();
    assert_eq!(recorded.len(), before + 1);
    assert!(recorded[before].payload.contains(r#"truncated="true""#));
    let text = String::from_utf8(huge).unwrap();
    let err = pump.post(None, None, &text).await.unwrap_err();
    assert_eq!(err.code(), "limit-exceeded");
    assert_keeps_little(&err);
    assert_eq!(pump.history(system).await.unwrap().len(), before + 2);
    support::assert_echo_serves(&pump).await;
}

/// The refusal of a huge input carries a few KiB of it, not a copy of it all.
fn assert_keeps_little(err: &agentpump::IngressError) {
    let SystemMessage::Huh { original, .. } = err.answer() else {
        panic!("{err:?}");
    };
    let kept = original.len();
    assert!(kept < 2 * ORIGINAL_ATTEMPT_LIMIT, "{kept} bytes kept");
}

/// POSTs a body of `size` bytes to `path`, declared with its length and written in 1 MiB chunks
/// of one buffer for as long as the server reads, and returns the status and problem JSON of
/// the answer. A raw connection, because an HTTP client reports the server closing the
/// connection under its upload as an error and drops the answer that came before.
async fn post_streamed(base: &str, path: &str, size: usize) -> (u16, serde_json::Value) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let addr = base.strip_prefix("http://").unwrap();
    let (mut rd, mut wr) = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap()
        .into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-length: {size}\r\n\r\n"
    );
    let writer = tokio::spawn(async move {
        let chunk = vec![b'x'; 1 << 20];
        wr.write_all(head.as_bytes()).await?;
        for _ in 0..size / chunk.len() {
            wr.write_all(&chunk).await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut response = Vec::new();
    let (head, body) = loop {
        let mut buf = [0u8; 4096];
        let n = rd.read(&mut buf).await.expect("the answer arrives");
        assert!(n > 0, "the server closed without answering");
        response.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&response).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_owned)
            })
            .expect("a content length")
            .parse()
            .unwrap();
        if body.len() >= length {
            break (head.to_owned(), body[..length].to_owned());
        }
    };
    writer.abort();
    assert!(
        head.contains("content-type: application/problem+json"),
        "{head}"
    );
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(&body).unwrap())
}

/// 13. A thread id of another organism (a second pump) sent to the first: `unknown-thread`,
/// recorded in the first pump's system thread; the other organism records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_of_another_organism_is_unknown_here() {
    let build = || {
        PumpBuilder::new()
            .register(Registration::new("echo", Echo).accepts(q("say")))
            .build()
            .unwrap()
    };
    let (here, there) = (build(), build());
    let base = support::serve(&here, TOKEN, 1 << 20).await;
    let live = start(&here, &say("live before")).await;
    let live_records = here.history(live).await.unwrap();
    let foreign = start(&there, &say("theirs")).await;
    let snapshot = |pump: PumpHandle| async move {
        let mut all = Vec::new();
        for t in pump.threads() {
            all.push(pump.history(t.id).await.unwrap());
        }
        all
    };
    let theirs = snapshot(there.clone()).await;
    let system = here.system_thread();

    let envelope = format!(
        "<message xmlns='{ENVELOPE_NS}'><meta><thread>{foreign}</thread></meta>{}</message>",
        say("crossing over")
    );
    let err = here.send(&envelope).await.unwrap_err();
    assert_eq!(err.code(), "unknown-thread");
    assert_eq!(err.recorded_in(), Some(system));
    let err = here
        .post(Some(foreign), None, &say("again"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "unknown-thread");
    let (status, body) = support::problem(
        support::http_client()
            .post(format!("{base}/threads/{foreign}/messages"))
            .bearer_auth(TOKEN)
            .body(say("over HTTP"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (404, Some("unknown-thread"))
    );

    let answers: Vec<String> = here
        .history(system)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.to.as_deref() == Some("client"))
        .map(|r| support::notice(r).1)
        .collect();
    assert_eq!(
        answers, ["unknown-thread"; 3],
        "every refusal is recorded here"
    );
    assert!(here.thread(foreign).is_none());
    assert_eq!(
        snapshot(there.clone()).await,
        theirs,
        "nothing recorded there"
    );
    assert_eq!(here.history(live).await.unwrap(), live_records);
    support::assert_echo_serves(&here).await;
    support::assert_echo_serves(&there).await;
}

/// A listener that spawns `per_delivery` children for each `boom` it gets — and, when
/// `on_notices`, for every pump notice too (`thread-spawned`, `thread-result`, `system-error`) —
/// each child carving `carve` out of its spawner's budget.
fn bomb(per_delivery: usize, on_notices: bool, carve: Budget) -> Registration {
    Registration::new(
        "bomb",
        Script::new(move |msg, cx| {
            if on_notices || !msg.is_system() {
                for i in 0..per_delivery {
                    let child = Spawn::new(p("boom", "")).sub_id(format!("b{i}"));
                    cx.spawn(child.budget(carve.clone()));
                }
            }
            Ok(())
        }),
    )
    .accepts(q("boom"))
}

/// One spawn bomb: how it spawns, and what must stop it.
struct Bomb {
    name: &'static str,
    per_delivery: usize,
    on_notices: bool,
    carve: Budget,
    /// Halts (`class/reason`) that must be seen, and the only ones allowed.
    halts: (&'static [&'static str], &'static [&'static str]),
    /// `budget-exhausted` refusals of a spawn: at least this many.
    refusals: usize,
}

/// 14. Spawn bombs, each ending on its own through the governor within the default budget
/// (spawn depth 8, 1 000 threads and 10 000 turns per tree): a chain refused at depth 8; a
/// chain and a fan (eight per delivery) that also spawn on every notice, halted at 1 000
/// threads with their descendants; and a chain carving 20 turns per child, whose children halt
/// on their turns. Other threads are served meanwhile and afterwards, and a live thread is
/// untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_bombs_are_stopped_by_the_governor() {
    const THREADS: &str = "TIMEOUT/max-threads";
    const TURNS: &str = "TIMEOUT/max-turns";
    const WITH_PARENT: &str = "BACKPRESSURE/parent-halted";
    let bombs = [
        Bomb {
            name: "chain",
            per_delivery: 1,
            on_notices: false,
            carve: Budget::default(),
            halts: (&[], &[]),
            refusals: 1,
        },
        Bomb {
            name: "chain on every notice",
            per_delivery: 1,
            on_notices: true,
            carve: Budget::default(),
            halts: (&[THREADS, WITH_PARENT], &[THREADS, WITH_PARENT]),
            refusals: 0,
        },
        Bomb {
            name: "fan of eight on every notice",
            per_delivery: 8,
            on_notices: true,
            carve: Budget::default(),
            halts: (&[THREADS, WITH_PARENT], &[THREADS, WITH_PARENT]),
            refusals: 0,
        },
        Bomb {
            name: "carving 20 turns per child",
            per_delivery: 1,
            on_notices: true,
            carve: Budget {
                turns: Some(20),
                ..Budget::default()
            },
            halts: (&[TURNS], &[THREADS, TURNS, WITH_PARENT]),
            refusals: 0,
        },
    ];
    for bomb in bombs {
        let name = bomb.name;
        let pump = PumpBuilder::new()
            .register(Registration::new("echo", Echo).accepts(q("say")))
            .register(self::bomb(bomb.per_delivery, bomb.on_notices, bomb.carve))
            .build()
            .unwrap();
        let live = start(&pump, &say("live before")).await;
        let live_records = pump.history(live).await.unwrap();
        let root = pump
            .post(None, None, &p("boom", ""))
            .await
            .unwrap()
            .thread();
        support::assert_echo_serves(&pump).await;
        tokio::time::timeout(Duration::from_secs(600), pump.settle(root))
            .await
            .unwrap_or_else(|_| panic!("{name}: the bomb never stopped"));
        let tree = pump.tree(root);
        let depth = tree.iter().map(|t| t.depth).max().unwrap();
        let mut halts = std::collections::BTreeSet::new();
        let mut refusals = 0;
        for t in &tree {
            for report in pump.reports(t.id).await.unwrap() {
                halts.insert(format!("{}/{}", report.class, report.stop_reason));
            }
            refusals += notices(&pump, t.id)
                .await
                .iter()
                .filter(|n| n.2 == "budget-exhausted")
                .count();
        }
        assert!(tree.len() <= 1 + 1_000, "{name}: {} threads", tree.len());
        assert!(depth <= 8, "{name}: depth {depth}");
        assert!(
            refusals >= bomb.refusals,
            "{name}: {refusals} spawns refused"
        );
        let (must, may) = bomb.halts;
        assert!(must.iter().all(|h| halts.contains(*h)), "{name}: {halts:?}");
        assert!(
            halts.iter().all(|h| may.contains(&h.as_str())),
            "{name}: {halts:?}"
        );
        // Every child ended; the root stays open unless the governor halted it.
        assert!(tree[1..].iter().all(|t| t.state.is_closed()), "{name}");
        let root_state = if must.is_empty() {
            ThreadState::Idle
        } else {
            ThreadState::Halted
        };
        assert_eq!(tree[0].state, root_state, "{name}");
        assert_eq!(pump.history(live).await.unwrap(), live_records, "{name}");
        support::assert_echo_serves(&pump).await;
        pump.verify().await.unwrap();
    }
}

/// Panics on every delivery, notices included, with a string or, for `<work>odd</work>`, a
/// payload that is not one.
fn kamikaze() -> Registration {
    quiet_kamikaze();
    Registration::new(
        "kamikaze",
        Script::new(|msg, _| {
            if msg.payload().as_str().contains("odd") {
                std::panic::panic_any(42_u8);
            }
            panic!("kamikaze");
        }),
    )
    .accepts(q("work"))
}

/// Keeps the panics `kamikaze` means out of the test output; every other panic is reported as
/// usual.
fn quiet_kamikaze() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let meant = payload.downcast_ref::<&str>() == Some(&"kamikaze")
                || payload.downcast_ref::<u8>() == Some(&42);
            if !meant {
                report(info);
            }
        }));
    });
}

/// Asks `kamikaze` for work on `<probe>`, and asks again on every answer it gets: a caller that
/// retries a tool that always panics.
fn retrier() -> Registration {
    Registration::new(
        "retrier",
        Script::new(|_, cx| {
            cx.send("kamikaze", p("work", ""));
            Ok(())
        }),
    )
    .accepts(q("probe"))
    .peers(["kamikaze"])
}

/// 15. A handler that panics on every message. Each panic answers the sender with
/// `system-error code="handler-panicked"`, recorded; fifty in a row in one thread, with string
/// and non-string panic payloads, leave the thread open and every other thread served. A caller
/// that retries the panicking tool forever is halted by the governor (`no-progress`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_always_panics_is_answered_and_contained() {
    const IN_A_ROW: usize = 50;
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .register(kamikaze())
        .register(retrier())
        .build()
        .unwrap();
    let live = start(&pump, &say("live before")).await;
    let live_records = pump.history(live).await.unwrap();

    let thread = pump
        .post(None, None, &p("work", "0"))
        .await
        .unwrap()
        .thread();
    for i in 1..IN_A_ROW {
        let body = if i % 2 == 1 { "odd" } else { "even" };
        pump.post(Some(thread), None, &p("work", body))
            .await
            .unwrap();
    }
    pump.settle(thread).await;
    let answers = notices(&pump, thread).await;
    let expected = (
        "client".to_owned(),
        "system-error".to_owned(),
        "handler-panicked".to_owned(),
    );
    assert_eq!(answers, vec![expected; IN_A_ROW]);
    let info = pump.thread(thread).unwrap();
    assert_eq!(info.state, ThreadState::Idle, "the thread goes on");
    assert_eq!(info.counters.failures, IN_A_ROW as u64);
    pump.post(Some(thread), None, &say("after the panics"))
        .await
        .unwrap();
    pump.settle(thread).await;
    assert_eq!(
        support::egress(&pump, thread).await,
        [say("after the panics")]
    );

    let retried = start(&pump, &p("probe", "")).await;
    let reports = pump.reports(retried).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].class, "no-progress", "{:?}", reports[0]);
    let codes: Vec<String> = notices(&pump, retried)
        .await
        .into_iter()
        .map(|n| n.2)
        .collect();
    assert!(
        codes.iter().filter(|c| *c == "handler-panicked").count() >= 2,
        "{codes:?}"
    );

    assert_eq!(pump.history(live).await.unwrap(), live_records);
    support::assert_echo_serves(&pump).await;
    pump.verify().await.unwrap();
}

/// Emits `n` `say`s on `<emit>`, one output each, or (on `<emit>text</emit>`) all of them in
/// one text output.
fn chatterbox(n: usize) -> Registration {
    Registration::new(
        "chatterbox",
        Script::new(move |msg, cx| {
            if *msg.qname() != q("emit") {
                return Ok(());
            }
            let all: Vec<String> = (0..n).map(|i| say(&i.to_string())).collect();
            if msg.payload().as_str().contains("text") {
                cx.emit_text(all.join("\n"));
            } else {
                all.into_iter().for_each(|s| cx.emit(s));
            }
            Ok(())
        }),
    )
    .accepts(q("emit"))
    .peers(["echo"])
}

/// 64 outputs + 1: sixty-four payloads from one delivery are delivered and the sixty-fifth is
/// refused with `huh code="limit-exceeded"`; in one text output (model answers) the whole
/// output is refused, since extraction stops at the limit before routing anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_over_the_limit_are_refused() {
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .register(chatterbox(65))
        .build()
        .unwrap();
    let delivered = |pump: PumpHandle, thread| async move {
        pump.history(thread)
            .await
            .unwrap()
            .iter()
            .filter(|r| r.to.as_deref() == Some("echo"))
            .count()
    };
    let outputs = start(&pump, &p("emit", "")).await;
    assert_eq!(delivered(pump.clone(), outputs).await, 64);
    let huh = (
        "chatterbox".to_owned(),
        "huh".to_owned(),
        "limit-exceeded".to_owned(),
    );
    assert_eq!(notices(&pump, outputs).await, std::slice::from_ref(&huh));
    let history = pump.history(outputs).await.unwrap();
    let refused = history
        .iter()
        .find(|r| r.kind == RecordKind::System)
        .unwrap();
    let attempts = original_attempts(&refused.payload);
    assert_eq!(attempts, [say("64")], "the sixty-fifth is the one refused");

    let text = start(&pump, &p("emit", "text")).await;
    assert_eq!(delivered(pump.clone(), text).await, 0);
    assert_eq!(notices(&pump, text).await, [huh]);
    support::assert_echo_serves(&pump).await;
}
