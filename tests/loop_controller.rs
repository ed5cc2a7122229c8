//! The loop controller of seed 002 (issue 36): scripted Scout, Solver and Skeptic listeners,
//! each iteration a fresh child thread per role, against the governor's certificates. Each
//! test quotes the seed line it checks.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentpump::governor::HaltingReport;
use agentpump::history::SqliteHistory;
use agentpump::listeners::phuc_loop::{LOOP_NS, LoopConfig, PhucLoop, Profile};
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpHandle, QName, Registration, Role,
    ThreadId,
};
use rust_decimal::Decimal;
use support::{Gate, Scratch, Script};

/// The iteration a capsule is for (its `iteration` attribute).
fn iteration(msg: &Delivery) -> usize {
    let t = msg.payload().as_str();
    t.split("iteration=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A role that answers each capsule with `answer(iteration)`, logging what it saw.
fn role(
    name: &str,
    log: &Arc<Mutex<Vec<String>>>,
    answer: impl Fn(usize) -> Result<String, ListenerError> + Send + Sync + 'static,
) -> Registration {
    role_registration(name, role_script(name, log, answer))
}

/// `listener` registered as the role `name`.
fn role_registration(name: &str, listener: impl Listener) -> Registration {
    Registration::new(name, listener)
        .accepts(QName::new(LOOP_NS, name))
        .role(Role::Agent)
}

/// The role `name`'s listener: answers each capsule with `answer(iteration)`, logging it.
fn role_script(
    name: &str,
    log: &Arc<Mutex<Vec<String>>>,
    answer: impl Fn(usize) -> Result<String, ListenerError> + Send + Sync + 'static,
) -> Script {
    let log = Arc::clone(log);
    let me = name.to_owned();
    Script::new(move |msg: &Delivery, cx: &mut Context| {
        if !msg.qname().is(LOOP_NS, &me) {
            return Ok(());
        }
        answer_capsule(&me, &log, &answer, msg, cx)
    })
}

/// The role `me` answers its capsule `msg` with `answer(iteration)`, logging it.
fn answer_capsule(
    me: &str,
    log: &Mutex<Vec<String>>,
    answer: &dyn Fn(usize) -> Result<String, ListenerError>,
    msg: &Delivery,
    cx: &mut Context,
) -> Result<(), ListenerError> {
    let n = iteration(msg);
    log.lock()
        .unwrap()
        .push(format!("{me} {n} {}", msg.payload().as_str()));
    cx.reply(answer(n)?);
    Ok(())
}

/// The Solver's listener, answering the Skeptic's capsules too (with `skeptic`).
fn solver_and_skeptic(
    log: &Arc<Mutex<Vec<String>>>,
    solver: Answer,
    skeptic: Answer,
) -> Registration {
    let log = Arc::clone(log);
    let both = Script::new(move |msg: &Delivery, cx: &mut Context| {
        if msg.qname().is(LOOP_NS, "solver") {
            answer_capsule("solver", &log, &solver, msg, cx)
        } else if msg.qname().is(LOOP_NS, "skeptic") {
            answer_capsule("skeptic", &log, &skeptic, msg, cx)
        } else {
            Ok(())
        }
    });
    role_registration("solver", both).accepts(QName::new(LOOP_NS, "skeptic"))
}

fn plan(n: usize) -> Result<String, ListenerError> {
    Ok(format!(
        r#"<plan xmlns="{LOOP_NS}">SCOUT-PROSE-{n}: try the next step</plan>"#
    ))
}

fn solution(n: usize) -> Result<String, ListenerError> {
    Ok(format!(
        r#"<artifacts xmlns="{LOOP_NS}"><artifact path="out/iter{n}.txt" role="test">attempt {n}</artifact></artifacts>"#
    ))
}

/// A Skeptic that measures `residuals[n]` and checks criterion c1 against the iteration's file.
fn skeptic(residuals: &'static [&'static str]) -> impl Fn(usize) -> Result<String, ListenerError> {
    move |n| {
        let r = residuals[n.min(residuals.len() - 1)];
        Ok(format!(
            r#"<verdict xmlns="{LOOP_NS}" residual="{r}"><criterion id="c1" met="{}" evidence="out/iter{n}.txt"/><tried>patch {n}</tried><succeeded lane="A" evidence="out/iter{n}.txt">attempt {n} written</succeeded><failed lane="C">not yet below R_p</failed><open>what next after {n}?</open></verdict>"#,
            r == "0"
        ))
    }
}

struct Loop {
    pump: PumpHandle,
    thread: ThreadId,
    dir: Scratch,
    log: Arc<Mutex<Vec<String>>>,
}

impl Loop {
    fn file(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.0.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// The loop thread's halting report, once there is one.
    async fn report(&self) -> HaltingReport {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(r) = self.pump.reports(self.thread).await.unwrap().pop() {
                return r;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no halt: {:#?}",
                self.log.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

type Answer = Box<dyn Fn(usize) -> Result<String, ListenerError> + Send + Sync>;

struct Setup {
    test: &'static str,
    scout: Answer,
    solver: Answer,
    skeptic: Answer,
    tweak: Box<dyn FnOnce(PhucLoop) -> PhucLoop>,
    profile: Profile,
    run: String,
    before: Box<dyn FnOnce(&Scratch)>,
    /// A Scout held at a gate instead of `scout`.
    held_scout: Option<Gate>,
    /// The Solver's listener plays the Skeptic too (answering its capsules with `skeptic`).
    solver_judges: bool,
}

fn run_payload(certificates: &str, r_p: &str, max: u64) -> String {
    format!(
        r#"<run xmlns="{LOOP_NS}" certificates="{certificates}" r-p="{r_p}" max-iterations="{max}" residual-metric="distance"><goal>make the residual small</goal><criterion id="c1">the file is right</criterion></run>"#
    )
}

impl Setup {
    fn new(test: &'static str, residuals: &'static [&'static str]) -> Self {
        Self {
            test,
            scout: Box::new(plan),
            solver: Box::new(solution),
            skeptic: Box::new(skeptic(residuals)),
            // The machine's own disk must not decide a test: half full unless a test says.
            tweak: Box::new(|l| l.disk_probe(Arc::new(|_| Some(Decimal::new(5, 1))))),
            profile: Profile::Strict,
            run: run_payload("CONVERGED DIVERGED", "0.001", 10),
            before: Box::new(|_| {}),
            held_scout: None,
            solver_judges: false,
        }
    }

    async fn start(self) -> Loop {
        let dir = Scratch::new(self.test);
        std::fs::create_dir_all(dir.0.join("ws")).unwrap();
        (self.before)(&dir);
        let log = Arc::new(Mutex::new(Vec::new()));
        let skeptic = if self.solver_judges {
            "solver"
        } else {
            "skeptic"
        };
        let mut config = LoopConfig::new("scout", "solver", skeptic, dir.0.join("ws"));
        config.profile = self.profile;
        let controller = (self.tweak)(PhucLoop::new(config));
        let b = PumpBuilder::new().register(match self.held_scout {
            Some(gate) => role_registration("scout", gate),
            None => role("scout", &log, self.scout),
        });
        let b = if self.solver_judges {
            b.register(solver_and_skeptic(&log, self.solver, self.skeptic))
        } else {
            b.register(role("solver", &log, self.solver)).register(role(
                "skeptic",
                &log,
                self.skeptic,
            ))
        };
        let pump = b.register(controller.registration("loop")).build().unwrap();
        let thread = pump
            .post(None, Some("loop"), &self.run)
            .await
            .unwrap()
            .thread();
        Loop {
            pump,
            thread,
            dir,
            log,
        }
    }
}

/// Seed 002 §1: "IF certificate.type == CONVERGED: status = EXIT_CONVERGED(lane=B)"; §5.1's
/// AGENTS.md structure; §7.2: Scout, then Solver, then Skeptic in each iteration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_iterations_converge_with_agents_md_as_the_seed_shows() {
    let l = Setup::new("loop-converge", &["0.5", "0.2", "0.0001"])
        .start()
        .await;
    let report = l.report().await;
    assert_eq!(
        (report.class.as_str(), report.status.as_str()),
        ("CONVERGED", "EXIT_CONVERGED")
    );
    let cert = report.halting_certificate.as_ref().unwrap();
    assert_eq!(cert.lane, "B");
    assert_eq!(
        cert.residual_history_decimal_strings,
        ["0.5", "0.2", "0.0001"]
    );
    let order: Vec<String> = l
        .log
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        order,
        [
            "scout 0",
            "solver 0",
            "skeptic 0",
            "scout 1",
            "solver 1",
            "skeptic 1",
            "scout 2",
            "solver 2",
            "skeptic 2"
        ]
    );
    let md = l.file("ws/AGENTS.md");
    assert!(md.starts_with("# AGENTS.md — Loop Learnings Log\n<!-- Generated by phuc-loop. Do not hand-edit iteration blocks. -->\n\n## Loop Metadata\n- goal: make the residual small\n- started: "), "{md}");
    for n in 0..3 {
        for section in [
            ".1 What Was Tried [Lane C — guidance only]",
            ".2 What Succeeded [Lane A or B — must be verified by Skeptic]",
            ".3 What Failed [Lane A — hard failure; Lane C — soft failure mode]",
            ".4 Residual / Distance-to-Goal",
            ".5 Open Questions for Next Iteration [Lane C]",
        ] {
            assert!(
                md.contains(&format!("### {n}{section}")),
                "{n}{section} in {md}"
            );
        }
    }
    assert!(
        md.contains("- [A] attempt 1 written (artifact: out/iter1.txt#"),
        "{md}"
    );
    assert!(md.contains("- [C] not yet below R_p"), "{md}");
    assert!(
        md.contains(
            "- metric: distance\n- value: 0.0001\n- direction: IMPROVING\n- certificate: CONVERGED"
        ),
        "{md}"
    );
    // The halting report carries the manifest's and AGENTS.md's digests.
    let evidence = report.learnings.last().unwrap();
    assert!(
        evidence
            .text
            .starts_with("loop evidence after iteration 2: evidence/loop/manifest.json sha256 "),
        "{evidence:?}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&l.file("ws/evidence/loop/manifest.json")).unwrap();
    assert_eq!(
        manifest["artifacts"].as_array().unwrap().len(),
        6,
        "a plan and a file per iteration"
    );
    for f in [
        "plan.json",
        "agents_md_final.md",
        "budget_log.json",
        "iter_2/cnf_capsule.solver.json",
        "iter_2/certificate.json",
        "iter_2/agents_md_entry.md",
        "iter_2/artifacts.json",
    ] {
        l.file(&format!("ws/evidence/loop/{f}"));
    }
}

/// Seed 002 §4.1: "forbidden_in_capsule: prior_subagent_reasoning_prose, …, absolute_file_paths,
/// float_residuals_use_decimal_strings_only, timestamps_or_pids_that_break_determinism"; §4.2
/// "canonical JSON; sorted keys; LF newlines".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capsules_hold_links_not_prose_and_no_host_detail() {
    let l = Setup::new("loop-capsule", &["0.5", "0.0001"]).start().await;
    l.report().await;
    let solver = l.file("ws/evidence/loop/iter_1/cnf_capsule.solver.json");
    let root = l.dir.0.display().to_string();
    assert!(!solver.contains(&root), "no absolute path: {solver}");
    assert!(
        !solver.contains("SCOUT-PROSE"),
        "the Scout's plan is a link, not prose: {solver}"
    );
    assert!(
        solver.contains("\"path\": \"evidence/loop/iter_1/scout_plan.md\""),
        "{solver}"
    );
    assert!(solver.contains("\"residual_current\": \"0.5\""), "{solver}");
    assert!(!solver.contains("started"), "no timestamp: {solver}");
    assert!(!solver.contains('\r') && solver.ends_with("}\n"));
    let keys: Vec<&str> = solver
        .lines()
        .filter(|l| l.starts_with("  \""))
        .map(|l| l.trim().split('"').nth(1).unwrap())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
    assert_eq!(
        keys,
        [
            "acceptance_criteria",
            "accumulated_learnings",
            "artifact_links",
            "current_state_summary",
            "goal_statement",
            "halting_certificates_applicable",
            "remaining_budget",
            "skill_pack",
            "subagent_role"
        ]
    );
    // The capsule a role received is the file's bytes: the same state, the same capsule.
    let seen = l
        .log
        .lock()
        .unwrap()
        .iter()
        .find(|e| e.starts_with("solver 1 "))
        .cloned()
        .unwrap();
    let inner = seen.split_once('>').unwrap().1.rsplit_once("</").unwrap().0;
    assert_eq!(quick_xml::escape::unescape(inner).unwrap(), solver);
}

/// Seed 002 §1 step 7: "IF len(residuals) >= 3 AND all_increasing(residuals[-3:]): …
/// status = EXIT_DIVERGED".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_rising_residuals_diverge() {
    let l = Setup::new("loop-diverge", &["0.1", "0.2", "0.3"])
        .start()
        .await;
    let report = l.report().await;
    assert_eq!(
        (report.class.as_str(), report.status.as_str()),
        ("DIVERGED", "EXIT_DIVERGED")
    );
    assert!(
        l.file("ws/AGENTS.md")
            .contains("- direction: DIVERGING\n- certificate: DIVERGED")
    );
}

/// Seed 002 §1 step 3: "IF artifacts is EMPTY: WRITE_LEARNING(lane=A, type=FAILURE,
/// content="Iteration produced no artifacts") status = BLOCKED; stop_reason =
/// EVIDENCE_INCOMPLETE".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_iteration_without_artifacts_is_evidence_incomplete() {
    let mut s = Setup::new("loop-noartifacts", &["0.5"]);
    s.solver = Box::new(|_| Ok(format!(r#"<artifacts xmlns="{LOOP_NS}"/>"#)));
    let l = s.start().await;
    let report = l.report().await;
    assert_eq!(
        (
            report.status.as_str(),
            report.stop_reason.as_str(),
            report.seed_stop_reason.as_deref()
        ),
        (
            "EXIT_BLOCKED",
            "EVIDENCE_INCOMPLETE",
            Some("EVIDENCE_INCOMPLETE")
        )
    );
    assert!(
        l.file("ws/AGENTS.md")
            .contains("- [A] Iteration produced no artifacts")
    );
    assert!(
        !l.log
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.starts_with("skeptic")),
        "no Skeptic without artifacts"
    );
}

/// Seed 002 §7.1: "forbidden: Solver writing directly to AGENTS.md without Skeptic
/// verification" — named as an artifact, written on disk, or as learnings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solver_writing_agents_md_is_refused() {
    let mut s = Setup::new("loop-solver-agents", &["0.0001"]);
    let ws = Arc::new(Mutex::new(std::path::PathBuf::new()));
    let seen = Arc::clone(&ws);
    s.before = Box::new(move |dir| *seen.lock().unwrap() = dir.0.join("ws"));
    s.solver = Box::new(move |n| {
        let path = ws.lock().unwrap().join("AGENTS.md");
        std::fs::write(path, "# mine now\n").unwrap();
        Ok(format!(
            r#"<artifacts xmlns="{LOOP_NS}"><artifact path="AGENTS.md">forged</artifact><artifact path="out/iter{n}.txt">ok</artifact><learning lane="A">I am right</learning></artifacts>"#
        ))
    });
    let l = s.start().await;
    assert_eq!(l.report().await.class, "CONVERGED");
    let md = l.file("ws/AGENTS.md");
    assert!(
        md.starts_with("# AGENTS.md — Loop Learnings Log"),
        "restored: {md}"
    );
    assert!(
        !md.contains("forged") && !md.contains("mine now") && !md.contains("I am right"),
        "{md}"
    );
    assert!(
        md.contains("- [A] AGENTS.md is written by the loop controller only"),
        "{md}"
    );
    assert!(md.contains("- [A] AGENTS.md was changed outside the controller during the solver's turn; refused and restored"), "{md}");
    assert!(
        md.contains("- [A] the Solver wrote 1 learning(s); refused"),
        "{md}"
    );
}

/// Seed 002 §6.1: "backpressure_signals (any one triggers EXIT_BLOCKED): stop_flag_file:
/// "scratch/STOP", disk_usage_fraction_exceeds: 0.90, API_rate_limit_error, user_interrupt,
/// downstream_dependency_unavailable".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_backpressure_signal_blocks_the_loop() {
    let mut stop = Setup::new("loop-stopfile", &["0.5"]);
    stop.before = Box::new(|dir| {
        std::fs::create_dir_all(dir.0.join("ws/scratch")).unwrap();
        std::fs::write(dir.0.join("ws/scratch/STOP"), "").unwrap();
    });
    let mut disk = Setup::new("loop-disk", &["0.5"]);
    disk.tweak = Box::new(|l| l.disk_probe(Arc::new(|_| Some(Decimal::new(95, 2)))));
    let mut rate = Setup::new("loop-ratelimit", &["0.5"]);
    rate.solver = Box::new(|_| Err(ListenerError::Backpressure("429 after 3 retries".into())));
    let mut down = Setup::new("loop-dependency", &["0.5"]);
    down.skeptic = Box::new(|_| Err(ListenerError::Upstream("connection refused".into())));
    for (setup, reason) in [
        (stop, "stop-file"),
        (disk, "disk-usage"),
        (rate, "upstream"),
        (down, "dependency-unavailable"),
    ] {
        let l = setup.start().await;
        let report = l.report().await;
        assert_eq!(
            (
                report.class.as_str(),
                report.status.as_str(),
                report.stop_reason.as_str(),
                report.seed_stop_reason.as_deref()
            ),
            (
                "BACKPRESSURE",
                "EXIT_BLOCKED",
                reason,
                Some("BACKPRESSURE_SIGNAL")
            ),
            "{reason}"
        );
    }
    // A user interrupt: the loop thread stopped while its Scout runs.
    let mut user = Setup::new("loop-interrupt", &["0.5"]);
    let gate = Gate::new();
    user.held_scout = Some(gate.clone());
    let l = user.start().await;
    gate.entered().await;
    l.pump.stop(l.thread).await.unwrap();
    gate.open(1);
    let report = l.report().await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("BACKPRESSURE", "stop-request")
    );
}

/// Seed 002 §6.2: "fast: … max_iterations: 5 # ceil(10 * 0.5); clamp_min = 3 …
/// must_emit_budget_reduction_log: true"; §1 step 9 "IF iteration >= budget.max_iterations:
/// status = EXIT_BUDGET_EXCEEDED stop_reason = MAX_ITERS".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_profile_clamps_and_max_iters_ends_the_loop() {
    let mut s = Setup::new("loop-fast", &["0.5", "0.4", "0.5", "0.4"]);
    s.profile = Profile::Fast;
    s.run = run_payload("CONVERGED", "0.001", 4);
    let l = s.start().await;
    let report = l.report().await;
    assert_eq!(
        (
            report.status.as_str(),
            report.stop_reason.as_str(),
            report.seed_stop_reason.as_deref()
        ),
        ("EXIT_BUDGET_EXCEEDED", "max-iterations", Some("MAX_ITERS"))
    );
    let scouts = l
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.starts_with("scout"))
        .count();
    assert_eq!(scouts, 3, "ceil(4 × 0.5) = 2, clamped to 3");
    let log = l.file("ws/evidence/loop/budget_reduction.log");
    assert!(
        log.starts_with("max_iterations: 4 -> 3 (profile fast, scale 0.5, clamp_min 3)\n"),
        "{log}"
    );
    assert!(
        log.contains("max_tool_calls_per_iteration: 80 -> 40"),
        "{log}"
    );
}

