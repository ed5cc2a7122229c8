//! The courier of `agentpump run` with `[store] spread_children`: each parcel for another
//! partition is posted to this host's own front (`POST /threads/ID/parcel`), which passes it to
//! the writer of that thread's partition — in the process when this host writes it, over HTTP
//! when another does — so a parcel finds its partition wherever the lease has moved it.

use futures_util::future::BoxFuture;
use reqwest::StatusCode;

use crate::host::HostError;
use crate::pump::spread::{Courier, Parcel, Undelivered};

/// Posts parcels to the organism's front at `front`, with the organism's API token.
#[derive(Debug)]
pub(super) struct FrontCourier {
    client: reqwest::Client,
    front: String,
    token: String,
}

impl FrontCourier {
    /// A courier to the front at `front` (`http://host:port`). A request that takes longer
    /// than 30 s is given up and tried again.
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be made.
    pub(super) fn new(front: String, token: String) -> Result<Self, HostError> {
        let client = crate::listeners::llm::http_client()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| HostError::http(format!("cannot make an HTTP client: {e}"), e))?;
        Ok(Self {
            client,
            front,
            token,
        })
    }
}

impl Courier for FrontCourier {
    fn carry<'a>(&'a self, parcel: &'a Parcel) -> BoxFuture<'a, Result<(), Undelivered>> {
        Box::pin(async move {
            let url = format!("{}/threads/{}/parcel", self.front, parcel.thread());
            let answer = self
                .client
                .post(&url)
                .bearer_auth(&self.token)
                .json(parcel)
                .send()
                .await
                .map_err(|e| Undelivered::Later(format!("{url}: {e}")))?;
            let status = answer.status();
            if status.is_success() {
                return Ok(());
            }
            let detail = answer.text().await.unwrap_or_default();
            let why = format!("{url} answered {status}: {detail}");
            // Refused for good: a parcel the pump will never take, or a token it does not know
            // (every host of one organism needs the same token). The rest is passing: no
            // writer of the partition yet, a writer unreachable, a store failing.
            match status {
                StatusCode::BAD_REQUEST
                | StatusCode::UNAUTHORIZED
                | StatusCode::FORBIDDEN
                | StatusCode::UNPROCESSABLE_ENTITY => Err(Undelivered::Refused(why)),
                _ => Err(Undelivered::Later(why)),
            }
        })
    }
}
