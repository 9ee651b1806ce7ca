//! Links between the pages, and the cells that hold them: to an entity, to a case of a saved
//! run. Every page takes them from here.

use std::fmt::Write;

use assay_core::bank::BankType;
use assay_report::html::CaseLinks;

use super::{esc, path_segment};

/// Percent-encodes a query-string value.
pub(super) fn url_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A link to an entity's page.
pub(super) fn entity_link(id: &str) -> String {
    format!(
        "<a href=\"/ui/entities/{}\"><code>{}</code></a>",
        url_encode(id),
        esc(id)
    )
}

/// The page of case `test_id` in run `run`.
pub(super) fn case_href(run: &str, test_id: &str) -> String {
    format!(
        "/ui/runs/{}/cases/{}",
        path_segment(run),
        path_segment(test_id)
    )
}

/// Links every case id of run `run`'s report to the case's page.
pub(super) struct RunCaseLinks<'a> {
    /// The run's id.
    pub run: &'a str,
}

impl CaseLinks for RunCaseLinks<'_> {
    fn case(&self, _bank: BankType, test_id: &str) -> Option<String> {
        Some(case_href(self.run, test_id))
    }
}

/// A case id in a table cell: on one line, cut with an ellipsis when long (its title has it
/// whole), linked to `href` when there is one.
pub(super) fn id_cell(test_id: &str, href: Option<&str>) -> String {
    let inner = match href {
        Some(href) => format!(
            "<a href=\"{}\"><code>{}</code></a>",
            esc(href),
            esc(test_id)
        ),
        None => format!("<code>{}</code>", esc(test_id)),
    };
    format!("<td class=\"id\" title=\"{}\">{inner}</td>", esc(test_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_links_stay_in_their_segment() {
        assert_eq!(
            case_href("2026-11-25-0915", "a/b <c>"),
            "/ui/runs/2026-11-25-0915/cases/a%2Fb%20%3Cc%3E"
        );
        let cell = id_cell("<x>", Some("/ui/runs/r/cases/%3Cx%3E"));
        assert!(
            cell.contains("title=\"&lt;x&gt;\"") && !cell.contains("<x>"),
            "{cell}"
        );
    }

    #[test]
    fn url_encoding() {
        assert_eq!(url_encode("a b&c/<"), "a%20b%26c%2F%3C");
    }
}
