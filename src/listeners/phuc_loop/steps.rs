//! The controller's steps, one per delivery: start (NULL_CHECK, DREAM_GOAL), next (BUDGET_CHECK,
//! SPAWN_SUBAGENT), and a role's end (COLLECT_ARTIFACTS, CHECK_HALTING, ACCUMULATE_LEARNINGS).

use quick_xml::escape::escape;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive as _;

use super::agents_md::Entry;
use super::journal::{CriterionState, Role, Run, Step};
use super::wire::{self, Artifacts, Declaration, Verdict, text_of};
use super::workspace::{AGENTS_MD, EVIDENCE, Workspace, refusal};
use super::{LOOP_NS, LoopBudget, PhucLoop, evidence};
use crate::ThreadId;
use crate::governor::{Budget, BudgetName, CertificateType, Control, Goal, Lane, Signal};
use crate::listener::{Context, Delivery, ListenerError};
use crate::listeners::capsule::{
    ARTIFACT_ROLES, ArtifactLink, Capsule, CapsuleState, RemainingBudget, StateSummary,
};
use crate::system::Spawn;

/// The answer a role's thread ends with when its listener failed.
pub(super) fn role_failed(code: &str, message: &str) -> String {
    format!(
        "<role-failed xmlns=\"{LOOP_NS}\" code=\"{}\">{}</role-failed>",
        escape(code),
        escape(message)
    )
}

fn failed(e: impl std::fmt::Display) -> ListenerError {
    ListenerError::failed(e)
}

/// The budget under the profile, for this declaration: (budget, reduction log lines).
fn effective(lp: &PhucLoop, d: &Declaration) -> (LoopBudget, Vec<String>) {
    let mut base = lp.config.budget;
    if let Some(n) = d.max_iterations {
        base.max_iterations = n;
    }
    base.scaled(lp.config.profile)
}

/// One delivery's view of the loop.
struct Turn<'a> {
    lp: &'a PhucLoop,
    ws: Workspace,
    budget: LoopBudget,
    run: Run,
    now_us: i64,
}

impl<'a> Turn<'a> {
    async fn load(
        lp: &'a PhucLoop,
        msg: &Delivery,
        cx: &Context,
    ) -> Result<Option<Self>, ListenerError> {
        let history = cx.history().await.map_err(failed)?;
        let Some(run) = Run::fold(cx.me(), &history) else {
            return Ok(None);
        };
        let now_us = history
            .iter()
            .rfind(|r| r.id == msg.id())
            .map_or(run.started_us, |r| r.time_us);
        Ok(Some(Self {
            lp,
            ws: Workspace::new(&lp.config.workspace),
            budget: effective(lp, &run.declaration).0,
            run,
            now_us,
        }))
    }

    fn tool_calls_left(cx: &Context) -> Option<u64> {
        cx.remaining()
            .into_iter()
            .find(|(n, _)| *n == BudgetName::ToolCalls)
            .and_then(|(_, v)| v.floor().to_u64())
    }

    /// (tool calls, seconds) the iteration `n` has left, each within the loop's totals.
    fn iteration_left(&self, cx: &Context, n: u64) -> (Option<u64>, u64) {
        let it = self.run.iterations.get(n as usize);
        let total_calls = Self::tool_calls_left(cx);
        let used = it
            .and_then(|i| i.tool_calls_left)
            .zip(total_calls)
            .map_or(0, |(start, now)| start.saturating_sub(now));
        let calls = self
            .budget
            .max_tool_calls_per_iteration
            .saturating_sub(used);
        let calls = total_calls.map_or(calls, |t| t.min(calls));
        let secs = |since: i64| ((self.now_us - since).max(0) / 1_000_000) as u64;
        let in_iteration = it.map_or(0, |i| secs(i.started_us));
        let seconds = self
            .budget
            .max_seconds_per_iteration
            .saturating_sub(in_iteration)
            .min(
                self.budget
                    .max_total_seconds
                    .saturating_sub(secs(self.run.started_us)),
            );
        (Some(calls), seconds)
    }

