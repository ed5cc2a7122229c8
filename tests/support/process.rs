//! Helpers for the process-engine tests: a tool that logs every call it takes, pumps that run
//! a program, and a pump that can be crashed (its runtime dropped) mid-run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentpump::history::{HistoryStore, Record, RecordKind};
use agentpump::process::engine::{ProcessListener, Program, call_place};
use agentpump::tool::{Answer, Call, ErrorType, TOOL_NS};
use agentpump::value::Value;
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpHandle, QName, Registration, Role,
    ThreadId,
};

/// The namespace of the test triggers.
pub const DEMO: &str = "urn:agentpump:demo:v1";

/// Which deliveries a listener hangs on (never answers): the pump "dies" while it is in them.
pub type HangOn = Arc<dyn Fn(&Delivery) -> bool + Send + Sync>;

/// Every call id a tool was invoked with, in order, across every pump sharing the log.
pub type CallLog = Arc<Mutex<Vec<String>>>;

/// A tool for the tests, logging each call id as it enters. Each tool name answers:
/// `echo` its args as fields (after `ms` milliseconds when given); `fail` an error of the type
/// in `type` (after `ms`); `flaky` `unavailable` to its first `fails` calls (counted over every
/// `flaky` call), then its args; anything else its args.
#[derive(Clone, Default)]
pub struct LogTool {
    /// The shared log of call ids.
    pub log: CallLog,
    /// Deliveries this tool never answers.
    pub hang: Option<HangOn>,
    /// Told each time the tool hangs.
    pub entered: Arc<tokio::sync::Notify>,
    /// `flaky` calls so far.
    pub flaky: Arc<std::sync::atomic::AtomicUsize>,
    /// A file each call id is also appended to (a line each, synced), for logs that must
    /// outlive the OS process.
    pub file: Option<std::path::PathBuf>,
}

impl LogTool {
    /// A tool logging into `log`.
    pub fn new(log: &CallLog) -> Self {
        Self {
            log: Arc::clone(log),
            ..Self::default()
        }
    }

    /// The same tool, hanging on the call with id `id`.
    pub fn hang_on_call(mut self, id: &str) -> Self {
        let id = id.to_owned();
        self.hang = Some(Arc::new(move |msg| {
            Call::parse(msg.payload())
                .is_ok_and(|c| c.id.as_deref().map(call_place) == Some(id.as_str()))
        }));
        self
    }
}

