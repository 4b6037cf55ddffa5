//! Any accepted selector yields a flat matcher list starting with the
//! request's namespace matcher, with no other namespace matcher.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(m) = gpuscale_adapter::prometheus::matchers::translate("inference", text) {
        assert!(m.starts_with("namespace=\"inference\""), "{m}");
        assert!(!m[1..].contains(",namespace="), "{m}");
        // Every `"` inside a value is escaped: strings stay closed.
        let mut in_str = false;
        let mut esc = false;
        for c in m.chars() {
            match (in_str, esc, c) {
                (true, true, _) => esc = false,
                (true, false, '\\') => esc = true,
                (_, false, '"') => in_str = !in_str,
                (false, _, '{' | '}' | '(' | ')' | ' ') => panic!("structure outside a string: {m}"),
                _ => {}
            }
        }
        assert!(!in_str, "{m}");
    }
});
