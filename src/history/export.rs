//! Reading history out: JSON lines, XML (one envelope per record), and a readable transcript.

use std::fmt::Write as _;

use super::{Record, RecordKind};
use crate::{Dialect, Limits};

/// Namespace of the XML export's `<history>` and `<record>` elements.
pub const HISTORY_NS: &str = "urn:agentpump:history:v1";

/// One JSON object per record, one per line.
pub fn to_jsonl(records: &[Record]) -> String {
    let mut out = String::new();
    for r in records {
        out.push_str(&serde_json::to_string(r).expect("a record serializes"));
        out.push('\n');
    }
    out
}

/// `<history xmlns="urn:agentpump:history:v1">` holding one `<record seq time kind digest>` per
/// record, each wrapping the record's envelope (payload byte for byte).
pub fn to_xml(records: &[Record]) -> String {
    let mut out = format!("<history xmlns=\"{HISTORY_NS}\">\n");
    let limits = Limits {
        max_bytes: usize::MAX,
        max_depth: usize::MAX,
        max_attributes: usize::MAX,
        max_outputs: usize::MAX,
    };
    for r in records {
        let envelope = match r.to_envelope(&limits) {
            Ok(env) => env.to_xml(Dialect::Agentpump),
            Err(_) => format!(
                "<![CDATA[{}]]>",
                r.payload.replace("]]>", "]]]]><![CDATA[>")
            ),
        };
        let _ = writeln!(
            out,
            "  <record seq=\"{}\" time=\"{}\" kind=\"{}\" digest=\"{}\">{envelope}</record>",
            r.seq,
            rfc3339(r.time_us),
            r.kind,
            hex::encode(r.digest)
        );
    }
    out.push_str("</history>\n");
    out
}

/// A readable transcript: time, seq, sender → addressee, markers for pump messages, halts and
/// decisions, and the payload pretty-printed; every line indented by `indent` spaces.
pub fn transcript(records: &[Record], indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    for r in records {
        let marker = match (r.kind, r.root.local()) {
            (RecordKind::System, "halt") => "  [HALT]",
            (RecordKind::System, _) => "  [system]",
            (RecordKind::Decision, _) => "  [decision]",
            (RecordKind::Egress, _) => "  [out]",
            (RecordKind::Message, _) => "",
        };
        let to = r.to.as_deref().unwrap_or("*");
        let _ = writeln!(
            out,
            "{pad}{}  #{}  {} -> {to}{marker}",
            rfc3339(r.time_us),
            r.seq,
            r.from
        );
        for line in pretty(&r.payload).lines() {
            let _ = writeln!(out, "{pad}    {line}");
        }
    }
    out
}

/// Indents XML for reading; returns it unchanged if it does not parse.
pub fn pretty(xml: &str) -> String {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    reader.config_mut().trim_text(true);
    let mut writer = quick_xml::Writer::new_with_indent(Vec::new(), b' ', 2);
    loop {
        match reader.read_event() {
            Ok(Event::Eof) => break,
            Ok(event) => {
                if writer.write_event(event).is_err() {
                    return xml.to_owned();
                }
            }
            Err(_) => return xml.to_owned(),
        }
    }
    String::from_utf8(writer.into_inner()).unwrap_or_else(|_| xml.to_owned())
}

/// Microseconds since the Unix epoch as RFC 3339 UTC (`2026-11-22T01:30:00.123456Z`).
pub fn rfc3339(time_us: i64) -> String {
    let secs = time_us.div_euclid(1_000_000);
    let micros = time_us.rem_euclid(1_000_000);
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    format!("{}T{h:02}:{m:02}:{s:02}.{micros:06}Z", utc_date(time_us))
}