/// Seed 002 §3.2: "If `halting_certificates_applicable` is missing or empty: `EXIT_NEED_INFO`
/// immediately"; §14 "ACCEPTANCE_CRITERIA is null or empty list".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_without_certificates_or_criteria_does_not_start() {
    let mut s = Setup::new("loop-needinfo", &["0.5"]);
    s.run =
        format!(r#"<run xmlns="{LOOP_NS}"><goal>g</goal><criterion id="c1">x</criterion></run>"#);
    let l = s.start().await;
    let report = l.report().await;
    assert_eq!(
        (report.status.as_str(), report.stop_reason.as_str()),
        ("EXIT_NEED_INFO", "no-certificates-declared")
    );
    assert!(
        report.learnings[0]
            .text
            .starts_with("NULL_CHECK: the <run> declares no halting certificate")
    );
    let mut s = Setup::new("loop-nocriteria", &["0.5"]);
    s.run = format!(r#"<run xmlns="{LOOP_NS}" certificates="CONVERGED"><goal>g</goal></run>"#);
    let l = s.start().await;
    for t in l.pump.tree(l.thread) {
        l.pump.settle(t.id).await;
    }
    let records = l.pump.history(l.thread).await.unwrap();
    let huh = records
        .iter()
        .find(|r| r.root.local() == "huh")
        .expect("refused");
    assert!(
        huh.payload
            .contains("the loop cannot start: acceptance_criteria, R_p missing"),
        "{}",
        huh.payload
    );
    assert!(l.log.lock().unwrap().is_empty());
}

/// Issue 36: "an organism listener kind, e.g. `kind = \"loop\"`": the `[listener.loop]` table
/// names the roles; without it, the error names the line.
#[test]
fn an_organism_declares_a_loop() {
    use agentpump::host::organism::Organism;
    let text = r#"
[[listener]]
name = "phuc"
kind = "loop"

[listener.loop]
scout = "a"
solver = "b"
skeptic = "c"
workspace = "loop-ws"
profile = "fast"
"#;
    let organism = Organism::parse(text, "organism.toml").unwrap();
    let names: Vec<String> = organism
        .registrations("organism.toml")
        .unwrap()
        .iter()
        .map(|r| r.name().to_string())
        .collect();
    assert_eq!(
        names,
        ["phuc", "ask"],
        "its listener and the inbox's `ask` tool"
    );
    let broken = "[[listener]]\nname = \"phuc\"\nkind = \"loop\"\n";
    let err = Organism::parse(broken, "organism.toml")
        .unwrap()
        .registrations("organism.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("organism.toml:3") && err.contains("needs a [listener.loop] table"),
        "{err}"
    );
}

/// A delivery a crashing pump hangs on.
type HangOn = Arc<dyn Fn(&Delivery) -> bool + Send + Sync>;

/// `inner`, except that it hangs for good on the delivery `hang` picks (saying so on `entered`):
/// the crash point.
struct Stalling<L> {
    inner: L,
    hang: HangOn,
    entered: Arc<tokio::sync::Notify>,
}

#[async_trait::async_trait]
impl<L: Listener> Listener for Stalling<L> {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if (self.hang)(msg) {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
        self.inner.handle(msg, cx).await
    }
}

/// Who hangs in the first pump.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hangs {
    /// The controller.
    Controller,
    /// A role's listener.
    Role(&'static str),
}

/// The residuals the restart tests of a converging loop measure (CONVERGED at the third).
const RESTART_RESIDUALS: &[&str] = &["0.5", "0.2", "0.0001"];

/// What a restarted loop declares and what its Skeptic measures.
#[derive(Clone, Copy)]
struct Course {
    certificates: &'static str,
    residuals: &'static [&'static str],
}

