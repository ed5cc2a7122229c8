//! [`Echo`]: answers every payload with itself.

use async_trait::async_trait;

use crate::{Context, Delivery, Listener, ListenerError};

/// Replies to the sender with the payload it received, byte for byte. System notices are ignored.
///
/// # Example
///
/// ```
/// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
/// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
/// pump.settle(thread).await;
/// let answer = &pump.history(thread).await?[1];
/// assert_eq!((&*answer.from, &*answer.payload), ("echo", r#"<say xmlns="urn:example:say:v1">hi</say>"#));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

#[async_trait]
impl Listener for Echo {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if !msg.is_system() {
            cx.reply(msg.payload().as_str());
        }
        Ok(())
    }
}
