//! The Streamable HTTP client transport: rmcp's, over agentpump's reqwest client (rustls on
//! `ring`), with the `[[mcp]]` table's headers and bearer token.

use std::collections::{BTreeMap, HashMap};

use axum::http::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// The transport to `url`.
///
/// # Errors
///
/// A header that is not a valid HTTP header, or a client that cannot be built, named.
pub fn client_transport(
    url: &str,
    headers: &BTreeMap<String, String>,
    token: Option<&str>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let header = HeaderName::try_from(name.as_str())
            .map_err(|e| format!("header `{name}` is not a header name: {e}"))?;
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|e| format!("header `{name}` has a value HTTP cannot carry: {e}"))?;
        custom.insert(header, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let client = crate::listeners::llm::http_client()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}