/// CONVERGED at the third iteration.
const CONVERGING: Course = Course {
    certificates: "CONVERGED DIVERGED",
    residuals: RESTART_RESIDUALS,
};

/// EXACT only: the Skeptic confirms c1 at the second iteration, with a residual of zero.
const EXACT_ONLY: Course = Course {
    certificates: "EXACT",
    residuals: &["0.5", "0"],
};

/// A loop's pump over the SQLite history at `dir`, the scripted roles logging into `log`;
/// `stall` makes one listener hang at a delivery.
fn restart_pump(
    dir: &std::path::Path,
    log: &Arc<Mutex<Vec<String>>>,
    course: Course,
    stall: Option<(Hangs, HangOn, Arc<tokio::sync::Notify>)>,
) -> PumpHandle {
    let store = Arc::new(SqliteHistory::open(dir.join("history.db")).unwrap());
    let mut config = LoopConfig::new("scout", "solver", "skeptic", dir.join("ws"));
    config.profile = Profile::Strict;
    let controller = PhucLoop::new(config).disk_probe(Arc::new(|_| Some(Decimal::new(5, 1))));
    let stalling = |who: Hangs| {
        stall
            .as_ref()
            .filter(|(w, _, _)| *w == who)
            .map(|(_, hang, entered)| (Arc::clone(hang), Arc::clone(entered)))
    };
    let roles: [(&str, Answer); 3] = [
        ("scout", Box::new(plan)),
        ("solver", Box::new(solution)),
        ("skeptic", Box::new(skeptic(course.residuals))),
    ];
    let mut b = PumpBuilder::new().history(store);
    for (name, answer) in roles {
        let script = role_script(name, log, answer);
        b = b.register(match stalling(Hangs::Role(name)) {
            Some((hang, entered)) => role_registration(
                name,
                Stalling {
                    inner: script,
                    hang,
                    entered,
                },
            ),
            None => role_registration(name, script),
        });
    }
    let registration = match stalling(Hangs::Controller) {
        Some((hang, entered)) => {
            let stalling = Stalling {
                inner: controller,
                hang,
                entered,
            };
            PhucLoop::roots().into_iter().fold(
                Registration::new("loop", stalling)
                    .role(Role::Agent)
                    .peers(["scout", "solver", "skeptic"]),
                Registration::accepts,
            )
        }
        None => controller.registration("loop"),
    };
    b.register(registration).build().unwrap()
}

