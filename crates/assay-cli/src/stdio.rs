//! stdout and stderr, written so that a closed pipe is not a panic.

/// Writes to stdout, ignoring a closed pipe (`assay … | head -1`): the command goes on and
/// ends with the exit code it would have had, which is what a CI step that pipes assay's
/// output through `head` or `grep -q` reads. Every line of data goes through here, never
/// `println!`, which panics on a closed pipe.
pub fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Writes to stderr, ignoring a closed pipe, as [`out`] does for stdout (never `eprintln!`,
/// which panics when stderr is closed).
pub fn err(text: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}
