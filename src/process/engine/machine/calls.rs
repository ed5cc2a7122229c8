//! Calls: what a USE, a PAR's children, a RUN, JOIN and CAPTURE ask of the pump and read back —
//! arguments, ids (deterministic, so a restarted run asks for the same things), sending unless
//! history shows it sent, retries, and answers kept for CAPTURE.

use super::*;

impl Machine {
    /// The next call id, `process-n-h`: `n` the call's ordinal in the run, `h` the first
    /// [`HASH_DIGITS`] hex digits of [`args_hash`] (written without `format!`: one per USE).
    pub(super) fn next_id(&mut self, tool: &str, args: &BTreeMap<String, Value>) -> String {
        self.calls += 1;
        let id = self.id();
        let mut out = String::with_capacity(id.len() + 8 + HASH_DIGITS);
        out.push_str(id);
        out.push('-');
        let mut buf = [0u8; 20]; // u64::MAX has 20 digits
        let (mut n, mut at) = (self.calls, buf.len());
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        out.push_str(std::str::from_utf8(&buf[at..]).expect("ascii digits"));
        out.push('-');
        out.push_str(&args_hash(tool, args));
        out
    }

    /// The arguments of a USE or RUN: its `where:` over the WITH defaults in scope. A call of
    /// a process of this file also names, in [`REDACT_ARG`], the arguments computed from a
    /// sensitive value, which the child redacts in turn.
    pub(super) fn args(
        &self,
        tool: &str,
        params: &[Param],
    ) -> Result<BTreeMap<String, Value>, Value> {
        let mut args = BTreeMap::new();
        let mut sensitive = Vec::new();
        for (k, v, secret) in &self.with {
            args.insert(k.clone(), v.clone());
            if *secret {
                sensitive.push(k.clone());
            }
        }
        for p in params {
            args.insert(p.key.name.clone(), self.value(&p.value)?);
            sensitive.retain(|k| *k != p.key.name);
            if privacy::reads_any(&p.value, &self.redacted) {
                sensitive.push(p.key.name.clone());
            }
        }
        if !sensitive.is_empty() && self.program.index_of(tool).is_some() {
            sensitive.sort();
            let keys = sensitive.into_iter().map(Value::Str).collect();
            args.insert(REDACT_ARG.to_owned(), Value::List(keys));
        }
        Ok(args)
    }