    fn capsule(&self, cx: &Context, n: u64, role: Role) -> Result<String, ListenerError> {
        let d = &self.run.declaration;
        let line = |id: &str| {
            let text = d.acceptance_criteria.iter().find(|(i, _)| i == id);
            format!("{id}: {}", text.map_or("", |(_, t)| t.as_str()))
        };
        let met: Vec<String> = self
            .run
            .criteria()
            .iter()
            .filter(|c| c.met)
            .map(|c| line(&c.id))
            .collect();
        let all: Vec<String> = d
            .acceptance_criteria
            .iter()
            .map(|(id, _)| line(id))
            .collect();
        let (calls, seconds) = self.iteration_left(cx, n);
        let state = CapsuleState {
            goal_statement: d.goal.clone(),
            acceptance_criteria: all.clone(),
            halting_certificates_applicable: d
                .halting_certificates_applicable
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect(),
            current_state_summary: StateSummary {
                iteration_number: n,
                residual_current: self.run.residuals().last().copied(),
                criteria_still_open: all.into_iter().filter(|c| !met.contains(c)).collect(),
                criteria_met_so_far: met,
            },
            accumulated_learnings: super::agents_md::without_date(
                &evidence::agents_md(&self.lp.config, &self.budget, &self.run).0,
            ),
            remaining_budget: RemainingBudget {
                iterations_remaining: Some(self.budget.max_iterations.saturating_sub(n)),
                tool_calls_remaining: calls,
                seconds_remaining: Some(seconds),
            },
            artifact_links: self
                .run
                .manifest()
                .into_iter()
                .map(|(_, l)| l.clone())
                .collect(),
            subagent_role: role.as_str().to_owned(),
            // The role thread is new: its agent has written no plan yet (an LLM role agent
            // sees the plans it writes in its prompt).
            plan: None,
        };
        Ok(Capsule::new(&state).map_err(failed)?.to_json())
    }

    /// SPAWN_SUBAGENT: the role's fresh thread, its capsule, its carve of the iteration's
    /// budget, and the journal line.
    async fn spawn(&self, cx: &mut Context, n: u64, role: Role) -> Result<(), ListenerError> {
        let json = self.capsule(cx, n, role)?;
        let file = format!("{EVIDENCE}/iter_{n}/cnf_capsule.{}.json", role.as_str());
        self.ws.write(&file, &json, "log").await.map_err(failed)?;
        let (calls, seconds) = self.iteration_left(cx, n);
        let carve = Budget {
            tool_calls: calls.filter(|c| *c > 0),
            wall_clock: (seconds > 0).then(|| std::time::Duration::from_secs(seconds)),
            ..Budget::default()
        };
        let c = &self.lp.config;
        let listener = match role {
            Role::Scout => &c.scout,
            Role::Solver => &c.solver,
            Role::Skeptic => &c.skeptic,
        };
        cx.spawn(
            Spawn::new(wire::capsule_payload(role.as_str(), n, &json))
                .to(listener.as_str())
                .sub_id(format!("iter{n}-{}", role.as_str()))
                .budget(carve),
        );
        let tool_calls_left = (role == Role::Scout)
            .then(|| Self::tool_calls_left(cx))
            .flatten();
        let step = Step::Spawned {
            iteration: n,
            role,
            tool_calls_left,
        };
        cx.send("client", step.to_xml());
        Ok(())
    }

    /// §6.1's signals the controller reads itself: the stop flag and disk usage. (A user
    /// interrupt is the pump's stop; a rate limit and an unavailable dependency arrive as a
    /// role's end.)
    async fn backpressure(&self) -> Option<(&'static str, String)> {
        if self.ws.stop_flag().await {
            return Some(("stop-file", format!("{} is present", super::STOP_FLAG)));
        }
        let limit = self.lp.config.disk_usage_limit;
        let used = (self.lp.disk)(self.ws.root())?;
        (used > limit).then(|| {
            (
                "disk-usage",
                format!("disk usage {used} is above {limit} (phuc-loop §6.1)"),
            )
        })
    }

