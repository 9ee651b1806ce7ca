//! Short content digests: ids and versions that stay the same while their parts do (a
//! generated case's test id, the version of a judge's prompt).

/// A short digest (16 hex digits) of the parts, each ended by a zero byte.
pub fn digest(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize()
        .iter()
        .take(8)
        .fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
}
