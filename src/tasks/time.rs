//! `updated_at`: RFC 3339 UTC timestamps without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as RFC 3339 UTC with whole seconds (`2026-02-07T15:00:00Z`).
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// `secs` since the Unix epoch as RFC 3339 UTC, whole seconds (the history's own RFC 3339
/// writer, its microseconds cut off).
pub(crate) fn rfc3339(secs: u64) -> String {
    let micros = i64::try_from(secs).unwrap_or(i64::MAX / 1_000_000) * 1_000_000;
    let full = crate::history::export::rfc3339(micros);
    format!("{}Z", &full[..19])
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_770_476_400), "2026-02-07T15:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
