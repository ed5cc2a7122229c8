//! Routing decisions: who may receive a payload from whom. Pure functions of the registrations;
//! no thread state is touched here.

use std::sync::Arc;

use smallvec::{SmallVec, smallvec};

use std::collections::HashMap;

use crate::listener::{Registration, Target};
use crate::system::{
    CLIENT_SENDER, ErrorCode, HuhCode, SYSTEM_SENDER, SystemMessage, is_reserved_namespace,
};
use crate::tool::{Answer, Call, TOOL_NS};
use crate::{EnvelopeError, Payload, QName};

/// The listeners a payload goes to, by index, in registration order (rarely more than a few).
pub(crate) type Targets = SmallVec<[usize; 4]>;

/// Who produced a payload.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sender<'a> {
    /// A registered listener (index), handling a message from `caller`.
    Listener { index: usize, caller: &'a str },
    /// Someone outside the pump.
    Client,
}

/// Where a payload goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// To these listeners, in registration order.
    Listeners(Targets),
    /// Out of the pump, to the outside sender of the thread.
    Client,
}

/// A refusal: the notice the sender gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `<huh>`: the payload failed to parse, validate or route.
    Huh(HuhCode, String),
    /// `<system-error>`: the delivery is not allowed or not possible.
    Error(ErrorCode, String),
}

impl Refusal {
    /// `<huh>` for a payload that did not parse.
    pub(crate) fn unparsed(err: &EnvelopeError) -> Self {
        Self::Huh(huh_code(err), err.to_string())
    }

    /// The notice that answers the refused payload `original`.
    pub(crate) fn into_notice(self, original: String) -> SystemMessage {
        match self {
            Self::Huh(code, message) => SystemMessage::Huh {
                code,
                message,
                original,
            },
            Self::Error(code, message) => SystemMessage::Error { code, message },
        }
    }
}

/// The routing tables: every listener's registration by index, its index by name, and the
/// listeners of each root in registration order. Built once by the builder; never changes.
#[derive(Debug)]
pub(crate) struct Routes {
    /// The pump's own sender names (`system`, `governor`, `client`), shared by every record to
    /// or from them: names no listener may take.
    pub names: super::Names,
    listeners: Vec<Registration>,
    by_name: HashMap<Arc<str>, usize>,
    by_root: HashMap<QName, Vec<usize>>,
    /// Every accepted root as `{namespace}name (by listener, …)`, in root order: what a refusal
    /// of a root no listener accepts names instead (built once, not per refusal).
    accepted: Vec<(QName, String)>,
}

impl std::ops::Index<usize> for Routes {
    type Output = Registration;

    fn index(&self, index: usize) -> &Registration {
        &self.listeners[index]
    }
}

impl Routes {
    /// The tables of validated registrations (`builder::validate` made the maps).
    pub(crate) fn new(
        listeners: Vec<Registration>,
        by_name: HashMap<Arc<str>, usize>,
        by_root: HashMap<QName, Vec<usize>>,
    ) -> Self {
        let mut accepted: Vec<(QName, String)> = by_root
            .iter()
            .map(|(q, indexes)| {
                let names: Vec<&str> = indexes.iter().map(|&i| &*listeners[i].name).collect();
                (q.clone(), format!("{q} (by {})", names.join(", ")))
            })
            .collect();
        accepted
            .sort_by(|(a, _), (b, _)| (a.namespace(), a.local()).cmp(&(b.namespace(), b.local())));
        Self {
            names: super::Names::new(),
            listeners,
            by_name,
            by_root,
            accepted,
        }
    }

    /// How many listeners are registered.
    pub(crate) fn len(&self) -> usize {
        self.listeners.len()
    }