/// Runs a loop on a pump in its own runtime until the listener `who` hangs at `hang`, kills that
/// pump (its runtime dropped: every task ends where it was, as in a kill -9), and finishes the
/// loop on a second pump over the same SQLite file.
async fn crash_and_restart(
    test: &'static str,
    course: Course,
    (who, hang): (Hangs, HangOn),
    last_step: &str,
) -> Loop {
    let dir = Scratch::new(test);
    std::fs::create_dir_all(dir.0.join("ws")).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let entered = Arc::new(tokio::sync::Notify::new());
    let (kill, killed) = tokio::sync::oneshot::channel::<()>();
    let (started, thread) = tokio::sync::oneshot::channel();
    let first = {
        let (root, log, entered) = (dir.0.clone(), Arc::clone(&log), Arc::clone(&entered));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let pump = restart_pump(&root, &log, course, Some((who, hang, entered)));
                let run = run_payload(course.certificates, "0.001", 10);
                let receipt = pump.post(None, Some("loop"), &run).await.unwrap();
                started.send(receipt.thread()).unwrap();
                let _ = killed.await;
                drop(pump); // no shutdown: the runtime goes next, with every task on it
            });
            drop(rt);
        })
    };
    let thread = thread.await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), entered.notified())
        .await
        .expect("the first pump reaches the crash point");
    kill.send(()).unwrap();
    tokio::task::spawn_blocking(move || first.join().unwrap())
        .await
        .unwrap();
    assert_eq!(
        journal(&dir.0, thread).await.last().map(String::as_str),
        Some(last_step),
        "the crash point"
    );
    let pump = restart_pump(&dir.0, &log, course, None);
    Loop {
        pump,
        thread,
        dir,
        log,
    }
}

