//! Percent-decoding of URL query values and path segments (RFC 3986). A
//! bad escape or a result that is not UTF-8 is an error, never guessed at.

/// Why a text does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{escape:?} at byte {at} is not an escape: '%' takes two hex digits")]
    BadEscape { at: usize, escape: String },
    #[error("the decoded bytes are not UTF-8")]
    NotUtf8,
}

/// A query value: `+` is a space, as HTML forms and Go's `url.Values` write it.
pub fn query(s: &str) -> Result<String, Error> {
    decode(s, true)
}

/// A path segment: `+` is itself.
pub fn path(s: &str) -> Result<String, Error> {
    decode(s, false)
}

fn decode(s: &str, plus_is_space: bool) -> Result<String, Error> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'%' => {
                let byte = b
                    .get(i + 1..i + 3)
                    .and_then(|hex| Some(hex_digit(hex[0])? << 4 | hex_digit(hex[1])?));
                let Some(byte) = byte else {
                    let end = s.len().min(i + 3);
                    let escape = String::from_utf8_lossy(&b[i..end]).into_owned();
                    return Err(Error::BadEscape { at: i, escape });
                };
                out.push(byte);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| Error::NotUtf8)
}

fn hex_digit(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_queries_and_paths() {
        assert_eq!(path("a+b%2Fc").unwrap(), "a+b/c");
        assert_eq!(query("model%3Dllama+3").unwrap(), "model=llama 3");
        assert_eq!(query("%e2%82%AC").unwrap(), "€");
        assert_eq!(query("ünïcödé").unwrap(), "ünïcödé");
        assert_eq!(query("").unwrap(), "");
        assert_eq!(query("%25zz").unwrap(), "%zz");
    }

    #[test]
    fn bad_escapes_are_errors() {
        let bad = |s: &str| query(s).unwrap_err();
        assert_eq!(
            bad("a%zz"),
            Error::BadEscape {
                at: 1,
                escape: "%zz".into()
            }
        );
        assert_eq!(
            bad("%4"),
            Error::BadEscape {
                at: 0,
                escape: "%4".into()
            }
        );
        assert!(matches!(bad("%"), Error::BadEscape { at: 0, .. }));
        // `u8::from_str_radix` would take "+f" as 15.
        assert!(matches!(bad("%+f"), Error::BadEscape { .. }));
        assert!(matches!(bad("%-1"), Error::BadEscape { .. }));
        assert!(matches!(bad("%é"), Error::BadEscape { at: 0, .. }));
        assert_eq!(bad("%ff"), Error::NotUtf8);
        assert_eq!(bad("%c3"), Error::NotUtf8);
        let e = bad("a%zz").to_string();
        assert_eq!(
            e,
            r#""%zz" at byte 1 is not an escape: '%' takes two hex digits"#
        );
    }
}
