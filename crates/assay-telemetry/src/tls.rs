//! The TLS crypto provider of every HTTP client assay builds (model providers, product
//! endpoints, MLflow, MCP servers, the OTLP exporter): rustls with ring.
//!
//! reqwest is built without a provider of its own (`rustls-no-provider`), so each place that
//! builds a client calls [`ensure_provider`] first; a client built before it would panic.
//! This sits here, in the lowest crate that makes HTTP clients, so that every adapter above
//! reaches it.

use std::sync::Once;

/// Installs ring as the process's default rustls crypto provider, once. A provider that an
/// embedding program installed first is kept.
pub fn ensure_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means one is installed already, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_provider_is_installed_and_a_second_call_keeps_it() {
        super::ensure_provider();
        let first = rustls::crypto::CryptoProvider::get_default().map(std::sync::Arc::as_ptr);
        assert!(
            first.is_some(),
            "no default crypto provider after ensure_provider"
        );
        super::ensure_provider();
        let second = rustls::crypto::CryptoProvider::get_default().map(std::sync::Arc::as_ptr);
        assert_eq!(first, second);
    }
}
