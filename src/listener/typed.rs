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
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, ListenerError, PumpBuilder, QName, Registration, Typed, TypedListener};
    /// #[derive(serde::Deserialize)]
    /// struct Add { a: i64, b: i64 }
    /// #[derive(serde::Serialize)]
    /// struct Sum { value: i64 }
    /// struct Adder;
    /// #[agentpump::async_trait]
    /// impl TypedListener for Adder {
    ///     type Input = Add;
    ///     type Output = Sum;
    ///     const OUTPUT_ROOT: (&'static str, &'static str) = ("urn:example:calc:v1", "sum");
    ///     async fn call(&self, add: Add, _cx: &mut Context) -> Result<Sum, ListenerError> {
    ///         Ok(Sum { value: add.a + add.b })
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let add = QName::new("urn:example:calc:v1", "add");
    /// let pump = PumpBuilder::new().register(Registration::new("adder", Typed(Adder)).accepts(add)).build()?;
    /// let thread = pump.post(None, None, r#"<add xmlns="urn:example:calc:v1"><a>1</a><b>2</b></add>"#).await?.thread();
    /// pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<sum xmlns="urn:example:calc:v1"><value>3</value></sum>"#);
    /// # Ok(())
    /// # }
    /// ```
    async fn call(
        &self,
        input: Self::Input,
        cx: &mut Context,
    ) -> Result<Self::Output, ListenerError>;
}

/// Adapts a [`TypedListener`] into a [`Listener`].
///
/// # Example
///
/// ```
/// # use agentpump::{Context, ListenerError, PumpBuilder, QName, Registration, Typed, TypedListener};
/// #[derive(serde::Deserialize)]
/// struct Shout { #[serde(rename = "$text")] text: String }
/// #[derive(serde::Serialize)]
/// struct Loud { #[serde(rename = "$text")] text: String }
/// struct Upper;
/// #[agentpump::async_trait]
/// impl TypedListener for Upper {
///     type Input = Shout;
///     type Output = Loud;
///     const OUTPUT_ROOT: (&'static str, &'static str) = ("urn:example:v1", "loud");
///     async fn call(&self, shout: Shout, _cx: &mut Context) -> Result<Loud, ListenerError> {
///         Ok(Loud { text: shout.text.to_uppercase() })
///     }
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let shout = QName::new("urn:example:v1", "shout");
/// let pump = PumpBuilder::new().register(Registration::new("upper", Typed(Upper)).accepts(shout)).build()?;
/// let thread = pump.post(None, None, r#"<shout xmlns="urn:example:v1">hi</shout>"#).await?.thread();
/// pump.settle(thread).await;
/// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<loud xmlns="urn:example:v1">HI</loud>"#);
/// let wrong = pump.post(Some(thread), None, r#"<shout xmlns="urn:example:v1"><a/></shout>"#).await?;
/// # pump.settle(thread).await;
/// let answer = pump.history(thread).await?.pop().expect("an answer");
/// assert_eq!(answer.in_reply_to, Some(wrong.ids()[0]));
/// # Ok(())
/// # }
/// ```
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
