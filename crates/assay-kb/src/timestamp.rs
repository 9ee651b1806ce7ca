//! Timestamps as the stores keep them: RFC 3339 text in UTC.

use chrono::{DateTime, SecondsFormat, Utc};

/// A timestamp as stored: RFC 3339, UTC, microseconds (sorts as text).
pub(crate) fn time_text(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A stored timestamp.
pub(crate) fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}
