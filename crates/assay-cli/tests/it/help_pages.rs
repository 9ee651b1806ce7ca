//! Every help page, as committed: `assay --help` and each subcommand's, byte for byte, in
//! `help/pages.txt`. A moved or reworded flag shows as a diff of that file; a refactor that
//! means to change nothing the user sees must leave it as it is. To accept a deliberate
//! change, run this test with `ASSAY_BLESS=1` and commit the file it writes.

use crate::support::{assay, repo_path};

const PAGES: &str = "crates/assay-cli/tests/it/help/pages.txt";

/// Every help page, each under a `==== assay …` line.
fn every_page() -> String {
    let mut paths = Vec::new();
    crate::schema::subcommands(&[], &mut paths);
    let mut all = String::new();
    for path in &paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let run = assay(&args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        all.push_str("==== assay");
        for word in path {
            all.push(' ');
            all.push_str(word);
        }
        all.push_str(" --help\n");
        all.push_str(&run.stdout);
        if !run.stdout.ends_with('\n') {
            all.push('\n');
        }
    }
    all
}

#[test]
fn every_help_page_is_the_committed_copy() {
    let now = every_page();
    let file = repo_path(PAGES);
    if std::env::var_os("ASSAY_BLESS").is_some() {
        std::fs::write(&file, &now).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e} (write it with ASSAY_BLESS=1)", file.display()));
    if committed == now {
        return;
    }
    // Name the first page and line that differ, with both versions of the line.
    let mut page = "";
    for (n, (was, is)) in committed.lines().zip(now.lines()).enumerate() {
        if let Some(name) = is.strip_prefix("==== ") {
            page = name;
        }
        assert_eq!(
            was,
            is,
            "{PAGES}:{}: `{page}` differs from the committed copy (ASSAY_BLESS=1 accepts a deliberate change)",
            n + 1
        );
    }
    panic!(
        "{PAGES}: {} lines committed, {} now: pages were added or removed (ASSAY_BLESS=1 accepts a deliberate change)",
        committed.lines().count(),
        now.lines().count()
    );
}