/// The loop's journal as the SQLite file at `dir` holds it: `step iteration [role]` per step.
async fn journal(dir: &std::path::Path, thread: ThreadId) -> Vec<String> {
    use agentpump::history::HistoryStore as _;
    let store = SqliteHistory::open_read_only(dir.join("history.db")).unwrap();
    let records = store.thread(thread, 0).await.unwrap();
    records
        .iter()
        .filter(|r| r.root.is(LOOP_NS, "progress"))
        .map(|r| {
            let text = r
                .payload
                .split_once('>')
                .unwrap()
                .1
                .rsplit_once("</")
                .unwrap()
                .0;
            let step: serde_json::Value =
                serde_json::from_str(&quick_xml::escape::unescape(text).unwrap()).unwrap();
            let n = step["iteration"]
                .as_u64()
                .or_else(|| step["entry"]["iteration"].as_u64())
                .unwrap();
            let role = step["role"]
                .as_str()
                .map_or(String::new(), |r| format!(" {r}"));
            format!("{} {n}{role}", step["step"].as_str().unwrap())
        })
        .collect()
}

impl Loop {
    /// How many times each role's thread of each iteration was spawned (`iterN-role`), in the
    /// loop thread's history.
    async fn spawns(&self) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for r in self.pump.history(self.thread).await.unwrap() {
            if r.root.local() != "spawn-thread" {
                continue;
            }
            let sub = r.payload.split("suggested-sub-id=\"").nth(1).unwrap();
            let sub = sub.split('"').next().unwrap().to_owned();
            match counts.iter_mut().find(|(s, _)| *s == sub) {
                Some((_, n)) => *n += 1,
                None => counts.push((sub, 1)),
            }
        }
        counts
    }

    /// How many times each role handled each iteration's capsule, over both pumps.
    fn handled(&self) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for e in self.log.lock().unwrap().iter() {
            let key = e.split(' ').take(2).collect::<Vec<_>>().join(" ");
            match counts.iter_mut().find(|(s, _)| *s == key) {
                Some((_, n)) => *n += 1,
                None => counts.push((key, 1)),
            }
        }
        counts
    }

    /// The loop ended as an uninterrupted run does: CONVERGED on the same residuals, each
    /// iteration's block once in AGENTS.md, a plan and a file per iteration in the manifest,
    /// and each role's thread spawned once per iteration.
    async fn ends_as_uninterrupted(&self) {
        let report = self.report().await;
        assert_eq!(report.class, "CONVERGED", "{report:#?}");
        assert_eq!(
            report
                .halting_certificate
                .as_ref()
                .unwrap()
                .residual_history_decimal_strings,
            RESTART_RESIDUALS
        );
        let spawned: Vec<(String, usize)> = (0..3)
            .flat_map(|n| ["scout", "solver", "skeptic"].map(|r| (format!("iter{n}-{r}"), 1)))
            .collect();
        assert_eq!(
            self.spawns().await,
            spawned,
            "each role's thread spawned once"
        );
        let md = self.file("ws/AGENTS.md");
        for n in 0..3 {
            let block = format!("### {n}.1 What Was Tried");
            assert_eq!(md.matches(&block).count(), 1, "{block} once in {md}");
        }
        let manifest: serde_json::Value =
            serde_json::from_str(&self.file("ws/evidence/loop/manifest.json")).unwrap();
        assert_eq!(manifest["artifacts"].as_array().unwrap().len(), 6);
    }
}