    /// The index of the listener named `name`.
    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Decides where a payload with root `root` goes when `sender` aims it at `target`.
    pub(crate) fn route(
        &self,
        sender: Sender<'_>,
        target: &Target,
        root: &QName,
    ) -> Result<Route, Refusal> {
        if is_reserved_namespace(root.namespace()) {
            return Err(Refusal::Huh(
                HuhCode::ReservedNamespace,
                format!("{root} is in a namespace only the pump handles"),
            ));
        }
        match target {
            Target::Reply => self.route_reply(sender),
            Target::Listener(name) => self.route_direct(sender, name, root),
            Target::Route => self.route_by_root(sender, root),
        }
    }

    fn route_reply(&self, sender: Sender<'_>) -> Result<Route, Refusal> {
        let caller = match sender {
            Sender::Listener { caller, .. } => caller,
            Sender::Client => return Err(no_route("an outside sender has no one to reply to")),
        };
        match caller {
            CLIENT_SENDER => Ok(Route::Client),
            SYSTEM_SENDER => Err(no_route(
                "a system notice cannot be answered; emit or send instead",
            )),
            name => self
                .by_name
                .get(name)
                .map(|&i| Route::Listeners(smallvec![i]))
                .ok_or_else(|| no_route(&format!("the caller `{name}` is not a listener"))),
        }
    }

    fn route_direct(&self, sender: Sender<'_>, name: &str, root: &QName) -> Result<Route, Refusal> {
        if name == CLIENT_SENDER {
            return match sender {
                Sender::Listener { .. } => Ok(Route::Client),
                Sender::Client => Err(no_route("an outside sender cannot address `client`")),
            };
        }
        let Some(&index) = self.by_name.get(name) else {
            return Err(no_route(&format!("no listener is named `{name}`")));
        };
        // A tool's answer goes back to whoever called, like a reply: whatever its roots and
        // peers (a process answers its starter long after the start was delivered).
        if root.namespace() == TOOL_NS && matches!(root.local(), "result" | "error") {
            return Ok(Route::Listeners(smallvec![index]));
        }
        if !self.listeners[index].accepts.contains(root) {
            return Err(no_route(&format!(
                "listener `{name}` does not accept {root}"
            )));
        }
        if !self.may_address(sender, index) {
            return Err(Refusal::Error(
                ErrorCode::PeerNotAllowed,
                format!("`{name}` is not a peer of `{}`", self.sender_name(sender)),
            ));
        }
        Ok(Route::Listeners(smallvec![index]))
    }

    fn route_by_root(&self, sender: Sender<'_>, root: &QName) -> Result<Route, Refusal> {
        let Some(candidates) = self.by_root.get(root) else {
            return Err(Refusal::Huh(
                HuhCode::UnknownRoot,
                format!(
                    "no listener accepts {root}; {}",
                    self.accepted_instead(root)
                ),
            ));
        };
        let allowed: Targets = candidates
            .iter()
            .copied()
            .filter(|&i| self.may_address(sender, i))
            .collect();
        if allowed.is_empty() {
            let names: Vec<&str> = candidates
                .iter()
                .map(|&i| &*self.listeners[i].name)
                .collect();
            return Err(Refusal::Error(
                ErrorCode::PeerNotAllowed,
                format!(
                    "`{}` may not address {root}, accepted by {}; add one of them to its peers",
                    self.sender_name(sender),
                    names.join(", ")
                ),
            ));
        }
        Ok(Route::Listeners(allowed))
    }

    /// What to send instead of `root`, which no listener accepts: the roots of the same name in
    /// another namespace (a payload is matched by namespace and name), else a few of the roots
    /// listeners accept, each `{namespace}name (by listener)`.
    fn accepted_instead(&self, root: &QName) -> String {
        let same: Vec<&(QName, String)> = self
            .accepted
            .iter()
            .filter(|(q, _)| q.local() == root.local())
            .collect();
        if let Some((first, _)) = same.first() {
            let list: Vec<&str> = same.iter().map(|(_, by)| by.as_str()).collect();
            return format!(
                "a root is matched by namespace and name, and {} is accepted as {}: give it xmlns=\"{}\"",
                root.local(),
                list.join(", "),
                first.namespace()
            );
        }
        const SHOWN: usize = 5;
        let list: Vec<&str> = self
            .accepted
            .iter()
            .take(SHOWN)
            .map(|(_, by)| by.as_str())
            .collect();
        match self.accepted.len() {
            0 => "no listener accepts any root by itself".to_owned(),
            n if n > SHOWN => format!("listeners accept {}, … ({n} roots in all)", list.join(", ")),
            _ => format!("listeners accept {}", list.join(", ")),
        }
    }

