//! [`TypedListener`] and its adapter [`Typed`]: listeners that take a `serde::Deserialize` payload
//! and answer with a `serde::Serialize` value.

use async_trait::async_trait;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Context, Delivery, Listener, ListenerError};

/// A listener written in terms of types: the payload is deserialized into `Input`, and the
/// returned `Output` is serialized under [`TypedListener::OUTPUT_ROOT`] and sent back to the sender.
///
/// A payload that does not fit `Input` gets `huh code="invalid-payload"`. System notices
/// (`huh`, `system-error`, …) are not inputs and are skipped.
///
/// # Example
///
/// ```
/// use agentpump::{Context, ListenerError, TypedListener};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize)]
/// struct Add { a: i64, b: i64 }
/// #[derive(Serialize)]
/// struct Sum { value: i64 }
///
/// struct Adder;
///
/// #[async_trait::async_trait]
/// impl TypedListener for Adder {
///     type Input = Add;
///     type Output = Sum;
///     const OUTPUT_ROOT: (&'static str, &'static str) = ("urn:example:calc:v1", "sum");
///     async fn call(&self, add: Add, _cx: &mut Context) -> Result<Sum, ListenerError> {
///         Ok(Sum { value: add.a + add.b })
///     }
/// }
/// ```
#[async_trait]
pub trait TypedListener: Send + Sync + 'static {
    /// What the payload deserializes into.
    type Input: DeserializeOwned + Send;
    /// What the answer serializes from.
    type Output: Serialize + Send;
    /// Namespace URI and local name of the answer's root element.
    const OUTPUT_ROOT: (&'static str, &'static str);

    /// Handles one typed input.
    ///
    /// # Errors
    ///
    /// As [`Listener::handle`].
    async fn call(
        &self,
        input: Self::Input,
        cx: &mut Context,
    ) -> Result<Self::Output, ListenerError>;
}

/// Adapts a [`TypedListener`] into a [`Listener`].
#[derive(Debug, Clone)]
pub struct Typed<L>(pub L);

#[async_trait]
impl<L: TypedListener> Listener for Typed<L> {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let input = msg.decode::<L::Input>()?;
        let output = self.0.call(input, cx).await?;
        let (namespace, local) = L::OUTPUT_ROOT;
        cx.reply(to_xml(&output, namespace, local)?);
        Ok(())
    }
}

/// Serializes `value` as an element `local` in `namespace` (declared as the default namespace).
///
/// # Errors
///
/// [`ListenerError::Failed`] when serde cannot serialize the value as XML.
///
/// # Example
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Sum { value: i64 }
/// let xml = agentpump::listener::to_xml(&Sum { value: 3 }, "urn:example:calc:v1", "sum")?;
/// assert_eq!(xml, r#"<sum xmlns="urn:example:calc:v1"><value>3</value></sum>"#);
/// # Ok::<(), agentpump::ListenerError>(())
/// ```
pub fn to_xml<T: Serialize>(
    value: &T,
    namespace: &str,
    local: &str,
) -> Result<String, ListenerError> {
    let body = quick_xml::se::to_string_with_root(local, value)
        .map_err(|e| ListenerError::failed(format!("cannot serialize <{local}>: {e}")))?;
    let split = 1 + local.len();
    if body.get(1..split).is_none_or(|name| name != local) {
        let message =
            format!("<{local}> serialized to `{body}`, not an element; wrap it in a struct");
        return Err(ListenerError::failed(message));
    }
    let ns = quick_xml::escape::escape(namespace);
    Ok(format!(
        "{} xmlns=\"{ns}\"{}",
        &body[..split],
        &body[split..]
    ))
}
