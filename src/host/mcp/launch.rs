//! How a stdio `[[mcp]]` server is started: which program (looked up on the host's `PATH`,
//! as a shell would) and with which environment (the few variables every MCP host passes,
//! plus the table's `env`).
//!
//! The child's environment is cleared, so a bare name such as `npx` or `agentpump` cannot be
//! looked up by the child's own `PATH`: the host finds it first
//! ([`locate`](crate::listeners::command::locate)), and a program it cannot find is an error
//! naming every folder it searched.

/// The variables a stdio server inherits from the host whether or not `env` names them: those
/// the official MCP SDKs pass (TypeScript's and Python's `DEFAULT_INHERITED_ENV_VARS`), so a
/// server behaves as it does under Claude Desktop or Cursor (`npx` finds `node` on `PATH`).
pub const INHERITED: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The environment of a stdio server: each of [`INHERITED`] and each of `named` that the
/// host has, in that order, each once.
pub fn environment(
    named: &[String],
    host: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = Vec::new();
    let names = INHERITED
        .iter()
        .copied()
        .chain(named.iter().map(String::as_str));
    for name in names {
        if vars.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        if let Some(value) = host(name) {
            vars.push((name.to_owned(), value));
        }
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_the_inherited_few_and_the_named_each_once() {
        let host = |name: &str| match name {
            "PATH" => Some("/bin".to_owned()),
            "HOME" => Some("/home/u".to_owned()),
            "TOKEN" => Some("t".to_owned()),
            _ => None,
        };
        let env = environment(&["TOKEN".into(), "PATH".into(), "UNSET".into()], host);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["HOME", "PATH", "TOKEN"]);
    }
}
