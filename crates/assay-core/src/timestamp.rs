//! RFC 3339 timestamps as instants: what typed `timestamp` state fields
//! (`crate::state_fields`) accept and what conditions (`crate::condition`) compare. A leaf
//! beneath both.

/// An RFC 3339 date and time (`2026-11-21T12:00:00Z`, `2026-11-21 12:00:00.5+01:00`) as
/// seconds since 1970 (UTC) and nanoseconds; `None` when `text` is not one.
pub fn parse_timestamp(text: &str) -> Option<(i64, u32)> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [
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
    let days_in_month = usize::try_from(month - 1)
        .ok()
        .and_then(|m| month_days.get(m))?;
    if day < 1 || day > *days_in_month || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut nanos = 0u32;
    if b[at] == b'.' {
        let start = at + 1;
        at = start;
        while at < b.len() && b[at].is_ascii_digit() {
            at += 1;
        }
        let fraction = &text[start..at];
        if fraction.is_empty() {
            return None;
        }
        let padded: String = fraction
            .chars()
            .chain(std::iter::repeat('0'))
            .take(9)
            .collect();
        nanos = padded.parse().ok()?;
    }
    let offset = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let hours = digits(at + 1..at + 3)?;
            let minutes = digits(at + 4..at + 6)?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let seconds = hours * 3600 + minutes * 60;
            if *sign == b'+' { seconds } else { -seconds }
        }
        _ => return None,
    };
    // Days from 1970-01-01 to the civil date (proleptic Gregorian).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((
        days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        nanos,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_to_instants() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(parse_timestamp("1970-01-01T01:00:00+01:00"), Some((0, 0)));
        assert_eq!(
            parse_timestamp("2026-11-21T12:00:00.5Z"),
            Some((1_795_262_400, 500_000_000))
        );
        assert_eq!(
            parse_timestamp("2024-02-29T00:00:00Z").map(|t| t.0),
            Some(1_709_164_800)
        );
        for bad in [
            "2026-11-21",
            "2026-02-30T00:00:00Z",
            "2026-11-21T12:00:00",
            "2026-11-21T25:00:00Z",
            "2026-11-21T12:00:00.Z",
            "soon",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }
}
