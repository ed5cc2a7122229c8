//! The page's files, embedded at build time from `assets/`: no CDN, no build step, works offline.
//! Each answer forbids framing and any script, style or connection from another origin; each is
//! sent gzip-compressed to a browser that accepts it, with an `ETag` so a reload costs a `304`.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::OnceLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the page: its path, content type and bytes.
pub(crate) const FILES: &[(&str, &str, &str)] = &[
    ("/", HTML, include_str!("assets/index.html")),
    (
        "/viewer.css",
        "text/css; charset=utf-8",
        include_str!("assets/viewer.css"),
    ),
    (
        "/favicon.svg",
        "image/svg+xml",
        include_str!("assets/favicon.svg"),
    ),
    ("/viewer.js", JS, include_str!("assets/viewer.js")),
    ("/xml.js", JS, include_str!("assets/xml.js")),
    ("/plot.js", JS, include_str!("assets/plot.js")),
    ("/dom.js", JS, include_str!("assets/dom.js")),
    ("/panels.js", JS, include_str!("assets/panels.js")),
    ("/process.js", JS, include_str!("assets/process.js")),
    ("/tasks.js", JS, include_str!("assets/tasks.js")),
    ("/plan.js", JS, include_str!("assets/plan.js")),
    ("/loop.js", JS, include_str!("assets/loop.js")),
    ("/inbox.js", JS, include_str!("assets/inbox.js")),
    ("/request.js", JS, include_str!("assets/request.js")),
    ("/fork.js", JS, include_str!("assets/fork.js")),
    ("/totals.js", JS, include_str!("assets/totals.js")),
    ("/timing.js", JS, include_str!("assets/timing.js")),
    ("/organism.js", JS, include_str!("assets/organism.js")),
];

/// Only this origin, no inline script, no frames.
const POLICY: &str = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// One file ready to send: its bytes, their gzip, and its entity tag.
struct Prepared {
    content_type: &'static str,
    plain: &'static str,
    gzip: Vec<u8>,
    etag: HeaderValue,
}

/// The files, compressed and tagged once, on first use.
fn prepared() -> &'static HashMap<&'static str, Prepared> {
    static PREPARED: OnceLock<HashMap<&'static str, Prepared>> = OnceLock::new();
    PREPARED.get_or_init(|| {
        FILES
            .iter()
            .map(|&(path, content_type, plain)| {
                let digest = hex::encode(&Sha256::digest(plain.as_bytes())[..12]);
                let etag =
                    HeaderValue::from_str(&format!("\"{digest}\"")).expect("hex is a header");
                let prepared = Prepared {
                    content_type,
                    plain,
                    gzip: gzip(plain.as_bytes()),
                    etag,
                };
                (path, prepared)
            })
            .collect()
    })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// Whether `headers` accept a gzip body (`Accept-Encoding: gzip`, not with `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let refused = parts.any(|p| {
                let weight = p.replace(' ', "");
                weight
                    .strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    == Some(0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// Whether `If-None-Match` names `etag` (or `*`).
fn unchanged(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| tag == "*" || tag.as_bytes() == etag.as_bytes())
}

/// `GET` of any file in [`FILES`] (`/favicon.ico` is the icon): `304` when the browser's copy is
/// current, else the file, gzip when accepted. Every answer varies by `Accept-Encoding` and must
/// be revalidated (`no-cache`), so an upgraded host is never served stale.
pub(crate) async fn file(uri: Uri, headers: HeaderMap) -> Response {
    let path = match uri.path() {
        "/favicon.ico" => "/favicon.svg",
        path => path,
    };
    let Some(file) = prepared().get(path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let common = [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::VARY, HeaderValue::from_static("Accept-Encoding")),
        (header::ETAG, file.etag.clone()),
    ];
    if unchanged(&headers, &file.etag) {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    let content_type = (
        header::CONTENT_TYPE,
        HeaderValue::from_static(file.content_type),
    );
    if accepts_gzip(&headers) {
        let encoding = (header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        (common, [content_type, encoding], file.gzip.clone()).into_response()
    } else {
        (common, [content_type], file.plain).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn gzip_is_accepted_unless_refused_with_q_zero() {
        for (value, accepted) in [
            ("gzip, deflate, br, zstd", true),
            ("br;q=1.0, gzip;q=0.8", true),
            ("*", true),
            ("identity", false),
            ("gzip;q=0", false),
            ("gzip; q=0.000", false),
            ("deflate, GZIP", true),
        ] {
            assert_eq!(
                accepts_gzip(&with(header::ACCEPT_ENCODING, value)),
                accepted,
                "{value}"
            );
        }
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn a_matching_etag_is_unchanged_and_any_other_is_not() {
        let etag = HeaderValue::from_static("\"abc\"");
        assert!(unchanged(
            &with(header::IF_NONE_MATCH, "\"x\", W/\"abc\""),
            &etag
        ));
        assert!(unchanged(&with(header::IF_NONE_MATCH, "*"), &etag));
        assert!(!unchanged(&with(header::IF_NONE_MATCH, "\"abd\""), &etag));
        assert!(!unchanged(&HeaderMap::new(), &etag));
    }

    #[test]
    fn every_file_compresses_and_the_page_stays_under_150_kb() {
        let total: usize = FILES.iter().map(|(_, _, body)| body.len()).sum();
        assert!(
            total < 150 * 1024,
            "the page's files are {total} bytes, over 150 KB"
        );
        for (path, file) in prepared() {
            assert!(
                file.gzip.len() < file.plain.len(),
                "{path} does not compress"
            );
        }
    }
}
