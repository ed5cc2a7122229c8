//! LLM agents against a real HTTP server on loopback that speaks the chat-completions protocol
//! (request validation included) and answers from a script.

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::listeners::llm::{Capsule, ContextMode, LlmAgent, LlmConfig, PeerDoc};
use agentpump::listeners::{Calculator, Echo};
use agentpump::{PumpBuilder, PumpConfig, PumpHandle, Registration, Role, ThreadId, ThreadState};
use rust_decimal::Decimal;
use serde_json::json;
use support::model::{Reply, answer, serve_model, status};
use support::{Script, egress, notices, p, q};

const GOV: &str = "urn:agentpump:governor:v1";

fn agent(config: LlmConfig) -> Registration {
    let llm = LlmAgent::new(
        config,
        "You are a careful assistant who checks its arithmetic.",
    )
    .with_peer(PeerDoc {
        name: "calculator".into(),
        description: "evaluates arithmetic exactly".into(),
        example: r#"<calc xmlns="urn:agentpump:calc:v1">6 * 7</calc>"#.into(),
    })
    .with_peer(PeerDoc {
        name: "verifier".into(),
        description: "checks a result".into(),
        example: p("check", "42"),
    });
    Registration::from_shared("assistant", Arc::new(llm))
        .accepts(q("ask"))
        .accepts(q("think"))
        .role(Role::Agent)
        .peers(["calculator", "verifier"])
}

fn verifier() -> Registration {
    Registration::new(
        "verifier",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                let ok = msg.payload().as_str().contains(">42<");
                cx.criterion("checked", ok, &format!("message {}", msg.id()));
                cx.reply(p("checked", if ok { "yes" } else { "no" }));
            }
            Ok(())
        }),
    )
    .accepts(q("check"))
    .role(Role::Verifier)
}

fn pump(config: LlmConfig, budget: Budget) -> PumpHandle {
    let governor = GovernorPolicy {
        budget,
        ..GovernorPolicy::default()
    };
    PumpBuilder::new()
        .config(PumpConfig {
            governor,
            ..PumpConfig::default()
        })
        .register(agent(config))
        .register(Registration::new("calculator", Calculator).accepts(Calculator::root()))
        .register(verifier())
        .register(Registration::new("echo", Echo).accepts(q("unused")))
        .build()
        .unwrap()
}

