//! `[[mcp]]`: an MCP server an organism uses as a source of tools, as written and as checked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// How long one call of an MCP tool may take when `timeout_ms` is not set (30 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// One `[[mcp]]` table, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// The server's name: its tools register as `NAME.TOOL`.
    pub name: String,
    /// A stdio server: the program and its arguments.
    pub command: Option<Vec<String>>,
    /// A Streamable HTTP server: its endpoint (`http://127.0.0.1:8931/mcp`).
    pub url: Option<String>,
    /// HTTP headers sent with every request to `url`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The environment variable holding a bearer token for `url`.
    pub token_env: Option<String>,
    /// The tools to register (default: every tool the server lists).
    pub tools: Option<Vec<String>>,
    /// How long one call may take, in milliseconds (default 30 000).
    pub timeout_ms: Option<u64>,
    /// Environment variables passed to a stdio server, beside those every stdio server
    /// inherits (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, as the official MCP SDKs
    /// pass them); default: none more.
    #[serde(default)]
    pub env: Vec<String>,
    /// The stdio server's working directory, relative to the organism file (default: its
    /// folder).
    pub cwd: Option<PathBuf>,
}

/// How the host reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on its standard input and output.
    Stdio {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// The variables passed through, with their values when the host has them.
        env: Vec<(String, String)>,
        /// The working directory.
        cwd: PathBuf,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Headers for every request.
        headers: BTreeMap<String, String>,
        /// A bearer token, read from `token_env`.
        token: Option<String>,
    },
}

/// A checked `[[mcp]]` table: what [`Connection`](super::Connection) needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The server's name.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// The allow list, if the table has one.
    pub tools: Option<Vec<String>>,
    /// How long one call may take.
    pub timeout: Duration,
}

impl McpSection {
    /// Checks the table and reads what it names from the environment (`env`, `token_env`).
    ///
    /// # Errors
    ///
    /// A message naming the key at fault: a name that cannot prefix tool names, neither or
    /// both of `command` and `url`, an empty `command`, an unset `token_env`, HTTP settings
    /// on a stdio server.
    pub fn check(&self, base: &Path) -> Result<ServerConfig, String> {
        let name = &self.name;
        if !valid_server_name(name) {
            return Err(format!(
                "[[mcp]] name `{name}` must be 1-32 of a-z A-Z 0-9 _ - (it prefixes its tools' names)"
            ));
        }
        let transport = match (&self.command, &self.url) {
            (Some(command), None) => self.stdio(command, base)?,
            (None, Some(url)) => self.http(url)?,
            (Some(_), Some(_)) => {
                return Err(format!(
                    "[[mcp]] `{name}` has both `command` and `url`: one transport per server"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "[[mcp]] `{name}` needs `command = [\"program\", …]` (stdio) or `url = \"http://…\"` (Streamable HTTP)"
                ));
            }
        };
        let timeout = self
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        if timeout.is_zero() {
            return Err(format!("[[mcp]] `{name}`: timeout_ms must be more than 0"));
        }
        Ok(ServerConfig {
            name: name.clone(),
            transport,
            tools: self.tools.clone(),
            timeout,
        })
    }

    fn stdio(&self, command: &[String], base: &Path) -> Result<Transport, String> {
        let name = &self.name;
        let Some((program, args)) = command.split_first() else {
            return Err(format!("[[mcp]] `{name}`: `command` is empty"));
        };
        if !self.headers.is_empty() || self.token_env.is_some() {
            return Err(format!(
                "[[mcp]] `{name}`: `headers` and `token_env` are for `url` servers; pass a stdio server what it needs with `env`"
            ));
        }
        let env = super::launch::environment(&self.env, |var| std::env::var(var).ok());
        Ok(Transport::Stdio {
            program: program.clone(),
            args: args.to_vec(),
            env,
            cwd: base.join(self.cwd.as_deref().unwrap_or(Path::new("."))),
        })
    }

    fn http(&self, url: &str) -> Result<Transport, String> {
        let name = &self.name;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "[[mcp]] `{name}`: url `{url}` must start with http:// or https://"
            ));
        }
        if !self.env.is_empty() || self.cwd.is_some() {
            return Err(format!(
                "[[mcp]] `{name}`: `env` and `cwd` are for `command` servers"
            ));
        }
        let token = match &self.token_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                format!("[[mcp]] `{name}`: token_env names `{var}`, which is not set")
            })?),
            None => None,
        };
        Ok(Transport::Http {
            url: url.to_owned(),
            headers: self.headers.clone(),
            token,
        })
    }
}

/// Whether `name` can prefix tool names: 1-32 of `a-z A-Z 0-9 _ -`.
fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(toml_text: &str) -> Result<ServerConfig, String> {
        let s: McpSection = toml::from_str(toml_text).map_err(|e| e.message().to_owned())?;
        s.check(Path::new("/o"))
    }

    #[test]
    fn refusals_name_the_key() {
        let cases = [
            (
                "name = \"a.b\"\ncommand = [\"x\"]",
                "name `a.b` must be 1-32",
            ),
            ("name = \"a\"", "needs `command = [\"program\", …]`"),
            (
                "name = \"a\"\ncommand = [\"x\"]\nurl = \"http://h/mcp\"",
                "has both `command` and `url`",
            ),
            ("name = \"a\"\ncommand = []", "`command` is empty"),
            ("name = \"a\"\nurl = \"ftp://h\"", "must start with http://"),
            (
                "name = \"a\"\nurl = \"http://h/mcp\"\ntoken_env = \"AGENTPUMP_TEST_UNSET_VAR\"",
                "token_env names `AGENTPUMP_TEST_UNSET_VAR`, which is not set",
            ),
            (
                "name = \"a\"\ncommand = [\"x\"]\ntimeout_ms = 0",
                "timeout_ms must be more than 0",
            ),
            (
                "name = \"a\"\ncommand = [\"x\"]\nport = 1",
                "unknown field `port`",
            ),
        ];
        for (text, expected) in cases {
            let err = section(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_stdio_server_gets_the_inherited_few_and_the_variables_it_names() {
        let config = section("name = \"fs\"\ncommand = [\"srv\", \"-v\"]\nenv = [\"PATH\", \"CARGO\", \"AGENTPUMP_TEST_UNSET_VAR\"]")
            .unwrap();
        let Transport::Stdio {
            program,
            args,
            env,
            cwd,
        } = config.transport
        else {
            panic!("stdio");
        };
        assert_eq!((program.as_str(), args), ("srv", vec!["-v".to_owned()]));
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        let inherited = super::super::launch::INHERITED
            .into_iter()
            .filter(|v| std::env::var(v).is_ok());
        let expected: Vec<&str> = inherited.chain(["CARGO"]).collect();
        assert_eq!(names, expected, "cargo sets CARGO for its tests");
        assert_eq!(cwd, Path::new("/o/."));
        assert_eq!(config.timeout, DEFAULT_TIMEOUT);
    }
}
