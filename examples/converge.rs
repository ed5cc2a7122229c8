//! cargo run --example converge
//!
//! An agent iterates by messaging itself toward √2 with Newton's method in exact decimals,
//! reporting its residual |x² − 2| to the governor each turn. The governor halts the thread with
//! a CONVERGED certificate once the residual is below the goal's r-p, and the example prints the
//! halting report.

use agentpump::governor::{CertificateType, Goal};
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration, Role,
};
use rust_decimal::Decimal;

const NS: &str = "urn:example:newton:v1";

/// `<guess>x</guess>`: reports |x² − 2| and emits the next guess (x + 2/x) / 2.
struct Newton;

#[async_trait::async_trait]
impl Listener for Newton {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        #[derive(serde::Deserialize)]
        struct Guess {
            #[serde(rename = "$text")]
            x: Decimal,
        }
        if msg.is_system() {
            return Ok(());
        }
        if msg.qname().local() == "start" {
            let goal = Goal {
                text: "the square root of 2 to 20 decimal places".into(),
                certificates: vec![CertificateType::Converged, CertificateType::Diverged],
                r_p: Some(Decimal::new(1, 20)),
                ..Goal::default()
            };
            cx.goal(&goal);
            cx.emit(format!(r#"<guess xmlns="{NS}">1</guess>"#));
            return Ok(());
        }
        let Guess { x } = msg.decode()?;
        let two = Decimal::TWO;
        cx.residual((x * x - two).abs());
        cx.emit(format!(
            r#"<guess xmlns="{NS}">{}</guess>"#,
            ((x + two / x) / two).normalize()
        ));
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pump = PumpBuilder::new()
        .register(
            Registration::new("newton", Newton)
                .accepts(QName::new(NS, "start"))
                .accepts(QName::new(NS, "guess"))
                .role(Role::Agent)
                .description("approaches √2 by Newton's method"),
        )
        .build()?;
    let thread = pump
        .post(None, None, &format!(r#"<start xmlns="{NS}"/>"#))
        .await?
        .thread();
    pump.settle(thread).await;
    for report in pump.reports(thread).await? {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}
