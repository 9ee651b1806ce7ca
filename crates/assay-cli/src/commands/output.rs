//! Output paths (`--junit`, `--html`, `--output`, `--drafts`): a file's extension decides what
//! is written to it, and a flag given a file whose extension names another format is refused
//! (exit 2) before anything runs or is written, so that no report lands in a file named for
//! another and no two outputs of one command share a file.

use std::path::Path;

use assay_project::HarnessError;

/// What an output file holds, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.md`
    Markdown,
    /// `.json`
    Json,
    /// `.html`, `.htm`
    Html,
    /// `.xml` (JUnit)
    Xml,
    /// `.yaml`, `.yml`
    Yaml,
}

impl Format {
    /// The format a path's extension names, if any.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "md" | "markdown" => Format::Markdown,
            "json" => Format::Json,
            "html" | "htm" => Format::Html,
            "xml" => Format::Xml,
            "yaml" | "yml" => Format::Yaml,
            _ => return None,
        })
    }

    fn describe(self) -> &'static str {
        match self {
            Format::Markdown => "Markdown (.md)",
            Format::Json => "JSON (.json)",
            Format::Html => "HTML (.html)",
            Format::Xml => "JUnit XML (.xml)",
            Format::Yaml => "YAML (.yaml)",
        }
    }
}

/// The format `path` (given to `flag`) names by its extension, when it is one of `writes`;
/// else a usage error naming the flag, the file and what the flag writes.
pub fn format(flag: &str, path: &Path, writes: &[Format]) -> Result<Format, HarnessError> {
    if let Some(f) = Format::of(path).filter(|f| writes.contains(f)) {
        return Ok(f);
    }
    let named = match (Format::of(path), path.extension()) {
        (Some(f), _) => format!("names {}", f.describe()),
        (None, Some(ext)) => format!("`.{}` names no format assay writes", ext.to_string_lossy()),
        (None, None) => "has no extension".to_owned(),
    };
    let what: Vec<&str> = writes.iter().map(|f| f.describe()).collect();
    Err(HarnessError::Usage(format!(
        "{flag} {}: the file's extension decides its format, and it {named}; {flag} writes {}: name the file so",
        path.display(),
        or_list(&what)
    )))
}

/// Refuses two outputs of one command that name the same file.
pub fn distinct(outputs: &[(&str, &Path)]) -> Result<(), HarnessError> {
    for (i, (a, pa)) in outputs.iter().enumerate() {
        if let Some((b, _)) = outputs[i + 1..].iter().find(|(_, pb)| pb == pa) {
            return Err(HarnessError::Usage(format!(
                "{a} and {b} name the same file, {}: one report would be written over the other",
                pa.display()
            )));
        }
    }
    Ok(())
}

fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_decides_or_the_flag_is_refused() {
        let p = Path::new;
        assert_eq!(
            format("--junit", p("ci/junit.XML"), &[Format::Xml]).unwrap(),
            Format::Xml
        );
        let e = format("--junit", p("junit.json"), &[Format::Xml])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--junit junit.json")
                && e.contains("names JSON (.json)")
                && e.contains("writes JUnit XML (.xml)"),
            "{e}"
        );
        let e = format(
            "--output",
            p("report"),
            &[Format::Markdown, Format::Json, Format::Html],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("has no extension"), "{e}");
        assert!(
            e.contains("Markdown (.md), JSON (.json) or HTML (.html)"),
            "{e}"
        );
        let e = format("--html", p("a.txt"), &[Format::Html])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`.txt` names no format"), "{e}");
        assert!(distinct(&[("--html", p("a.html")), ("--output", p("a.md"))]).is_ok());
        let e = distinct(&[("--html", p("a.html")), ("--output", p("a.html"))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--html and --output name the same file"), "{e}");
    }
}