/// Each role handled each iteration once, but `again` (in flight at the crash: delivered again).
fn handled_once_but(again: Option<&str>) -> Vec<(String, usize)> {
    (0..3)
        .flat_map(|n| ["scout", "solver", "skeptic"].map(move |r| format!("{r} {n}")))
        .map(|k| {
            let times = if again == Some(k.as_str()) { 2 } else { 1 };
            (k, times)
        })
        .collect()
}

/// Issue 36: "A restart continues the loop from history and the workspace without re-running a
/// finished iteration." — killed between iterations: iteration 0 judged, `<next iteration="1">`
/// recorded and not yet handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_iterations_runs_no_finished_iteration_again() {
    let hang: HangOn = Arc::new(|msg| {
        msg.qname().is(LOOP_NS, "next") && msg.payload().as_str().contains("iteration=\"1\"")
    });
    let l = crash_and_restart(
        "loop-restart-iter",
        CONVERGING,
        (Hangs::Controller, hang),
        "judged 0",
    )
    .await;
    l.ends_as_uninterrupted().await;
    assert_eq!(l.handled(), handled_once_but(None));
}

/// Issue 36: "a restart between iterations and between roles" — killed after iteration 1's
/// Solver answered, before the controller collected its artifacts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_roles_collects_the_answer_without_asking_again() {
    let hang: HangOn = Arc::new(|msg| {
        msg.thread_result().is_some()
            && msg.payload().as_str().contains("out/iter1.txt")
            && !msg.payload().as_str().contains("<verdict")
    });
    let l = crash_and_restart(
        "loop-restart-role",
        CONVERGING,
        (Hangs::Controller, hang),
        "spawned 1 solver",
    )
    .await;
    l.ends_as_uninterrupted().await;
    assert_eq!(l.handled(), handled_once_but(None));
}