#[agentpump::async_trait]
impl Listener for LogTool {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let call = Call::parse(msg.payload()).map_err(|e| ListenerError::failed(e.to_string()))?;
        let id = call_place(call.id.as_deref().unwrap_or_default()).to_owned();
        if let Some(path) = &self.file {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap();
            writeln!(f, "{id}").unwrap();
            f.sync_data().unwrap();
        }
        self.log.lock().unwrap().push(id);
        if self.hang.as_ref().is_some_and(|h| h(msg)) {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        if let Some(Value::Num(ms)) = call.args.get("ms") {
            let ms = u64::try_from(ms.mantissa()).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let answer = match call.tool.as_str() {
            "flaky"
                if self.flaky.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < fails(&call) =>
            {
                call.error(ErrorType::Unavailable, "not now; nothing was done")
                    .to_xml()
            }
            _ => echo_or_fail(&call),
        };
        cx.reply(answer);
        Ok(())
    }
}

/// The test tools' answer: `fail` answers an error of the type its `type` argument names
/// (`failed` when none fits); any other tool answers its arguments as fields.
pub fn echo_or_fail(call: &Call) -> String {
    if call.tool == "fail" {
        let kind = call
            .args
            .get("type")
            .map(ToString::to_string)
            .unwrap_or_default();
        let kind = ErrorType::from_name(&kind).unwrap_or(ErrorType::Failed);
        return call
            .error(kind, format!("asked to fail ({kind:?})"))
            .to_xml();
    }
    let mut r = call.result();
    r.fields = call.args.clone();
    r.to_xml()
}

/// `b` with a listener for every process of `program`.
pub fn with_processes(mut b: PumpBuilder, program: &Arc<Program>) -> PumpBuilder {
    for id in program.process_ids() {
        let l = ProcessListener::new(Arc::clone(program), id).unwrap();
        b = b.register(l.registration());
    }
    b
}

/// A call's `fails` argument (0 when missing).
fn fails(call: &Call) -> usize {
    match call.args.get("fails") {
        Some(Value::Num(n)) => usize::try_from(n.mantissa()).unwrap_or(0),
        _ => 0,
    }
}

/// `name` as a tool listener.
pub fn tool_of(name: &str, t: impl Listener + 'static) -> Registration {
    Registration::new(name, t)
        .role(Role::Tool)
        .accepts(QName::new(TOOL_NS, "call"))
}

/// A process listener that hangs on the deliveries `hang` picks (the pump dies while the
/// process is handling them), else is the process.
pub struct Stalling {
    inner: ProcessListener,
    hang: HangOn,
    entered: Arc<tokio::sync::Notify>,
}

#[agentpump::async_trait]
impl Listener for Stalling {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if (self.hang)(msg) {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        self.inner.handle(msg, cx).await
    }
}

/// A process's registration (as `ProcessListener::registration` makes it) around `listener`.
fn process_registration(l: &ProcessListener, listener: impl Listener + 'static) -> Registration {
    let mut r = Registration::new(l.name(), listener)
        .role(Role::Process)
        .accepts(QName::new(TOOL_NS, "call"))
        .may_loop(true)
        .peers(l.references());
    for root in l.triggers() {
        r = r.accepts(root);
    }
    r
}

/// What a test pump runs: the program, its tools, statements per turn, the store, and an
/// optional process delivery to hang on.
#[derive(Clone)]
pub struct Setup {
    /// The process document.
    pub text: String,
    /// The tool every name in `tools` is served by.
    pub tool: LogTool,
    /// Tool names.
    pub tools: Vec<&'static str>,
    /// `steps_per_turn` of every process.
    pub steps: u64,
    /// The history store.
    pub store: Arc<dyn HistoryStore>,
    /// A process delivery every process hangs on.
    pub stall: Option<(HangOn, Arc<tokio::sync::Notify>)>,
    /// The governor policy's root budget (default when `None`).
    pub budget: Option<agentpump::governor::Budget>,
}

impl Setup {
    /// `text` with `echo`, `fail` and `flaky` served by a tool logging into `log`.
    pub fn new(text: &str, log: &CallLog) -> Self {
        Self {
            text: text.to_owned(),
            tool: LogTool::new(log),
            tools: vec!["echo", "fail", "flaky"],
            steps: 10_000,
            store: Arc::new(agentpump::history::MemoryHistory::new()),
            stall: None,
            budget: None,
        }
    }

    /// The pump builder.
    pub fn builder(&self) -> PumpBuilder {
        let program = Program::parse(&self.text).unwrap_or_else(|e| panic!("{:#?}", e.0));
        let mut b = PumpBuilder::new().history(Arc::clone(&self.store));
        if let Some(budget) = &self.budget {
            b = b.config(agentpump::PumpConfig {
                governor: agentpump::governor::GovernorPolicy {
                    budget: budget.clone(),
                    ..agentpump::governor::GovernorPolicy::default()
                },
                ..agentpump::PumpConfig::default()
            });
        }
        for id in program.process_ids() {
            let l = ProcessListener::new(Arc::clone(&program), id)
                .unwrap()
                .steps_per_turn(self.steps);
            b = b.register(match &self.stall {
                Some((hang, entered)) => {
                    let stalling = Stalling {
                        inner: ProcessListener::new(Arc::clone(&program), id)
                            .unwrap()
                            .steps_per_turn(self.steps),
                        hang: Arc::clone(hang),
                        entered: Arc::clone(entered),
                    };
                    process_registration(&l, stalling)
                }
                None => l.registration(),
            });
        }
        for name in &self.tools {
            b = b.register(tool_of(name, self.tool.clone()));
        }
        b
    }