    /// Spawns `role` unless a backpressure signal stops the loop first.
    async fn go_on(&self, cx: &mut Context, n: u64, role: Role) -> Result<(), ListenerError> {
        match self.backpressure().await {
            Some((reason, what)) => stop(cx, reason, &what),
            None => self.spawn(cx, n, role).await?,
        }
        Ok(())
    }

    /// AGENTS.md as it should be now; when the file differs, it is restored and the change
    /// refused (§7.1: "Solver writing directly to AGENTS.md without Skeptic verification").
    async fn guard_agents_md(&self, role: Role) -> Result<Option<String>, ListenerError> {
        let want = evidence::agents_md(&self.lp.config, &self.budget, &self.run).0;
        let have = self.ws.read(AGENTS_MD).await.map_err(failed)?;
        if have.as_deref() == Some(want.as_str()) {
            return Ok(None);
        }
        self.ws
            .write(AGENTS_MD, &want, "log")
            .await
            .map_err(failed)?;
        Ok(Some(format!(
            "AGENTS.md was changed outside the controller during the {}'s turn; refused and restored (only the loop controller writes it, phuc-loop §7.1)",
            role.as_str()
        )))
    }
}

/// Ends the loop EXIT_BLOCKED on a backpressure signal, with its Lane A learning.
fn stop(cx: &mut Context, reason: &str, what: &str) {
    cx.learning(Lane::A, &format!("BACKPRESSURE ({reason}): {what}"));
    cx.signal(Signal::new(Control::Abort).reason(reason));
}

/// `<run>`: NULL_CHECK, then DREAM_GOAL — the goal to the governor, the workspace initialised,
/// the first iteration asked for.
pub(super) async fn start(
    lp: &PhucLoop,
    msg: &Delivery,
    cx: &mut Context,
) -> Result<(), ListenerError> {
    let history = cx.history().await.map_err(failed)?;
    let earlier = history
        .iter()
        .filter(|r| r.root.is(LOOP_NS, "run") && r.to.as_deref() == Some(cx.me()))
        .count();
    if earlier > 1 {
        return Err(ListenerError::InvalidPayload(
            "this thread already runs a loop; start another loop in a new thread".into(),
        ));
    }
    let d = Declaration::parse(msg.payload().as_str()).map_err(ListenerError::InvalidPayload)?;
    let missing = d.missing();
    if !missing.is_empty() {
        return Err(ListenerError::InvalidPayload(format!(
            "the loop cannot start: {} missing (phuc-loop §14 null_detected)",
            missing.join(", ")
        )));
    }
    let (budget, reductions) = effective(lp, &d);
    let goal = Goal {
        text: d.goal.clone(),
        criteria: d.acceptance_criteria.clone(),
        certificates: d.halting_certificates_applicable.clone(),
        r_p: d.r_p,
        residual_metric: d.residual_metric.clone(),
        budget: Budget {
            tool_calls: Some(budget.max_total_tool_calls),
            wall_clock: Some(std::time::Duration::from_secs(budget.max_total_seconds)),
            ..Budget::default()
        },
    };
    if d.halting_certificates_applicable.is_empty() {
        // The governor answers NEED_INFO (HALTING_CRITERIA_MISSING); this says why.
        cx.learning(
            Lane::A,
            "NULL_CHECK: the <run> declares no halting certificate; the loop does not start (phuc-loop §3.2)",
        );
        cx.goal(&goal);
        return Ok(());
    }
    let now_us = history
        .iter()
        .rfind(|r| r.id == msg.id())
        .map_or(0, |r| r.time_us);
    let run = Run {
        declaration: d,
        started_us: now_us,
        iterations: Vec::new(),
        open: None,
    };
    let ws = Workspace::new(&lp.config.workspace);
    evidence::initialise(&ws, &lp.config, &budget, &run, &reductions)
        .await
        .map_err(failed)?;
    cx.goal(&goal);
    if let Some(why) = self_judging(&lp.config) {
        cx.learning(Lane::A, &why);
    }
    cx.emit(next_payload(0));
    Ok(())
}

