//! cargo run --example llm_agent -- --base-url http://127.0.0.1:11434/v1 --model llama3.2 [--api-key-env OPENAI_API_KEY] ["question"]
//!
//! An LLM agent with a calculator tool, against any OpenAI-compatible chat-completions endpoint
//! (Ollama, vLLM, llama.cpp server, OpenAI, LiteLLM). Prints the thread's transcript and, if the
//! governor halted it, the halting report.

use std::sync::Arc;

use agentpump::history::export;
use agentpump::listeners::Calculator;
use agentpump::listeners::llm::{LlmAgent, LlmConfig, PeerDoc};
use agentpump::{PumpBuilder, QName, Registration, Role};

const NS: &str = "urn:agentpump:assistant:v1";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut base_url, mut model, mut key, mut question) = (None, None, None, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--base-url" => base_url = args.next(),
            "--model" => model = args.next(),
            "--api-key-env" => key = args.next(),
            _ => question = Some(arg),
        }
    }
    let (Some(base_url), Some(model)) = (base_url, model) else {
        eprintln!(
            "usage: llm_agent --base-url URL --model NAME [--api-key-env VAR] [\"question\"]"
        );
        std::process::exit(2);
    };
    let mut config = LlmConfig::new(base_url, model);
    config.api_key_env = key;
    let definition = include_str!("../listeners/assistant/definition.md");
    let calculator = PeerDoc {
        name: "calculator".into(),
        description: "evaluates arithmetic exactly, in decimals".into(),
        example: r#"<calc xmlns="urn:agentpump:calc:v1">(1 + 2) / 4</calc>"#.into(),
    };
    let agent = LlmAgent::new(config, definition).with_peer(calculator);
    let pump = PumpBuilder::new()
        .register(Registration::new("calculator", Calculator).accepts(Calculator::root()))
        .register(
            Registration::from_shared("assistant", Arc::new(agent))
                .accepts(QName::new(NS, "question"))
                .accepts(QName::new(NS, "think"))
                .role(Role::Agent)
                .peers(["calculator"]),
        )
        .build()?;
    let question = question.unwrap_or_else(|| "What is 17.5% of 1234.56?".into());
    let payload = format!(
        "<question xmlns=\"{NS}\">{}</question>",
        quick_xml::escape::escape(question.as_str())
    );
    let thread = pump.post(None, Some("assistant"), &payload).await?.thread();
    pump.settle(thread).await;
    print!("{}", export::transcript(&pump.history(thread).await?, 0));
    for report in pump.reports(thread).await? {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}