    /// Outside senders may address anyone; a listener may address itself, its caller and its peers.
    fn may_address(&self, sender: Sender<'_>, target: usize) -> bool {
        match sender {
            Sender::Client => true,
            Sender::Listener { index, caller } => {
                let me = &self.listeners[index];
                let name = &self.listeners[target].name;
                index == target
                    || **name == *caller
                    || me.peers.iter().any(|p| Arc::ptr_eq(p, name) || p == name)
            }
        }
    }

    fn sender_name(&self, sender: Sender<'_>) -> &str {
        match sender {
            Sender::Listener { index, .. } => &self.listeners[index].name,
            Sender::Client => CLIENT_SENDER,
        }
    }
}

fn no_route(message: &str) -> Refusal {
    Refusal::Error(ErrorCode::NoRoute, message.to_owned())
}

/// The refusal of a payload that carries an element only the pump may emit below its root.
pub(crate) fn smuggled(payload: &crate::Payload) -> Option<Refusal> {
    payload.carries_reserved_element().then(|| {
        let message = format!(
            "{} carries an element in a namespace only the pump emits",
            payload.qname()
        );
        Refusal::Huh(HuhCode::ReservedNamespace, message)
    })
}

/// The `huh` code for a payload that failed to parse.
pub(crate) fn huh_code(err: &EnvelopeError) -> HuhCode {
    match err {
        EnvelopeError::TooLarge { .. }
        | EnvelopeError::TooDeep { .. }
        | EnvelopeError::TooManyAttributes { .. }
        | EnvelopeError::TooManyNamespaces { .. } => HuhCode::LimitExceeded,
        EnvelopeError::Doctype { .. } => HuhCode::ForbiddenDtd,
        EnvelopeError::UnknownEntity { .. } => HuhCode::UnknownEntity,
        EnvelopeError::UnknownPrefix { .. } => HuhCode::UnknownPrefix,
        EnvelopeError::NoPayload => HuhCode::NoPayload,
        _ => HuhCode::MalformedXml,
    }
}

/// A payload checked against the tool protocol when it is in [`TOOL_NS`], from a listener or
/// from outside: `Some` target when a call routed by its root goes to the tool it names,
/// `None` to keep the target asked for, a refusal naming the fault of a malformed one.
pub(crate) fn tool_checked(payload: &Payload, target: &Target) -> Result<Option<Target>, Refusal> {
    if payload.qname().namespace() != TOOL_NS {
        return Ok(None);
    }
    tool_target(payload, target).map_err(|message| Refusal::Huh(HuhCode::InvalidPayload, message))
}

/// A tool-protocol payload checked against the protocol (zero trust: a malformed call or
/// answer is refused here, naming the fault). A `call` routed by its root goes to the listener
/// its `tool` attribute names — the one tool it calls, not every listener of the root.
fn tool_target(payload: &Payload, target: &Target) -> Result<Option<Target>, String> {
    let local = payload.qname().local();
    if local == "call" {
        // Read once: the tool that receives the payload shares this reading.
        let call = Call::shared(payload).map_err(|e| e.to_string())?;
        return Ok((*target == Target::Route).then(|| Target::Listener(call.tool.clone())));
    }
    match Answer::shared(payload) {
        Some(Ok(_)) => Ok(None),
        Some(Err(e)) => Err(e.to_string()),
        None => Err(format!(
            "<{local}> is not a message of {TOOL_NS}: expected <call>, <result> or <error>"
        )),
    }
}