/// Why the Skeptic's verdicts cannot be credited to it, when its listener is the Solver's
/// (seed 002 §7.1: the Skeptic's role is "Verify Solver output"): the controller then reports
/// the criteria as its own, so they cannot earn EXACT.
fn self_judging(config: &super::LoopConfig) -> Option<String> {
    (config.skeptic == config.solver).then(|| {
        format!(
            "the Skeptic is the Solver's listener `{}`: its verdicts are not independent, so the loop cannot end EXACT (phuc-loop §7.1)",
            config.solver
        )
    })
}

fn next_payload(n: u64) -> String {
    format!("<next xmlns=\"{LOOP_NS}\" iteration=\"{n}\"/>")
}

/// `<next>`: BUDGET_CHECK (MAX_ITERS), backpressure, then the iteration's Scout.
pub(super) async fn next(
    lp: &PhucLoop,
    msg: &Delivery,
    cx: &mut Context,
) -> Result<(), ListenerError> {
    let Some(t) = Turn::load(lp, msg, cx).await? else {
        return Ok(());
    };
    if t.run.open.is_some() {
        return Ok(()); // one subagent at a time (§2.5 STACKED_SPECULATIVE_ITERATIONS)
    }
    let n = t.run.judged().count() as u64;
    if n >= t.budget.max_iterations {
        cx.learning(
            Lane::A,
            &format!(
                "MAX_ITERS: {n} of {} iterations done without a halting certificate",
                t.budget.max_iterations
            ),
        );
        cx.signal(Signal::new(Control::Abort).reason("max-iterations"));
        return Ok(());
    }
    t.go_on(cx, n, Role::Scout).await
}

/// What a role's thread came back with.
enum Outcome {
    /// Its answer.
    Answer(String),
    /// Nothing usable, and why.
    Nothing(String),
    /// A backpressure signal: our reason and what happened.
    Backpressure(String, String),
}

fn outcome(msg: &Delivery, role: Role) -> Outcome {
    let Some(result) = msg.thread_result() else {
        return Outcome::Nothing("no thread-result".into());
    };
    let who = role.as_str();
    if let Some((class, reason)) = result.halt() {
        return if class == "BACKPRESSURE" {
            Outcome::Backpressure(
                reason.to_owned(),
                format!("the {who}'s thread halted BACKPRESSURE {reason}"),
            )
        } else {
            Outcome::Nothing(format!("the {who}'s thread halted {class} {reason}"))
        };
    }
    let Some(payload) = result.payload() else {
        return Outcome::Nothing(format!("the {who} gave no answer"));
    };
    if payload.qname().is(LOOP_NS, "role-failed") {
        let text = payload.as_str();
        let what = format!("the {who}'s listener failed: {}", text_of(text));
        return if text.contains("code=\"upstream-failed\"") {
            Outcome::Backpressure("dependency-unavailable".into(), what)
        } else {
            Outcome::Nothing(what)
        };
    }
    Outcome::Answer(payload.as_str().to_owned())
}

/// A role's thread ended: collect its answer and go on.
pub(super) async fn role_done(
    lp: &PhucLoop,
    msg: &Delivery,
    cx: &mut Context,
) -> Result<(), ListenerError> {
    let Some(t) = Turn::load(lp, msg, cx).await? else {
        return Ok(());
    };
    let Some((n, role)) = t.run.open else {
        return Ok(()); // a result for no open role: already collected
    };
    let Some(child) = msg.thread_result().map(|r| r.thread()) else {
        return Ok(()); // only a role's `thread-result` gets here
    };
    let answer = match outcome(msg, role) {
        Outcome::Backpressure(reason, what) => {
            stop(cx, &reason, &what);
            return Ok(());
        }
        Outcome::Answer(text) => Ok(text),
        Outcome::Nothing(why) => Err(why),
    };
    match role {
        Role::Scout => scouted(t, cx, n, answer).await,
        Role::Solver => solved(t, cx, n, answer).await,
        Role::Skeptic => judged(t, cx, n, answer, child).await,
    }
}

