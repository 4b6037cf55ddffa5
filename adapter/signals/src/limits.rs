//! Bounds on what one request may make the adapter hold (documented in
//! docs/adapter.md, "Request limits"): a selector is client input, and each
//! distinct one becomes a cache key, a query and a memo entry, so its size
//! is bounded before any of them is built. Error messages quote input
//! through [`excerpt`], so a refusal never echoes a megabyte back.

/// Bytes of one label selector (metric selector, `labelSelector`, pod selector).
pub const MAX_SELECTOR_BYTES: usize = 8 * 1024;
/// Values of one `in`/`notin` set.
pub const MAX_SET_VALUES: usize = 100;
/// Requirements of one selector.
pub const MAX_REQUIREMENTS: usize = 32;
/// Bytes of the PromQL a (metric, namespace, selector) renders to.
pub const MAX_QUERY_BYTES: usize = 32 * 1024;
/// (namespace, pod selector) pairs of `pods/*` custom metrics whose pods
/// are listed and kept at most.
pub const MAX_POD_SELECTORS: usize = 1000;
/// Client input is quoted in error messages through `excerpt`: at most
/// `EXCERPT_CHARS` characters and the length.
pub use gpuscale_util::selector::{EXCERPT_CHARS, excerpt};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_bounded() {
        assert_eq!(excerpt("a=b"), "\"a=b\"");
        let long = "x".repeat(1_000_000);
        let e = excerpt(&long);
        assert!(e.len() < 140, "{e}");
        assert!(e.ends_with("(1000000 bytes)"), "{e}");
        // Cut on a character boundary.
        assert!(excerpt(&"é".repeat(200)).contains("… (400 bytes)"));
    }
}