/// Issue 36: a restart while a role works (iteration 1's Skeptic in its handler): the capsule
/// is delivered again in the same thread; no role's thread is spawned twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_a_role_works_delivers_its_capsule_again_in_the_same_thread() {
    let hang: HangOn = Arc::new(|msg| {
        msg.qname().is(LOOP_NS, "skeptic") && msg.payload().as_str().contains("iteration=\"1\"")
    });
    let l = crash_and_restart(
        "loop-restart-busy",
        CONVERGING,
        (Hangs::Role("skeptic"), hang),
        "spawned 1 skeptic",
    )
    .await;
    l.ends_as_uninterrupted().await;
    // The hanging delivery was not logged by the first pump (it hung before the script ran).
    assert_eq!(l.handled(), handled_once_but(None));
}

/// Seed 002 §1 step 8: "IF certificate.type == EXACT: status = EXIT_CONVERGED(lane=A)"; §3.1
/// EXACT: "condition: goal_achieved == true AND all acceptance_criteria passed" — a loop
/// declaring only EXACT, whose Skeptic confirms c1 with the iteration's artifact, ends EXACT;
/// the criterion is the Skeptic's, and `verify --certificates` re-derives the certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_declaring_only_exact_ends_exact_on_the_skeptics_confirmation() {
    let mut setup = Setup::new("loop-exact", EXACT_ONLY.residuals);
    setup.run = run_payload(EXACT_ONLY.certificates, "0.001", 10);
    let l = setup.start().await;
    let report = l.report().await;
    assert_exact(&l, &report).await;
}