async fn scouted(
    mut t: Turn<'_>,
    cx: &mut Context,
    n: u64,
    answer: Result<String, String>,
) -> Result<(), ListenerError> {
    let plan = answer.map(|a| {
        if a.contains(&format!("xmlns=\"{LOOP_NS}\"")) {
            text_of(&a)
        } else {
            a
        }
    });
    let link = match plan {
        Ok(text) if !text.trim().is_empty() => {
            let path = format!("{EVIDENCE}/iter_{n}/scout_plan.md");
            Some(t.ws.write(&path, &text, "plan").await.map_err(failed)?)
        }
        _ => None,
    };
    let step = Step::Scouted {
        iteration: n,
        plan: link.clone(),
    };
    cx.send("client", step.to_xml());
    t.run.iterations[n as usize].plan = link;
    t.go_on(cx, n, Role::Solver).await
}

/// COLLECT_ARTIFACTS: the Solver's files, checked and hashed; none → EVIDENCE_INCOMPLETE.
async fn solved(
    mut t: Turn<'_>,
    cx: &mut Context,
    n: u64,
    answer: Result<String, String>,
) -> Result<(), ListenerError> {
    let mut refused: Vec<String> = t.guard_agents_md(Role::Solver).await?.into_iter().collect();
    let claims = match answer.and_then(|a| Artifacts::parse(&a)) {
        Ok(a) => a,
        Err(why) => {
            refused.push(why);
            Artifacts::default()
        }
    };
    if claims.learnings > 0 {
        refused.push(format!(
            "the Solver wrote {} learning(s); refused: only the Skeptic's verified entries reach AGENTS.md (phuc-loop §7.1)",
            claims.learnings
        ));
    }
    let mut artifacts = Vec::new();
    for claim in &claims.files {
        match take(&t.ws, claim).await {
            Ok(link) => artifacts.push(link),
            Err(why) => refused.push(why),
        }
    }
    let step = Step::Solved {
        iteration: n,
        artifacts: artifacts.clone(),
        refused: refused.clone(),
    };
    cx.send("client", step.to_xml());
    let it = &mut t.run.iterations[n as usize];
    it.artifacts = artifacts;
    it.refused = refused;
    if !t.run.iterations[n as usize].artifacts.is_empty() {
        return t.go_on(cx, n, Role::Skeptic).await;
    }
    let mut failed_lines = vec![(Lane::A, "Iteration produced no artifacts".to_owned())];
    failed_lines.extend(
        t.run.iterations[n as usize]
            .refused
            .iter()
            .map(|r| (Lane::A, r.clone())),
    );
    let entry = Entry {
        iteration: n,
        failed: failed_lines,
        direction: "STABLE".into(),
        certificate: "NONE".into(),
        ..Entry::default()
    };
    let criteria = t.run.criteria().to_vec();
    record(&mut t, cx, entry, criteria).await?;
    cx.learning(
        Lane::A,
        &format!("EVIDENCE_INCOMPLETE: iteration {n} produced no artifacts (phuc-loop §1 step 3)"),
    );
    cx.signal(Signal::new(Control::Abort).reason("EVIDENCE_INCOMPLETE"));
    Ok(())
}