    /// A USE's or RUN's call: its arguments, its id, sent (see [`Machine::send`]); the id.
    pub(super) fn call(
        &mut self,
        tool: &str,
        params: &[Param],
        timeout_ms: Option<u64>,
        par: bool,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<String, Value> {
        let args = self.args(tool, params)?;
        self.call_with(tool, args, timeout_ms, par, span, turn)
    }

    /// [`Machine::call`] with its arguments already evaluated.
    pub(super) fn call_with(
        &mut self,
        tool: &str,
        args: BTreeMap<String, Value>,
        timeout_ms: Option<u64>,
        par: bool,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<String, Value> {
        let id = self.next_id(tool, &args);
        let call = Call {
            tool: tool.to_owned(),
            id: Some(id.clone()),
            timeout_ms,
            args,
        };
        self.send(call, par, span, turn)?;
        Ok(id)
    }

    /// Sends a call (a process of this program runs in a child thread), unless history shows
    /// it sent or answered. A call history holds at the same place with other arguments or
    /// another tool is a divergence: an error no RECOVER handles.
    pub(super) fn send(
        &mut self,
        call: Call,
        par: bool,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<(), Value> {
        let id = call.id.as_deref().unwrap_or_default();
        if let Some(recorded) = turn.known.sent.get(slot(id)) {
            if recorded.id == id {
                return Ok(());
            }
            self.diverged = true;
            let message = format!(
                "history diverged from the process: call {} was `{}` (arguments {}) and is now \
                 `{}` (arguments {}); the run stops rather than reuse or repeat it",
                slot(id),
                recorded.tool,
                match hash_of(&recorded.id) {
                    "" => "unhashed",
                    h => h,
                },
                call.tool,
                hash_of(id),
            );
            return Err(error("history-diverged", message, span));
        }
        if turn.known.answers.contains_key(id) {
            return Ok(());
        }
        let child = par || self.program.index_of(&call.tool).is_some();
        turn.effects.push(Effect::Call { call, child });
        Ok(())
    }

    /// USE outside PAR: send once, wait, retry what may be retried, keep the answer.
    pub(super) fn use_(&mut self, u: &Use, span: Span, turn: &mut Turn<'_>) -> Result<Flow, Value> {
        let tool = &u.tool.name;
        if self.pending.is_none() {
            let id = self.call(tool, &u.params, timeout(u), false, span, turn)?;
            self.pending = Some(Pending { id, attempt: 0 });
        }
        // A repeat's answer may be known already (a restart reads them all from history).
        let answer = loop {
            let pending = self.pending.as_ref().expect("set above");
            let Some(answer) = turn.known.answers.remove(&pending.id) else {
                return Ok(Flow::Wait);
            };
            let Answer::Error(e) = &*answer else {
                break answer;
            };
            if !Retry::of(u).allows(e, pending.attempt) {
                self.pending = None;
                return Err(tool_error(tool, e.kind.as_str(), &e.message, span));
            }
            let attempt = pending.attempt + 1;
            let id = self.call(tool, &u.params, timeout(u), false, span, turn)?;
            self.pending = Some(Pending { id, attempt });
        };
        self.pending = None;
        match self.last.get_mut(tool) {
            Some(slot) => *slot = answer,
            None => {
                self.last.insert(tool.clone(), answer);
            }
        }
        Ok(Flow::Next)
    }

    /// RUN: the process in a child thread; its RETURN's symbols come back bound.
    pub(super) fn run_process(
        &mut self,
        process: &str,
        params: &[Param],
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Flow, Value> {
        if self.pending.is_none() {
            let id = self.call(process, params, None, false, span, turn)?;
            self.pending = Some(Pending { id, attempt: 0 });
        }
        let id = &self.pending.as_ref().expect("set above").id;
        let Some(answer) = turn.known.answers.remove(id) else {
            return Ok(Flow::Wait);
        };
        self.pending = None;
        match &*answer {
            Answer::Error(e) => Err(tool_error(process, e.kind.as_str(), &e.message, span)),
            Answer::Result(r) => {
                // What a child computed from a sensitive argument is sensitive here too.
                let secret = self.with.iter().any(|(.., s)| *s)
                    || params
                        .iter()
                        .any(|p| privacy::reads_any(&p.value, &self.redacted));
                for (k, v) in &r.fields {
                    if is_symbol(k) {
                        if secret {
                            self.redacted.insert(k.clone());
                        }
                        self.bind(k, v.clone(), turn);
                    }
                }
                self.last.insert(process.to_owned(), answer);
                Ok(Flow::Next)
            }
        }
    }

    /// JOIN: every PAR child answered; a child that failed and may be repeated (its USE's
    /// `retry`, `atomic`) is called again, all such children at once in lexical order once
    /// every child answered (so a restart assigns the same ids); a hard failure is one
    /// composite error (the first in lexical order, the rest `suppressed`); else the captures,
    /// in lexical order, and each tool's answer is its last for a CAPTURE after the JOIN.
    pub(super) fn join(
        &mut self,
        captures: &[Capture],
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Flow, Value> {
        // A repeat's answer may be known already (a restart reads them all from history).
        let answers = loop {
            let mut answers = Vec::new();
            for c in &self.par {
                match turn.known.answers.get(&c.id) {
                    Some(a) => answers.push((c.tool.clone(), Arc::clone(a))),
                    None => return Ok(Flow::Wait),
                }
            }
            if !self.repeat_failed(&answers, span, turn)? {
                break answers;
            }
        };
        let par = std::mem::take(&mut self.par);
        self.event(
            Event::Join {
                children: par.len(),
                line: span.line,
            },
            turn,
        );
        let mut errors = answers.iter().filter_map(|(tool, a)| match &**a {
            Answer::Error(e) => Some(tool_error(tool, e.kind.as_str(), &e.message, span)),
            Answer::Result(_) => None,
        });
        if let Some(first) = errors.next() {
            let suppressed: Vec<Value> = errors.collect();
            let mut first = first;
            if let Value::Object(m) = &mut first {
                m.insert("suppressed".into(), Value::List(suppressed));
            }
            return Err(first);
        }
        for (tool, answer) in &answers {
            self.last.insert(tool.clone(), Arc::clone(answer));
        }
        // The k-th CAPTURE from a tool reads the k-th PAR USE of that tool.
        let mut used: BTreeMap<&str, usize> = BTreeMap::new();
        for c in captures {
            let n = used.entry(c.tool.name.as_str()).or_insert(0);
            let answer = answers
                .iter()
                .filter(|(t, _)| *t == c.tool.name)
                .nth(*n)
                .map(|(_, a)| Arc::clone(a));
            *n += 1;
            if answer.is_none() {
                return Err(coded(
                    Code::ConcurrencyPolicy,
                    format!(
                        "JOIN captures from `{}`, which no PAR USE launched",
                        c.tool.name
                    ),
                    span,
                ));
            }
            self.capture(c, answer.as_deref(), span, turn)?;
        }
        Ok(Flow::Next)
    }

    /// Calls again, in lexical order, each PAR child whose failure its USE may repeat;
    /// whether any was.
    pub(super) fn repeat_failed(
        &mut self,
        answers: &[(String, Arc<Answer>)],
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<bool, Value> {
        let mut repeated = false;
        for (i, (_, answer)) in answers.iter().enumerate() {
            let Answer::Error(e) = &**answer else {
                continue;
            };
            let child = &self.par[i];
            if !child.retry.allows(e, child.attempt) {
                continue;
            }
            let (tool, args, timeout_ms) =
                (child.tool.clone(), child.args.clone(), child.timeout_ms);
            let id = self.call_with(&tool, args, timeout_ms, true, span, turn)?;
            let child = &mut self.par[i];
            child.id = id;
            child.attempt += 1;
            repeated = true;
        }
        Ok(repeated)
    }

    /// CAPTURE: binds symbols from an answer's fields through the map's paths.
    pub(super) fn capture(
        &mut self,
        c: &Capture,
        answer: Option<&Answer>,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<(), Value> {
        let tool = &c.tool.name;
        let fields = match answer {
            Some(Answer::Result(r)) => &r.fields,
            Some(Answer::Error(e)) => {
                return Err(tool_error(tool, e.kind.as_str(), &e.message, span));
            }
            None => {
                return Err(coded(
                    Code::CaptureMissing,
                    format!("CAPTURE from `{tool}`, which has not answered here"),
                    span,
                ));
            }
        };
        if c.map.is_empty() {
            if let [only] = c.symbols.as_slice() {
                self.bind(&only.name, Value::Object(fields.clone()), turn);
                return Ok(());
            }
            for s in &c.symbols {
                let v = fields
                    .get(&s.name.to_ascii_lowercase())
                    .cloned()
                    .ok_or_else(|| {
                        coded(
                            Code::CapturePathError,
                            format!("`{tool}` returned no field {}", s.name.to_ascii_lowercase()),
                            s.span,
                        )
                    })?;
                self.bind(&s.name, v, turn);
            }
            return Ok(());
        }
        for entry in &c.map {
            match follow(fields, &entry.path.segs) {
                Some(v) => self.bind(&entry.symbol.name, v, turn),
                None if entry.path.optional => {}
                None => {
                    return Err(coded(
                        Code::CapturePathError,
                        format!("`{tool}`'s result has nothing at \"{}\"", entry.path),
                        entry.path.span,
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The hash a call id carries: sha256 over the tool's name, then each argument's name and
/// compact JSON value (numbers normalized) in name order, each followed by a NUL byte; its
/// first [`HASH_DIGITS`] hex digits.
pub(super) fn args_hash(tool: &str, args: &BTreeMap<String, Value>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0u8]);
    let mut json = String::new();
    for (k, v) in args {
        h.update(k.as_bytes());
        h.update([0u8]);
        json.clear();
        v.append_json(&mut json);
        h.update(json.as_bytes());
        h.update([0u8]);
    }
    let digest = h.finalize();
    hex::encode(&digest[..HASH_DIGITS / 2])
}

/// A USE's `timeout_ms`, passed on its call.
pub(super) fn timeout(u: &Use) -> Option<u64> {
    let (n, _) = u.modifiers.as_ref()?.timeout_ms?;
    u64::try_from(n.trunc().mantissa()).ok()
}

pub(super) fn tool_error(tool: &str, kind: &str, message: &str, span: Span) -> Value {
    let mut v = error(kind, message, span);
    if let Value::Object(m) = &mut v {
        m.insert("tool".into(), Value::Str(tool.to_owned()));
    }
    v
}

/// The value at `segs` in a result's fields (no segment: the fields as one object), copied;
/// only what the path reaches is copied.
pub(super) fn follow(fields: &BTreeMap<String, Value>, segs: &[PathSeg]) -> Option<Value> {
    let Some((PathSeg::Field(first), rest)) = segs.split_first() else {
        return segs.is_empty().then(|| Value::Object(fields.clone()));
    };
    let mut at = fields.get(first)?;
    for seg in rest {
        at = match (seg, at) {
            (PathSeg::Field(name), Value::Object(m)) => m.get(name)?,
            (PathSeg::Index(i), Value::List(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(at.clone())
}
