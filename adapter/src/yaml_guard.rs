//! What a config file must be before the YAML parser sees it: a regular
//! file (a FIFO or a device would block or never end), of bounded size, and
//! with bounded flow nesting. The parser's own recursion limit stops deep
//! documents only after its scanner has gone through them, and its scanner
//! is quadratic in flow nesting (`{a: {a: …`: minutes for 100,000 levels);
//! this check is one linear pass.

use std::io::Read as _;
use std::path::Path;

/// Bytes of a config file at most.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Levels of `[`/`{` nesting at most.
pub const MAX_FLOW_DEPTH: usize = 64;

/// Read `path` if it is a regular file within [`MAX_FILE_BYTES`].
pub fn read(path: &Path) -> Result<String, std::io::Error> {
    use std::io::{Error, ErrorKind};
    // Looked at before opening: opening a FIFO blocks until a writer comes.
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory is refused)",
        ));
    }
    let file = std::fs::File::open(path)?;
    // The file may have been replaced between the two looks.
    if !file.metadata()?.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    Ok(text)
}

/// Where `text` nests `[`/`{` deeper than [`MAX_FLOW_DEPTH`] (1-based
/// line), outside quoted strings and comments; `None` when it does not.
pub fn too_deep(text: &str) -> Option<usize> {
    let (mut depth, mut line) = (0usize, 1usize);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = '\n';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (_, '\n') => {
                line += 1;
                comment = false;
            }
            _ if comment => {}
            (Some('\''), '\'') if chars.peek() == Some(&'\'') => {
                chars.next();
            }
            (Some('"'), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '#') if prev.is_whitespace() => comment = true,
            // A quote opens a scalar only where a scalar can start (`it's`
            // in a plain scalar is no quote).
            (None, '\'' | '"') if prev.is_whitespace() || matches!(prev, '[' | '{' | ',' | ':') => {
                quote = Some(c);
            }
            (None, '[' | '{') => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Some(line);
                }
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_found_in_one_pass() {
        assert_eq!(too_deep(&"{a: ".repeat(100_000)), Some(1));
        assert_eq!(too_deep(&format!("x: 1\n{}", "[".repeat(65))), Some(2));
        assert_eq!(too_deep(&"[".repeat(64)), None);
        // Quoted and commented brackets do not count, nor PromQL's.
        let quoted = format!(
            "q: '{}'\n# {}\nr: \"{}\"",
            "[".repeat(99),
            "{".repeat(99),
            "{".repeat(99)
        );
        assert_eq!(too_deep(&quoted), None);
        assert_eq!(
            too_deep("query: sum(rate(x{${matchers}}[5m])) / sum(y{${matchers}})"),
            None
        );
        // An apostrophe in a plain scalar hides nothing.
        let hidden = format!(
            "description: it's
x: {}",
            "{a: ".repeat(100)
        );
        assert_eq!(too_deep(&hidden), Some(2));
    }
}