/// The loop ended EXACT on c1 as the Skeptic confirmed it with iteration 1's file, and the
/// recorded history earns it.
async fn assert_exact(l: &Loop, report: &HaltingReport) {
    assert_eq!(
        (
            report.class.as_str(),
            report.status.as_str(),
            report.stop_reason.as_str()
        ),
        ("EXACT", "EXIT_CONVERGED", "all-criteria-met"),
        "{report:#?}"
    );
    let cert = report.halting_certificate.as_ref().unwrap();
    assert_eq!(cert.lane, "A");
    let c1 = &cert.acceptance_criteria_checklist[0];
    assert_eq!((c1.id.as_str(), c1.met), ("c1", true));
    assert_eq!(c1.reported_by.as_deref(), Some("skeptic"));
    assert!(
        c1.evidence_link
            .as_deref()
            .is_some_and(|e| e.starts_with("out/iter1.txt#")),
        "{c1:?}"
    );
    let records = l.pump.history(l.thread).await.unwrap();
    assert_eq!(agentpump::history::audit(&records, report), Ok(()));
}

/// Seed line 4: "subagent output is treated as Lane C until Skeptic-verified"; §7.1 Skeptic:
/// "Verify Solver output" — when the Solver's own listener plays the Skeptic, its verdicts
/// are the loop's own word: the loop says why and does not end EXACT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_solver_confirming_its_own_criteria_does_not_end_exact() {
    let mut setup = Setup::new("loop-self-judged", EXACT_ONLY.residuals);
    setup.run = run_payload(EXACT_ONLY.certificates, "0.001", 10);
    setup.solver_judges = true;
    let l = setup.start().await;
    let report = l.report().await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("done-uncertified", "criteria-self-certified"),
        "{report:#?}"
    );
    assert!(
        report.learnings.iter().any(|x| x.text.starts_with(
            "the Skeptic is the Solver's listener `solver`: its verdicts are not independent"
        )),
        "{:#?}",
        report.learnings
    );
}

/// Seed 002 §1 step 8 (EXACT → EXIT_CONVERGED(lane=A)) across a restart: killed after the
/// Skeptic of iteration 1 answered, before the controller read its verdict. The criterion
/// names a thread spawned before the restart; the restarted governor credits it alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_the_skeptics_answer_and_the_verdict_still_ends_exact() {
    let hang: HangOn = Arc::new(|msg| {
        msg.thread_result().is_some()
            && msg.payload().as_str().contains("<verdict")
            && msg.payload().as_str().contains("residual=\"0\"")
    });
    let l = crash_and_restart(
        "loop-restart-exact",
        EXACT_ONLY,
        (Hangs::Controller, hang),
        "spawned 1 skeptic",
    )
    .await;
    let report = l.report().await;
    assert_exact(&l, &report).await;
    let spawned: Vec<(String, usize)> = (0..2)
        .flat_map(|n| ["scout", "solver", "skeptic"].map(|r| (format!("iter{n}-{r}"), 1)))
        .collect();
    assert_eq!(l.spawns().await, spawned, "each role's thread spawned once");
    // `agentpump verify --certificates` re-derives it from the SQLite file both pumps wrote.
    let args = ["verify", "--db", "history.db", "--certificates"];
    let (ok, out, err) = support::agentpump_in(&l.dir.0, &args);
    assert!(ok, "{out}{err}");
    assert!(out.contains("every certificate agrees"), "{out}");
}