    /// The pump.
    pub fn build(&self) -> PumpHandle {
        self.builder().build().unwrap()
    }
}

/// The single process of `body` wrapped in a document, started by `<go>` in the demo namespace.
pub fn doc(args: &str, body: &str) -> String {
    format!(
        "<triggers>\n<trigger event=\"{{{DEMO}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\"{args}>\n{body}</process>\n</processes>\n"
    )
}

/// `<go>` with `body` inside.
pub fn go(body: &str) -> String {
    format!(r#"<go xmlns="{DEMO}">{body}</go>"#)
}

/// Posts `start`, settles the thread: its id and history.
pub async fn run(pump: &PumpHandle, start: &str) -> (ThreadId, Vec<Record>) {
    let thread = pump.post(None, None, start).await.unwrap().thread();
    pump.settle(thread).await;
    (thread, pump.history(thread).await.unwrap())
}

/// The answer to the starter (the last egress), if any.
pub fn answer(records: &[Record]) -> Option<Answer> {
    let r = records
        .iter()
        .rev()
        .find(|r| r.kind == RecordKind::Egress)?;
    let payload = agentpump::Payload::parse(&r.payload, &Default::default()).unwrap();
    Answer::parse(&payload).and_then(Result::ok)
}

/// The RETURN the starter got.
pub fn returned(records: &[Record]) -> Answer {
    answer(records).unwrap_or_else(|| panic!("no answer to the client in {:#?}", roots(records)))
}

/// The RETURN's fields (panics when the process failed).
pub fn fields(records: &[Record]) -> BTreeMap<String, Value> {
    match returned(records) {
        Answer::Result(r) => r.fields,
        Answer::Error(e) => panic!("the process failed: {e:?}"),
    }
}

/// The tool error the starter got (panics when the process returned).
pub fn failure(records: &[Record]) -> agentpump::tool::ToolError {
    match returned(records) {
        Answer::Error(e) => e,
        Answer::Result(r) => panic!("the process returned {:?}", r.fields),
    }
}

/// One line per record, for failure messages.
pub fn roots(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{} {}→{:?}: {}", r.kind, r.from, r.to, r.payload))
        .collect()
}

/// An exact number.
pub fn num(s: &str) -> Value {
    Value::Num(s.parse().unwrap())
}

/// A pump running on its own runtime in its own OS thread. [`Doomed::crash`] drops that
/// runtime: every task of the pump — runners, handlers in flight — ends at its current await,
/// as in a kill; only what the store committed remains.
pub struct Doomed {
    kill: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Doomed {
    /// Builds `setup`'s pump on a runtime of its own and posts `start`: the thread it started.
    pub async fn start(setup: Setup, start: String) -> (Self, ThreadId) {
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let pump = setup.build();
                let thread = pump.post(None, None, &start).await.unwrap().thread();
                tx.send(thread).unwrap();
                let _ = killed.await;
            });
            drop(rt);
        });
        let id = rx.await.unwrap();
        (
            Self {
                kill: Some(kill),
                thread: Some(thread),
            },
            id,
        )
    }

    /// Kills the pump: its runtime and every task on it are dropped.
    pub async fn crash(mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        if let Some(t) = self.thread.take() {
            tokio::task::spawn_blocking(move || t.join().unwrap())
                .await
                .unwrap();
        }
    }
}

/// Settles `root` and every thread below it on `pump` until the root answered its starter (or
/// ten seconds pass): its history.
pub async fn settle_tree(pump: &PumpHandle, root: ThreadId) -> Vec<Record> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        for t in pump.tree(root) {
            pump.settle(t.id).await;
        }
        pump.settle(root).await;
        let records = pump.history(root).await.unwrap();
        if answer(&records).is_some() || tokio::time::Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `store` holds at least `n` records of `root` `kind` (a local name).
pub async fn wait_for(store: &Arc<dyn HistoryStore>, thread: ThreadId, local: &str, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let records = store.thread(thread, 0).await.unwrap();
        let seen = records.iter().filter(|r| r.root.local() == local).count();
        if seen >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {seen} `{local}` records of {n}: {:#?}",
            roots(&records)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How many times each call id was invoked.
pub fn counts(log: &CallLog) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for id in log.lock().unwrap().iter() {
        *m.entry(id.clone()).or_insert(0) += 1;
    }
    m
}