/// One artifact a Solver named: checked, written when given inline, hashed.
async fn take(ws: &Workspace, claim: &wire::ArtifactClaim) -> Result<ArtifactLink, String> {
    if let Some(why) = refusal(&claim.path) {
        return Err(why);
    }
    if !ARTIFACT_ROLES.contains(&claim.role.as_str()) {
        return Err(format!(
            "`{}` has role `{}`, expected plan, log, test, artifact, proof or snapshot",
            claim.path, claim.role
        ));
    }
    let linked = match &claim.content {
        Some(content) => ws.write(&claim.path, content, &claim.role).await,
        None => ws.link(&claim.path, &claim.role).await,
    };
    linked.map_err(|e| format!("the Solver named {}: {}", claim.path, e.source))
}

/// The manifest's `path#sha256` for an evidence reference (`path` or `path#sha256`), when it
/// names an artifact of the loop — prose never resolves (Lane C is not evidence).
fn resolve(run: &Run, reference: Option<&str>) -> Option<String> {
    let (path, sha) = match reference?.split_once('#') {
        Some((p, s)) => (p, Some(s)),
        None => (reference?, None),
    };
    run.manifest()
        .into_iter()
        .rev()
        .find(|(_, l)| l.path == path && sha.is_none_or(|s| s == l.sha256))
        .map(|(_, l)| format!("{}#{}", l.path, l.sha256))
}

/// CHECK_HALTING and ACCUMULATE_LEARNINGS: the Skeptic's verdict, lane-checked, becomes the
/// iteration's entry; the criteria and the residual go to the governor, which decides. The
/// criteria name the Skeptic's thread (`skeptic`): the governor credits them to the Skeptic,
/// not to the controller that says `done`, so they can earn EXACT.
async fn judged(
    mut t: Turn<'_>,
    cx: &mut Context,
    n: u64,
    answer: Result<String, String>,
    skeptic: ThreadId,
) -> Result<(), ListenerError> {
    let mut entry = Entry {
        iteration: n,
        ..Entry::default()
    };
    if let Some(tampered) = t.guard_agents_md(Role::Skeptic).await? {
        entry.failed.push((Lane::A, tampered));
    }
    entry.failed.extend(
        t.run.iterations[n as usize]
            .refused
            .iter()
            .map(|r| (Lane::A, r.clone())),
    );
    let verdict = answer
        .and_then(|a| Verdict::parse(&a))
        .unwrap_or_else(|why| {
            entry.failed.push((Lane::A, format!("no verdict: {why}")));
            Verdict::default()
        });
    let criteria = judge_criteria(&t.run, &verdict, &mut entry);
    lanes(&t.run, &verdict, &mut entry);
    let residual = match verdict.residual() {
        Some(Ok(r)) => Some(r),
        Some(Err(why)) => {
            entry.failed.push((Lane::A, why));
            None
        }
        None => None,
    };
    let done = label(&t.run, residual, &criteria, &mut entry);
    let (manifest, agents) = record(&mut t, cx, entry, criteria.clone()).await?;
    let independent = self_judging(&t.lp.config).is_none();
    for c in &criteria {
        let evidence = c.evidence.as_deref().unwrap_or("");
        if independent {
            cx.criterion_confirmed_in(skeptic, &c.id, c.met, evidence);
        } else {
            cx.criterion(&c.id, c.met, evidence);
        }
    }
    cx.learning(
        Lane::A,
        &format!(
            "loop evidence after iteration {n}: {EVIDENCE}/manifest.json sha256 {manifest}; AGENTS.md sha256 {agents}"
        ),
    );
    if let Some(r) = residual {
        cx.residual(r);
    }
    if done {
        cx.signal(Signal::new(Control::Done).notes("the Skeptic found every criterion met"));
    }
    cx.emit(next_payload(n + 1));
    Ok(())
}

