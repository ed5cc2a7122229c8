//! [`Params`]: a route's query string, read so that what is wrong with it is named — a key given
//! twice, or a value that does not read as what its key takes — in our problem JSON rather than
//! in the wording of the URL decoder.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::Problem;

/// The query keys whose values are whole numbers (record seqs, cursors, page sizes); every
/// other key takes text.
const NUMBERS: [&str; 3] = ["after", "before", "limit"];

/// The query string of a request as `T`; refused with 400 `bad-query` naming the key.
#[derive(Debug)]
pub(crate) struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        read(parts.uri.query().unwrap_or_default()).map(Self)
    }
}

/// `query` as `T`.
fn read<T: DeserializeOwned>(query: &str) -> Result<T, Problem> {
    let bad = |detail: String| Problem::new(StatusCode::BAD_REQUEST, "bad-query", detail);
    let unreadable =
        |e: serde_urlencoded::de::Error| bad(format!("the query string cannot be read: {e}"));
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).map_err(unreadable)?;
    for (i, (key, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(k, _)| k == key) {
            return Err(bad(format!(
                "query parameter `{key}` is given more than once; give it once"
            )));
        }
    }
    // Each pair alone, so that the value that does not read is named by its key.
    for (key, value) in &pairs {
        let one = serde_urlencoded::to_string([(key, value)]).expect("text pairs encode");
        if let Err(e) = serde_urlencoded::from_str::<T>(&one) {
            let takes = if NUMBERS.contains(&key.as_str()) {
                format!("a whole number from 0 to {}", u64::MAX)
            } else {
                e.to_string()
            };
            return Err(bad(format!(
                "query parameter `{key}` takes {takes}; got `{value}`"
            )));
        }
    }
    serde_urlencoded::from_str(query).map_err(unreadable)
}

#[cfg(test)]
mod tests {
    use super::read;

    #[derive(Debug, serde::Deserialize)]
    struct Window {
        after: Option<u64>,
        q: Option<String>,
    }

    #[test]
    fn names_the_key_and_what_it_takes() {
        let detail = |query: &str| read::<Window>(query).unwrap_err().detail;
        assert_eq!(
            detail("q=x&after=abc"),
            "query parameter `after` takes a whole number from 0 to 18446744073709551615; got `abc`"
        );
        assert_eq!(
            detail("after=1&after=2"),
            "query parameter `after` is given more than once; give it once"
        );
        let w = read::<Window>("q=a%20b&after=7").unwrap();
        assert_eq!((w.after, w.q.as_deref()), (Some(7), Some("a b")));
    }
}