async fn run(pump: &PumpHandle, payload: &str) -> ThreadId {
    let thread = pump
        .post(None, Some("assistant"), payload)
        .await
        .unwrap()
        .thread();
    tokio::time::timeout(Duration::from_secs(20), pump.settle(thread))
        .await
        .expect("the thread settles");
    thread
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_thinks_calls_a_tool_is_verified_and_is_certified_exact() {
    let goal = format!(
        r#"<goal xmlns="{GOV}" certificates="EXACT"><text>compute 6 * 7</text><criterion id="checked">an independent check agrees</criterion></goal>"#
    );
    let (model, base) = serve_model(
        vec![
            answer(&format!("Let me plan first.\n{goal}\n{}", p("think", "multiply")), 100, 20),
            answer("```xml\n<calc xmlns=\"urn:agentpump:calc:v1\">6 * 7</calc>\n```", 150, 10),
            answer(&format!("The tool says 42; I will have it checked. {}", p("check", "42")), 200, 10),
            answer(&format!(r#"Verified. <loop xmlns="{GOV}" control="done" notes="checked by the verifier"/>"#), 250, 10),
        ],
        None,
    )
    .await;
    let pump = pump(
        LlmConfig::new(base, "scripted-model"),
        GovernorPolicy::default_budget(),
    );
    let thread = run(&pump, &p("ask", "what is 6 * 7?")).await;
    let report = pump.reports(thread).await.unwrap().pop().expect("halted");
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("EXACT", "all-criteria-met")
    );
    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 4);
    let roles: Vec<Vec<&str>> = requests
        .iter()
        .map(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["role"].as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(roles[0], ["system", "user"]);
    assert_eq!(roles[3].first(), Some(&"system"));
    assert!(
        roles[3].contains(&"assistant"),
        "its own outputs come back as assistant: {:?}",
        roles[3]
    );
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("careful assistant")
            && system.contains("- calculator: evaluates arithmetic exactly")
            && system.contains("control=\"done\"")
    );
    let last: Vec<&str> = requests[3]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        last.iter()
            .any(|c| c.starts_with("from calculator:") && c.contains(">42<")),
        "{last:?}"
    );
    assert!(
        last.iter().any(|c| c.starts_with("from verifier:")),
        "{last:?}"
    );
    assert_eq!(requests[0]["model"], "scripted-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answers_come_back_as_huh_and_endless_garbage_is_halted() {
    let (model, base) = serve_model(
        vec![answer(
            "Sure! <think xmlns='urn:test:v1'>oops</thnk>",
            10,
            5,
        )],
        Some(answer("I have nothing to add.", 10, 5)),
    )
    .await;
    let pump = pump(
        LlmConfig::new(base, "m"),
        Budget {
            turns: Some(8),
            ..GovernorPolicy::default_budget()
        },
    );
    let thread = run(&pump, &p("ask", "go")).await;
    let requests = model.requests.lock().unwrap().clone();
    let second: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        second.iter().any(|c| c.starts_with("from system:")
            && c.contains("malformed-xml")
            && c.contains("thnk")),
        "{second:?}"
    );
    let codes: Vec<String> = notices(&pump, thread)
        .await
        .into_iter()
        .map(|n| n.2)
        .collect();
    assert!(codes.contains(&"no-payload".to_owned()));
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Halted);
    let report = pump.reports(thread).await.unwrap().pop().unwrap();
    assert!(
        ["no-progress", "TIMEOUT"].contains(&report.class.as_str()),
        "{}",
        report.class
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_and_cost_are_charged_exactly_and_a_cost_budget_stops_the_next_call() {
    let (model, base) = serve_model(vec![], Some(answer(&p("think", "more"), 1200, 300))).await;
    let mut config = LlmConfig::new(base, "m");
    config.price_in_per_1k = Decimal::new(1, 2); // 0.01 per 1k in
    config.price_out_per_1k = Decimal::new(3, 2); // 0.03 per 1k out
    config.max_tokens = 300;
    // Each call costs 1200 × 0.01/1000 + 300 × 0.03/1000 = 0.021; the budget allows two.
    let budget = Budget {
        cost: Some(Decimal::new(5, 2)),
        ..GovernorPolicy::default_budget()
    };
    let pump = pump(config, budget);
    let thread = run(&pump, &p("ask", "go")).await;
    let info = pump.thread(thread).unwrap();
    let calls = model.requests.lock().unwrap().len() as u64;
    assert_eq!(
        (info.counters.tokens_in, info.counters.tokens_out),
        (1200 * calls, 300 * calls)
    );
    assert_eq!(
        info.counters.cost,
        Decimal::new(21, 3) * Decimal::from(calls)
    );
    let report = pump.reports(thread).await.unwrap().pop().unwrap();
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-cost")
    );
    assert!(
        info.counters.cost <= Decimal::new(5, 2),
        "never over the budget: {}",
        info.counters.cost
    );
    assert_eq!(
        calls, 2,
        "the third call would have exceeded the budget and was not made"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_server_errors_timeouts_and_garbage_bodies_are_handled() {
    // 429 with Retry-After, then 500, then success: retried through.
    let (model, base) = serve_model(
        vec![
            status(429, Some(1)),
            status(500, None),
            answer(
                &format!(r#"<loop xmlns="{GOV}" control="abort" reason="fine"/>"#),
                5,
                5,
            ),
        ],
        None,
    )
    .await;
    let pump1 = pump(LlmConfig::new(base, "m"), GovernorPolicy::default_budget());
    let thread = run(&pump1, &p("ask", "go")).await;
    assert_eq!(model.requests.lock().unwrap().len(), 3);
    assert_eq!(
        pump1
            .reports(thread)
            .await
            .unwrap()
            .pop()
            .unwrap()
            .stop_reason,
        "fine"
    );

    // A rate limit that does not clear: BACKPRESSURE.
    let (_, base) = serve_model(vec![], Some(status(429, Some(0)))).await;
    let mut config = LlmConfig::new(base, "m");
    config.retries = 2;
    let pump2 = pump(config, GovernorPolicy::default_budget());
    let thread = run(&pump2, &p("ask", "go")).await;
    let report = pump2.reports(thread).await.unwrap().pop().unwrap();
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("BACKPRESSURE", "upstream")
    );

    // Too slow, every time: upstream-failed after the retries.
    let slow = Reply {
        delay: Duration::from_secs(5),
        ..answer("late", 1, 1)
    };
    let (model3, base) = serve_model(vec![], Some(slow)).await;
    let mut config = LlmConfig::new(base, "m");
    config.timeout = Duration::from_millis(200);
    config.retries = 1;
    let pump3 = pump(config, GovernorPolicy::default_budget());
    let thread = run(&pump3, &p("ask", "go")).await;
    let got = notices(&pump3, thread).await;
    assert!(
        got.iter()
            .any(|n| n.1 == "system-error" && n.2 == "upstream-failed"),
        "{got:?}"
    );
    assert_eq!(model3.requests.lock().unwrap().len(), 2);

    // A body that is not JSON: a precise error, not a panic.
    let garbage = Reply {
        status: 200,
        body: "{\"choices\": [".into(),
        retry_after: None,
        delay: Duration::ZERO,
    };
    let (_, base) = serve_model(vec![garbage], None).await;
    let pump4 = pump(LlmConfig::new(base, "m"), GovernorPolicy::default_budget());
    let thread = run(&pump4, &p("ask", "go")).await;
    let history = pump4.history(thread).await.unwrap();
    let error = history
        .iter()
        .find(|r| r.payload.contains("upstream-failed"))
        .expect("reported");
    assert!(
        error.payload.contains("invalid JSON from"),
        "{}",
        error.payload
    );

    // A 401 because the key's variable is unset says so instead of leaving the user guessing.
    let (_, base) = serve_model(vec![status(401, None)], None).await;
    let mut config = LlmConfig::new(base, "m");
    config.api_key_env = Some("AGENTPUMP_TEST_KEY_THAT_IS_NOT_SET".into());
    let pump5 = pump(config, GovernorPolicy::default_budget());
    let thread = run(&pump5, &p("ask", "go")).await;
    let history = pump5.history(thread).await.unwrap();
    let error = history
        .iter()
        .find(|r| r.payload.contains("upstream-failed"))
        .expect("reported");
    assert!(
        error
            .payload
            .contains("environment variable AGENTPUMP_TEST_KEY_THAT_IS_NOT_SET is not set"),
        "{}",
        error.payload
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capsule_mode_gives_identical_prompt_bytes_for_identical_state() {
    let script = |n: usize| vec![answer(&p("think", "again"), 1, 1); n];
    let mut prompts = Vec::new();
    for _ in 0..2 {
        let (model, base) = serve_model(
            script(1),
            Some(answer(
                &format!(r#"<loop xmlns="{GOV}" control="abort"/>"#),
                1,
                1,
            )),
        )
        .await;
        let mut config = LlmConfig::new(base, "m");
        config.context = ContextMode::Capsule;
        let pump = pump(config, GovernorPolicy::default_budget());
        run(&pump, &p("ask", "the same question")).await;
        let requests = model.requests.lock().unwrap().clone();
        let first = requests[0]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            first.starts_with(
                "Your capsule (phuc-loop CNF, seed 002 §4.1):\n{\n  \"acceptance_criteria\": []"
            ),
            "{first}"
        );
        prompts.push(
            requests
                .iter()
                .map(|r| {
                    r["messages"][1]["content"]
                        .as_str()
                        .unwrap()
                        .replace(|c: char| c.is_ascii_hexdigit() || c == '-', "")
                })
                .collect::<Vec<_>>(),
        );
    }
    // Ids and digests differ between runs (fresh UUIDs); with them masked, every prompt is equal.
    assert_eq!(prompts[0], prompts[1]);
    let _ = Capsule::to_json;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_an_endpoint_does_not_report_is_estimated_and_marked() {
    let body = json!({ "choices": [{ "message": { "role": "assistant", "content": format!(r#"<loop xmlns="{GOV}" control="abort"/>"#) } }] });
    let reply = Reply {
        status: 200,
        body: body.to_string(),
        retry_after: None,
        delay: Duration::ZERO,
    };
    let (_, base) = serve_model(vec![reply], None).await;
    let pump = pump(LlmConfig::new(base, "m"), GovernorPolicy::default_budget());
    let thread = run(&pump, &p("ask", "go")).await;
    let counters = pump.thread(thread).unwrap().counters;
    assert_eq!(
        counters.estimated_usage, 1,
        "the one call's usage is marked as an estimate"
    );
    assert!(
        counters.tokens_in > 0 && counters.tokens_out > 0,
        "{counters:?}"
    );
    // The mark survives in the store's delivered marks too.
    let listed = pump.store().threads(None).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .find(|t| t.id == thread)
            .unwrap()
            .counters
            .estimated_usage,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_reported_in_part_is_charged_as_reported_and_estimated_for_the_rest() {
    let body = json!({
        "choices": [{ "message": { "role": "assistant", "content": format!(r#"<loop xmlns="{GOV}" control="abort"/>"#) } }],
        "usage": { "prompt_tokens": 7 }
    });
    let reply = Reply {
        status: 200,
        body: body.to_string(),
        retry_after: None,
        delay: Duration::ZERO,
    };
    let (_, base) = serve_model(vec![reply], None).await;
    let pump = pump(LlmConfig::new(base, "m"), GovernorPolicy::default_budget());
    let thread = run(&pump, &p("ask", "go")).await;
    let counters = pump.thread(thread).unwrap().counters;
    assert_eq!(counters.tokens_in, 7, "the reported half is charged as is");
    assert!(counters.tokens_out > 0, "the missing half is estimated");
    assert_eq!(counters.estimated_usage, 1, "and the call is marked");
}

/// The system notices of a thread other than budget warnings: what went wrong, if anything.
async fn complaints(pump: &PumpHandle, thread: ThreadId) -> Vec<(String, String, String)> {
    notices(pump, thread)
        .await
        .into_iter()
        .filter(|(_, element, code)| element != "halt" && code != "budget-warning")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_answers_the_client_who_asked_after_using_a_tool() {
    let (model, base) = serve_model(
        vec![
            answer(r#"<calc xmlns="urn:agentpump:calc:v1">6 * 7</calc>"#, 50, 10),
            answer(
                &format!(
                    r#"The calculator says 42. <send to="client">{}</send> <loop xmlns="{GOV}" control="done"/>"#,
                    p("answer", "42")
                ),
                80,
                10,
            ),
        ],
        None,
    )
    .await;
    let pump = pump(
        LlmConfig::new(base, "scripted-model"),
        GovernorPolicy::default_budget(),
    );
    let thread = run(&pump, &p("ask", "what is 6 * 7?")).await;
    assert_eq!(complaints(&pump, thread).await, []);
    assert_eq!(egress(&pump, thread).await, [p("answer", "42")]);
    let requests = model.requests.lock().unwrap().clone();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains(r#"<send to="NAME">"#) && system.contains("<reply>"),
        "the protocol teaches addressing: {system}"
    );
    assert!(system.contains("handling now is from `client`"), "{system}");
    let second = requests[1]["messages"][0]["content"].as_str().unwrap();
    assert!(
        second.contains("handling now is from `calculator`"),
        "{second}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_replies_to_the_message_it_is_handling() {
    let (_model, base) = serve_model(
        vec![answer(
            &format!(
                "```xml\n<reply>\n  {}\n</reply>\n```\n<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:LOOP:{{\"control\":\"done\"}}>>>",
                p("answer", "hello")
            ),
            50,
            10,
        )],
        None,
    )
    .await;
    let pump = pump(
        LlmConfig::new(base, "scripted-model"),
        GovernorPolicy::default_budget(),
    );
    let thread = run(&pump, &p("ask", "say hello")).await;
    assert_eq!(complaints(&pump, thread).await, []);
    assert_eq!(egress(&pump, thread).await, [p("answer", "hello")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_address_comes_back_to_the_agent_as_a_precise_notice() {
    let (_model, base) = serve_model(
        vec![
            answer(&format!(r#"<send>{}</send>"#, p("answer", "1")), 50, 10),
            answer(
                &format!(r#"<send to="nobody">{}</send>"#, p("answer", "2")),
                50,
                10,
            ),
            answer(&format!(r#"<loop xmlns="{GOV}" control="abort"/>"#), 50, 10),
        ],
        None,
    )
    .await;
    let pump = pump(
        LlmConfig::new(base, "scripted-model"),
        GovernorPolicy::default_budget(),
    );
    let thread = run(&pump, &p("ask", "?")).await;
    let got = complaints(&pump, thread).await;
    assert_eq!(
        got,
        [
            ("assistant".into(), "huh".into(), "invalid-request".into()),
            ("assistant".into(), "system-error".into(), "no-route".into()),
        ],
        "{got:?}"
    );
    assert_eq!(egress(&pump, thread).await, Vec::<String>::new());
}

/// Issue 13, case 15: the Ask-Loop `HALT` signal "`<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{...}>>>`"
/// (Ask-Loop v2 §3: "the host emits a `HALT` signal and terminates the loop") is what an LLM agent
/// sees in its next prompt when its thread was halted and resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_agent_sees_the_halt_in_ask_loop_text_form() {
    let think = answer(&p("think", "more"), 10, 5);
    let (model, base) = serve_model(vec![], Some(think)).await;
    let budget = Budget {
        turns: Some(2),
        ..GovernorPolicy::default_budget()
    };
    let pump = pump(LlmConfig::new(base, "scripted-model"), budget);
    let thread = run(&pump, &p("ask", "think twice")).await;
    let report = pump.reports(thread).await.unwrap().pop().expect("halted");
    assert_eq!(report.stop_reason, "max-turns");
    // Two turns, and the budget warning (delivered without costing a turn).
    let before = model.requests.lock().unwrap().len();
    assert_eq!(before, 3);
    let one_more = Budget {
        turns: Some(1),
        ..Budget::default()
    };
    pump.resume(thread, &one_more).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), pump.settle(thread))
        .await
        .unwrap();
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests.len(), before + 1, "the one turn the resume added");
    let last = requests[before]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(
        last["content"],
        "from system:\n<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{\"class\":\"TIMEOUT\",\"reason\":\"max-turns\"}>>>"
    );
}

/// Issue 28: "a model that answers its caller with a bare `<answer>` instead of the `<reply>`
/// its prompt teaches gets `huh unknown-root` — but the `<loop control="done">` it wrote beside
/// the answer halts the thread (`done-uncertified`) in the same turn, so it never sees the
/// `huh` and the caller never gets an answer." The `done` is set aside; the model sees the
/// refusal in its next prompt, answers its caller as taught (handling a notice, it addresses
/// `client` by name), and its second `done` stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_beside_a_refused_answer_does_not_stand_and_the_agent_corrects_itself() {
    let (model, base) = serve_model(slip_then_correct(), None).await;
    slips_once_and_recovers(&model, LlmConfig::new(base, "scripted-model")).await;
}

/// Issue 28: the same rule "test[ed] against a real OpenAI-compatible proxy as well as the
/// loopback model": LiteLLM's proxy (PyPI `litellm[proxy]`, pinned in `.ci/run`, found through
/// `AGENTPUMP_LITELLM` or on the PATH) between the agent and the scripted model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_beside_a_refused_answer_does_not_stand_through_a_real_proxy() {
    let (model, upstream) = serve_model(slip_then_correct(), None).await;
    let proxy = support::model::Proxy::start(&upstream, "scripted-model").await;
    slips_once_and_recovers(
        &model,
        LlmConfig::new(proxy.base(), "openai/scripted-model"),
    )
    .await;
}

/// A bare `<answer>` with `done` beside it, then the answer sent to the client and `done`.
fn slip_then_correct() -> Vec<Reply> {
    let done = format!(r#"<loop xmlns="{GOV}" control="done"/>"#);
    vec![
        answer(&format!("{} {done}", p("answer", "42")), 50, 10),
        answer(
            &format!(r#"<send to="client">{}</send> {done}"#, p("answer", "42")),
            60,
            10,
        ),
    ]
}

async fn slips_once_and_recovers(model: &support::model::Model, config: LlmConfig) {
    let pump = pump(config, GovernorPolicy::default_budget());
    let thread = run(&pump, &p("ask", "what is 6 * 7?")).await;
    assert_eq!(
        complaints(&pump, thread).await,
        [
            ("assistant".into(), "huh".into(), "unknown-root".into()),
            (
                "assistant".into(),
                "system-error".into(),
                "done-set-aside".into()
            ),
        ]
    );
    assert_eq!(egress(&pump, thread).await, [p("answer", "42")]);
    let report = pump.reports(thread).await.unwrap().pop().expect("halted");
    assert_eq!(report.class.as_str(), "done-uncertified");
    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "one more model call, no more");
    let second = requests[1].to_string();
    assert!(
        second.contains("unknown-root") && second.contains("does not stand"),
        "the model is told what was refused and that its done waits: {second}"
    );
}

/// The same mistake made again and again is not a way around the budgets: the repeated `done`
/// payload trips the no-progress guard (Ask-Loop v2: "identical control payloads … k times").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_set_aside_again_and_again_halts_no_progress() {
    let wrong = answer(
        &format!(
            r#"{} <loop xmlns="{GOV}" control="done"/>"#,
            p("answer", "42")
        ),
        50,
        10,
    );
    let (model, base) = serve_model(vec![], Some(wrong)).await;
    let pump = pump(
        LlmConfig::new(base, "scripted-model"),
        GovernorPolicy::default_budget(),
    );
    let thread = run(&pump, &p("ask", "what is 6 * 7?")).await;
    let report = pump.reports(thread).await.unwrap().pop().expect("halted");
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("no-progress", "same-control-signal")
    );
    assert_eq!(model.requests.lock().unwrap().len(), 3);
    assert_eq!(egress(&pump, thread).await, Vec::<String>::new());
}

/// Issue 36: "an LLM-driven loop against the loopback model" — three LLM agents in capsule mode
/// play Scout, Solver and Skeptic; each request shows the role exactly the controller's §4.1
/// capsule (the file `evidence/loop/iter_N/cnf_capsule.<role>.json`), and the loop converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_agents_in_capsule_mode_play_a_phuc_loop_to_convergence() {
    use agentpump::listeners::phuc_loop::{
        LOOP_NS, LoopConfig, PhucLoop, Role as LoopRole, role_root,
    };
    let residuals = ["0.5", "0.2", "0.0001"];
    let mut script = Vec::new();
    for (n, r) in residuals.iter().enumerate() {
        let met = n == residuals.len() - 1;
        script.push(answer(
            &format!("My plan:\n<plan xmlns=\"{LOOP_NS}\">refine step {n}</plan>"),
            10,
            5,
        ));
        script.push(answer(&format!("Done.\n<artifacts xmlns=\"{LOOP_NS}\"><artifact path=\"out/step{n}.txt\" role=\"artifact\">value {n}</artifact></artifacts>"), 10, 5));
        script.push(answer(&format!("```xml\n<verdict xmlns=\"{LOOP_NS}\" residual=\"{r}\"><criterion id=\"c1\" met=\"{met}\" evidence=\"out/step{n}.txt\"/><succeeded lane=\"A\" evidence=\"out/step{n}.txt\">step {n} holds</succeeded></verdict>\n```"), 10, 5));
    }
    let (model, base) = serve_model(script, None).await;
    let dir = support::Scratch::new("llm-loop");
    let mut b = PumpBuilder::new();
    for role in [LoopRole::Scout, LoopRole::Solver, LoopRole::Skeptic] {
        let mut config = LlmConfig::new(base.clone(), "scripted-model");
        config.context = ContextMode::Capsule;
        let llm = LlmAgent::new(config, format!("You are the loop's {}.", role.as_str()));
        b = b.register(
            Registration::from_shared(role.as_str(), Arc::new(llm))
                .accepts(role_root(role))
                .role(Role::Agent)
                .peers(["loop"]),
        );
    }
    let controller = PhucLoop::new(LoopConfig::new(
        "scout",
        "solver",
        "skeptic",
        dir.0.join("ws"),
    ))
    .disk_probe(Arc::new(|_| Some(Decimal::new(5, 1))));
    let pump = b.register(controller.registration("loop")).build().unwrap();
    let run = format!(
        r#"<run xmlns="{LOOP_NS}" certificates="CONVERGED DIVERGED" r-p="0.001" max-iterations="5"><goal>make it small</goal><criterion id="c1">the step holds</criterion></run>"#
    );
    let thread = pump.post(None, Some("loop"), &run).await.unwrap().thread();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let report = loop {
        if let Some(r) = pump.reports(thread).await.unwrap().pop() {
            break r;
        }
        assert!(tokio::time::Instant::now() < deadline, "no halt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("CONVERGED", "residual-below-r-p")
    );
    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 9, "one request per role per iteration");
    for (i, request) in requests.iter().enumerate() {
        let role = ["scout", "solver", "skeptic"][i % 3];
        let file = dir.0.join(format!(
            "ws/evidence/loop/iter_{}/cnf_capsule.{role}.json",
            i / 3
        ));
        let capsule = std::fs::read_to_string(&file).unwrap();
        let shown = request["messages"][1]["content"].as_str().unwrap();
        assert!(
            shown.contains(capsule.trim_end()),
            "request {i} shows the {role}'s capsule:\n{shown}\n---\n{capsule}"
        );
        assert!(
            !shown.contains("refine step"),
            "no prior subagent prose: {shown}"
        );
    }
    let md = std::fs::read_to_string(dir.0.join("ws/AGENTS.md")).unwrap();
    assert!(
        md.contains("- [A] step 2 holds (artifact: out/step2.txt#"),
        "{md}"
    );
}

/// "an LLM agent (scripted model on loopback) asking and getting an answer" — it learns `ask`
/// from its prompt, the thread waits, and the person's answer comes back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_asks_a_person_and_goes_on_with_the_answer() {
    let ask = r#"I need a person for this. <call xmlns="urn:agentpump:tool:v1" tool="ask" id="q1"><arg name="question">Which colour?</arg></call>"#;
    let (model, base) = serve_model(
        vec![
            answer(ask, 50, 10),
            answer(
                &format!(
                    r#"<send to="client">{}</send> <loop xmlns="{GOV}" control="done"/>"#,
                    p("answer", "teal it is")
                ),
                80,
                10,
            ),
        ],
        None,
    )
    .await;
    let llm = LlmAgent::new(LlmConfig::new(base, "scripted-model"), "You paint.")
        .with_peer(PeerDoc {
        name: "ask".into(),
        description: "asks a person".into(),
        example:
            r#"<call xmlns="urn:agentpump:tool:v1" tool="ask"><arg name="question">…</arg></call>"#
                .into(),
    });
    let pump = PumpBuilder::new()
        .register(
            Registration::from_shared("assistant", Arc::new(llm))
                .accepts(q("ask"))
                .role(Role::Agent)
                .peers(["ask"]),
        )
        .register(agentpump::ask_tool())
        .build()
        .unwrap();
    let thread = run(&pump, &p("ask", "paint the door")).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Waiting);
    let open = pump
        .inbox(&agentpump::InboxFilter::default())
        .await
        .unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(
        (
            open[0].request.listener.as_str(),
            open[0].request.question.as_str()
        ),
        ("assistant", "Which colour?")
    );
    let value = agentpump::pump::inbox::Decision::Answer {
        value: "teal".into(),
    };
    let reply = agentpump::Reply {
        decision: value,
        by: "dana".into(),
    };
    pump.answer(open[0].id, reply).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), pump.settle(thread))
        .await
        .expect("the thread settles");
    assert_eq!(egress(&pump, thread).await, [p("answer", "teal it is")]);
    let requests = model.requests.lock().unwrap().clone();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains(r#"tool="ask""#) && system.contains("The thread waits"),
        "{system}"
    );
    let second: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        second
            .iter()
            .any(|c| c.starts_with("from ask:") && c.contains("teal") && c.contains("dana")),
        "{second:?}"
    );
}

/// Issue 33: "each delivery's queue wait, handler time, commit time and LLM latency, from what
/// the history records" — the agent's delivery records how long it waited for the model (here
/// at least the model's 150 ms delay), inside its handler time, and the store keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_latency_is_recorded_inside_the_handler_time() {
    let body = json!({ "choices": [{ "message": { "role": "assistant", "content": format!(r#"<loop xmlns="{GOV}" control="abort"/>"#) } }], "usage": { "prompt_tokens": 7, "completion_tokens": 3 } });
    let reply = Reply {
        status: 200,
        body: body.to_string(),
        retry_after: None,
        delay: Duration::from_millis(150),
    };
    let (_, base) = serve_model(vec![reply], None).await;
    let pump = pump(LlmConfig::new(base, "m"), GovernorPolicy::default_budget());
    let thread = run(&pump, &p("ask", "go")).await;
    let marks = pump.store().marks(thread).await.unwrap();
    let asked = marks
        .iter()
        .find(|m| m.listener.as_deref() == Some("assistant") && m.usage.llm_us > 0)
        .expect("the agent's delivery, with its LLM latency");
    let timing = asked.timing.expect("timed");
    assert!(asked.usage.llm_us >= 150_000, "{asked:?}");
    assert!(
        asked.usage.llm_us <= u64::try_from(timing.handled_us - timing.started_us).unwrap(),
        "inside the handler time: {asked:?}"
    );
}
