//! The `--log-level` value every gpuscale binary takes.

/// A log filter `tracing_subscriber::EnvFilter` accepts (`info`,
/// `gpuscale_activator=debug,kube=info`), refused at the command line
/// rather than replaced by the default.
pub fn filter(s: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_filter_that_does_not_parse_is_refused_naming_why() {
        assert_eq!(
            super::filter("gpuscale=debug").as_deref(),
            Ok("gpuscale=debug")
        );
        assert!(super::filter("gpuscale=loud").is_err());
    }
}
