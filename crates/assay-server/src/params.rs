//! Query parameters, parsed by hand so that every mistake is a JSON 400 that names the
//! parameter: an unknown parameter, a repeated single-valued one, a bad boolean.

use axum::extract::Query;
use axum::http::Uri;

use crate::error::ApiError;

/// The query parameters of a request, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parses the query of `uri`, and rejects any parameter not in `allowed`.
    pub fn parse(uri: &Uri, allowed: &[&str]) -> Result<Params, ApiError> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        for (name, _) in &pairs {
            if !allowed.contains(&name.as_str()) {
                return Err(ApiError::bad_request(if allowed.is_empty() {
                    format!("unknown query parameter `{name}` (this endpoint takes none)")
                } else {
                    format!(
                        "unknown query parameter `{name}` (expected {})",
                        allowed.join(", ")
                    )
                }));
            }
        }
        Ok(Params { pairs })
    }

    fn values<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a str> + use<'a> {
        let name = name.to_owned();
        self.pairs
            .iter()
            .filter(move |(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of a single-valued parameter; given twice is an error.
    pub fn one(&self, name: &str) -> Result<Option<&str>, ApiError> {
        let mut values = self.values(name);
        let first = values.next();
        if values.next().is_some() {
            return Err(ApiError::bad_request(format!(
                "query parameter `{name}` is given more than once"
            )));
        }
        Ok(first)
    }

    /// A boolean parameter: `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`), or `default`.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, ApiError> {
        match self.one(name)? {
            None => Ok(default),
            Some(v) => parse_bool(v).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "query parameter `{name}`: expected true or false, got `{v}`"
                ))
            }),
        }
    }

    /// Whether the parameter is given at all.
    pub fn has(&self, name: &str) -> bool {
        self.values(name).next().is_some()
    }

    /// A list parameter: repeated (`?x=a&x=b`) and/or comma-separated (`?x=a,b`); blanks dropped.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.values(name)
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// Parses a boolean as FastAPI does.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str, allowed: &[&str]) -> Result<Params, ApiError> {
        let uri: Uri = format!("/x?{q}").parse().unwrap();
        Params::parse(&uri, allowed)
    }

    #[test]
    fn parses_booleans_lists_and_rejects_unknowns() {
        let p = parse("a=true&b=0&l=x,y&l=z&l=", &["a", "b", "l"]).unwrap();
        assert!(p.bool("a", false).unwrap());
        assert!(!p.bool("b", true).unwrap());
        assert!(p.bool("c", true).unwrap());
        assert_eq!(p.list("l"), ["x", "y", "z"]);
        let e = parse("a=maybe", &["a"])
            .unwrap()
            .bool("a", false)
            .unwrap_err();
        assert!(e.message.contains("`a`") && e.message.contains("maybe"));
        let e = parse("zz=1", &["a"]).unwrap_err();
        assert!(e.message.contains("`zz`"), "{}", e.message);
        let e = parse("a=1&a=2", &["a"]).unwrap().one("a").unwrap_err();
        assert!(e.message.contains("more than once"));
        let p = parse("l=%E2%9C%93", &["l"]).unwrap();
        assert_eq!(p.list("l"), ["✓"]);
    }
}