/// The UTC calendar date (`YYYY-MM-DD`) of an instant in microseconds since the Unix epoch.
pub fn utc_date(time_us: i64) -> String {
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = time_us.div_euclid(86_400_000_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A time that [`parse_rfc3339`] cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a date: {why}; use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.ffffff]Z (UTC)")]
pub struct TimeError {
    text: String,
    why: &'static str,
}

/// Reads a UTC date (`2026-11-22`, midnight) or RFC 3339 time with `Z`
/// (`2026-11-22T01:30:00Z`, `2026-11-22T01:30:00.123456Z`) as microseconds since the Unix
/// epoch: the inverse of [`rfc3339`].
///
/// # Errors
///
/// A [`TimeError`] saying what is wrong with `text`.
///
/// # Example
///
/// ```
/// use agentpump::history::export::{parse_rfc3339, rfc3339};
/// let t = parse_rfc3339("2026-11-22T02:10:00.123456Z")?;
/// assert_eq!(rfc3339(t), "2026-11-22T02:10:00.123456Z");
/// assert_eq!(parse_rfc3339("1970-01-02")?, 86_400_000_000);
/// assert!(parse_rfc3339("2026-13-01").is_err());
/// # Ok::<(), agentpump::history::export::TimeError>(())
/// ```
pub fn parse_rfc3339(text: &str) -> Result<i64, TimeError> {
    let fail = |why| TimeError {
        text: text.to_owned(),
        why,
    };
    let (date, time) = match text.split_once(['T', 't']) {
        Some((date, time)) => (
            date,
            Some(
                time.strip_suffix(['Z', 'z'])
                    .ok_or_else(|| fail("the time must end in Z (UTC)"))?,
            ),
        ),
        None => (text, None),
    };
    let number = |part: &str, digits: usize, what| {
        if part.len() == digits && part.bytes().all(|b| b.is_ascii_digit()) {
            Ok(part.parse::<i64>().expect("ascii digits"))
        } else {
            Err(fail(what))
        }
    };
    let mut parts = date.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(fail("the date must be YYYY-MM-DD"));
    };
    let (year, month, day) = (
        number(y, 4, "the year must be 4 digits")?,
        number(m, 2, "the month must be 2 digits")?,
        number(d, 2, "the day must be 2 digits")?,
    );
    if !(1..=12).contains(&month) {
        return Err(fail("the month is not 01-12"));
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day < 1 || day > days_in_month[month as usize - 1] {
        return Err(fail("no such day in that month"));
    }
    let mut micros = 0;
    if let Some(time) = time {
        let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
        let mut parts = hms.split(':');
        let (Some(h), Some(mi), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(fail("the time must be HH:MM:SS"));
        };
        let (h, mi, s) = (
            number(h, 2, "the hour must be 2 digits")?,
            number(mi, 2, "the minute must be 2 digits")?,
            number(s, 2, "the second must be 2 digits")?,
        );
        if h > 23 || mi > 59 || s > 59 {
            return Err(fail("the time is out of range"));
        }
        if fraction.len() > 6 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
            return Err(fail("the fraction must be 1-6 digits"));
        }
        let fraction: i64 = format!("{fraction:0<6}").parse().unwrap_or(0);
        micros = ((h * 60 + mi) * 60 + s) * 1_000_000 + fraction;
    }
    // Days since 1970-01-01 from a civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok(days * 86_400_000_000 + micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Days are UTC calendar dates, leap days and the epoch included (the viewer's totals by
    /// day and the loop's AGENTS.md read them).
    #[test]
    fn utc_days() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(-1), "1969-12-31");
        assert_eq!(utc_date(951_782_400_000_000), "2000-02-29");
        assert_eq!(utc_date(1_796_083_199_999_999), "2026-11-30");
    }

    #[test]
    fn times_parse_back() {
        for t in [
            0,
            1_795_313_400_123_456,
            951_782_400_000_001,
            -86_400_000_000,
        ] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Ok(t), "{}", rfc3339(t));
        }
        assert_eq!(parse_rfc3339("2000-02-29"), Ok(951_782_400_000_000));
        for bad in [
            "2026-02-29",
            "2026-1-01",
            "yesterday",
            "2026-01-01T10:00:00",
            "2026-01-01T24:00:00Z",
            "",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339(1_795_313_400_123_456),
            "2026-11-22T02:10:00.123456Z"
        );
        assert_eq!(rfc3339(951_782_400_000_001), "2000-02-29T00:00:00.000001Z");
    }

    #[test]
    fn pretty_indents_and_keeps_what_does_not_parse() {
        assert_eq!(
            pretty("<a xmlns='urn:x'><b>1</b></a>"),
            "<a xmlns='urn:x'>\n  <b>1</b>\n</a>"
        );
        assert_eq!(pretty("<a>"), "<a>");
    }
}