/// Each declared criterion as the verdict judged it: met only with an artifact of the loop as
/// evidence.
fn judge_criteria(run: &Run, verdict: &Verdict, entry: &mut Entry) -> Vec<CriterionState> {
    let mut out = Vec::new();
    for (id, _) in &run.declaration.acceptance_criteria {
        let judged = verdict.criteria.iter().find(|c| &c.id == id);
        let evidence = judged.and_then(|c| resolve(run, c.evidence.as_deref()));
        let claimed = judged.is_some_and(|c| c.met);
        if claimed && evidence.is_none() {
            entry.failed.push((
                Lane::A,
                format!("criterion {id} claimed met without an artifact of the loop as evidence; it stays open"),
            ));
        }
        out.push(CriterionState {
            id: id.clone(),
            met: claimed && evidence.is_some(),
            evidence,
        });
    }
    out
}

/// The verdict's lines into the entry: successes need lane A or B and an artifact (else they
/// are guidance, N.1); failures are A or C; the rest is Lane C.
fn lanes(run: &Run, verdict: &Verdict, entry: &mut Entry) {
    entry.tried.extend(verdict.tried.iter().cloned());
    for s in &verdict.succeeded {
        match (s.lane, resolve(run, s.evidence.as_deref())) {
            (Lane::A | Lane::B, Some(link)) => entry
                .succeeded
                .push((s.lane, format!("{} (artifact: {link})", s.text.trim()))),
            _ => entry
                .tried
                .push(format!("(unverified: no artifact) {}", s.text.trim())),
        }
    }
    for f in &verdict.failed {
        let lane = if f.lane == Lane::A { Lane::A } else { Lane::C };
        entry.failed.push((lane, f.text.trim().to_owned()));
    }
    entry.open.extend(verdict.open.iter().cloned());
}

/// N.4: direction and certificate as the evidence stands (the governor decides the halt);
/// whether to say `done` (EXACT, when a zero residual cannot end the loop as CONVERGED).
fn label(
    run: &Run,
    residual: Option<Decimal>,
    criteria: &[CriterionState],
    entry: &mut Entry,
) -> bool {
    let d = &run.declaration;
    let declared = |c| d.halting_certificates_applicable.contains(&c);
    let mut residuals = run.residuals();
    entry.residual = residual.map(|r| r.normalize().to_string());
    entry.direction = match (residuals.last(), residual) {
        (Some(prev), Some(r)) if r < *prev => "IMPROVING",
        (Some(prev), Some(r)) if r > *prev => "DIVERGING",
        _ => "STABLE",
    }
    .into();
    residuals.extend(residual);
    let all_met = !criteria.is_empty() && criteria.iter().all(|c| c.met);
    let converged = matches!((residual, d.r_p), (Some(r), Some(rp)) if r < rp);
    entry.certificate = if residual.is_some() && crate::governor::diverging(&residuals, 3) {
        "DIVERGED"
    } else if all_met && residual.is_some_and(|r| r.is_zero()) && declared(CertificateType::Exact) {
        "EXACT"
    } else if converged && declared(CertificateType::Converged) {
        "CONVERGED"
    } else {
        "NONE"
    }
    .into();
    entry.certificate == "EXACT" && !(converged && declared(CertificateType::Converged))
}

/// ACCUMULATE_LEARNINGS: the entry journaled and every evidence file rewritten; (manifest
/// sha256, AGENTS.md sha256).
async fn record(
    t: &mut Turn<'_>,
    cx: &mut Context,
    entry: Entry,
    criteria: Vec<CriterionState>,
) -> Result<(String, String), ListenerError> {
    let n = entry.iteration;
    let (calls, _) = t.iteration_left(cx, n);
    let used = calls.map(|left| t.budget.max_tool_calls_per_iteration.saturating_sub(left));
    let seconds = (t.now_us - t.run.iterations[n as usize].started_us) / 1_000_000;
    let step = Step::Judged {
        entry: entry.clone(),
        criteria: criteria.clone(),
    };
    cx.send("client", step.to_xml());
    let it = &mut t.run.iterations[n as usize];
    it.entry = Some(entry);
    it.criteria = criteria;
    evidence::after_iteration(&t.ws, &t.lp.config, &t.budget, &t.run, n, used, seconds)
        .await
        .map_err(failed)
}
