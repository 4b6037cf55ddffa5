//! An error as one line with its causes, the way the binaries report a
//! failed call: hyper's and ureq's top-level errors ("client error
//! (Connect)") name no cause on their own.

/// `e` and each of its sources, joined by ": ".
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);

    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn every_cause_is_named_in_order() {
        let e = E(
            "client error (Connect)",
            Some(Box::new(E(
                "tcp connect error",
                Some(Box::new(E("Connection refused", None))),
            ))),
        );
        assert_eq!(
            super::chain(&e),
            "client error (Connect): tcp connect error: Connection refused"
        );
        assert_eq!(super::chain(&E("alone", None)), "alone");
    }
}
